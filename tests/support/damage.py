"""Damage a real capture the way networks and capture tools do, and record exactly what
was taken: drop data segments, reorder packets, cut the snaplen, start mid-stream.

The record says, per TCP direction (sender, receiver), which stream bytes are gone
(merged into holes: adjacent losses are one hole), so a test can check kdissect's loss
accounting against the truth. Classic pcap (Ethernet/raw IP/SLL) in, classic pcap out.

    python tests/support/damage.py IN.pcap OUT.pcap [--seed N]
"""

from __future__ import annotations

import random
import struct
import sys
from dataclasses import dataclass, field

from kdissect.capture.packet import SYN, tcp_segment

Endpoint = tuple[str, int]


@dataclass
class Damage:
    """What was removed. ``holes[(sender, receiver)]``: sorted (start, length) in bytes
    relative to the first sequence number of that direction kept in the output, of the
    losses the output shows a trace of (later data, a FIN or an acknowledgement)."""

    dropped_segments: int = 0
    dropped_bytes: int = 0
    cut_bytes: int = 0  # payload bytes the snaplen cut off
    moved: int = 0  # packets delivered later than they were captured
    skipped_packets: int = 0  # packets before the mid-stream start
    traceless: int = 0  # bytes removed of which the output shows no trace
    holes: dict[tuple[Endpoint, Endpoint], list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def lost_bytes(self) -> int:
        return sum(n for hs in self.holes.values() for _, n in hs)

    @property
    def hole_count(self) -> int:
        return sum(len(hs) for hs in self.holes.values())


def _records(data: bytes):
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    snaplen, linktype = struct.unpack(endian + "II", data[16:24])
    pos, out = 24, []
    while pos + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack_from(endian + "IIII", data, pos)
        out.append([sec, frac, data[pos + 16 : pos + 16 + incl], orig])
        pos += 16 + incl
    return data[:24], endian, linktype, out


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, n in sorted(spans):
        if merged and start <= merged[-1][0] + merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], start + n - merged[-1][0])
        else:
            merged.append([start, n])
    return [(s, n) for s, n in merged]


def damage(
    data: bytes,
    *,
    seed: int = 1,
    drop: float = 0.02,
    reorder: float = 0.05,
    snaplen: int | None = 200,
    start: float = 0.03,
    spare: int = 4,
) -> tuple[bytes, Damage]:
    """The damaged capture and what was removed. ``start``: fraction of packets before
    the mid-stream start; the first ``spare`` packets of each direction after it are
    left alone (they fix where each direction's stream begins)."""
    rng = random.Random(seed)
    head, endian, linktype, recs = _records(data)
    record = Damage()
    skip = int(len(recs) * start)
    record.skipped_packets = skip
    recs = recs[skip:]
    segs = [tcp_segment(linktype, r[2], r[3]) for r in recs]
    base: dict[tuple, int] = {}
    seen: dict[tuple, int] = {}
    keep, lost = [], []
    for r, s in zip(recs, segs):
        if s is None:
            keep.append((r, s))
            continue
        d = ((s.src, s.sport), (s.dst, s.dport))
        if d not in base:
            base[d] = (s.seq + 1 if s.flags & SYN else s.seq) & 0xFFFFFFFF
        seen[d] = seen.get(d, 0) + 1
        if s.payload and seen[d] > spare and not s.flags & SYN and rng.random() < drop:
            record.dropped_segments += 1
            record.dropped_bytes += len(s.payload)
            lost.append((d, (s.seq - base[d]) & 0xFFFFFFFF, len(s.payload)))
            continue
        keep.append((r, s))
    # reorder: a packet arrives 1-4 places later, stamped with the time it now arrives at
    out = list(keep)
    i = 0
    while i < len(out) - 5:
        s = out[i][1]
        if (
            s is not None
            and seen.get(((s.src, s.sport), (s.dst, s.dport)), 0)
            and i > 8
            and rng.random() < reorder
        ):
            k = rng.randint(1, 4)
            moved = out.pop(i)
            out.insert(i + k, moved)
            record.moved += 1
            i += k + 1
            continue
        i += 1
    recs_out = []
    last = (0, 0)
    for r, s in out:
        sec, frac, body, orig = r
        if (sec, frac) < last:
            sec, frac = last  # it arrived after what now precedes it
        last = (sec, frac)
        if snaplen is not None and len(body) > snaplen:
            if s is not None and s.payload:
                kept = tcp_segment(linktype, body[:snaplen], orig)
                cut = len(s.payload) - len(kept.payload) if kept else len(s.payload)
                if cut > 0:
                    d = ((s.src, s.sport), (s.dst, s.dport))
                    lost.append((d, (s.seq - base[d] + len(s.payload) - cut) & 0xFFFFFFFF, cut))
                    record.cut_bytes += cut
            body = body[:snaplen]
        recs_out.append(struct.pack(endian + "IIII", sec, frac, len(body), orig) + body)
    # what the output still shows of each direction's extent: its data, its FIN, and
    # what the receiver acknowledged; a loss beyond that leaves no trace (e.g. an answer
    # dropped after the client's last packet) and is recorded apart
    shown: dict = {}
    for _, s in out:
        if s is None or (s.flags & SYN and not s.payload):
            continue
        d = ((s.src, s.sport), (s.dst, s.dport))
        if d in base:
            end = (s.seq - base[d]) % 2**32 + len(s.payload) + s.missing
            shown[d] = max(shown.get(d, 0), end)
        back = (d[1], d[0])
        if back in base and s.flags & 0x10:
            shown[back] = max(shown.get(back, 0), (s.ack - base[back]) % 2**32)
    by_dir: dict = {}
    for d, off, n in lost:
        visible = min(n, shown.get(d, 0) - off)
        if visible > 0:
            by_dir.setdefault(d, []).append((off, visible))
        record.traceless += n - max(visible, 0)
    record.holes = {d: _merge(spans) for d, spans in by_dir.items()}
    if snaplen is not None:
        head = head[:16] + struct.pack(endian + "I", snaplen) + head[20:]
    return head + b"".join(recs_out), record


def main(argv: list[str]) -> None:
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
    with open(argv[0], "rb") as f:
        out, record = damage(f.read(), seed=seed)
    with open(argv[1], "wb") as f:
        f.write(out)
    print(
        f"skipped {record.skipped_packets} packets (mid-stream start); dropped "
        f"{record.dropped_segments} segments ({record.dropped_bytes} bytes); snaplen cut "
        f"{record.cut_bytes} bytes; moved {record.moved} packets later; "
        f"{record.hole_count} holes, {record.lost_bytes} bytes lost"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
