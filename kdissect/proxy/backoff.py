"""The display takes a core only when one is free, and gives it back often.

The display's process already runs below everything else (nice 10), but measured on a
2-core machine shared with the clients and the broker, a busy process even at
SCHED_IDLE still costs them 6-13 % (caches, memory bandwidth, the hypervisor), and
decoding every record as JSON keeps one busy for as long as traffic flows. So while the
rest of the machine leaves less than 1¼ cores free, the display pauses: the forwarder's
buffer fills and sheds whole exchanges (counted and reported), and the display catches
up when the load drops. A pause lasts half a second at most: on a machine busy with
other work for minutes, the display would otherwise stay dark for minutes; past that
it goes on, without offering its core, on a ration of a tenth of one core (decoding as
fast as it could, it took a core from the clients: Java consume through the proxy at
70 % of direct on an otherwise idle 2-core machine, 97 % with the display stopped), and
samples the exchanges when it falls far behind (display.py). (With a whole core as the
line, Metadata round trips through the proxy on 2 cores added +0.92 ms at p99 in two
runs; with 1¼, +0.70.) Where there is no /proc/stat (not Linux) it never pauses.

Even with a core free, one message's decoding is a burst of milliseconds (a Metadata
answer naming 110 topics: 7 ms), and measured on this kind of VM the scheduler does not
cut a SCHED_IDLE burst short for a woken task as it should: a round trip through the
proxy waited for the burst to end (p99 +1.5 to +2.5 ms with 7 ms bursts beside the
proxy, +0.4 to +0.8 when the same bursts gave the core away every 0.1-1 ms). So while
the display works, a timer signal makes it offer its core (``sched_yield``) every
``YIELD_EVERY`` seconds; the offer costs about 20 µs, 4 % of the display's speed.
"""

from __future__ import annotations

import io
import os
import signal
import stat
import sys
import threading
import time

WINDOW = 0.05  # seconds between looks at the machine's load
PAUSE = 0.1  # seconds paused while the machine is busy...
MAX_PAUSE = 0.5  # ...at most this long in a row: then the display goes on, sampling
FIRST_LOOK = 0.02  # after waiting for data: how long to watch the load before decoding
FREE = 1.25  # pause when the others leave less than 1¼ cores free...
BUSY_AT_LEAST = 0.5  # ...or, on 1 core, use more than half of it
QUIET_LOOKS = 4  # looks in a row with a core free before a lasting load counts as over
YIELD_EVERY = 0.0005  # seconds (wall clock, while it works) between offers of its core
# While no core is free past MAX_PAUSE, the display decodes on a ration: at most RATION of
# one core, in bursts of up to RATION_BURST CPU-seconds, each sleep at most RATION_NAP
RATION = 0.1
RATION_BURST = 0.05
RATION_NAP = 0.25


def _busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot, or None where unknown."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


class CpuGate:
    """``check()`` often (it is cheap); it sleeps while the machine has no free core.
    Between ``working()`` and ``waiting()`` (before blocking for data) the process
    offers its core every ``YIELD_EVERY`` seconds; this needs the main thread (a
    signal handler), elsewhere the offers are left out. The handler and the streams
    it needs are set up by the first ``working()``: a gate only asked to pause
    changes nothing in the process."""

    def __init__(self, cores: int | None = None):
        self.cores = cores or os.cpu_count() or 1
        self.busy_above = max(self.cores - FREE, BUSY_AT_LEAST)  # cores the others use
        self.enabled = _busy_seconds() is not None
        self.paused = 0.0  # seconds spent paused
        self.rationed = 0.0  # seconds slept on the ration (busy past MAX_PAUSE)
        self.credit = RATION_BURST  # CPU-seconds the display may still use on its ration
        self._ration_at = (time.monotonic(), time.process_time())
        self.yielding: bool | None = None  # can it offer? decided by the first working()
        self.offering = False  # between working() and waiting()
        self.loaded = False  # busy past MAX_PAUSE: go on, without offers
        self.quiet = 0  # looks in a row that found a core free, while loaded
        self.active = False  # between working() and waiting()
        self._mark()

    def working(self) -> None:
        self.active = True
        if self.loaded:
            # no core is free: each offer would hand the core to other work for a whole
            # time slice (measured: 2 requests decoded in 10 s beside a busy loop per
            # core); the display's low priority keeps forwarding first
            return
        if self.yielding is None:
            self.yielding = _offer_core_on_alarm()
        if self.yielding and not self.offering:
            self.offering = True  # first: waiting() then always disarms
            signal.setitimer(signal.ITIMER_REAL, YIELD_EVERY, YIELD_EVERY)

    def waiting(self) -> None:
        """Before sleeping or blocking: the offers would only wake the process."""
        self.active = False
        if self.offering:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.offering = False

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

    def check(self) -> bool:
        """Pause while the machine has no free core, but never longer than
        ``MAX_PAUSE`` at a time: a load that lasts (other work on the machine) must not
        keep the display dark. Returns True while the load lasts past that: the display
        then decodes less (see display.py) rather than waiting."""
        if not self.enabled:
            return False
        since = time.monotonic() - self.wall
        if since < WINDOW:
            if self.loaded:
                self._ration()
            return self.loaded
        if since > 2 * WINDOW:
            # the display was waiting for data, so that window says nothing about now:
            # traffic just resumed, and the machine may be busy with it
            self._mark()
            self._sleep(FIRST_LOOK)
        waited = 0.0
        while self._others() > self.busy_above:
            self.quiet = 0
            if self.loaded or waited >= MAX_PAUSE:
                self._set_loaded(True)  # still busy: go on, on a ration
                self._ration()
                self._mark()
                return True
            self._mark()
            self._sleep(PAUSE)
            self.paused += PAUSE
            waited += PAUSE
        if self.loaded:
            # /proc/stat counts in 10 ms ticks, so one 50 ms look may find a core free
            # on a machine that has none: a lasting load is over only after several
            # such looks in a row (else each false look cost another pause)
            self.quiet += 1
            if self.quiet < QUIET_LOOKS:
                self._ration()
                self._mark()
                return True
        self.quiet = 0
        self._set_loaded(False)
        self._mark()
        return False

    def _ration(self) -> None:
        """While busy past MAX_PAUSE: credit comes at RATION CPU-seconds per second (up to
        RATION_BURST) and what the process uses is taken from it; in debt, it sleeps (at
        most RATION_NAP at a time, so a stop is still seen), the channel meanwhile
        filling and the forwarder shedding whole exchanges. Never dark (it always gets
        its tenth of a core: light traffic is all shown), and never more than that from
        clients and brokers that have no core to spare."""
        wall, own = time.monotonic(), time.process_time()
        was_wall, was_own = self._ration_at
        self.credit = min(RATION_BURST, self.credit + (wall - was_wall) * RATION)
        self.credit -= own - was_own
        if self.credit < 0:
            nap = min(-self.credit / RATION, RATION_NAP)
            self._sleep(nap)
            self.rationed += nap
        # (from before the nap: the next call credits the nap's time)
        self._ration_at = (wall, time.process_time())

    def _set_loaded(self, loaded: bool) -> None:
        if loaded == self.loaded:
            return
        active = self.active
        if loaded:
            self.waiting()  # no offers while no core is free
            self.loaded = True
            self.credit = RATION_BURST  # (its CPU before this was not on the ration)
            self._ration_at = (time.monotonic(), time.process_time())
        else:
            self.loaded = False
        if active:
            self.working()

    def _sleep(self, seconds: float) -> None:
        active = self.active
        self.waiting()
        time.sleep(seconds)
        if active:
            self.working()


_offering = False


def _offer_core(signum, frame) -> None:
    # On a starved core the next alarm can come while this one still yields, and Python
    # runs its handler inside this one: without the flag the handlers nest until
    # RecursionError (seen at SIGTERM with a busy loop on each core)
    global _offering
    if _offering:
        return
    _offering = True
    try:
        os.sched_yield()
    finally:
        _offering = False


def _offer_core_on_alarm() -> bool:
    """Whether SIGALRM now offers the core (main thread, Linux; not while a caller
    already uses the alarm)."""
    if (
        not hasattr(os, "sched_yield")
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        return False
    if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, signal.SIG_IGN, None, _offer_core):
        return False
    for name in ("stdout", "stderr"):
        _finish_every_write(name)
    signal.signal(signal.SIGALRM, _offer_core)
    return True


class _WholeWrites(io.RawIOBase):
    """A raw file whose writes always finish."""

    def __init__(self, fd: int):
        self._fd = fd
        self._interrupted: BaseException | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b) -> int:
        if self._interrupted is not None:  # raised after reporting what went out
            e, self._interrupted = self._interrupted, None
            raise e
        view = memoryview(b).cast("B")
        done = 0
        try:
            while done < len(view):
                done += os.write(self._fd, view[done:])
        except BaseException as e:  # (Ctrl-C, a closed pipe...)
            if not done:
                raise
            # the buffered writer would otherwise write the part that went out again
            self._interrupted = e
        return done


def _finish_every_write(name: str) -> None:
    """A signal cuts a write to a pipe or terminal short, and Python's buffered writer
    (3.11, measured: a 20 MiB JSON line to a pipe) then returns the short count, and
    its text layer drops the rest. So ``sys.<name>`` gets a raw file that writes
    everything; regular files are never cut short and stay as they are."""
    stream = getattr(sys, name)
    buffer = getattr(stream, "buffer", None)
    if isinstance(getattr(buffer, "raw", buffer), _WholeWrites):
        return
    try:
        fd = stream.fileno()
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return
    except (AttributeError, OSError, ValueError):
        return
    stream.flush()
    # a stream Python writes unbuffered (PYTHONUNBUFFERED, -u: its buffer is the raw
    # file) stays prompt, a line at a time: the BufferedWriter (which keeps what a cut
    # write left) held the display's lines until exit
    unbuffered = not isinstance(buffer, io.BufferedIOBase)
    setattr(
        sys,
        name,
        io.TextIOWrapper(
            io.BufferedWriter(_WholeWrites(fd)),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering or unbuffered,
            write_through=getattr(stream, "write_through", False),
        ),
    )
