"""The browser screen both TUIs are: a list of items growing while a source loads, the
selected item's field trees beside its bytes, a display filter, a byte search, the next
problem, sorting. What differs between exchanges (pcap, live, proxy) and Kafka's files
on disk is an ``Adapter``: the cells and sort keys of an item, how a filter and a search
test it, whether it is a problem and where. The apps (app.py, log_app.py) hold their
sources, their detail and their own keys."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Static

from ..filters import Filter, FilterError, parse_filter
from ..protocol.node import Node
from ..stream import anomaly
from .detail import Detail, HexView, Item
from .exchange_list import ExchangeList
from .filterbar import FilterInput, FilterSuggester, check_filter
from .jobs import IN_WORKERS, Jobs, set_text, work_line
from .loader import Done, Note, Progress
from .screens import HelpScreen
from .sorting import Sorting
from .work import scan

REST = 0.06  # seconds the list cursor rests before the detail follows
DECODE_HERE = 4096  # bigger items decode in a worker thread


def unique_path(path: Path) -> Path:
    """``path``, or ``name-2.ext``, ``name-3.ext``... : an export never overwrites."""
    n, candidate = 1, path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


class Adapter(Protocol):
    """What the browser asks of its items. ``passes`` and ``holds`` run in forked
    children too (work.py): they read what they need themselves."""

    noun: str  # "exchange", "item": the subtitle and the messages name the items so
    fields: list[str] | None  # the filter's field names (None: the exchanges')
    no_problem: str  # said when `p` finds no problem among the items shown

    def sort_key(self, item: Any, column: str) -> tuple:
        """(0, value) to sort by; (1, ...) for an empty cell, which stays last."""
        ...

    def matches(self, flt: Filter, item: Any) -> bool:
        """Whether ``item`` passes ``flt`` (here, as items arrive)."""
        ...

    def slow(self, flt: Filter) -> bool:
        """Whether ``flt`` reads the items again (then, over many, it runs in workers)."""
        ...

    def passes(self, flt: Filter, item: Any) -> bool:
        """``matches`` as a forked worker asks it."""
        ...

    def holds(self, item: Any, needle: bytes) -> bool:
        """Whether ``needle`` is in the item's bytes (decompressed records included)."""
        ...

    def locate(self, item: Any, needle: bytes, shown: list[Item]) -> tuple[int, Node, int] | None:
        """Where the detail showing ``item`` (``shown``) holds ``needle``: (the tree's
        index, the node holding it, the offset)."""
        ...

    def is_problem(self, item: Any) -> bool: ...

    def problem_field(self, item: Any, root: Node) -> Node | None:
        """The field to land on when no field of ``root`` is an offending one."""
        ...


class Browser(Sorting, Jobs, App):
    """The list, the detail, the bars and the work line over ``adapter``'s items. A
    subclass sets ``adapter``, ``items`` (every item read, in arrival order) and says how
    to show one (``show``), what the list shows when it is empty (``_show_empty``) and
    what follows when the rows change (``follow_cursor``)."""

    LIST: ClassVar[type[ExchangeList]] = ExchangeList
    LIST_ID: ClassVar[str] = "exchanges"
    FILTER_HINT: ClassVar[str] = ""
    SEARCH_HINT: ClassVar[str] = ""
    HELP: ClassVar[str | None] = None  # the help screen's text (None: the exchanges')
    STATS_HERE: ClassVar[int] = IN_WORKERS  # statistics of more items: in the background
    EXPORT_AS: ClassVar[str] = ""  # what the work line says the list's export writes
    STOPPED: ClassVar[str] = "loading stopped (Esc): the list holds what was read until then"

    adapter: Adapter
    items: list
    live = False  # a source that runs until stopped
    loaded = False

    def init_browser(self, title: str, filter_text: str = "", flt: Filter | None = None) -> None:
        self.title_text = title
        self.sub_title = title
        self.filter: Filter | None = flt
        self.filter_text = filter_text
        self.needle: bytes | None = None
        self.needle_text = ""
        self.stop = threading.Event()
        self._stopped = False  # loading stopped by the user (Esc)
        self._progress: tuple[int, int] | None = None
        # values the filter bar completes: topics (and client ids) seen so far
        self.seen: dict[str, set[str]] = {"topic": set()}
        self.detail_item: Any = None  # what the detail shows
        self.pending: Any = None  # what it is about to show
        self._detail_timer: Timer | None = None
        self._incoming: deque = deque()  # what the loader sent, not yet in the list

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="main"):
            # long work (loading, filters, searches, statistics): what, how far, Esc
            yield from work_line()
            yield Static(id="active-filter")
            yield self.LIST(id=self.LIST_ID)
            yield Static(id="empty")
            yield Detail(self.options.show_secrets, id="detail")  # type: ignore[attr-defined]
        # in the flow, not docked: docked at one edge they covered each other (and the
        # footer hid the bar's border and the reason of a bad filter)
        with Vertical(id="bars"):
            yield FilterInput(
                placeholder=self.FILTER_HINT,
                id="filter",
                classes="bar",
                suggester=FilterSuggester(
                    lambda field: self.seen.get(field, ()), self.adapter.fields
                ),
            )
            yield Static(id="filter-error")
            yield Input(placeholder=self.SEARCH_HINT, id="search", classes="bar")
        yield Footer()

    @property
    def table(self) -> ExchangeList:
        return self.query_one(ExchangeList)

    @property
    def shown(self) -> list:
        """The items in the list, in its order."""
        return self.table.rows

    @property
    def read(self) -> int:
        """Items read so far (the filter may show fewer)."""
        return len(self.items)

    def on_unmount(self) -> None:
        self.stop.set()

    # -- loading ---------------------------------------------------------------------------

    def load_in_worker(self, receive: Callable[[Callable[[Any], None]], bool | None]) -> None:
        """``receive(take)`` in a worker thread: ``take`` queues what the loader sends
        for the list (a loader's ``Progress``: only the latest matters); ``receive`` returns
        True when it queued why the loading ended. Its child, if any, was forked before,
        from the UI thread (loader.Forked)."""

        def run() -> None:
            if not receive(self._take) and self._stopped:  # Esc: the rows so far stay
                self._take(Note(self.STOPPED))
                self._take(Done())

        self.run_worker(run, thread=True, exclusive=True)

    def _take(self, obj: Any) -> None:
        if isinstance(obj, Progress):
            self._progress = (obj.done, obj.total)
        else:
            self._incoming.append(obj)

    def current(self) -> Any:
        return self.table.current()

    def show(self, item: Any) -> None:
        """Show ``item`` in the detail now."""
        raise NotImplementedError

    def follow_cursor(self) -> None:
        """After the rows change under the cursor (sort, filter), show what it is on."""
        raise NotImplementedError

    @on(ExchangeList.RowHighlighted)
    def _highlighted(self, event: ExchangeList.RowHighlighted) -> None:
        """The detail follows the cursor once it rests: keys that scroll through the
        list stay instant."""
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(REST, self.show_current)

    def show_current(self) -> None:
        """Show the item under the cursor; a big one decodes in a worker thread first
        (keys pressed meanwhile are answered)."""
        if not self.query(HexView):  # the app is closing: its widgets are gone
            return
        item = self.current()
        if item is None or item is self.detail_item:
            return
        cost = self.decode_cost(item)
        if cost < DECODE_HERE:
            self.show(item)
            return
        self.pending = item
        self.decoding(cost)

        def decode() -> None:
            self.call_from_thread(self._decoded, item, self.decode(item))

        self.run_worker(decode, thread=True, group="detail")

    def _decoded(self, item: Any, decoded: Any) -> None:
        self.keep_decoded(item, decoded)
        if self.pending is item and self.current() is item and self.query(HexView):
            self.show(item)

    def decode_cost(self, item: Any) -> int:
        """The bytes ``show`` would decode first (0: none, or kept)."""
        return 0

    def decoding(self, cost: int) -> None:
        """Say that ``cost`` bytes decode in a worker."""

    def decode(self, item: Any) -> Any:
        """What ``show`` needs decoded, off the UI thread."""

    def keep_decoded(self, item: Any, decoded: Any) -> None:
        """Keep what ``decode`` gave (here, on the UI thread)."""

    def select(self, item: Any) -> None:
        """Move the list's cursor to ``item`` and show it now."""
        self.table.move_cursor(self.table.index(item))
        self.table.center_cursor()
        self.show(item)

    # -- sorting ---------------------------------------------------------------------------

    def sort_value(self, column: str):
        adapter = self.adapter
        return lambda item: adapter.sort_key(item, column)

    def after_sort(self) -> None:
        self.follow_cursor()

    # -- the filter ------------------------------------------------------------------------

    def matches(self, item: Any) -> bool:
        return self.filter is None or self.adapter.matches(self.filter, item)

    def apply_filter(self, text: str) -> FilterError | None:
        """Show only the items that pass the filter; returns the error of a bad one. A
        filter that reads the items again (their records) over many items runs on all
        cores in the background, the list staying as it was until it is done."""
        try:
            parsed = parse_filter(text, self.adapter.fields) if text.strip() else None
        except FilterError as e:
            return e
        items = list(self.items)
        if parsed is not None and len(items) > IN_WORKERS and self.adapter.slow(parsed):
            adapter = self.adapter
            self.run_job(
                f"filter {text}",
                lambda progress, cancel: scan(
                    items, lambda item: adapter.passes(parsed, item), progress, cancel
                ),
                lambda found: self._filtered(parsed, text, items, found),
            )
            return None
        self._filtered(parsed, text, items, None)
        return None

    def _filtered(self, parsed: Filter | None, text: str, items: list, found) -> None:
        """The list shows the items passing ``parsed``: ``found`` (indexes in ``items``)
        when workers tested them, then those read since."""
        self.filter, self.filter_text = parsed, text
        if found is None:
            rows = [item for item in self.items if self.matches(item)]
        else:
            later = [item for item in self.items[len(items) :] if self.matches(item)]
            rows = [items[i] for i in found] + later
        self.table.set_rows(rows, keep=self.current())
        self.rows_changed()

    def rows_changed(self) -> None:
        self.fit_list()
        self._show_active_filter()
        self._update_subtitle()
        self._show_empty()
        self.follow_cursor()

    def fit_list(self) -> None:
        """The list's height, as its rows ask (exchanges: a short list leaves the room)."""

    def _show_active_filter(self) -> None:
        active = self.query_one("#active-filter", Static)
        if self.filter is not None:  # the filter stays in sight
            set_text(
                active,
                Text.assemble(
                    ("filter ", "dim"),
                    (self.filter_text, "bold"),
                    (f"  {len(self.shown)} of {self.read} · / edits it", "dim"),
                ),
                layout=False,
            )
        active.set_class(self.filter is not None, "visible")

    def subtitle_note(self) -> str:
        return ""

    def _update_subtitle(self) -> None:
        count = f"{len(self.shown)} of {self.read}" if self.filter else str(self.read)
        state = "" if self.loaded else "  live" if self.live else "  loading…"
        note = self.subtitle_note()
        self.sub_title = f"{self.title_text}  {count} {self.adapter.noun}s{note}{state}"

    def _show_empty(self) -> None:
        raise NotImplementedError

    @on(Input.Changed, "#filter")
    def _validate(self, event: Input.Changed) -> None:
        check_filter(event.input, self.query_one("#filter-error", Static), self.adapter.fields)

    # -- problems and the byte search ------------------------------------------------------

    def action_next_problem(self, step: int = 1) -> None:
        """The next item (after the cursor, wrapping) that is a problem, opened on its
        offending field with the field's bytes highlighted."""
        rows = self.shown
        n = len(rows)
        start = self.table.cursor_row
        for k in range(1, n + 1):
            item = rows[(start + step * k) % n]
            if self.adapter.is_problem(item):
                self.select(item)
                self._land_on_problem(item)
                return
        self.notify(self.adapter.no_problem, timeout=4)

    def _land_on_problem(self, item: Any) -> None:
        detail = self.query_one(Detail)
        for index in reversed(range(len(detail.items))):  # a response first
            root = detail.items[index].root
            node = anomaly.offending(root)
            if node is None:
                node = self.adapter.problem_field(item, root)
            if node is not None:
                detail.select(index, node)
                detail.field_tree.reveal(node, root)
                return

    def action_search_next(self) -> None:
        """The next item (after the cursor, wrapping) whose bytes hold the needle, on the
        wire or in a decompressed record buffer; the field holding the match is
        selected. Over many items the search runs on all cores in the background."""
        if not self.needle:
            self.action_search()
            return
        needle, adapter = self.needle, self.adapter
        self.search_from_cursor(
            lambda item: adapter.holds(item, needle),
            self._show_match,
            f"{self.needle_text!r} is in no {adapter.noun} shown (decompressed records included)",
        )

    def _show_match(self, item: Any) -> None:
        """Select ``item`` and, in its detail, the field holding the needle."""
        if self.needle is None:
            return
        self.select(item)
        detail = self.query_one(Detail)
        found = self.adapter.locate(item, self.needle, detail.items)
        if found is not None:
            detail.select_at(*found)

    # -- statistics and export -----------------------------------------------------------

    def action_stats(self) -> None:
        """Statistics of the items shown; over many gathered in the background (Esc
        cancels)."""
        items = list(self.shown)
        gather = self.stats_of(items)
        if len(items) > self.STATS_HERE:
            self.run_job("statistics", gather, lambda found: self.open_stats(items, found))
        else:
            self.open_stats(items, gather(lambda done, total: None, None))

    def stats_of(self, items: list) -> Callable[[Callable[[int, int], None], Any], Any]:
        """``gather(progress, cancel)``: the statistics of ``items`` (None if cancelled)."""
        raise NotImplementedError

    def open_stats(self, items: list, gathered: Any) -> None:
        """The statistics screen over what ``stats_of`` gathered."""
        raise NotImplementedError

    def action_export(self) -> None:
        """The item under the cursor, to a new file here."""
        item = self.current()
        if item is None:
            return
        path, write = self.export_of(item)
        try:
            write(path)
        except OSError as e:
            self.notify(f"could not write {path}: {e.strerror}", severity="error")
            return
        self.notify(f"exported to {path.resolve()}")

    def export_of(self, item: Any) -> tuple[Path, Callable[[Path], object]]:
        """(a new file's path, what writes ``item`` to it)."""
        raise NotImplementedError

    def export_listed(
        self,
        path: Callable[[int], Path],
        work: Callable[[Path, list, Callable[[int, int], None], Any], Any],
        finish: Callable[[Path, Any], None],
    ) -> None:
        """The items listed (the filter applies), in the list's order, written to
        ``path(count)`` by ``work(path, items, progress, cancel)`` in the background (Esc
        cancels); then ``finish(path, result)``."""
        items = list(self.shown)
        if not items:
            self.notify("nothing to export: the list is empty", severity="warning")
            return
        where = path(len(items))

        def run(progress, cancel):
            try:
                return work(where, items, progress, cancel)
            except OSError as e:
                self.call_from_thread(
                    self.notify, f"could not write {where}: {e.strerror}", severity="error"
                )
                return None

        self.run_job(
            f"export {len(items)} {self.adapter.noun}s{self.EXPORT_AS}",
            run,
            lambda result: finish(where, result),
        )

    # -- the detail's keys -----------------------------------------------------------------

    def action_toggle_pane(self) -> None:
        """Tree ⇄ bytes: on a narrow terminal they take turns, else the focus moves."""
        self.query_one(Detail).toggle_pane()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.HELP) if self.HELP is not None else HelpScreen())
