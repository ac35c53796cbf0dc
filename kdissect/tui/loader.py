"""Running a TUI source: ``load(emit, warn, progress)`` in a thread of this process, or
in a child process so that the decoding (CPU-bound Python) does not hold this process's
GIL while the UI answers keys. Either way the UI receives ``("view", (view, row))``,
``("warn", text)``, ``("progress", (done, total))`` and finally ``("done", None)``.
With a ``Spill``, the child sends exchanges without their messages' bytes (``view.spans``
says where they are in the spill file)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable

from ..stream.facts import ExchangeFields

_BATCH_SECONDS = 0.05


class ListedView(ExchangeFields):
    """An exchange as the TUI lists it: the cells of its row, where its messages' bytes
    are in the spill file (None: in memory) and whether the user bookmarked it."""
    row: tuple = ()
    spans: list[tuple[int, int]] | None = None
    bookmarked: bool = False
    _reasons: list[str] | None = None   # anomaly.reasons, found by the loader (its cache)


def run_in_thread(load, options, row_of, put: Callable) -> None:
    """``load`` hands enriched exchanges (the engine ran in front of it) to ``emit``."""
    def emit(ex) -> None:
        view = ListedView(ex, options)
        put(("view", (view, row_of(view))))

    try:
        load(emit, lambda text: put(("warn", text)),
             lambda done, total: put(("progress", (done, total))))
    except Exception as e:                       # the source failed: say so, keep rows
        put(("warn", f"loading stopped: {e}"))
    put(("done", None))


def _child(load, options, row_of, conn, spill) -> None:
    """In the child: run the source, sending batches of what it finds."""
    batch: list = []
    last = time.monotonic()

    def put(item) -> None:
        nonlocal last
        if item[0] == "view":
            view, row = item[1]
            spans = spill.put(view.ex.messages) if spill is not None else None
            item = ("view", (view.ex, row, spans))      # enriched here, in the child
        batch.append(item)
        now = time.monotonic()
        if now - last >= _BATCH_SECONDS or item[0] == "done":
            conn.send(batch[:])
            batch.clear()
            last = now

    run_in_thread(load, options, row_of, put)
    conn.close()


def run_in_process(load, options, row_of, put: Callable,
                   stop: threading.Event, spill=None) -> None:
    """``run_in_thread``'s work in a forked child; returns when the source is done or
    ``stop`` is set (then the child is ended)."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(load, options, row_of, send, spill),
                        daemon=True)
    child.start()
    send.close()
    try:
        while not stop.is_set():
            if not recv.poll(0.1):
                if not child.is_alive() and not recv.poll(0):
                    put(("warn", f"the loader ended unexpectedly (exit {child.exitcode})"))
                    put(("done", None))
                    return
                continue
            try:
                batch = recv.recv()
            except EOFError:
                put(("done", None))
                return
            for kind, payload in batch:
                if kind == "view":
                    ex, row, spans = payload
                    view = ListedView(ex, options)
                    view.spans = spans
                    put(("view", (view, row)))
                else:
                    put((kind, payload))
                if kind == "done":
                    return
    finally:
        if child.is_alive():
            child.terminate()
        child.join(timeout=5)
