"""The forwarding process: the proxy's event loop alone in a process of its own, so that
decoding, printing and the TUI (in the process that started it) never take the
interpreter lock from forwarding. It talks to its parent only through the display
channel (``feed``); SIGINT or SIGTERM close it cleanly, and it prints its counters to
stderr as it exits."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable

from .feed import ERROR, READY, FeedWriter
from .metrics import DisplayShared
from .priority import PriorityRefused, raise_forwarding


def event_loop_factory(kind: str):
    """(name, loop factory) for ``kind`` "auto" (uvloop when installed), "uvloop" or
    "asyncio"."""
    if kind in ("auto", "uvloop"):
        try:
            import uvloop

            return "uvloop", uvloop.new_event_loop
        except ImportError:
            if kind == "uvloop":
                raise RuntimeError(
                    "uvloop is not installed: pip install 'kdissect[fast]' "
                    "(Linux and macOS), or use --event-loop asyncio"
                ) from None
    return "asyncio", asyncio.new_event_loop


class Forwarder:
    """The child process and the read end of its display channel."""

    def __init__(self, process, fd: int, shared: DisplayShared):
        self.process, self.fd = process, fd
        self.shared = shared  # the display's counts, read by the forwarder
        self.error = "the proxy process ended"  # why it did not start (its channel says)

    def stop(self) -> None:
        if self.process.pid and self.process.is_alive():
            os.kill(self.process.pid, signal.SIGTERM)

    def join(self, timeout: float = 30) -> int | None:
        self.process.join(timeout)
        if self.process.is_alive():  # it did not close in time
            self.process.kill()
            self.process.join()
        return self.process.exitcode


def start(
    make_proxy: Callable,
    budget: int,
    loop_kind: str = "auto",
    metrics_at: tuple[str, int] | None = None,
    per_connection: bool = False,
    priority: str = "normal",
) -> Forwarder:
    """Fork the forwarding process. ``make_proxy(feed, on_note, shared)`` builds the
    Proxy there; ``priority``: one of ``priority.POLICIES``."""
    read_fd, write_fd = os.pipe()
    shared = DisplayShared()
    ctx = multiprocessing.get_context("fork")
    process = ctx.Process(
        target=_main,
        args=(
            make_proxy,
            read_fd,
            write_fd,
            budget,
            loop_kind,
            (metrics_at, per_connection),
            shared,
            priority,
        ),
        name="kdissect-proxy",
    )
    process.start()
    os.close(write_fd)  # EOF for the display once the forwarder is gone
    return Forwarder(process, read_fd, shared)


# glibc's malloc gives buffers over 128 KiB (a socket's chunk, a Fetch answer of a
# megabyte) their own pages from the kernel and returns them when freed, so each was
# faulted in anew: measured on this kind of VM, 6.3 ms to allocate and fill 1.4 MB, 0.4 ms
# from memory kept. The forwarder and the display (display.py: the copies of each
# answer it reads, 2.5 ms per MB as they came, 0.12 from memory kept) keep freed memory
# up to these sizes (what the forwarder holds at once is still capped by --max-memory).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
KEEP = 64 << 20  # freed memory kept at the top of the heap before it is given back
KEEP_AT_MOST = 1 << 30  # (mallopt takes an int)


def keep_freed_memory(keep: int = KEEP) -> None:
    """glibc only (``mallopt``); elsewhere nothing changes. Buffers up to 32 MiB come
    from the heap, and up to ``keep`` bytes freed at its top stay there."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, ImportError):
        return
    mallopt(M_MMAP_THRESHOLD, 32 << 20)  # own pages only above 32 MiB
    mallopt(M_TRIM_THRESHOLD, min(keep, KEEP_AT_MOST))
    # one heap for every thread: a thread's own heap (the thread forwarder's, which
    # allocates each large message) is given back whole once all of it is free, whatever
    # the threshold above (measured: 18,500 page faults per Java consume run of 200 MB)
    mallopt(M_ARENA_MAX, 1)


def forwarder_keeps(budget: int) -> int:
    """What the forwarder keeps of the memory it frees: the display channel's queue holds
    the answers it forwarded (no copy) up to twice ``budget`` while the display is behind,
    and hands them all back once it catches up; with only 64 MiB kept the heap was then
    given back to the kernel and the next burst faulted it in again, page by page on the
    forwarding path (measured with the Java consumer: 18,500 page faults per run of 200 MB,
    against 2 with the display stopped)."""
    return KEEP + 2 * budget


def _main(
    make_proxy,
    read_fd: int,
    write_fd: int,
    budget: int,
    loop_kind: str,
    metrics_at,
    shared: DisplayShared,
    priority: str,
) -> None:
    os.close(read_fd)
    keep_freed_memory(forwarder_keeps(budget))
    try:
        scheduling = raise_forwarding(priority)
    except PriorityRefused as e:
        _fatal(write_fd, str(e))
        return
    # until the loop handles it (below), a Ctrl-C must not end start-up with a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        name, factory = event_loop_factory(loop_kind)
    except RuntimeError as e:
        _fatal(write_fd, str(e))
        return
    with asyncio.Runner(loop_factory=factory) as runner:
        code = runner.run(
            _serve(make_proxy, write_fd, budget, f"{name}|{scheduling}", metrics_at, shared)
        )
    sys.stderr.flush()
    os._exit(code)


def _fatal(write_fd: int, text: str) -> None:
    from .feed import HEADER

    payload = text.encode()
    os.write(write_fd, HEADER.pack(ERROR, 0, 0, 0.0, 0, len(payload)) + payload)
    os.close(write_fd)


async def _say_unreachable(proxy, feed: FeedWriter) -> None:
    why = await proxy.unreachable()
    if why is not None:
        feed.note(why)


async def _serve(
    make_proxy, write_fd: int, budget: int, running: str, metrics_at, shared: DisplayShared
) -> int:
    """``running``: the event loop's name and the scheduling, as READY tells them."""
    metrics_addr, per_connection = metrics_at
    stop = asyncio.Event()
    feed = FeedWriter(write_fd, budget, on_broken=stop.set)  # the parent is gone
    await feed.start()
    from .skipscan import warm

    warm()
    loop = asyncio.get_running_loop()
    try:
        proxy = make_proxy(feed, feed.note, shared)

        # what the event loop itself reports (an accept that failed for want of file
        # descriptors: asyncio pauses that listener for a second and goes on) is a
        # note, counted; a kind per exception type, so a second, different error is told
        # too, with its traceback (once: not a traceback per occurrence)
        def told(_loop, context) -> None:
            e = context.get("exception")
            text = f"{context.get('message')}: {e or ''} (the proxy goes on)"
            if e is not None and not isinstance(e, OSError):
                text += "\n" + "".join(traceback.format_exception(e)).rstrip()
            proxy.repeated(f"event loop: {type(e).__name__ if e else 'error'}", text)

        loop.set_exception_handler(told)
        await proxy.start()
    except Exception as e:
        feed.note(str(getattr(e, "strerror", None) or e), ERROR)
        await feed.aclose()
        return 2
    if metrics_addr is not None:
        from .metrics import serve_prometheus

        try:
            serve_prometheus(proxy.metrics, metrics_addr[0], metrics_addr[1], per_connection)
        except OSError as e:
            feed.note(
                f"cannot serve metrics on {metrics_addr[0]}:{metrics_addr[1]}: {e.strerror or e}",
                ERROR,
            )
            await proxy.close()
            await feed.aclose()
            return 2
    # every catchable ending signal closes cleanly (the recording flushed); SIGKILL
    # leaves the recording as it was at the last flush, a second at most behind
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    # what is loaded now (schemas, modules: ~64,000 objects) lives as long as the process:
    # out of the collector's sight, a full collection takes microseconds instead of the
    # tens of milliseconds (135 ms on a busy machine) a forwarded message would wait
    gc.collect()
    gc.freeze()
    feed.note(f"{proxy.host}:{proxy.bootstrap_port}|{running}", READY)
    probe = loop.create_task(_say_unreachable(proxy, feed))
    await stop.wait()
    probe.cancel()
    # the repeats' last counts are final counters too: said here, as the summary below
    # (through the channel they were lost whenever the display was given up on)
    proxy.repeated.emit = lambda text: print(f"proxy: {text}", file=sys.stderr, flush=True)
    await proxy.close()
    if proxy.recorder is not None:
        proxy.recorder.close()
    # the counters are final: said now, not after the display has taken what is queued
    # (a display stuck on an output nobody reads holds that up, and is given up on)
    print(f"proxy: {proxy.metrics.summary()}", file=sys.stderr, flush=True)
    if feed.unreported:
        feed.dropped(feed.unreported)
    await feed.aclose()
    return 0
