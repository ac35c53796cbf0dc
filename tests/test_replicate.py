"""tests/support/replicate.py, which the Spark tests and the benchmarks' bigger captures
are made with: each copy on a subnet of its own, numbered from ``first``, its times
shifted past the previous copy's."""

from __future__ import annotations

import io
import struct
from pathlib import Path

from tests.support.replicate import replicate

CAPTURE = Path(__file__).resolve().parents[1] / "captures" / "kcat.pcap"


def _packets(pcap: bytes) -> list[tuple[int, bytes]]:
    """(seconds, IPv4 source address) of each Ethernet/IPv4 packet."""
    out, pos = [], 24
    while pos + 16 <= len(pcap):
        sec, _frac, incl, _orig = struct.unpack_from("<IIII", pcap, pos)
        frame = pcap[pos + 16 : pos + 16 + incl]
        if frame[12:14] == b"\x08\x00":
            out.append((sec, frame[26:30]))
        pos += 16 + incl
    return out


def _copies(first: int) -> bytes:
    buf = io.BytesIO()
    replicate(CAPTURE.read_bytes(), 2, buf, first=first)
    return buf.getvalue()


def test_copies_sit_on_subnets_numbered_from_first_at_the_same_times():
    original = _packets(CAPTURE.read_bytes())
    n = len(original)
    for first in (0, 10):
        got = _packets(_copies(first))
        assert len(got) == 2 * n
        for k, copy in enumerate((got[:n], got[n:])):
            for (sec, src), (sec0, src0) in zip(copy, original):
                assert src == src0[:2] + bytes([src0[2] + first + k]) + src0[3:]
                assert sec > sec0 if k else sec == sec0
    assert [s for s, _ in _packets(_copies(0))] == [s for s, _ in _packets(_copies(10))]
