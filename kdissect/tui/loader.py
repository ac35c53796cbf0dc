"""Running a TUI source: ``load(emit, warn, progress)`` in a thread of this process, or
in a child process so that the decoding (CPU-bound Python) does not hold this process's
GIL while the UI answers keys. Either way the UI receives typed messages: ``Row``
(an enriched exchange's view and its row), ``Warn`` (a note or a Gap), ``Progress`` and
finally ``Done``. With a ``Spill``, the child sends exchanges without their messages'
bytes (``view.spans`` says where they are in the spill file)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..stream.fields import ExchangeFields
from ..stream.model import Exchange, Gap

_BATCH_SECONDS = 0.05


@dataclass(slots=True)
class Row:
    view: ListedView
    row: Any                       # what row_of(view) made of it (cells, reasons)


@dataclass(slots=True)
class Warn:
    what: str | Gap | object        # a note, a Gap, or a TLS connection's TlsFacts


@dataclass(slots=True)
class Progress:
    done: int
    total: int


@dataclass(slots=True)
class Done:
    pass


Message = Row | Warn | Progress | Done


@dataclass(slots=True)
class _Sent:
    """A row as the child sends it: the exchange (enriched there), without a view."""
    ex: Exchange
    row: Any
    spans: Any


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
        put(Row(view, row_of(view)))

    try:
        load(emit, lambda what: put(Warn(what)),
             lambda done, total: put(Progress(done, total)))
    except Exception as e:                       # the source failed: say so, keep rows
        put(Warn(f"loading stopped: {e}"))
    put(Done())


def _child(load, options, row_of, conn, spill) -> None:
    """In the child: run the source, sending batches of what it finds."""
    batch: list[Message | _Sent] = []
    last = time.monotonic()

    def put(item: Message) -> None:
        nonlocal last
        sent: Message | _Sent = item
        if isinstance(item, Row):
            spans = spill.put(item.view.ex.messages) if spill is not None else None
            sent = _Sent(item.view.ex, item.row, spans)      # enriched here, in the child
        batch.append(sent)
        now = time.monotonic()
        if now - last >= _BATCH_SECONDS or isinstance(item, Done):
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
                    put(Warn(f"the loader ended unexpectedly (exit {child.exitcode})"))
                    put(Done())
                    return
                continue
            try:
                batch = recv.recv()
            except EOFError:
                put(Done())
                return
            for item in batch:
                if isinstance(item, _Sent):
                    view = ListedView(item.ex, options)
                    view.spans = item.spans
                    put(Row(view, item.row))
                else:
                    put(item)
                if isinstance(item, Done):
                    return
    finally:
        if child.is_alive():
            child.terminate()
        child.join(timeout=5)
