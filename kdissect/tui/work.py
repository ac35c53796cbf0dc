"""Long work over every exchange (record filters, byte search) on all cores: forked
children each take a share of the exchanges, read their bytes from the spill file
(inherited with the fork, as are the views and the filter: nothing is pickled but
indexes) and send back what they found and how far they are. The UI's worker thread
waits for them, reports progress, and ends them when the user cancels."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import threading
from collections.abc import Callable, Sequence

_REPORT_EVERY = 64  # items between progress reports from a child
# the children's priority: measured with both cores busy (docs/guide/tui.md), workers at +10
# lost to the busy loops (the filter took 10 s, tshark 7) while keys at +0 stayed at a
# 6 ms median; only at load 30 did +10 keep keys faster (203 ms against 488 ms)
_NICER = 0


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _scan(items: Sequence, test: Callable, first_only: bool, conn) -> None:
    """In a child: the indexes of ``items`` that pass ``test`` (the first one only with
    ``first_only``), with progress reports on the way."""
    if _NICER:
        os.nice(_NICER)
    found: list[int] = []
    for done, item in enumerate(items, 1):
        try:
            hit = test(item)
        except Exception:  # a bad item must not end the scan
            hit = False
        if hit:
            found.append(done - 1)
            if first_only:
                break
        if done % _REPORT_EVERY == 0:
            conn.send(("progress", _REPORT_EVERY))
    conn.send(("done", found))
    conn.close()


def scan(
    items: Sequence,
    test: Callable,
    progress: Callable[[int, int], None],
    cancel: threading.Event,
    first_only: bool = False,
    workers: int | None = None,
) -> list[int] | None:
    """Indexes of ``items`` passing ``test``, in order; with ``first_only`` at most one,
    the first. None when cancelled. Runs in forked children (``workers``: all cores)."""
    n = len(items)
    if n == 0:
        return []
    workers = max(1, min(workers or cores(), n))
    ctx = multiprocessing.get_context("fork")
    # a search wants the first hit: contiguous shares, the earliest with a hit decides;
    # a filter wants them all: every workers-th item, so that costly exchanges (big
    # Produce requests and Fetch responses come in runs) are shared out evenly
    bounds = [n * k // workers for k in range(workers + 1)]

    def index(k: int, i: int) -> int:
        return bounds[k] + i if first_only else k + i * workers

    children = []
    pipes: list[multiprocessing.connection.Connection] = []
    for k in range(workers):
        recv, send = ctx.Pipe(duplex=False)
        part = items[bounds[k] : bounds[k + 1]] if first_only else items[k::workers]
        child = ctx.Process(target=_scan, args=(part, test, first_only, send), daemon=True)
        child.start()
        send.close()
        children.append(child)
        pipes.append(recv)
    results: list[list[int] | None] = [None] * workers
    done = 0
    try:
        while any(r is None for r in results):
            if cancel.is_set():
                return None
            ready = multiprocessing.connection.wait(
                [p for p, r in zip(pipes, results) if r is None], timeout=0.1
            )
            for k, pipe in enumerate(pipes):
                if pipe not in ready:
                    continue
                try:
                    kind, payload = pipe.recv()
                except EOFError:  # the child died: its share is unknown
                    results[k] = []
                    continue
                if kind == "progress":
                    done += payload
                    progress(done, n)
                else:
                    results[k] = [index(k, i) for i in payload]
            if first_only:  # the earliest share with a hit decides
                for r in results:
                    if r is None:
                        break
                    if r:
                        return r[:1]
        found = sorted(i for r in results for i in (r or []))
        return found[:1] if first_only else found
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
            child.join(timeout=2)
        for pipe in pipes:
            pipe.close()
