"""The browser screen both TUIs are: a list of items growing while a source loads, the
selected item's field trees beside its bytes, a display filter, a byte search, the next
problem, sorting. What differs between exchanges (pcap, live, proxy) and Kafka's files
on disk is an ``Adapter``: the cells and sort keys of an item, how a filter and a search
test it, whether it is a problem and where. The apps (app.py, log_app.py) hold their
sources, their detail and their own keys.

A source's messages (loader.py: rows, notes, progress, the end) reach the screen as
``Arrived`` messages, handled between keys: a worker thread receives them and posts
what came since the last post, one ``Arrived`` at a time (never one per row), and the
screen adds them for a few milliseconds, then lets the keys queued meanwhile run before
it goes on (``on_arrived``). Nothing polls."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Static

from ..filters import Filter, FilterError, parse_filter
from ..protocol.node import Node
from ..stream import anomaly
from .detail import Detail, HexView, Item
from .exchange_list import ExchangeList
from .filterbar import FilterInput, FilterSuggester, OrderedInput, check_filter
from .jobs import IN_WORKERS, Jobs, set_text, work_line
from .loader import Done, Note, Progress
from .palette import ANSI_DARK, ANSI_LIGHT
from .screens import HelpScreen
from .sorting import Sorting
from .work import scan

REST = 0.06  # seconds the list cursor rests before the detail follows
DECODE_HERE = 4096  # bigger items decode in a worker thread
SLICE = 0.01  # seconds the screen adds arrived items for, at most, before keys run
REDRAW = 0.3  # seconds between redraws of the growing list's extent and counts
KEEP_TREES = 16  # decoded trees kept for the items viewed last
TOASTS = 5  # notes of the source shown as toasts (the statistics list them all)


class Arrived(Message):
    """What the source sent since the previous ``Arrived`` (loader.py's messages, and
    the items), from ``start`` on: the rest of a batch the screen did not finish in one
    slice comes again, behind the keys typed meanwhile."""

    def __init__(self, batch: list, start: int = 0) -> None:
        super().__init__()
        self.batch, self.start = batch, start


class Recent(OrderedDict):
    """The trees decoded last, by key (at most ``most``): memory stays bounded."""

    def __init__(self, most: int = KEEP_TREES) -> None:
        super().__init__()
        self.most = most

    def recall(self, key: Any) -> Any:
        """The tree kept under ``key`` (now the most recent), else None."""
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
        return found

    def keep(self, key: Any, tree: Any) -> None:
        self[key] = tree
        self.move_to_end(key)
        while len(self) > self.most:
            self.popitem(last=False)


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
    subclass sets ``adapter``, ``items`` (every item read, in arrival order),
    ``sorted_by`` (its first order: arrival's) and says how to load (``start_loading``),
    how to take what the source sends (``admit``, ``noted``, ``finished``), how to show
    an item (``show``), what the list says when it is empty (``empty_text``) and what
    follows when the rows change (``follow_cursor``)."""

    LIST: ClassVar[type[ExchangeList]] = ExchangeList
    LIST_ID: ClassVar[str] = "exchanges"
    FILTER_HINT: ClassVar[str] = ""
    SEARCH_HINT: ClassVar[str] = ""
    HELP: ClassVar[str | None] = None  # the help screen's text (None: the exchanges')
    STATS_HERE: ClassVar[int] = IN_WORKERS  # statistics of more items: in the background
    EXPORT_AS: ClassVar[str] = ""  # what the work line says the list's export writes
    STOPPED: ClassVar[str] = "loading stopped (Esc): the list holds what was read until then"
    EMPTY_HIDES: ClassVar[bool] = False  # the empty list's reason takes the list's place

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
        self.trees = Recent()  # the trees of the items viewed last
        self.warnings: list[str] = []  # the source's notes
        # what the source sent and no Arrived carries yet; whether one is on its way
        self._pending: list = []
        self._posted = False
        self._handover = threading.Lock()
        self._drawn = 0.0  # when the growing list was last redrawn
        self._undrawn = False  # items (or the end) came since
        self._redraw_timer: Timer | None = None

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
            yield OrderedInput(placeholder=self.SEARCH_HINT, id="search", classes="bar")
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

    def on_mount(self) -> None:
        # ANSI colours mapped legibly (palette.py); kdissect log's screen once kept Textual's
        self.ansi_theme_dark, self.ansi_theme_light = ANSI_DARK, ANSI_LIGHT
        self.arrival = self.sorted_by  # the first order: the items' arrival
        column, reverse = self.sorted_by
        self.table.set_order(column, self.sort_value(column), reverse)
        self._show_active_filter()  # a start filter (-Y) shows from the start
        self.start_loading()

    def on_unmount(self) -> None:
        self.stop.set()

    # -- loading ---------------------------------------------------------------------------

    def start_loading(self) -> None:
        """Start the source: ``load_in_worker`` with its receiving end."""
        raise NotImplementedError

    def load_in_worker(self, receive: Callable[[Callable[[list], None]], bool | None]) -> None:
        """``receive(take)`` in a worker thread: ``take(objects)`` hands what the source
        sent (in order) to the screen; ``receive`` returns True when it handed over why the
        loading ended. Its child, if any, was forked before, from the UI thread
        (loader.Forked)."""

        def run() -> None:
            if not receive(self._take) and self._stopped:  # Esc: the rows so far stay
                self._take([Note(self.STOPPED), Done()])

        self.run_worker(run, thread=True, exclusive=True)

    def _take(self, objects: list) -> None:
        """(In the worker thread.) ``objects`` for the screen: posted now if no
        ``Arrived`` is on its way, else they join the next one (``on_arrived`` posts it)."""
        with self._handover:
            self._pending.extend(objects)
            if self._posted:
                return
            self._posted = True
            batch, self._pending = self._pending, []
        self.post_message(Arrived(batch))

    async def on_arrived(self, message: Arrived) -> None:
        """Add the items that arrived for SLICE seconds at most, then let the keys typed
        meanwhile run (the rest, or what came since, is posted behind them). What the
        items change on screen (the list's extent, the counts, the progress) is redrawn
        every REDRAW seconds at most: a redraw costs more than adding thousands of rows."""
        if not self.query(ExchangeList):  # the app is closing: its widgets are gone
            return
        table = self.table
        before = table.row_count
        # a live list follows new rows while the cursor is on the last one (tail -f)
        at_end = self.live and table.cursor_row >= before - 1 and self.sorted_by == self.arrival
        batch, at = message.batch, message.start
        until = time.monotonic() + SLICE
        while at < len(batch) and time.monotonic() < until:
            self._arrived(batch[at])
            at += 1
        first = before == 0 and table.row_count > 0
        self._redraw(first)
        if first:  # the first rows: show the first one
            self.show(self.current())
        elif at_end and table.row_count > before:
            table.move_cursor(table.row_count - 1)
        await asyncio.sleep(0)  # the keys the terminal sent meanwhile join the queue...
        if at < len(batch):  # ...before the rest
            self.post_message(Arrived(batch, at))
            return
        with self._handover:
            batch, self._pending = self._pending, []
            self._posted = bool(batch)
        if batch:
            self.post_message(Arrived(batch))

    def _arrived(self, obj: Any) -> None:
        self._undrawn = True
        if isinstance(obj, Progress):
            self._progress = (obj.done, obj.total)
        elif isinstance(obj, Note):
            self.noted(obj.text, obj.level)
        elif isinstance(obj, Done):
            self.loaded = True
            self.finished()
        else:
            item = self.admit(obj)
            if item is not None:
                self.items.append(item)
                if self.matches(item):
                    self.table.add(item)

    def admit(self, obj: Any) -> Any:
        """The item to list for what the source sent (None: a fact kept elsewhere)."""
        return obj

    def noted(self, text: str, level: str) -> None:
        """A note of the source: kept (the statistics list them all); the first few are
        shown as they come, an error in the error colour."""
        self.warnings.append(text)
        if len(self.warnings) <= TOASTS:
            self.notify(text, severity="error" if level == "error" else "warning", timeout=8)
        elif len(self.warnings) == TOASTS + 1:
            self.notify(
                "more warnings: s (statistics) lists them all", severity="warning", timeout=8
            )

    def finished(self) -> None:
        """The source has sent everything."""

    def _redraw(self, now_: bool = False) -> None:
        """What the items changed on screen, now if ``now_`` or the loading ended, else
        REDRAW seconds after the last redraw."""
        if not self._undrawn or not self.query(ExchangeList):
            return
        now = time.monotonic()
        wait = self._drawn + REDRAW - now
        if not (now_ or self.loaded or wait <= 0):
            if self._redraw_timer is None:
                self._redraw_timer = self.set_timer(wait, self._redraw_later)
            return
        self._drawn, self._undrawn = now, False
        self._show_work()
        self.table.grown()
        self.fit_list()
        self._show_active_filter()
        self._update_subtitle()
        self._show_empty()

    def _redraw_later(self) -> None:
        self._redraw_timer = None
        self._redraw()

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

    def fit_list(self, height: int | None = None) -> None:
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
        """An empty list says why, and what to do next, once the loading ended."""
        empty = self.query_one("#empty", Static)
        says = self.loaded and not self.shown
        if says:
            empty.update(self.empty_text())
        empty.set_class(says, "visible")
        if self.EMPTY_HIDES:
            self.table.display = self.query_one(Detail).display = not says

    def empty_text(self) -> Text:
        """Why the list is empty (nothing read, or nothing passes the filter)."""
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
