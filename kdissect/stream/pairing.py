"""Pair responses with requests on one connection, by correlation id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Pending(Generic[T]):
    item: T                        # the caller's request (a message, an index...)
    expected: bool = True          # False: the request asked for no response (acks=0)


class Correlator(Generic[T]):
    """Requests awaiting their response on one connection.

    A reused correlation id pairs with the latest earlier unanswered request that used
    it; a request that expects an answer wins over an acks=0 Produce with the same id,
    and a broker answering acks=0 anyway is still paired (``Pending.expected`` says so)."""

    def __init__(self) -> None:
        self._pending: dict[int, list[Pending[T]]] = {}

    def request(self, correlation_id: int, item: T, expected: bool = True) -> None:
        self._pending.setdefault(correlation_id, []).append(Pending(item, expected))

    def response(self, correlation_id: int) -> Pending[T] | None:
        waiting = self._pending.get(correlation_id)
        if not waiting:
            return None
        answered = [p for p in waiting if p.expected]
        match = (answered or waiting)[-1]
        waiting.remove(match)
        if not waiting:
            del self._pending[correlation_id]
        return match

    def waiting_for(self, correlation_id: int) -> bool:
        return any(p.expected for p in self._pending.get(correlation_id, ()))

    def unanswered(self) -> list[T]:
        """Requests still waiting for the response they expect."""
        return [p.item for ps in self._pending.values() for p in ps if p.expected]

    def clear(self) -> None:
        self._pending.clear()


def produce_acks(data: bytes, header_size: int, api_version: int) -> int | None:
    """The acks of a Produce request (message bytes after the size), read without
    decoding the body; None if the bytes are too short."""
    pos = header_size
    try:
        if api_version >= 3:               # transactional_id comes first
            if api_version >= 9:           # compact nullable string: uvarint length + 1
                n, shift = 0, 0
                while True:
                    b = data[pos]
                    pos += 1
                    n |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                pos += max(n - 1, 0)
            else:
                n = int.from_bytes(data[pos:pos + 2], "big", signed=True)
                pos += 2 + max(n, 0)
        if pos + 2 > len(data):
            return None
        return int.from_bytes(data[pos:pos + 2], "big", signed=True)
    except IndexError:
        return None
