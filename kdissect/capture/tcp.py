"""TCP reassembly: segments -> ordered bytes per connection and direction, with the
holes (lost or uncaptured data) reported where they are.

Handles retransmissions and overlaps (bytes already delivered are dropped), out-of-order
arrival (held until the hole fills, or declared a gap when it never does), sequence
wrap-around (offsets are 64-bit), captures that start mid-connection (no SYN), FIN/RST,
and a 4-tuple reused by a later connection (a new SYN after the old one ended or with a
different initial sequence number).
"""

from __future__ import annotations

import heapq
from collections import deque
from ..protocol.plain import Compared, Plain
from typing import Protocol

from .packet import ACK, FIN, RST, SYN, Segment

MAX_HELD = 16 * 1024 * 1024  # out-of-order bytes held per direction before giving up
MAX_HELD_SEGMENTS = 16384  # out-of-order segments held per direction
# A hole the receiver has acknowledged past is lost to the capture, unless the packet is
# merely late in it: it is declared after this many more packets of the connection (not
# after a time: a connection may be quiet for long, e.g. a JoinGroup held for seconds).
HOLE_PACKETS = 32
CLOSE_WAIT = 64  # packets after which a closed connection is finished


class StreamSink(Protocol):
    def data(
        self,
        conn: TcpConnection,
        direction: int,
        offset: int,
        payload: bytes,
        ts: float,
        frame: int,
    ) -> None: ...

    def gap(
        self, conn: TcpConnection, direction: int, offset: int, length: int, ts: float, frame: int
    ) -> None: ...

    def closed(self, conn: TcpConnection) -> None: ...


class Direction(Compared):
    """One direction of a TCP connection: where its stream stands, what it holds."""

    __slots__ = _fields = (
        "base",
        "next",
        "held",
        "order",
        "held_bytes",
        "fin",
        "end",
        "acked",
        "overdue",
        "last_ts",
        "hole",
        "retransmitted",
        "gaps",
        "gap_bytes",
    )

    def __init__(self) -> None:
        self.base: int | None = None  # sequence number of stream offset 0
        self.next = 0  # next stream offset expected
        # out-of-order segments: offset -> (payload or None for a known hole, size, ts,
        # frame), with a heap of their offsets (O(log n) to find the lowest)
        # (None until something is held: a capture may hold 200,000 connections)
        self.held: dict[int, tuple[bytes | None, int, float, int]] | None = None
        self.order: list[int] | None = None
        self.held_bytes = 0
        self.fin = False
        self.end = -1  # stream offset where the FIN says the data ends
        self.acked = 0  # highest offset the receiver acknowledged
        self.overdue: int | None = None  # the connection's packet count when acked passed ``next``
        self.last_ts = float(
            "-inf"
        )  # when the last bytes were delivered in TCP order (-1: invalid)
        self.hole: list | None = None  # [offset, length, ts, frame]: a hole not yet reported
        self.retransmitted = 0  # bytes seen twice
        self.gaps = 0
        self.gap_bytes = 0

    def lowest(self) -> int:
        order, held = self.order, self.held
        assert order is not None and held is not None, "lowest() needs held segments"
        while order[0] not in held:
            heapq.heappop(order)  # stale: already delivered or replaced
        return order[0]


class TcpConnection(Plain):
    """A TCP connection: its endpoints, directions and counters (compared by identity)."""

    __slots__ = _fields = (
        "index",
        "a",
        "b",
        "first_ts",
        "saw_syn",
        "dirs",
        "closed",
        "last_ts",
        "key",
        "packets",
    )

    def __init__(
        self,
        index: int,
        a: tuple[str, int],  # the initiator when known (SYN), else a guess
        b: tuple[str, int],
        first_ts: float,
        saw_syn: bool,
        dirs: tuple[Direction, Direction] | None = None,
        closed: bool = False,
        last_ts: float = 0.0,
        key: tuple = (),
        packets: int = 0,
    ):
        self.index, self.a, self.b, self.first_ts, self.saw_syn = index, a, b, first_ts, saw_syn
        self.dirs = (Direction(), Direction()) if dirs is None else dirs
        self.closed, self.last_ts, self.key, self.packets = closed, last_ts, key, packets

    def endpoint(self, direction: int) -> tuple[tuple[str, int], tuple[str, int]]:
        """(sender, receiver) of a direction (0: a -> b)."""
        return (self.a, self.b) if direction == 0 else (self.b, self.a)


class Reassembler:
    def __init__(self, sink: StreamSink, client_hint=None, budget=None):
        """``client_hint(src, dst) -> True`` if src looks like the client (e.g. dst is a
        Kafka port); used when the capture has no SYN to tell. ``budget``: the process's
        memory budget (``stream.budget.Budget``), charged with out-of-order bytes held."""
        self.sink = sink
        self.client_hint = client_hint or (lambda src, dst: src[1] > dst[1])
        self.conns: dict[tuple, TcpConnection] = {}
        self.count = 0
        self.budget = budget
        self.packets = 0
        self.closing: deque[tuple[int, TcpConnection]] = deque()

    def _key(self, src, dst) -> tuple:
        return (src, dst) if src <= dst else (dst, src)

    def segment(self, seg: Segment, ts: float, frame: int) -> None:
        self.take(
            frame,
            ts,
            seg.src,
            seg.sport,
            seg.dst,
            seg.dport,
            seg.seq,
            seg.ack,
            seg.flags,
            seg.payload,
            seg.missing,
        )

    def take(
        self,
        frame: int,
        ts: float,
        src_ip: str,
        sport: int,
        dst_ip: str,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        missing: int,
    ) -> None:
        """A segment's fields, in the order the compiled scanner gives them."""
        src, dst = (src_ip, sport), (dst_ip, dport)
        key = self._key(src, dst)
        conn = self.conns.get(key)
        syn_only = flags & SYN and not flags & ACK
        if conn is not None and syn_only:
            d = conn.dirs[0 if src == conn.a else 1]
            if conn.closed or (d.base is not None and d.base != (seq + 1) & 0xFFFFFFFF):
                self._finish(conn)  # the 4-tuple now carries a new connection
                conn = None
        if conn is None:
            if not (payload or missing or flags & (SYN | FIN | RST)):
                return  # a bare ACK (e.g. the last one of a finished connection)
            if syn_only or (flags & SYN and flags & ACK):
                client = src if syn_only else dst
            else:
                client = src if self.client_hint(src, dst) else dst
            server = dst if client == src else src
            self.count += 1
            conn = TcpConnection(self.count, client, server, ts, bool(flags & SYN), key=key)
            self.conns[key] = conn
        conn.last_ts = ts
        conn.packets += 1
        direction = 0 if src == conn.a else 1
        d = conn.dirs[direction]
        if flags & SYN:
            if d.base != (seq + 1) & 0xFFFFFFFF:  # not a late copy of the SYN
                d.base = (seq + 1) & 0xFFFFFFFF
                d.next = 0
        elif d.base is None:
            d.base = seq  # mid-connection start: this byte is offset 0
        if payload or missing:
            offset = self._unwrap(d, seq)
            if payload:
                self._accept(conn, direction, d, offset, payload, len(payload), ts, frame)
            if missing:
                # the snaplen cut this segment: its tail is a hole we know the size of
                self._accept(conn, direction, d, offset + len(payload), None, missing, ts, frame)
        if flags & FIN:
            d.fin = True
            d.end = self._unwrap(d, seq) + len(payload) + missing
            d.acked = min(d.acked, d.end)
        other = conn.dirs[1 - direction]
        if flags & ACK and other.base is not None:
            acked = self._unwrap(other, ack)
            if other.end >= 0:
                acked = min(acked, other.end)  # a FIN takes a sequence number too
            if acked > other.acked:
                other.acked = acked
        for side, o in enumerate(conn.dirs):
            if o.acked > o.next:
                self._overdue(conn, side, o, ts)
            else:
                o.overdue = None
        if not conn.closed and (flags & RST or (conn.dirs[0].fin and conn.dirs[1].fin)):
            conn.closed = True
            self.closing.append((self.packets, conn))
        self.packets += 1
        # a closed connection is finished a little later (late packets still count);
        # finished, it keeps no state here
        while self.closing and self.packets - self.closing[0][0] > CLOSE_WAIT:
            _, done = self.closing.popleft()
            if self.conns.get(done.key) is done:
                self._finish(done)

    def _overdue(self, conn, direction: int, d: Direction, ts: float) -> None:
        """The receiver acknowledged bytes from ``d.next`` on that the capture lacks:
        once they are clearly not just late, they are a hole."""
        if d.overdue is None:
            d.overdue = conn.packets
            return
        if conn.packets - d.overdue < HOLE_PACKETS:
            return
        d.overdue = None
        first = d.lowest() if d.held else d.acked
        self._skip_to(conn, direction, d, min(first, max(d.acked, d.next)), ts, 0)
        self._charge(conn, direction, d)

    @staticmethod
    def _unwrap(d: Direction, seq: int) -> int:
        assert d.base is not None, "the direction's first sequence number is known"
        rel = (seq - d.base) & 0xFFFFFFFF
        delta = (rel - d.next) & 0xFFFFFFFF
        if delta >= 0x80000000:
            delta -= 0x100000000
        return d.next + delta

    def _accept(
        self,
        conn,
        direction,
        d: Direction,
        offset: int,
        payload: bytes | None,
        size: int,
        ts: float,
        frame: int,
    ) -> None:
        """Take ``size`` bytes at stream ``offset``; ``payload`` None is a hole of known
        size (bytes the capture's snaplen cut off)."""
        end = offset + size
        if end <= d.next:
            d.retransmitted += size
            return
        if offset < d.next:  # overlap: keep only the new bytes
            cut = d.next - offset
            d.retransmitted += cut
            payload = payload[cut:] if payload is not None else None
            size -= cut
            offset = d.next
        if offset > d.next:  # out of order: hold until the hole fills
            if d.held is None or d.order is None:
                d.held, d.order = {}, []
            old = d.held.get(offset)
            if old is None or old[1] < size:
                d.held_bytes += size - (old[1] if old else 0)
                d.held[offset] = (payload, size, ts, frame)
                if old is None:
                    heapq.heappush(d.order, offset)
            if d.held_bytes > MAX_HELD or len(d.held) > MAX_HELD_SEGMENTS:
                self._skip_hole(conn, direction, d)
            self._charge(conn, direction, d)
            return
        self._deliver(conn, direction, d, payload, size, ts, frame)
        if d.held:
            self._drain(conn, direction, d, ts)
            self._charge(conn, direction, d)

    def _deliver(
        self, conn, direction, d: Direction, payload: bytes | None, size: int, ts: float, frame: int
    ) -> None:
        if payload is None:
            self._hole(conn, direction, d, d.next, size, ts, frame)
        else:
            if d.hole is not None:
                self._report_hole(conn, direction, d)
            # bytes are complete in TCP order no earlier than those before them
            d.last_ts = max(d.last_ts, ts)
            self.sink.data(conn, direction, d.next, payload, d.last_ts, frame)
        d.next += size

    def _hole(
        self, conn, direction, d: Direction, offset: int, length: int, ts: float, frame: int
    ) -> None:
        """Lost bytes; adjacent ones are one hole, reported when data resumes."""
        h = d.hole
        if h is not None and h[0] + h[1] == offset:
            h[1] += length
            h[2], h[3] = ts, frame
            return
        if h is not None:
            self._report_hole(conn, direction, d)
        d.hole = [offset, length, ts, frame]

    def _report_hole(self, conn, direction, d: Direction) -> None:
        if d.hole is None:
            return
        offset, length, ts, frame = d.hole
        d.hole = None
        d.gaps += 1
        d.gap_bytes += length
        self.sink.gap(conn, direction, offset, length, ts, frame)

    def _drain(self, conn, direction, d: Direction, now: float) -> None:
        """Deliver held segments that now follow on; ``now``: when the hole filled."""
        held = d.held
        while held:
            offset = d.lowest()
            if offset > d.next:
                return
            payload, size, ts, frame = held.pop(offset)
            d.held_bytes -= size
            if offset + size <= d.next:
                d.retransmitted += size
                continue
            cut = d.next - offset
            self._deliver(
                conn,
                direction,
                d,
                payload[cut:] if payload is not None else None,
                size - cut,
                max(ts, now),
                frame,
            )
        d.held = d.order = None

    def _skip_to(self, conn, direction, d: Direction, offset: int, ts: float, frame: int) -> None:
        """Bytes from ``d.next`` to ``offset`` will not come: a hole; then go on."""
        if offset > d.next:
            if d.held and d.lowest() == offset:
                _, _, ts, frame = d.held[offset]  # where the data resumes
            self._hole(conn, direction, d, d.next, offset - d.next, ts, frame)
            d.next = offset
        self._drain(conn, direction, d, 0.0)

    def _skip_hole(self, conn, direction, d: Direction) -> None:
        """Data after a hole that never filled: report the hole and go on after it."""
        self._skip_to(conn, direction, d, d.lowest(), conn.last_ts, 0)

    def _charge(self, conn, direction: int, d: Direction) -> None:
        """Tell the budget what this direction holds; when spent, it gives up its hole."""
        if self.budget is not None:
            self.budget.set(id(d), d.held_bytes, lambda: self._give_up(conn, direction, d))

    def _give_up(self, conn, direction: int, d: Direction) -> None:
        while d.held:
            self._skip_hole(conn, direction, d)

    def _finish(self, conn: TcpConnection) -> None:
        for direction, d in enumerate(conn.dirs):
            while d.held:
                self._skip_hole(conn, direction, d)
            if self.budget is not None:
                self.budget.drop(id(d))
            end = max(d.end, d.acked)
            if end > d.next:  # the tail the receiver got or the FIN shows
                self._hole(conn, direction, d, d.next, end - d.next, conn.last_ts, 0)
                d.next = end
            if d.hole is not None:
                self._report_hole(conn, direction, d)
        self.sink.closed(conn)
        if self.conns.get(conn.key) is conn:
            del self.conns[conn.key]

    def flush(self) -> None:
        """End of capture: whatever is still held is after a hole that never filled."""
        for conn in list(self.conns.values()):
            self._finish(conn)
