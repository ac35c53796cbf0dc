"""The Textual TUI (a first part of issue 4): the exchange list, the selected exchange's
field trees, and the message bytes with the selected field highlighted."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, Sparkline, Static, Tree

from ..filters import FilterError, parse_filter
from ..protocol import Options
from ..protocol.node import Node
from ..render.lines import endpoint, iso
from ..render.stats import stats_tables
from ..render.text import format_value, hexdump
from ..stream.facts import ExchangeView
from ..stream.stats import Stats
from ..stream.model import Exchange, KafkaMessage

COLUMNS = ("#", "time", "client → broker", "API", "v", "corr", "client id", "latency",
           "summary", "status")
HIGHLIGHT = "bold black on yellow"
PARENT = "on grey23"


class KdissectApp(App):
    """Browse exchanges. ``load(emit, warn)`` runs in a worker thread and calls ``emit``
    with each exchange as it is found (rows appear while the source is still loading)
    and ``warn`` with anything the user should know (damaged files, gaps)."""

    TITLE = "kdissect"
    AUTO_FOCUS = "#exchanges"      # not the (hidden) filter bar
    CSS = """
    #exchanges { height: 45%; }
    #detail { height: 1fr; }
    #fields { width: 1fr; }
    #bytes { width: 81; overflow-y: auto; }   /* a hex dump line is 79 cells */
    #filter { dock: bottom; display: none; }
    #filter.visible { display: block; }
    """
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "stats", "Statistics"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "close_filter", "Close filter", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, load, options: Options | None = None, title: str = ""):
        super().__init__()
        self.load = load
        self.options = options or Options()
        self.views: list[ExchangeView] = []
        self.shown: list[ExchangeView] = []
        self.topic_ids: dict[str, str] = {}
        self.by_key: dict[str, ExchangeView] = {}      # table row key -> exchange
        self.sorted_by: tuple[str, bool] | None = None
        self.filter = None
        self.selected_message: KafkaMessage | None = None
        self.selected_field: Node | None = None
        self.marks: list[tuple[int, int, str]] = []
        self.sub_title = title

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield DataTable(id="exchanges", cursor_type="row", zebra_stripes=True)
            with Horizontal(id="detail"):
                yield Tree("select an exchange", id="fields")
                yield Static(id="bytes")
        yield Input(placeholder="display filter, e.g. api == Produce and error != 0",
                    id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.run_worker(self._load, thread=True, exclusive=True)

    def _load(self) -> None:
        self.load(lambda ex: self.call_from_thread(self.add_exchange, ex),
                  lambda text: self.call_from_thread(self.notify, text, severity="warning"))
        self.call_from_thread(self._loaded)

    def _loaded(self) -> None:
        self.sub_title = f"{self.sub_title}  {len(self.views)} exchanges"

    # -- the list -----------------------------------------------------------------------

    def add_exchange(self, ex: Exchange) -> None:
        view = ExchangeView(ex, self.options, self.topic_ids)
        view.learn()
        self.views.append(view)
        if self.filter is None or self.filter(view):
            self._add_row(view)

    def _add_row(self, view: ExchangeView) -> None:
        ex, first = view.ex, view.ex.first
        facts = view.facts()
        status = next((m.status for m in (ex.response, ex.request)
                       if m is not None and m.status != "ok"), "")
        style = "red" if facts.errors or view.problems else "yellow" if status else ""
        self.query_one(DataTable).add_row(
            str(first.index), iso(first.ts)[11:23],
            f"{endpoint(ex.client)} → {endpoint(ex.broker)}",
            Text(first.api_name, style="bold"), str(first.api_version),
            str(first.correlation_id),
            ex.request.client_id or "" if ex.request else "",
            f"{ex.latency * 1000:.1f}ms" if ex.latency is not None else "",
            Text(facts.text(), style=style), Text(status, style="yellow"),
            key=str(id(view)))
        self.by_key[str(id(view))] = view
        self.shown.append(view)

    def apply_filter(self, text: str) -> str | None:
        """Show only matching exchanges; returns an error message for a bad filter."""
        try:
            self.filter = parse_filter(text) if text.strip() else None
        except FilterError as e:
            return str(e)
        table = self.query_one(DataTable)
        table.clear()
        self.shown = []
        for view in self.views:
            if self.filter is None or self.filter(view):
                self._add_row(view)
        self.follow_cursor()
        return None

    # -- detail -------------------------------------------------------------------------

    def view_at(self, row: int) -> ExchangeView | None:
        table = self.query_one(DataTable)
        if not 0 <= row < table.row_count:
            return None
        return self.by_key.get(table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value)

    @on(DataTable.RowHighlighted, "#exchanges")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_exchange(self.view_at(event.cursor_row))

    def follow_cursor(self) -> None:
        """After the rows change under the cursor (sort, filter), show what it is on."""
        self.show_exchange(self.view_at(self.query_one(DataTable).cursor_row))

    def show_exchange(self, view: ExchangeView | None) -> None:
        if view is None:
            return
        ex = view.ex
        tree = self.query_one(Tree)
        tree.clear()
        tree.root.set_label(f"{ex.first.api_name} exchange, stream {ex.stream}")
        for m in (ex.request, ex.response):
            if m is None:
                continue
            decoded = m.decoded(self.options)
            branch = tree.root.add(Text(f"{decoded.title}  ({len(m.data)} bytes)", "bold"),
                                   data=(m, decoded.tree), expand=True)
            self._add_nodes(branch, m, decoded.tree)
        tree.root.expand()
        first = ex.request or ex.response
        self.select_field(first, first.decoded(self.options).tree)

    def _add_nodes(self, branch, message: KafkaMessage, node: Node) -> None:
        for child in node.children:
            label = Text(child.name, style="red" if child.problem else "")
            value = format_value(child, self.options.show_secrets, 40)
            if value:
                label.append(f" = {value}", style="bold")
            if child.note:
                label.append(f"  {child.note}", style="italic cyan")
            if child.problem:
                label.append(f"  ✗ {child.problem}", style="bold red")
            if child.children:
                sub = branch.add(label, data=(message, child))
                self._add_nodes(sub, message, child)
            else:
                branch.add_leaf(label, data=(message, child))

    @on(Tree.NodeHighlighted, "#fields")
    def _field_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data:
            self.select_field(*event.node.data)

    def select_field(self, message: KafkaMessage, node: Node) -> None:
        """Show ``message``'s bytes with ``node`` highlighted and its parents shaded."""
        self.selected_message, self.selected_field = message, node
        root = message.decoded(self.options).tree
        path = _ancestors(root, node) or []
        self.marks = ([(p.offset, p.end, PARENT) for p in path[1:-1]]
                      + ([(node.offset, node.end, HIGHLIGHT)] if node is not root else []))
        self.query_one("#bytes", Static).update(
            hexdump(message.data, root, self.options.show_secrets, marks=self.marks))

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

    def action_stats(self) -> None:
        self.push_screen(StatsScreen(self.shown))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    # -- filter bar ---------------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("visible")
        box.focus()

    def action_close_filter(self) -> None:
        self.query_one("#filter", Input).remove_class("visible")
        self.query_one(DataTable).focus()

    @on(Input.Changed, "#filter")
    def _validate(self, event: Input.Changed) -> None:
        try:
            if event.value.strip():
                parse_filter(event.value)
            event.input.styles.border = ("tall", "green")
            event.input.tooltip = None
        except FilterError as e:
            event.input.styles.border = ("tall", "red")
            event.input.tooltip = str(e)

    @on(Input.Submitted, "#filter")
    def _submit(self, event: Input.Submitted) -> None:
        problem = self.apply_filter(event.value)
        if problem:
            self.notify(problem, title="Bad filter", severity="error")
        else:
            self.action_close_filter()


def _ancestors(root: Node, target: Node) -> list[Node] | None:
    """The path from ``root`` down to ``target`` (inclusive), in the same buffer."""
    path: list[Node] = []

    def visit(node: Node) -> bool:
        path.append(node)
        if node is target:
            return True
        if node.buffer is None or node is root:
            for child in node.children:
                if visit(child):
                    return True
        path.pop()
        return False

    return path if visit(root) else None



def _sort_key(cell, reverse: bool = False) -> tuple:
    """Numbers (latency in ms, ids, versions) sort as numbers, the rest as text, and
    empty cells (no latency: unanswered) come last whichever the direction."""
    text = str(cell).strip()
    if not text:
        return (-1 if reverse else 2, 0.0, "")
    number = text[:-2] if text.endswith("ms") else text
    try:
        return (0, float(number), "")
    except ValueError:
        return (1, 0.0, text)


class StatsScreen(ModalScreen):
    """Statistics over the exchanges shown (the filter applies), with latency over time."""

    BINDINGS = [Binding("escape,s,q", "dismiss", "Close")]
    CSS = """
    StatsScreen { align: center middle; }
    #stats-box { width: 90%; height: 90%; border: round $accent; background: $surface; }
    #latency { height: 4; margin: 0 1; }
    """

    def __init__(self, views: list[ExchangeView]):
        super().__init__()
        self.stats = Stats()
        for v in views:
            self.stats.add(v.ex, v)
        self.latencies = [v.ex.latency * 1000 for v in sorted(views, key=lambda v: v.ex.first.ts)
                          if v.ex.latency is not None]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stats-box"):
            yield Static(Text(f"latency over time ({len(self.latencies)} exchanges, ms; "
                              f"max {max(self.latencies, default=0):.1f})", style="bold"))
            yield Sparkline(self.latencies or [0.0], id="latency")
            yield Static(stats_tables(self.stats), id="stats-tables")
            yield Static(Text("escape closes", style="dim"))


HELP = """\
[b]Keys[/b]
  ↑ ↓ PgUp PgDn   move in the list (the detail follows)
  tab             to the field tree, then the bytes
  /               filter: api == Produce and error != 0, latency > 50ms, topic == "orders"
                  (the border turns red while the filter cannot be read; Enter applies)
  click a header  sort by that column (again: reverse)
  s               statistics: per API, errors, latency percentiles, connections
  ?               this help
  q               quit
See docs/filters.md for every filter field."""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]
    CSS = """
    HelpScreen { align: center middle; }
    #help { width: 90; height: auto; border: round $accent; background: $surface; padding: 1 2; }
    """

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help")
