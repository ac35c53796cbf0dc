"""The display takes a core only when one is free.

The display's process already runs at the lowest scheduling priority, but measured on a
2-core machine shared with the clients and the broker, a busy process even at
SCHED_IDLE still costs them 6-13 % (caches, memory bandwidth, the hypervisor), and
decoding every record as JSON keeps one busy for as long as traffic flows. So while the
rest of the machine leaves less than a whole core free, the display pauses: the
forwarder's buffer fills and sheds whole exchanges (counted and reported), and the
display catches up when the load drops. Where there is no /proc/stat (not Linux) it
never pauses.
"""

from __future__ import annotations

import os
import time

WINDOW = 0.05         # seconds between looks at the machine's load
PAUSE = 0.1           # seconds paused while the machine is busy
FIRST_LOOK = 0.02     # after waiting for data: how long to watch the load before decoding
FREE = 1.0            # pause when the others leave less than a whole core free


def _busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot, or None where unknown."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]     # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


class CpuGate:
    """``check()`` often (it is cheap); it sleeps while the machine has no free core."""

    def __init__(self, cores: int | None = None):
        self.cores = cores or os.cpu_count() or 1
        self.enabled = _busy_seconds() is not None
        self.paused = 0.0            # seconds spent paused
        self._mark()

    def _mark(self) -> None:
        self.wall = time.monotonic()
        self.own = time.process_time()
        self.busy = _busy_seconds() if self.enabled else None

    def _others(self) -> float:
        """Cores the rest of the machine used since the last mark."""
        wall, own, busy = time.monotonic(), time.process_time(), _busy_seconds()
        if busy is None or self.busy is None or wall <= self.wall:
            return 0.0
        return max(0.0, (busy - self.busy) - (own - self.own)) / (wall - self.wall)

    def check(self) -> None:
        if not self.enabled:
            return
        since = time.monotonic() - self.wall
        if since < WINDOW:
            return
        if since > 2 * WINDOW:
            # the display was waiting for data, so that window says nothing about now:
            # traffic just resumed, and the machine may be busy with it
            self._mark()
            time.sleep(FIRST_LOOK)
        while self._others() > self.cores - FREE:
            self._mark()
            time.sleep(PAUSE)
            self.paused += PAUSE
        self._mark()
