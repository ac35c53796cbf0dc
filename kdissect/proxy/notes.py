"""The forwarder's notes, rate-limited: a client that retries a wrong setting every few
milliseconds, or 100,000 connections refused by the cap, must not print a line each.
Each kind of note is shown once; repeats are counted and summed up at most every
``EVERY`` seconds ("... 147 more times in the last 10 s") and once more at exit."""

from __future__ import annotations

import time
from collections.abc import Callable

EVERY = 10.0  # seconds between the summaries of one kind's repeats


class Notes:
    def __init__(
        self,
        emit: Callable[[str], None],
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.emit, self.every, self.clock = emit, every, clock
        self.counts: dict[str, int] = {}  # kind -> repeats not yet told
        self.total: dict[str, int] = {}  # kind -> times in all
        self.since: dict[str, float] = {}  # kind -> when it was last told

    def __call__(self, kind: str, text: str) -> None:
        """``text`` of ``kind`` (e.g. "plaintext on TLS"): shown the first time, then
        counted."""
        self.total[kind] = self.total.get(kind, 0) + 1
        if kind not in self.since:
            self.since[kind] = self.clock()
            self.counts[kind] = 0
            self.emit(text)
            return
        self.counts[kind] += 1
        self.tick()

    def tick(self, final: bool = False) -> None:
        """Say how many repeats each kind had since it was last told (every ``every``
        seconds; ``final``: now, at exit)."""
        now = self.clock()
        for kind, n in self.counts.items():
            if n and (final or now - self.since[kind] >= self.every):
                self.emit(
                    f"{kind}: {n} more time{'s' if n > 1 else ''} in the last "
                    f"{now - self.since[kind]:.0f} s ({self.total[kind]} in all)"
                )
                self.counts[kind] = 0
                self.since[kind] = now
