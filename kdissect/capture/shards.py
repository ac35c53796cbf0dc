"""Byte-range shards of one pcap file, so several workers can read it at once.

pcap records carry no sync marker: a shard that starts mid-file finds its first record by
looking for a header that starts a chain of plausible headers, each one's length leading
exactly to the next. A shard owns the records that *start* inside its range (the last may
end beyond it) and reports where it began and where the record after its last one starts:
the seams meet when each shard's ``next`` is the following shard's ``first``.

pcapng and compressed files are not split (``splittable`` says which are).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from .pcapfile import MAX_PACKET, PCAP_MAGICS, Packet, pcap_records

HEADER = 24                    # pcap file header
RECORD = 16                    # pcap record header
CHAIN = 8                      # headers that must chain before a start is believed
_LARGEST_SANE = 262144         # tcpdump's default snaplen; larger only if the file says so


@dataclass
class PcapHeader:
    endian: str
    unit: float                # seconds per timestamp fraction tick
    snaplen: int
    linktype: int


@dataclass
class Shard:
    """What reading one range found: where its records start and end, and problems."""
    start: int
    end: int
    first: int | None = None   # offset of the first record owned (None: none found)
    next: int | None = None    # offset just after the last record owned
    packets: int = 0
    warnings: list[str] = field(default_factory=list)


def read_header(f) -> PcapHeader | None:
    """The file header of a plain pcap file, or None if ``f`` is something else."""
    f.seek(0)
    head = f.read(HEADER)
    if len(head) < HEADER or head[:4] not in PCAP_MAGICS:
        return None
    endian, unit = PCAP_MAGICS[head[:4]]
    snaplen, linktype = struct.unpack(endian + "II", head[16:24])
    return PcapHeader(endian, unit, snaplen, linktype & 0x0FFFFFFF)


def splittable(path: str) -> bool:
    with open(path, "rb") as f:
        return read_header(f) is not None


def plan(size: int, shard_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges of about ``shard_bytes`` covering a pcap file of ``size`` bytes."""
    body = max(size - HEADER, 0)
    count = max(1, -(-body // max(shard_bytes, 1)))
    step = -(-body // count) if body else 0
    return [(HEADER + i * step, min(HEADER + (i + 1) * step, size)) for i in range(count)] \
        if body else [(HEADER, size)]


def _plausible(h: PcapHeader, raw: bytes) -> tuple[int, int] | None:
    """(timestamp seconds, included length) if ``raw`` can be a record header."""
    sec, frac, incl, orig = struct.unpack(h.endian + "IIII", raw)
    limit = max(h.snaplen, _LARGEST_SANE) if h.snaplen else _LARGEST_SANE
    if incl > orig or orig > max(limit, 65535 * 4) or incl > limit or incl == 0:
        return None
    if frac >= (1_000_000 if h.unit == 1e-6 else 1_000_000_000):
        return None
    return sec, incl


def _chains(f, h: PcapHeader, pos: int, size: int) -> bool:
    """Do CHAIN headers (or all of them, up to the end of the file) chain from ``pos``?"""
    last_sec = None
    for _ in range(CHAIN):
        if pos == size:
            return True
        f.seek(pos)
        raw = f.read(RECORD)
        if len(raw) < RECORD:
            return False
        got = _plausible(h, raw)
        if got is None:
            return False
        sec, incl = got
        # time may step back a little (several interfaces, clock steps), not by hours
        if last_sec is not None and abs(sec - last_sec) > 3600:
            return False
        last_sec = sec
        pos += RECORD + incl
        if pos > size:
            return False
    return True


def find_start(f, h: PcapHeader, start: int, end: int, size: int) -> int | None:
    """The first offset in [start, end) where a chain of record headers begins."""
    window = MAX_PACKET if h.snaplen > MAX_PACKET else max(h.snaplen, _LARGEST_SANE) + RECORD
    stop = min(end, start + window, size - RECORD + 1)
    pos = start
    while pos < stop:
        if _chains(f, h, pos, size):
            return pos
        pos += 1
    return None


def read_shard(path: str, start: int, end: int) -> tuple[Shard, Iterator[tuple[int, Packet]]]:
    """The records that start in [start, end) of the pcap file at ``path``, as
    (file offset, packet) with packets numbered from 1 within the shard. The Shard is
    complete once the iterator is exhausted."""
    shard = Shard(start, end)

    def records() -> Iterator[tuple[int, Packet]]:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            h = read_header(f)
            if h is None:
                shard.warnings.append(f"{path}: not a plain pcap file; cannot be split")
                return
            pos = start if start <= HEADER else find_start(f, h, start, end, size)
            if pos is None:
                shard.next = None
                if end - start > max(h.snaplen, _LARGEST_SANE) + RECORD:
                    shard.warnings.append(f"{path}: no pcap record found in bytes "
                                          f"{start}-{end}: the file is damaged there")
                return
            shard.first = shard.next = pos
            f.seek(pos)
            warnings: list[str] = []
            for offset, packet in pcap_records(f.read, h.endian, h.unit, h.linktype, pos,
                                               warnings, end):
                shard.packets += 1
                shard.next = offset + RECORD + len(packet.data)
                yield offset, packet
            # packet numbers in these count from the shard's start
            shard.warnings += [f"{path} (bytes {start}-{end}): {w}" for w in warnings]

    return shard, records()
