"""Modal screens of the TUI: statistics and help."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..render.stats import stats_tables
from ..render.tls import tls_table
from ..stream import anomaly
from ..stream.fields import ExchangeFields
from ..stream.stats import Stats
from .chart import LatencyChart


def gather(
    views: Sequence[ExchangeFields],
    load=lambda view: view,
    gaps=(),
    progress=lambda done, total: None,
    cancel=None,
) -> tuple[Stats, list] | None:
    """The statistics of ``views`` and the points of the chart; None if ``cancel`` (an
    Event) is set meanwhile. ``load(view)`` gives a view's messages their bytes."""
    stats = Stats()
    for gap in gaps:
        stats.add_gap(gap)
    points = []
    for done, v in enumerate(views, 1):
        stats.add(load(v).ex, v)
        service = anomaly.service_time(v)  # None: no latency
        if service is not None:
            points.append((v.ex.first.ts, service * 1000, v))
        if done % 256 == 0:
            if cancel is not None and cancel.is_set():
                return None
            progress(done, len(views))
    points.sort(key=lambda p: p[0])
    return stats, points


class StatsScreen(ModalScreen):
    """Statistics over the exchanges shown (the filter applies): broker time over real
    time (Enter or a click goes to the slice's slowest exchange: the screen closes with
    it), then the tables of ``--stats``."""

    BINDINGS = [Binding("escape,s,q", "dismiss", "Close")]
    CSS = """
    StatsScreen { align: center middle; }
    #stats-box { width: 96%; height: 94%; border: round $accent; background: $surface; }
    #latency { height: 10; margin: 0 1; }
    #latency:focus { background: $boost; }
    #slice { margin: 0 1; color: $text-muted; }
    #stats-box { border-subtitle-color: $text-muted; }
    """

    def __init__(
        self,
        views: Sequence[ExchangeFields],
        load=lambda view: view,
        gathered: tuple[Stats, list] | None = None,
        warnings=(),
        gaps=(),
        tls=(),
    ):
        """``load(view)`` gives a view's messages their bytes (see tui/spill.py);
        ``gathered``: what ``gather`` found (else it runs now). ``warnings``: the
        source's, all listed; ``gaps`` are counted as --stats counts them; ``tls``: the
        source's TLS connections (capture.tls.TlsFacts), decrypted or not, listed."""
        super().__init__()
        if gathered is None:
            gathered = gather(views, load, gaps)
            assert gathered is not None, "gather() without a cancel event finishes"
        self.stats, self.points = gathered
        self.latencies = [p[2].ex.latency * 1000 for p in self.points]
        self.warnings = list(warnings)
        self.tls = list(tls)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stats-box"):
            yield Static(
                Text(
                    f"broker time over the capture ({len(self.points)} exchanges; "
                    f"waits clients asked for left out; ← → move, Enter goes to "
                    f"the slowest)",
                    style="bold",
                )
            )
            yield LatencyChart(self.points, id="latency")
            yield Static(id="slice")
            # the tables at the box's width: on a narrow screen they wrap their headers,
            # leave out columns of blanks or 0, then come in parts (render/plain_table.py),
            # never cutting an API name, an address, a client id or a figure; their
            # titles wrap with them (they scrolled sideways, titles cut mid-word)
            yield Static(stats_tables(self.stats), id="stats-tables")
            if self.tls:
                yield Static(tls_table(self.tls), id="tls")
            if self.warnings:
                listed = Text(f"Capture warnings ({len(self.warnings)})\n", style="bold")
                for w in self.warnings:
                    listed.append(f"• {w}\n", style="yellow")
                yield Static(listed, id="warnings")
            yield Static(Text("escape closes", style="dim"))

    def on_mount(self) -> None:
        # the tables below the chart scroll: say how
        self.query_one(
            "#stats-box"
        ).border_subtitle = "more below: Tab, then ↑ ↓ PgUp PgDn or the wheel · Esc closes"
        chart = self.query_one(LatencyChart)
        chart.focus()
        self.call_after_refresh(self._start)

    def _start(self) -> None:
        chart = self.query_one(LatencyChart)
        if self.points:
            chart.jump_to_slowest()
        self._describe()

    @on(LatencyChart.Moved)
    def _describe(self) -> None:
        self.query_one("#slice", Static).update(self.query_one(LatencyChart).describe())

    @on(LatencyChart.Picked)
    def _picked(self, event: LatencyChart.Picked) -> None:
        self.dismiss(event.item)


HELP = """\
[b]Exchange list[/b] (rows in request order; # is the capture's frame number, as in Wireshark)
  ↑ ↓ PgUp PgDn Home End   move (the detail follows)
  p / P           next / previous problem: an error code, a finding, no answer, or broker
                  time over 500 ms; the offending field is selected, its bytes highlighted
  /               filter: anomaly, api == Produce and error != 0, record.key == "order-42",
                  kafka.api_key == 0 (Tab or → completes; a caret shows what is wrong)
  ctrl+f          search bytes, decompressed records too: text, 0x…, hex: 00 01; n: next
  o / O           sort: time, broker time (beyond the waits clients asked for), latency,
                  status... / reverse; a click on a header sorts by it
  t               time of day ⇄ date and time in UTC ⇄ in the local zone
  f               follow the connection: only its exchanges, in order (f again: all)
  b / B           bookmark the exchange / go to the next bookmark
  s               statistics: broker time over time (Enter goes to the slowest), per API,
                  client, broker, topic; throttling; consumer-group timeline
  E               export the exchanges listed as a pcapng for Wireshark (a new file)
  J               export the exchanges listed as JSON lines (a message a line)
  Esc             cancel the work under way (a filter, a search, statistics) or stop
                  loading (the rows so far stay)
[b]Detail[/b]
  tab             field tree ⇄ bytes          *   open every field under the cursor
  shift+tab       back to the list (p, n and a click leave the keys in the detail)
  v               tree ⇄ bytes on a narrow terminal (they take turns below 114 columns);
                  the line under them: the selected field in full (name, value, offset,
                  length, explanation)
  x               jump between the request and the response
  d               record keys and values: decoded into trees (by --schemas, else what
                  they look like) ⇄ raw bytes
  ← → ↑ ↓         in the bytes: move the cursor; the field under it is selected;
                  in the tree: → opens the field (then goes in), ← closes it (goes up)
  c / e           copy the selected field's value / export the exchange as JSON
[b]Colours[/b]
  [red]red[/red]: an error code or malformed bytes   [yellow]yellow[/yellow]: a warning (unanswered, throttled, slow)
  [dim]dim latency[/dim]: mostly a wait the client asked for (Fetch long poll, group rebalance)
  bytes: [bold black on #fd971f] field [/] [black on #a8a8a8] its parents [/] [bold bright_white on dark_red] problem [/]
[b]Anywhere[/b]
  ?  this help     q  quit
See docs/guide/tui.md and docs/guide/filters.md."""


_KEYS = 16  # a help entry's keys take columns 2-17; what they do starts at column 18


def _entry(line: str) -> tuple[str, str] | None:
    """(keys, what they do) of a help line laid out in two columns, else None."""
    if len(line) > _KEYS + 2 and line[:2] == "  " and line[2] not in " [":
        if line[_KEYS : _KEYS + 2] == "  " and line[_KEYS + 2] != " ":
            return line[2:_KEYS].rstrip(), line[_KEYS + 2 :]
    return None


def help_layout(text: str) -> RenderableType:
    """A help text (console markup, written for 100 columns: two-column entries whose
    description goes on under column 18) laid out for the box's width: each entry's
    description wraps in its column (at 80 columns, lines cut at the box's edge went on
    at column 0), other lines with their indent kept."""
    parts: list[RenderableType] = []
    entries: list[list[str]] = []

    def flush() -> None:
        if entries:
            grid = Table.grid(padding=(0, 1))
            grid.add_column(width=_KEYS - 3, no_wrap=True)
            grid.add_column(ratio=1)
            for keys, said in entries:
                grid.add_row(Text.from_markup(keys), Text.from_markup(said))
            parts.append(Padding(grid, (0, 0, 0, 2)))
            entries.clear()

    for line in text.splitlines():
        entry = _entry(line)
        if entry is not None:
            entries.append(list(entry))
        elif entries and line.startswith(" " * (_KEYS + 2)):  # the description goes on
            entries[-1][1] += " " + line.strip()
        else:
            flush()
            indent = len(line) - len(line.lstrip(" "))
            parts.append(Padding(Text.from_markup(line.lstrip(" ")), (0, 0, 0, indent)))
    flush()
    return Group(*parts)


class HelpScreen(ModalScreen):
    """The keys; it scrolls at once (the box has the focus) with ↑ ↓ PgUp PgDn Home End
    and Space, and says so when it does not fit."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
        Binding("space", "page_down", "Page down", show=False),
    ]
    CSS = """
    HelpScreen { align: center middle; }
    #help-box { width: 100; max-width: 100%; height: auto; max-height: 100%;
                border: round $accent; background: $surface; }
    #help { padding: 0 1; }
    """

    def __init__(self, text: str = HELP):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_layout(self.text), id="help")

    def on_mount(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        box.focus()
        self.watch(box, "scroll_y", self._say_where, init=False)
        self.call_after_refresh(self._say_where)

    def on_resize(self) -> None:
        # a taller terminal may show it all, a shorter one hide the end: said anew
        self.call_after_refresh(self._say_where)

    def _say_where(self, _scroll_y: float = 0.0) -> None:
        """The box's border says whether more is below, or that this is the end."""
        box = self.query_one("#help-box", VerticalScroll)
        if box.max_scroll_y <= 0:
            box.border_subtitle = ""
        elif box.scroll_y < box.max_scroll_y:
            box.border_subtitle = "more below: ↓ PgDn Space End · Esc closes"
        else:
            box.border_subtitle = "the end: ↑ PgUp Home · Esc closes"

    def action_page_down(self) -> None:
        self.query_one("#help-box", VerticalScroll).scroll_page_down()
