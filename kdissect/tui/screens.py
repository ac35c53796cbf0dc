"""Modal screens of the TUI: statistics and help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Sparkline, Static

from ..render.stats import stats_tables
from ..stream.facts import ExchangeView
from ..stream.stats import Stats


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
[b]Exchange list[/b]
  ↑ ↓ PgUp PgDn   move (the detail follows)      click a header   sort (again: reverse)
  /               filter: api == Produce and error != 0, latency > 50ms, topic == "orders"
                  (→ or Tab completes; red border and a caret where it cannot be read)
  ctrl+f          search the bytes for text or hex (0x… or "hex: 00 01"); n: next match
  f               follow the connection: only its exchanges, in order (f again: all)
  b / B           bookmark the exchange / go to the next bookmark
  s               statistics: per API, errors, latency percentiles and over time
[b]Detail[/b]
  tab             field tree ⇄ bytes
  x               jump between the request and the response
  ← → ↑ ↓         in the bytes: move the cursor; the field under it is selected
  c               copy the selected field's value
  e               export the exchange as JSON (a file in the current directory)
[b]Anywhere[/b]
  ?  this help     q  quit
See docs/tui.md and docs/filters.md."""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]
    CSS = """
    HelpScreen { align: center middle; }
    #help { width: 96; height: auto; border: round $accent; background: $surface; padding: 1 2; }
    """

    def __init__(self, text: str = HELP):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.text, id="help")
