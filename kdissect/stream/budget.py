"""One memory budget for the whole process: the bytes held for partial messages (and,
charged by the TCP reassembler, out-of-order segments) across all connections.

Each connection's own bounds (a message's size cap, pending requests, held segments)
keep one connection cheap; many connections together are bounded only here. When the
budget is spent, the holder whose partial data is oldest gives it up (keeping what it
needs to say what was lost) until the total fits again.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable

DEFAULT = 384 * 1024 * 1024  # --max-memory when not given
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """'512M', '2G', '1048576', '1.5GiB' -> bytes; ValueError with a clear message."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.I)
    if not m:
        raise ValueError(f"{text!r} is not a size: write e.g. 512M or 2G")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value < 1 << 20:
        raise ValueError(f"{text!r} is below the 1M minimum")
    return value


class Budget:
    """Holders (any hashable) report what they hold with ``set``; when the total passes
    ``limit`` the oldest holders' ``give_up`` callbacks run until it fits."""

    def __init__(self, limit: int = DEFAULT):
        self.limit = limit
        self.used = 0
        self.given_up = 0  # times a holder gave up its data
        # holder -> (bytes held, give up); oldest partial first
        self._held: OrderedDict[object, tuple[int, Callable[[], None]]] = OrderedDict()

    def set(self, holder: object, held: int, give_up: Callable[[], None]) -> None:
        old = self._held.get(holder)
        before = old[0] if old is not None else 0
        if held:
            self._held[holder] = (held, give_up)  # keeps its place: the oldest stays first
        elif old is not None:
            del self._held[holder]
        self.used += held - before
        if self.used > self.limit:
            self._relieve(holder)

    def holds(self, holder: object) -> bool:
        return holder in self._held

    def drop(self, holder: object) -> None:
        old = self._held.pop(holder, None)
        if old is not None:
            self.used -= old[0]

    def _relieve(self, current: object) -> None:
        while self.used > self.limit and self._held:
            holder = next(iter(self._held))
            _, give_up = self._held[holder]
            self.drop(holder)
            self.given_up += 1
            give_up()
