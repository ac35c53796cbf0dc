"""TCP reassembly: segments -> ordered bytes per connection and direction, with the
holes (lost or uncaptured data) reported where they are.

Handles retransmissions and overlaps (bytes already delivered are dropped), out-of-order
arrival (held until the hole fills, or declared a gap when it never does), sequence
wrap-around (offsets are 64-bit), captures that start mid-connection (no SYN), FIN/RST,
and a 4-tuple reused by a later connection (a new SYN after the old one ended or with a
different initial sequence number).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .packet import ACK, FIN, RST, SYN, Segment

MAX_HELD = 16 * 1024 * 1024      # out-of-order bytes held per direction before giving up


class StreamSink(Protocol):
    def data(self, conn: TcpConnection, direction: int, offset: int, payload: bytes,
             ts: float, frame: int) -> None: ...

    def gap(self, conn: TcpConnection, direction: int, offset: int, length: int,
            ts: float, frame: int) -> None: ...

    def closed(self, conn: TcpConnection) -> None: ...


@dataclass
class Direction:
    base: int | None = None        # sequence number of stream offset 0
    next: int = 0                  # next stream offset expected
    held: dict[int, tuple[bytes | None, int, float, int]] = field(default_factory=dict)
    held_bytes: int = 0
    fin: bool = False
    retransmitted: int = 0         # bytes seen twice
    gaps: int = 0
    gap_bytes: int = 0


@dataclass
class TcpConnection:
    index: int
    a: tuple[str, int]             # the initiator when known (SYN), else a guess
    b: tuple[str, int]
    first_ts: float
    saw_syn: bool
    dirs: tuple[Direction, Direction] = field(default_factory=lambda: (Direction(), Direction()))
    closed: bool = False
    last_ts: float = 0.0
    key: tuple = ()

    def endpoint(self, direction: int) -> tuple[tuple[str, int], tuple[str, int]]:
        """(sender, receiver) of a direction (0: a -> b)."""
        return (self.a, self.b) if direction == 0 else (self.b, self.a)


class Reassembler:
    def __init__(self, sink: StreamSink, client_hint=None):
        """``client_hint(src, dst) -> True`` if src looks like the client (e.g. dst is a
        Kafka port); used when the capture has no SYN to tell."""
        self.sink = sink
        self.client_hint = client_hint or (lambda src, dst: src[1] > dst[1])
        self.conns: dict[tuple, TcpConnection] = {}
        self.count = 0

    def _key(self, src, dst) -> tuple:
        return (src, dst) if src <= dst else (dst, src)

    def segment(self, seg: Segment, ts: float, frame: int) -> None:
        src, dst = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = self._key(src, dst)
        conn = self.conns.get(key)
        syn_only = seg.flags & SYN and not seg.flags & ACK
        if conn is not None and syn_only:
            d = conn.dirs[0 if src == conn.a else 1]
            if conn.closed or (d.base is not None and d.base != (seg.seq + 1) & 0xFFFFFFFF):
                self._finish(conn)           # the 4-tuple now carries a new connection
                conn = None
        if conn is None:
            if syn_only or (seg.flags & SYN and seg.flags & ACK):
                client = src if syn_only else dst
            else:
                client = src if self.client_hint(src, dst) else dst
            server = dst if client == src else src
            self.count += 1
            conn = TcpConnection(self.count, client, server, ts, bool(seg.flags & SYN), key=key)
            self.conns[key] = conn
        conn.last_ts = ts
        direction = 0 if src == conn.a else 1
        d = conn.dirs[direction]
        if seg.flags & SYN:
            d.base = (seg.seq + 1) & 0xFFFFFFFF
            d.next = 0
        elif d.base is None:
            d.base = seg.seq                 # mid-connection start: this byte is offset 0
        payload = seg.payload
        if payload or seg.missing:
            offset = self._unwrap(d, seg.seq)
            if payload:
                self._accept(conn, direction, d, offset, payload, len(payload), ts, frame)
            if seg.missing:
                # the snaplen cut this segment: its tail is a hole we know the size of
                self._accept(conn, direction, d, offset + len(payload), None, seg.missing,
                             ts, frame)
        if seg.flags & FIN:
            d.fin = True
        if seg.flags & RST or (conn.dirs[0].fin and conn.dirs[1].fin):
            conn.closed = True

    @staticmethod
    def _unwrap(d: Direction, seq: int) -> int:
        rel = (seq - d.base) & 0xFFFFFFFF
        delta = (rel - d.next) & 0xFFFFFFFF
        if delta >= 0x80000000:
            delta -= 0x100000000
        return d.next + delta

    def _accept(self, conn, direction, d: Direction, offset: int, payload: bytes | None,
                size: int, ts: float, frame: int) -> None:
        """Take ``size`` bytes at stream ``offset``; ``payload`` None is a hole of known
        size (bytes the capture's snaplen cut off)."""
        end = offset + size
        if end <= d.next:
            d.retransmitted += size
            return
        if offset < d.next:                  # overlap: keep only the new bytes
            cut = d.next - offset
            d.retransmitted += cut
            payload = payload[cut:] if payload is not None else None
            size -= cut
            offset = d.next
        if offset > d.next:                  # out of order: hold until the hole fills
            old = d.held.get(offset)
            if old is None or old[1] < size:
                d.held_bytes += size - (old[1] if old else 0)
                d.held[offset] = (payload, size, ts, frame)
            if d.held_bytes > MAX_HELD:
                self._skip_hole(conn, direction, d, ts, frame)
            return
        self._deliver(conn, direction, d, payload, size, ts, frame)
        self._drain(conn, direction, d)

    def _deliver(self, conn, direction, d: Direction, payload: bytes | None, size: int,
                 ts: float, frame: int) -> None:
        if payload is None:
            self.sink.gap(conn, direction, d.next, size, ts, frame)
            d.gaps += 1
            d.gap_bytes += size
        else:
            self.sink.data(conn, direction, d.next, payload, ts, frame)
        d.next += size

    def _drain(self, conn, direction, d: Direction) -> None:
        while d.held:
            offset = min(d.held)
            if offset > d.next:
                return
            payload, size, ts, frame = d.held.pop(offset)
            d.held_bytes -= size
            if offset + size <= d.next:
                d.retransmitted += size
                continue
            cut = d.next - offset
            self._deliver(conn, direction, d, payload[cut:] if payload is not None else None,
                          size - cut, ts, frame)

    def _skip_hole(self, conn, direction, d: Direction, ts, frame) -> None:
        """Data after a hole that never filled: report the hole and go on after it."""
        first = min(d.held)
        _, _, ts, frame = d.held[first]      # where the data resumes after the hole
        self.sink.gap(conn, direction, d.next, first - d.next, ts, frame)
        d.gaps += 1
        d.gap_bytes += first - d.next
        d.next = first
        self._drain(conn, direction, d)

    def _finish(self, conn: TcpConnection) -> None:
        for direction, d in enumerate(conn.dirs):
            while d.held:
                self._skip_hole(conn, direction, d, conn.last_ts, 0)
        self.sink.closed(conn)
        if self.conns.get(conn.key) is conn:
            del self.conns[conn.key]

    def flush(self) -> None:
        """End of capture: whatever is still held is after a hole that never filled."""
        for conn in list(self.conns.values()):
            self._finish(conn)
