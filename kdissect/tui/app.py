"""The Textual TUI: the exchange list (growing while the source loads or stays live), the
selected exchange's field trees beside its bytes, filters, search, following a
connection, bookmarks, statistics, copy and export."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict, deque
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Header, Input, ProgressBar, Static

from ..filters import FilterError, parse_filter
from ..protocol import Message, Options
from ..render.lines import endpoint, iso, message_json
from ..render.text import format_value
from ..stream.facts import ExchangeView
from ..stream.model import KafkaMessage
from .detail import Detail, Item
from .filterbar import FilterSuggester
from .loader import run_in_process, run_in_thread
from .screens import HelpScreen, StatsScreen

COLUMNS = ("#", "time", "client → broker", "API", "v", "corr", "client id", "latency",
           "summary", "status")
BOOKMARK = "★"
_DRAIN = 2000              # rows added per UI tick at most: keys stay answered
_KEEP_DECODED = 16         # full trees kept for the messages viewed last
_REST = 0.06               # seconds the list cursor rests before the detail follows
_DECODE_HERE = 4096        # bigger exchanges decode in a worker thread


def _row(view: ExchangeView) -> tuple:
    """The cells of an exchange's row (computed off the UI thread)."""
    ex, first = view.ex, view.ex.first
    facts = view.facts()
    status = "" if ex.status == "ok" else ex.status
    bad = bool(facts.errors or view.problems)
    style = "red" if bad else "yellow" if status else ""
    return (str(first.index), iso(first.ts)[11:23],
            f"{endpoint(ex.client)} → {endpoint(ex.broker)}",
            Text(first.api_name, style="bold red" if bad else "bold"),
            str(first.api_version), str(first.correlation_id),
            ex.request.client_id or "" if ex.request else "",
            f"{ex.latency * 1000:.1f}ms" if ex.latency is not None else "",
            Text(facts.text(), style=style), Text(status, style="yellow"))


def parse_needle(text: str) -> bytes | None:
    """Search text as bytes: ``0x0a0b``, ``hex: 0a 0b`` or plain text (UTF-8)."""
    t = text.strip()
    hexpart = t[4:] if t.lower().startswith("hex:") else t[2:] if t.lower().startswith("0x") \
        else None
    if hexpart is not None:
        digits = re.sub(r"[\s:]", "", hexpart)
        try:
            return bytes.fromhex(digits) or None
        except ValueError:
            return None
    return t.encode() if t else None


class KdissectApp(App):
    """Browse exchanges. ``load(emit, warn, progress)`` runs in a worker thread: it calls
    ``emit`` with each exchange as it is found (rows appear while the source is still
    loading, and keep coming from a live one), ``warn`` with what the user should know,
    and ``progress(done, total)`` if it knows how far it is. With ``isolate`` (the
    default) it runs in a forked child process, so its CPU-bound decoding leaves this
    process's GIL to the UI; ``isolate=False`` keeps it in a thread (a source that needs
    this process's objects). ``stop`` is set when the app closes."""

    TITLE = "kdissect"
    AUTO_FOCUS = "#exchanges"
    CSS = """
    #exchanges { height: 45%; }
    #detail { height: 1fr; }
    #progress { dock: top; height: 1; }
    #progress.done { display: none; }
    .bar { dock: bottom; display: none; }
    .bar.visible { display: block; }
    #filter-error { dock: bottom; display: none; color: $error; height: auto; }
    #filter-error.visible { display: block; }
    """
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("ctrl+f", "search", "Search"),
        Binding("n", "search_next", "Next match", show=False),
        Binding("f", "follow", "Follow"),
        Binding("b", "bookmark", "Bookmark"),
        Binding("B", "next_bookmark", "Next bookmark", show=False),
        Binding("x", "jump", "Req⇄Resp"),
        Binding("c", "copy", "Copy value", show=False),
        Binding("e", "export", "Export JSON"),
        Binding("s", "stats", "Stats"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "close_bars", "Close bar", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, load, options: Options | None = None, title: str = "",
                 stop: threading.Event | None = None, isolate: bool = True):
        super().__init__()
        self.isolate = isolate         # run the source in a child process
        self.load = load
        self.options = options or Options()
        self.views: list[ExchangeView] = []
        self.shown: list[ExchangeView] = []
        self.by_key: dict[str, ExchangeView] = {}
        self.sorted_by: tuple[str, bool] | None = None
        self.filter = None
        self.filter_text = ""
        self.following: tuple[int, str] | None = None     # (stream, the filter before)
        self.bookmarks: set[int] = set()
        self.needle: bytes | None = None
        self.detail_view: ExchangeView | None = None      # what the detail shows
        self.detail_pending: ExchangeView | None = None   # what it is about to show
        self._detail_timer = None
        self.loaded = False
        self.stop = stop or threading.Event()
        self._incoming: deque = deque()
        self._progress: tuple[int, int] | None = None
        # full trees of the last messages viewed (by message index): memory stays bounded
        self._trees: OrderedDict[int, Message] = OrderedDict()
        self.title_text = title
        self.sub_title = title

    def compose(self) -> ComposeResult:
        yield Header()
        yield ProgressBar(id="progress", show_eta=True, classes="done")   # until progress
        with Vertical():
            yield DataTable(id="exchanges", cursor_type="row", zebra_stripes=True)
            yield Detail(self.options.show_secrets, id="detail")
        yield Static(id="filter-error")
        yield Input(placeholder="display filter, e.g. api == Produce and error != 0  "
                                "(→ completes, Enter applies, Esc closes)",
                    id="filter", classes="bar", suggester=FilterSuggester())
        yield Input(placeholder="search bytes: text, or hex as 0x0001 / hex: 00 01",
                    id="search", classes="bar")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.set_interval(0.05, self._drain)
        self.run_worker(self._load, thread=True, exclusive=True)

    def on_unmount(self) -> None:
        self.stop.set()

    # -- loading (worker thread) ---------------------------------------------------------

    def _load(self) -> None:
        def put(item) -> None:
            if item[0] == "progress":
                self._progress = item[1]            # only the latest matters
            else:
                self._incoming.append(item)
        if self.isolate:
            run_in_process(self.load, self.options, _row, put, self.stop)
        else:
            run_in_thread(self.load, self.options, _row, put)

    def _drain(self) -> None:
        """Add what the loader found since the last tick (a bounded number of rows)."""
        tables = self.query(DataTable)
        if not tables:                     # the app is closing: its widgets are gone
            return
        table = tables.first()
        if self._progress is not None and not self.loaded:
            done, total = self._progress
            bar = self.query_one(ProgressBar)
            bar.remove_class("done")            # sources that know how far they are
            bar.update(total=total, progress=done)
        added = 0
        while self._incoming and added < _DRAIN:
            kind, payload = self._incoming.popleft()
            if kind == "warn":
                self.notify(payload, severity="warning", timeout=8)
            elif kind == "done":
                self.loaded = True
                self.query_one(ProgressBar).add_class("done")
                self._update_subtitle()
            else:
                view, row = payload
                self.views.append(view)
                view.row = row
                if self.filter is None or self.filter(view):
                    self._add_row(table, view)
                added += 1
        if added:
            self._update_subtitle()
            if table.row_count == added:             # the first rows: show the first one
                self.follow_cursor()

    def _update_subtitle(self) -> None:
        count = f"{len(self.shown)} of {len(self.views)}" if self.filter else str(len(self.views))
        state = "" if self.loaded else "  loading…"
        follow = f"  following stream {self.following[0]}" if self.following else ""
        self.sub_title = f"{self.title_text}  {count} exchanges{follow}{state}"

    # -- the list -----------------------------------------------------------------------

    def _add_row(self, table: DataTable, view: ExchangeView) -> None:
        row = view.row
        if id(view) in self.bookmarks:
            row = (f"{BOOKMARK}{row[0]}",) + row[1:]
        table.add_row(*row, key=str(id(view)))
        self.by_key[str(id(view))] = view
        self.shown.append(view)

    def apply_filter(self, text: str) -> FilterError | None:
        """Show only matching exchanges; returns the error of a bad filter."""
        try:
            self.filter = parse_filter(text) if text.strip() else None
        except FilterError as e:
            return e
        self.filter_text = text
        self._refill()
        return None

    def _refill(self) -> None:
        table = self.query_one(DataTable)
        current = self.current_view()
        table.clear()
        self.shown = []
        for view in self.views:
            if self.filter is None or self.filter(view):
                self._add_row(table, view)
        if self.sorted_by:
            column, reverse = self.sorted_by
            self.sorted_by = (column, not reverse)
            self.sort_by(column)
        if current is not None and str(id(current)) in self.by_key and \
                current in self.shown:
            table.move_cursor(row=table.get_row_index(str(id(current))))
        self._update_subtitle()
        self.follow_cursor()

    def view_at(self, row: int) -> ExchangeView | None:
        table = self.query_one(DataTable)
        if not 0 <= row < table.row_count:
            return None
        return self.by_key.get(table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value)

    def current_view(self) -> ExchangeView | None:
        return self.view_at(self.query_one(DataTable).cursor_row)

    @on(DataTable.RowHighlighted, "#exchanges")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The detail follows the cursor once it rests (keys that scroll through the
        list stay instant), and big messages decode off the UI thread."""
        view = self.view_at(event.cursor_row)
        if view is self.detail_view or view is None:
            return
        self.detail_pending = view
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(_REST, lambda: self._decode_for(view))

    def _decode_for(self, view: ExchangeView) -> None:
        if self.detail_pending is not view or not self.query(Detail):
            return
        size = sum(len(m.data) for m in (view.ex.request, view.ex.response) if m)
        if size < _DECODE_HERE:
            self.show_exchange(view)
            return
        self.query_one(Detail).tree.root.set_label(f"decoding {size} bytes…")

        def decode() -> None:
            for m in view.ex.messages:
                self.tree_of(m)
            self.call_from_thread(self._decoded_for, view)
        self.run_worker(decode, thread=True, group="detail")

    def _decoded_for(self, view: ExchangeView) -> None:
        if self.detail_pending is view and self.query(Detail):
            self.show_exchange(view)

    def follow_cursor(self) -> None:
        """After the rows change under the cursor (sort, filter), show what it is on."""
        self.show_exchange(self.current_view())

    def show_exchange(self, view: ExchangeView | None) -> None:
        if view is None:
            return
        self.detail_view = self.detail_pending = view
        ex = view.ex
        items = []
        for m in (ex.request, ex.response):
            if m is None:
                continue
            decoded = self.tree_of(m)
            items.append(Item(Text(f"{decoded.title}  ({len(m.data)} bytes)", "bold"),
                              m.data, decoded.tree))
        self.query_one(Detail).show(f"{ex.first.api_name} exchange, stream {ex.stream}",
                                    items)

    def tree_of(self, m: KafkaMessage) -> Message:
        """The full tree of ``m``, decoded on first view and kept among the last few."""
        decoded = self._trees.get(m.index)
        if decoded is None:
            decoded = self._trees[m.index] = m.decoded(self.options)
            while len(self._trees) > _KEEP_DECODED:
                self._trees.popitem(last=False)
        else:
            self._trees.move_to_end(m.index)
        return decoded

    @on(DataTable.HeaderSelected, "#exchanges")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.label))

    def sort_by(self, column: str) -> None:
        """Sort the list by a column; selecting it again reverses the order."""
        reverse = self.sorted_by == (column, False)
        table = self.query_one(DataTable)
        key = table.ordered_columns[COLUMNS.index(column)].key
        table.sort(key, key=lambda cell: _sort_key(cell, reverse), reverse=reverse)
        self.sorted_by = (column, reverse)
        self.follow_cursor()

    # -- actions ------------------------------------------------------------------------

    def action_stats(self) -> None:
        self.push_screen(StatsScreen(self.shown))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_follow(self) -> None:
        """Only the selected exchange's connection, in capture order; again: all."""
        if self.following is not None:
            _, before = self.following
            self.following = None
            self.apply_filter(before)
            self.query_one("#filter", Input).value = before
            return
        view = self.current_view()
        if view is None:
            return
        before = self.filter_text
        self.following = (view.ex.stream, before)
        self.sorted_by = None
        self.apply_filter(f"stream == {view.ex.stream}")

    def action_bookmark(self) -> None:
        view = self.current_view()
        if view is None:
            return
        self.bookmarks ^= {id(view)}
        cell = f"{BOOKMARK}{view.row[0]}" if id(view) in self.bookmarks else view.row[0]
        table = self.query_one(DataTable)
        table.update_cell(str(id(view)), table.ordered_columns[0].key, cell)

    def action_next_bookmark(self) -> None:
        table = self.query_one(DataTable)
        n = table.row_count
        for step in range(1, n + 1):
            row = (table.cursor_row + step) % n
            view = self.view_at(row)
            if view is not None and id(view) in self.bookmarks:
                table.move_cursor(row=row)
                return
        self.notify("no bookmarks in the list (b bookmarks an exchange)")

    def action_jump(self) -> None:
        self.query_one(Detail).jump_message()

    def action_copy(self) -> None:
        detail = self.query_one(Detail)
        if detail.selected is None:
            return
        _, node = detail.selected
        value = format_value(node, self.options.show_secrets, 1 << 20)
        self.copy_to_clipboard(value)
        self.notify(f"copied {node.name}: {value[:60]}")

    def action_export(self) -> None:
        view = self.current_view()
        if view is None:
            return
        ex = view.ex
        out = {"client": endpoint(ex.client), "broker": endpoint(ex.broker),
               "latency_ms": ex.latency * 1000 if ex.latency is not None else None,
               **{m.direction: message_json(m, self.options, ex)
                  for m in (ex.request, ex.response) if m is not None}}
        path = Path(f"kdissect-exchange-{ex.first.index}.json")
        try:
            path.write_text(json.dumps(out, indent=2, default=str))
        except OSError as e:
            self.notify(f"could not write {path}: {e.strerror}", severity="error")
            return
        self.notify(f"exported to {path.resolve()}")

    # -- filter and search bars ---------------------------------------------------------

    def _open_bar(self, name: str) -> None:
        for bar in self.query(".bar"):
            bar.remove_class("visible")
        box = self.query_one(f"#{name}", Input)
        box.add_class("visible")
        box.focus()

    def action_filter(self) -> None:
        self._open_bar("filter")

    def action_search(self) -> None:
        self._open_bar("search")

    def action_close_bars(self) -> None:
        for bar in self.query(".bar"):
            bar.remove_class("visible")
        self.query_one("#filter-error").remove_class("visible")
        self.query_one(DataTable).focus()

    @on(Input.Changed, "#filter")
    def _validate(self, event: Input.Changed) -> None:
        problem = self.query_one("#filter-error", Static)
        try:
            if event.value.strip():
                parse_filter(event.value)
            event.input.styles.border = ("tall", "green")
            problem.remove_class("visible")
        except FilterError as e:
            event.input.styles.border = ("tall", "red")
            problem.update(Text(f"{' ' * (e.position + 1)}^ {str(e).splitlines()[0]}"))
            problem.add_class("visible")

    @on(Input.Submitted, "#filter")
    def _submit_filter(self, event: Input.Submitted) -> None:
        problem = self.apply_filter(event.value)
        if problem:
            self.notify(str(problem).splitlines()[0], title="Bad filter", severity="error")
            return
        self.following = None
        self.action_close_bars()

    @on(Input.Submitted, "#search")
    def _submit_search(self, event: Input.Submitted) -> None:
        self.needle = parse_needle(event.value)
        if self.needle is None:
            self.notify("type text, or hex as 0x0a0b or hex: 0a 0b", severity="error")
            return
        self.action_close_bars()
        self.action_search_next()

    def action_search_next(self) -> None:
        """The next exchange (after the cursor, wrapping) whose bytes hold the needle;
        the field holding the match is selected."""
        if not self.needle:
            self.action_search()
            return
        table = self.query_one(DataTable)
        n = table.row_count
        for step in range(1, n + 1):
            row = (table.cursor_row + step) % n
            view = self.view_at(row)
            if view is None:
                continue
            messages = [m for m in (view.ex.request, view.ex.response) if m is not None]
            for index, m in enumerate(messages):
                at = m.data.find(self.needle)
                if at >= 0:
                    table.move_cursor(row=row)
                    self.show_exchange(view)
                    detail = self.query_one(Detail)
                    detail.select(index, detail.items[index].root)
                    detail.hexview.move_to(at)
                    return
        self.notify(f"{self.needle!r} is in no exchange shown", severity="warning")


def _sort_key(cell, reverse: bool = False) -> tuple:
    """Numbers (latency in ms, ids, versions) sort as numbers, the rest as text, and
    empty cells (no latency: unanswered) come last whichever the direction."""
    text = str(cell).strip().lstrip(BOOKMARK)
    if not text:
        return (-1 if reverse else 2, 0.0, "")
    number = text[:-2] if text.endswith("ms") else text
    try:
        return (0, float(number), "")
    except ValueError:
        return (1, 0.0, text)

