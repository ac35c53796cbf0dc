"""Statistics of kdissect log's items and their screen (`s`): per partition and per
segment file, batches, records, bytes, codecs, producers, findings and the time range;
then the findings by code. Gathered from what the list keeps of each item (``stat``: no file is
read again), so it is quick even over hundreds of thousands of batches."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


@dataclass
class Tally:
    files: set = field(default_factory=set)
    batches: int = 0
    records: int = 0
    bytes: int = 0
    codecs: Counter = field(default_factory=Counter)
    producers: set = field(default_factory=set)
    findings: Counter = field(default_factory=Counter)
    first_ts: int | None = None
    last_ts: int | None = None

    def add(self, item) -> None:
        records, codec, pid, first_ts, max_ts, codes = item.stat
        self.files.add(item.path)
        self.findings.update(codes)
        if item.kind != "batch":
            return
        self.batches += 1
        self.records += records or 0
        self.bytes += item.length
        if codec:
            self.codecs[codec] += 1
        if pid is not None:
            self.producers.add(pid)
        for ts in (first_ts, max_ts):
            if isinstance(ts, int) and ts >= 0:
                self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
                self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)


@dataclass
class LogStats:
    partitions: dict[str, Tally] = field(default_factory=dict)
    files: dict[str, Tally] = field(default_factory=dict)
    total: Tally = field(default_factory=Tally)
    items: int = 0


def gather(
    items: Sequence, progress: Callable[[int, int], None] = lambda d, t: None, cancel=None
) -> LogStats | None:
    """The statistics of ``items``; None if ``cancel`` (an Event) is set meanwhile."""
    stats = LogStats(items=len(items))
    for done, item in enumerate(items, 1):
        where = (
            f"{item.topic}-{item.partition}"
            if item.topic is not None
            else str(item.path.parent.name or item.path.parent)
        )
        stats.partitions.setdefault(where, Tally()).add(item)
        if item.kind == "batch":  # the segment by its partition and name
            stats.files.setdefault(f"{item.path.parent.name}/{item.path.name}", Tally()).add(item)
        stats.total.add(item)
        if done % 4096 == 0:
            if cancel is not None and cancel.is_set():
                return None
            progress(done, len(items))
    return stats


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in counter.most_common())


def _table(title: str, first: str, tallies: dict[str, Tally], files: bool) -> Table:
    """A row per partition or file, each on one line: cells too wide for the screen end
    in … (they wrapped into rows of five lines at 120 columns); the time range has its
    own table."""
    table = Table(
        title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False
    )
    # columns the width may shrink; their cells cut with …, never wrapped (_one_line)
    table.add_column(first, overflow="ellipsis", min_width=12)
    if files:
        table.add_column("files", justify="right", no_wrap=True, min_width=5)
    for name in ("batches", "records", "bytes"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    table.add_column("codecs (batches)", overflow="ellipsis", min_width=8)
    table.add_column("producers", justify="right", no_wrap=True, min_width=9)
    table.add_column("findings", overflow="ellipsis", min_width=10)
    for name, t in tallies.items():
        cells: list = (
            [_one_line(name)]
            + ([str(len(t.files))] if files else [])
            + [
                str(t.batches),
                str(t.records),
                f"{t.bytes:,}",
                _one_line(_counts(t.codecs)),
                str(len(t.producers)),
                _one_line(_counts(t.findings), "yellow"),
            ]
        )
        table.add_row(*cells)
    return table


def _one_line(text: str, style: str = "") -> Text:
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


def _times(tallies: dict[str, Tally]) -> Table:
    table = Table(
        title="Time range per partition (UTC)",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    table.add_column("partition", no_wrap=True, overflow="ellipsis", min_width=12)
    table.add_column("first timestamp", no_wrap=True)
    table.add_column("last timestamp", no_wrap=True)
    for name, t in tallies.items():
        if t.first_ts is not None:
            table.add_row(name, _when(t.first_ts), _when(t.last_ts))
    return table


def _line(name: str, t: Tally, files: bool) -> Text:
    """One partition or file as a wrapped line (narrow screens)."""
    text = Text.assemble((name, "bold"), ": ")
    if files:
        text.append(f"{len(t.files)} files, ")
    text.append(
        f"{t.batches} batches, {t.records} records, {t.bytes:,} bytes; codecs "
        f"{_counts(t.codecs) or '-'}; {len(t.producers)} producers; "
    )
    text.append(f"findings {_counts(t.findings) or 'none'}", "yellow" if t.findings else "")
    text.append(f"; {_when(t.first_ts) or '-'} → {_when(t.last_ts) or '-'} UTC")
    return text


class StatsView:
    """The statistics: tables when there is room (110 columns), else a line each."""

    def __init__(self, stats: LogStats):
        self.stats = stats

    def __rich_console__(self, console, options):
        stats, t = self.stats, self.stats.total
        yield Text.assemble(
            (f"{stats.items} items", "bold"),
            f": {len(t.files)} files, {t.batches} batches, "
            f"{t.records} records, {t.bytes:,} bytes of batches, {len(t.producers)} "
            f"producers",
        )
        yield Text(f"time {_when(t.first_ts) or '-'} → {_when(t.last_ts) or '-'} UTC")
        wide = options.max_width >= 100
        for title, first, tallies, files in (
            ("Per partition", "partition", stats.partitions, True),
            ("Per segment file", "file", stats.files, False),
        ):
            if wide:
                yield _table(title, first, tallies, files)
            else:
                yield Text(title, style="bold")
                for name, tally in tallies.items():
                    yield _line(name, tally, files)
        if wide:
            yield _times(stats.partitions)
        findings = Table(title="Findings", title_justify="left", title_style="bold")
        findings.add_column("code")
        findings.add_column("count", justify="right")
        for code, n in t.findings.most_common():
            findings.add_row(code, str(n))
        if not t.findings:
            findings.add_row(Text("none", style="green"), "")
        yield findings


class LogStatsScreen(ModalScreen):
    """The statistics of the items listed (the filter applies)."""

    BINDINGS = [Binding("escape,s,q", "dismiss", "Close")]
    CSS = """
    LogStatsScreen { align: center middle; }
    #stats-box { width: 96%; height: 94%; border: round $accent; background: $surface;
                 border-subtitle-color: $text-muted; }
    """

    def __init__(self, stats: LogStats) -> None:
        super().__init__()
        self.renderable = StatsView(stats)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stats-box"):
            yield Static(self.renderable, id="stats-tables")
            yield Static(Text("escape closes", style="dim"))

    def on_mount(self) -> None:
        scroll = self.query_one("#stats-box")
        scroll.border_subtitle = "↑ ↓ PgUp PgDn or the wheel scroll · Esc closes"
        scroll.focus()
