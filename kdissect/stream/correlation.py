"""The correlation core: requests awaiting their responses on one connection.

Kafka answers the requests of a connection in the order they were sent, and a Produce
with acks=0 gets no answer at all. So an acks=0 request is finished (no answer will
come) as soon as a later request is answered, when it has waited ``ACKS0_WAIT``
seconds, or when the connection ends; a broker that answers it anyway is paired
with it all the same (one exchange, flagged). What is pending is bounded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import takewhile
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_PENDING = 4096  # requests awaiting answers per connection (Kafka clients keep ~5)
ACKS0_WAIT = 5.0  # seconds an acks=0 request waits for an unexpected answer


@dataclass(slots=True, eq=False)
class Pending(Generic[T]):
    item: T  # the caller's request (a message, an (api, version)...)
    correlation_id: int
    seq: int  # order of the request on the connection
    expected: bool = True  # False: the request asked for no response (acks=0)
    ts: float = 0.0
    reused: bool = False  # its correlation id was already pending


@dataclass(slots=True)
class Match(Generic[T]):
    pending: Pending[T]
    earlier: list[Pending[T]]  # earlier requests still waiting for their answer

    @property
    def out_of_order(self) -> bool:
        return bool(self.earlier)

    @property
    def item(self) -> T:
        return self.pending.item

    @property
    def expected(self) -> bool:
        return self.pending.expected


class Correlator(Generic[T]):
    """Per connection. ``request`` and ``response`` return the requests they finish
    without an answer (acks=0 ones whose time is up, ones pushed out by the bound), in
    the order they were sent; the caller reports those. A reused correlation id pairs
    with the latest earlier unanswered request that used it (the earlier one's answer
    was most likely lost); one expecting an answer wins over an acks=0 Produce."""

    __slots__ = ("_by_id", "_order", "_acks0", "_seq", "max_pending", "acks0_wait")

    def __init__(self, max_pending: int = MAX_PENDING, acks0_wait: float = ACKS0_WAIT):
        self._by_id: dict[int, list[Pending[T]]] = {}
        self._order: dict[int, Pending[T]] = {}  # seq -> pending, in the order sent
        # acks=0 requests, oldest first (made when the first comes: an empty deque costs
        # 600 bytes, and a capture may hold 200,000 connections)
        self._acks0: deque[Pending[T]] | None = None
        self._seq = 0
        self.max_pending = max_pending
        self.acks0_wait = acks0_wait

    def request(
        self, correlation_id: int, item: T, expected: bool = True, ts: float = 0.0
    ) -> tuple[Pending[T], list[Pending[T]]]:
        waiting = self._by_id.setdefault(correlation_id, [])
        p = Pending(
            item,
            correlation_id,
            self._seq,
            expected,
            ts,
            bool(waiting) and any(w.expected for w in waiting),
        )
        self._seq += 1
        waiting.append(p)
        self._order[p.seq] = p
        if not expected:
            if self._acks0 is None:
                self._acks0 = deque()
            self._acks0.append(p)
        finished = self._expire(ts) if self._acks0 else []
        while len(self._order) > self.max_pending:
            finished.append(self._drop(next(iter(self._order.values()))))
        return p, finished

    def usual(self, correlation_id: int, item: T, ts: float = 0.0) -> Pending[T] | None:
        """``request``'s usual case, in one call: a request expecting an answer whose
        correlation id is not pending, no acks=0 request waiting, room left. It is added
        and returned (``request`` would return it, not reused, nothing finished); None:
        nothing done, ask ``request``."""
        by_id, order = self._by_id, self._order
        if self._acks0 or correlation_id in by_id or len(order) >= self.max_pending:
            return None
        seq = self._seq
        p = Pending(item, correlation_id, seq, True, ts, False)
        self._seq = seq + 1
        by_id[correlation_id] = [p]
        order[seq] = p
        return p

    def response(
        self, correlation_id: int, ts: float = 0.0
    ) -> tuple[Match[T] | None, list[Pending[T]]]:
        waiting = self._by_id.get(correlation_id)
        if not waiting:
            return None, self._expire(ts) if self._acks0 else []
        if len(waiting) == 1:
            p = waiting[0]
        else:
            answered = [p for p in waiting if p.expected]
            p = (answered or waiting)[-1]
        if next(iter(self._order)) == p.seq:  # the oldest: nothing earlier (most answers)
            self._drop(p)
            return Match(p, []), self._expire(ts) if self._acks0 else []
        earlier = list(takewhile(lambda q: q.seq < p.seq, self._order.values()))
        self._drop(p)
        # answered in order: acks=0 requests sent before this one will get no answer now
        finished = [self._drop(q) for q in earlier if not q.expected]
        return Match(p, [q for q in earlier if q.expected]), finished + (
            self._expire(ts) if self._acks0 else []
        )

    def first(self, correlation_id: int) -> Pending[T] | None:
        """``response``'s usual case, in one call: the answer's request is the oldest
        pending and the only one with its id, and no acks=0 request waits. It is
        finished and returned (``response`` would return it matched, nothing earlier,
        nothing finished); None: nothing done, ask ``response``."""
        if self._acks0:
            return None
        waiting = self._by_id.get(correlation_id)
        if waiting is None or len(waiting) != 1:
            return None
        p = waiting[0]
        order = self._order
        if next(iter(order)) != p.seq:
            return None
        del order[p.seq]
        del self._by_id[correlation_id]
        if not order:  # (as _drop: a dict keeps its grown table)
            order.clear()
            self._by_id.clear()
        return p

    def plain(self) -> list[Pending[T]] | None:
        """What is pending, in the order sent, when each request expects an answer and
        has a correlation id of its own (``usual`` added them all); else None."""
        if self._acks0 or len(self._by_id) != len(self._order):
            return None
        waiting = list(self._order.values())
        return waiting if all(p.expected for p in waiting) else None

    def give_up(self, pending: list[Pending[T]]) -> list[Pending[T]]:
        """Stop waiting for these (their answers will not come): returned for reporting."""
        return [self._drop(p) for p in pending if p.seq in self._order]

    def waiting_for(self, correlation_id: int, since: float = float("inf")) -> bool:
        """Is a request with this id waiting for an answer (one sent by ``since``)?"""
        return any(p.expected and p.ts <= since for p in self._by_id.get(correlation_id, ()))

    def expected_ids(self) -> list[int]:
        """The correlation ids of the requests waiting for an answer."""
        return [c for c, waiting in self._by_id.items() if any(p.expected for p in waiting)]

    def close(self) -> list[Pending[T]]:
        """Everything still pending, in the order sent; the correlator is empty after."""
        rest = list(self._order.values())
        self._order.clear()
        self._by_id.clear()
        return rest

    def __len__(self) -> int:
        return len(self._order)

    def _drop(self, p: Pending[T]) -> Pending[T]:
        del self._order[p.seq]
        waiting = self._by_id[p.correlation_id]
        waiting.remove(p)
        if not waiting:
            del self._by_id[p.correlation_id]
        if not self._order:  # a dict keeps its grown table: start small again
            self._order.clear()  # (clear frees it; no new dicts per exchange)
            self._by_id.clear()
        return p

    def _expire(self, now: float) -> list[Pending[T]]:
        """acks=0 requests that have waited long enough for an answer."""
        out: list[Pending[T]] = []
        queue = self._acks0
        while queue and (
            queue[0].seq not in self._order or (now and now - queue[0].ts >= self.acks0_wait)
        ):
            p = queue.popleft()
            if p.seq in self._order:
                out.append(self._drop(p))
        return out
