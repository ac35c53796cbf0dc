"""A bigger capture from a real one: copies one after another, each copy's IPv4
addresses moved to their own subnet (second and third octets plus the copy's number)
and its times shifted past the previous copy's end, so every copy's connections are new
ones. Ethernet/IPv4 classic pcap only; checksums are left as they are (nothing checks
them by default). benchmarks/replicate_capture.py is its command line."""

from __future__ import annotations

import struct


def replicate(data: bytes, copies: int, out, first: int = 0) -> None:
    """Write ``copies`` copies of the pcap file ``data`` to the binary file ``out``;
    the copies' subnets are numbered from ``first`` (so that copies of two captures
    can be merged without sharing hosts)."""
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    rec = struct.Struct(endian + "IIII")
    start = last = None
    pos = 24
    while pos + 16 <= len(data):
        sec, _frac, incl, _orig = rec.unpack_from(data, pos)
        start = sec if start is None else start
        last = sec
        pos += 16 + incl
    span = (last - start + 1) if start is not None else 0
    out.write(data[:24])
    for k in range(first, first + copies):
        pos = 24
        while pos + 16 <= len(data):
            sec, frac, incl, orig = rec.unpack_from(data, pos)
            frame = bytearray(data[pos + 16 : pos + 16 + incl])
            if len(frame) >= 34 and frame[12:14] == b"\x08\x00":
                for at in (27, 31):  # source, destination
                    third = frame[at + 1] + k
                    frame[at + 1] = third & 0xFF
                    frame[at] = (frame[at] + (third >> 8)) & 0xFF
            out.write(rec.pack(sec + (k - first) * span, frac, incl, orig))
            out.write(frame)
            pos += 16 + incl
