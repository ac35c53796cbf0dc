"""Byte-range shards of one pcap file, so several workers can read it at once.

pcap records carry no sync marker: a shard that starts mid-file finds its first record by
looking for a header that starts a chain of plausible headers, each one's length leading
exactly to the next. A shard owns the records that *start* inside its range (the last may
end beyond it) and reports where it began and where the record after its last one starts:
the seams meet when each shard's ``next`` is the following shard's ``first``. Damage
inside a range is passed over the same way, so a file read as one shard recovers exactly
what it would split.

pcapng and compressed files are not split (``splittable`` says which are).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from .pcapfile import MAX_PACKET, PCAP_MAGICS, Packet, largest_record

HEADER = 24  # pcap file header
RECORD = 16  # pcap record header
CHAIN = 8  # headers that must chain before a start is believed


@dataclass
class PcapHeader:
    endian: str
    unit: float  # seconds per timestamp fraction tick
    snaplen: int
    linktype: int


@dataclass
class Shard:
    """What reading one range found: where its records start and end, and problems."""

    start: int
    end: int
    first: int | None = None  # offset of the first record owned (None: none found)
    next: int | None = None  # offset just after the last record owned
    packets: int = 0
    # (packet number within the shard after which it happened, text)
    warnings: list[tuple[int, str]] = field(default_factory=list)


def read_header(f) -> PcapHeader | None:
    """The file header of a plain pcap file, or None if ``f`` is something else."""
    f.seek(0)
    head = f.read(HEADER)
    if len(head) < HEADER or head[:4] not in PCAP_MAGICS:
        return None
    endian, unit = PCAP_MAGICS[head[:4]]
    snaplen, linktype = struct.unpack(endian + "II", head[16:24])
    return PcapHeader(endian, unit, snaplen, linktype & 0x0FFFFFFF)


def splittable(path: str, opener: Callable[[str], BinaryIO] | None = None) -> bool:
    with _opened(path, opener) as f:
        return read_header(f) is not None


def plan(size: int, shard_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges of about ``shard_bytes`` covering a pcap file of ``size`` bytes."""
    body = max(size - HEADER, 0)
    count = max(1, -(-body // max(shard_bytes, 1)))
    step = -(-body // count) if body else 0
    return (
        [(HEADER + i * step, min(HEADER + (i + 1) * step, size)) for i in range(count)]
        if body
        else [(HEADER, size)]
    )


def _plausible(h: PcapHeader, raw: bytes) -> tuple[int, int] | None:
    """(timestamp seconds, included length) if ``raw`` can be a record header."""
    sec, frac, incl, orig = struct.unpack(h.endian + "IIII", raw)
    limit = largest_record(h.snaplen)
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


def _window(h: PcapHeader) -> int:
    """Bytes searched at a time for a chain of record headers: a record and its header."""
    return MAX_PACKET if h.snaplen > MAX_PACKET else largest_record(h.snaplen) + RECORD


def find_start(f, h: PcapHeader, start: int, end: int, size: int) -> int | None:
    """The first offset in [start, end) where a chain of record headers begins."""
    window = _window(h)
    stop = min(end, start + window, size - RECORD + 1)
    pos = start
    while pos < stop:
        if _chains(f, h, pos, size):
            return pos
        pos += 1
    return None


def _opened(path: str, opener: Callable[[str], BinaryIO] | None) -> BinaryIO:
    return opener(path) if opener is not None else open(path, "rb")


def read_shard(
    path: str, start: int, end: int, opener: Callable[[str], BinaryIO] | None = None
) -> tuple[Shard, Iterator[tuple[int, Packet]]]:
    """The records that start in [start, end) of the pcap file at ``path``, as
    (file offset, packet) with packets numbered from 1 within the shard. Damage inside
    the range (bytes that are not records) is skipped up to the next chain of record
    headers, as a shard starting there would; ``Shard.warnings`` say where, as
    (packet number before the damage, within the shard; text). The Shard is complete
    once the iterator is exhausted. ``opener(path)`` opens the file (default: open)."""
    shard = Shard(start, end)

    def records() -> Iterator[tuple[int, Packet]]:
        with _opened(path, opener) as f:
            f.seek(0, 2)
            size = f.tell()
            h = read_header(f)
            if h is None:
                shard.warnings.append((0, "not a plain pcap file; cannot be split"))
                return
            pos = start if start <= HEADER else find_start(f, h, start, end, size)
            if pos is None:
                shard.next = None
                if end - start > largest_record(h.snaplen) + RECORD:
                    shard.warnings.append(
                        (
                            0,
                            f"no pcap record found in bytes {start}-{end}: "
                            f"the file is damaged there",
                        )
                    )
                return
            shard.first = shard.next = pos
            yield from _resyncing(f, h, pos, end, size, shard)

    return shard, records()


def _resyncing(
    f, h: PcapHeader, pos: int, end: int, size: int, shard: Shard
) -> Iterator[tuple[int, Packet]]:
    """Records from ``pos`` on; after damage, on from the next chain of headers."""
    rec = struct.Struct(h.endian + "IIII")
    limit = largest_record(h.snaplen)
    tick = 1_000_000 if h.unit == 1e-6 else 1_000_000_000
    f.seek(pos)
    read = f.read
    index = 0
    while pos < end:
        hdr = read(RECORD)
        if not hdr:
            return
        problem = None
        if len(hdr) < RECORD:
            problem = f"the file ends inside a record header at byte {pos}"
        else:
            sec, frac, incl, orig = rec.unpack(hdr)
            if incl > limit or incl > orig or frac >= tick:
                problem = f"byte {pos} holds no plausible record header"
            else:
                data = read(incl)
                if len(data) < incl:
                    problem = (
                        f"the file ends inside a record at byte {pos} ({len(data)} of {incl} bytes)"
                    )
        if problem is None:
            index += 1
            shard.packets += 1
            shard.next = pos + RECORD + incl
            yield pos, Packet(index, sec + frac * h.unit, h.linktype, data, orig)
            pos += RECORD + incl
            continue
        found = _next_chain(f, h, pos + 1, end, size)
        if found is None:
            shard.warnings.append(
                (index, f"{problem}; nothing readable follows up to byte {min(end, size)}")
            )
            return
        shard.warnings.append(
            (index, f"{problem}; skipped {found - pos} damaged bytes ({pos}-{found})")
        )
        pos = found
        f.seek(pos)


def _next_chain(f, h: PcapHeader, pos: int, end: int, size: int) -> int | None:
    """``find_start`` over as many windows as it takes to reach ``end``."""
    while pos < min(end, size):
        found = find_start(f, h, pos, end, size)
        if found is not None:
            return found
        pos += _window(h)
    return None
