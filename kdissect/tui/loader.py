"""Running a TUI source: ``load(sink)`` (the engine's hooks: exchange, gap, tls, note,
progress) in a thread of this process, or in a child process so that the decoding
(CPU-bound Python) does not hold this process's GIL while the UI answers keys. Either
way the UI receives typed messages, one per hook: ``Row`` (an enriched exchange's view
and its row), ``GapSeen``, ``TlsSeen``, ``Note``, ``Progress`` and finally ``Done``, a
batch at a time from a child (the screen takes them as browser.Arrived messages). With
a ``Spill``, the child sends exchanges without their messages' bytes (``view.spans``
says where they are in the spill file)."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..stream.fields import ExchangeFields
from ..stream.model import Exchange, Gap
from ..stream.sink import BaseSink

_BATCH_SECONDS = 0.05


@dataclass(slots=True)
class Row:
    view: ListedView
    row: Any  # what row_of(view) made of it (cells, reasons)


@dataclass(slots=True)
class Note:
    text: str
    level: str = "warn"  # "info", "warn" or "error", as the engine's note hook says


@dataclass(slots=True)
class GapSeen:
    gap: Gap


@dataclass(slots=True)
class TlsSeen:
    facts: Any  # a TLS connection's capture.tls.TlsFacts


@dataclass(slots=True)
class Progress:
    done: int
    total: int


@dataclass(slots=True)
class Done:
    pass


@dataclass(slots=True)
class TopicNames:
    """Topic names (id -> name) the engine learned since the last ones sent: the trees
    decoded on view name topics known by id with them (Fetch v13+ of
    ``__consumer_offsets`` and the other internal topics, whose records are decoded by
    their schemas)."""

    names: dict[str, str]


Message = Row | GapSeen | TlsSeen | Note | Progress | Done | TopicNames


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
    _reasons: list[str] | None = None  # anomaly.reasons, found by the loader (its cache)


class _ToScreen(BaseSink):
    """The engine's hooks as the screen's messages (``put``); an exchange (enriched by
    the engine in front of it) as its view and row."""

    def __init__(self, options, row_of, put: Callable[[Message], None]) -> None:
        self._options, self._row_of, self._put = options, row_of, put
        self.topic_ids: dict[str, str] = {}  # the engine's (BaseSink.topic_ids)
        self._told = 0  # how many of them were sent

    def exchange(self, ex: Exchange) -> None:
        view = ListedView(ex, self._options)
        self._put(Row(view, self._row_of(view)))
        ids = self.topic_ids
        if len(ids) != self._told:
            # the names added since (enrichment only adds: a dict keeps their order),
            # taken from its end: what each sends is what is new, however many came before
            new = list(itertools.islice(reversed(ids.items()), len(ids) - self._told))
            self._told = len(ids)
            self._put(TopicNames(dict(reversed(new))))

    def gap(self, g: Gap) -> None:
        self._put(GapSeen(g))

    def tls(self, facts: Any) -> None:
        self._put(TlsSeen(facts))

    def note(self, text: str, level: str = "warn") -> None:
        self._put(Note(text, level))

    def progress(self, done: int, total: int) -> None:
        self._put(Progress(done, total))


def run_in_thread(load, options, row_of, put: Callable) -> None:
    """``load(sink)``: the source run with a sink whose hooks ``put`` typed messages."""
    try:
        load(_ToScreen(options, row_of, put))
    except Exception as e:  # the source failed: say so, keep rows
        put(Note(f"loading stopped: {e}", "error"))
    put(Done())


class _End:
    """The child's last message: it finished (without it, it died)."""


_MOST = 256  # objects per batch at most: each unpickles in a few ms


def _forked_child(work: Callable, conn) -> None:
    """In the child: ``work(emit)``, what it emits sent in batches (the screen gets a
    batch at a time: browser.Arrived)."""
    batch: list = []
    last = time.monotonic()

    def emit(obj) -> None:
        nonlocal last
        batch.append(obj)
        now = time.monotonic()
        if now - last >= _BATCH_SECONDS or len(batch) >= _MOST:
            conn.send(batch[:])
            batch.clear()
            last = now

    work(emit)
    conn.send(batch + [_End()])
    conn.close()


class Forked:
    """``work(emit)`` in a child forked here, when the app starts it (from the UI
    thread, never from a worker thread of this multithreaded app): its CPU-bound Python
    leaves this process's GIL to the UI. ``receive`` (in a worker thread) takes what it
    emits."""

    def __init__(self, work: Callable[[Callable[[Any], None]], None]) -> None:
        ctx = multiprocessing.get_context("fork")
        self.recv, send = ctx.Pipe(duplex=False)
        self.child = ctx.Process(target=_forked_child, args=(work, send), daemon=True)
        self.child.start()
        send.close()

    def receive(self, take: Callable[[list], None], stop: threading.Event) -> int | None:
        """``take(objects)`` with the objects the child emits, in order, a batch as it
        sent them (unpickling a batch holds the GIL: keys wait for it). Returns None when
        the child finished or ``stop`` was set (the child is then ended), else the exit
        code of a child that died first."""
        child, recv = self.child, self.recv
        try:
            while not stop.is_set():
                if not recv.poll(0.1):
                    continue
                try:
                    batch = recv.recv()
                except EOFError:  # it died without its last message
                    child.join(timeout=5)
                    return child.exitcode if child.exitcode is not None else -1
                ended = bool(batch) and isinstance(batch[-1], _End)
                if ended:
                    batch.pop()
                if batch:
                    take(batch)
                if ended:
                    return None
            return None
        finally:
            if child.is_alive():
                child.terminate()
            child.join(timeout=5)
            recv.close()


def run_forked(
    work: Callable[[Callable[[Any], None]], None],
    take: Callable[[Any], None],
    stop: threading.Event,
) -> int | None:
    """``work(emit)`` in a child forked now, ``take`` with each object it emits (Forked)."""

    def each(batch: list) -> None:
        for obj in batch:
            take(obj)

    return Forked(work).receive(each, stop)


def fork_loader(load, options, row_of, spill=None) -> Forked:
    """``run_in_thread``'s work in a child forked now: exchanges enriched there, sent
    without their messages' bytes when they went to ``spill``."""

    def work(emit: Callable) -> None:
        def sent(item: Message) -> None:
            if isinstance(item, Row):  # enriched here, in the child
                spans = spill.put(item.view.ex.messages) if spill is not None else None
                emit(_Sent(item.view.ex, item.row, spans))
            else:
                emit(item)

        run_in_thread(load, options, row_of, sent)

    return Forked(work)


def receive_rows(
    forked: Forked, options, put: Callable[[list], None], stop: threading.Event
) -> None:
    """``put(messages)`` with what ``fork_loader``'s child sends (its rows as ``Row``s), a
    batch at a time; returns when it is done or ``stop`` is set (then the child is ended)."""

    def row(item):
        if isinstance(item, _Sent):
            view = ListedView(item.ex, options)
            view.spans = item.spans
            return Row(view, item.row)
        return item

    code = forked.receive(lambda batch: put([row(item) for item in batch]), stop)
    if code is not None:
        put([Note(f"the loader ended unexpectedly (exit {code})", "error"), Done()])
