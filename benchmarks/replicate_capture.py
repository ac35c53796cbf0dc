#!/usr/bin/env python3
"""A bigger capture from a real one: COPIES copies one after another, each copy's IPv4
addresses moved to their own /24 (the third octet plus the copy's number) and its times
shifted past the previous copy's end, so every copy's connections are new ones. Makes
the 1.5 GB capture of benchmarks/pcap_vs_tshark.py from make_bulk_capture.py's 150 MB:

    python benchmarks/replicate_capture.py IN.pcap OUT.pcap --copies 10

Ethernet/IPv4 classic pcap only (what make_bulk_capture.py writes); checksums are left
as they are (neither kdissect nor tshark checks them by default).
"""

from __future__ import annotations

import argparse
import struct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--copies", type=int, default=10)
    args = ap.parse_args()
    data = open(args.input, "rb").read()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    rec = struct.Struct(endian + "IIII")
    first = last = None
    pos = 24
    while pos + 16 <= len(data):
        sec, _frac, incl, _orig = rec.unpack_from(data, pos)
        first = sec if first is None else first
        last = sec
        pos += 16 + incl
    span = (last - first + 1) if first is not None else 0
    with open(args.output, "wb") as out:
        out.write(data[:24])
        for k in range(args.copies):
            pos = 24
            while pos + 16 <= len(data):
                sec, frac, incl, orig = rec.unpack_from(data, pos)
                frame = bytearray(data[pos + 16:pos + 16 + incl])
                if len(frame) >= 34 and frame[12:14] == b"\x08\x00":
                    frame[28] = (frame[28] + k) & 0xFF          # source, third octet
                    frame[32] = (frame[32] + k) & 0xFF          # destination, third octet
                out.write(rec.pack(sec + k * span, frac, incl, orig))
                out.write(frame)
                pos += 16 + incl


if __name__ == "__main__":
    main()
