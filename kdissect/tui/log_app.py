"""`kdissect log` in the terminal UI: Kafka's files and record batches in a list (files
and positions where the capture screens have connections), the selected item's byte tree
beside its bytes, with the keys of the exchange screens: / filters (the display-filter
language, as `kdissect log -Y`, with completion and a caret under what is wrong), ctrl+f
searches bytes (inside compressed batches too), o/O and the headers sort, s shows
statistics, e/E export, p goes to the next problem (a finding), ? helps, q quits.

Items come from ``sources.logunits.walk`` in a forked child (``read_items``: one batch
decoded at a time, its decoding never holding this process's GIL) and are added to the
list in slices of a few milliseconds, so the screen answers keys while a big log dir is
read. Memory stays bounded as in `kdissect log`: the list keeps each batch's cells,
findings and place in its file, not its tree; the selected batch is decoded again from
the file (the last few are kept). Filters over the items read, searches, statistics and
exports run in the background (filters and searches on every core: work.py), with
progress on the work line; Esc cancels them."""

from __future__ import annotations

import copy
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Static

from ..filters import Filter, FilterError, parse_filter
from ..stream.fields import LOG_NAMES
from ..protocol import Options, ondisk
from ..protocol.internal import decode_records, family_of
from ..protocol.node import Node
from ..protocol.batch import CRC_FROM, HEAD_SIZE, Batch
from ..protocol.records import read_records
from ..render.log_json import CODECS
from ..render.log_lines import record_lines_for
from ..render.records import json_bytes
from ..sources.logdir import (
    ATTRIBUTE_FIELDS,
    CHECK_FIELDS,
    LogError,
    LogItem,
    end_marker,
    file_kind,
    values_answer,
)
from ..sources.logunits import walk
from ..stream import anomaly
from ..stream.content import buffer_nodes
from .app import unique_path
from .palette import ANSI_DARK, ANSI_LIGHT
from .detail import Detail, Item
from .filterbar import FILTER_CSS, FilterInput, FilterSuggester, check_filter
from .jobs import IN_WORKERS as _IN_WORKERS
from .jobs import BAR_BINDINGS, WORK_CSS, Jobs, set_text, work_line
from .loader import Done, Progress, Warn, run_forked
from .log_list import LogList
from .screens import HelpScreen
from .sorting import SORT_BINDINGS, Sorting
from .work import scan

_FLUSH = 0.1  # seconds between reports of how far reading is
_TICK = 0.05  # seconds between hand-overs of items read to the list
_SLICE = 0.01  # seconds a hand-over takes at most: keys wait no longer
_WHOLE_FILE = 64 << 20  # files other than segments are shown whole up to this size
_KEEP_TREES = 16  # trees of the batches viewed last
_REST = 0.06  # seconds the list cursor rests before the detail follows
_DECODE_HERE = 4096  # bigger batches decode in a worker thread
# filter fields known without decoding a batch again (its findings are kept)
_KEPT = frozenset(
    {
        "finding",
        "severity",
        "anomaly",
        "topic",
        "partition",
        "aborted",
        "deleted",
        *ATTRIBUTE_FIELDS,
    }
)
# the sort orders the `o` key cycles through (size and records: biggest first)
SORT_CYCLE = (
    "#",
    "size",
    "records",
    "time",
    "status",
    "producer",
    "codec",
    "offsets",
    "kind",
    "file",
)
# the fields the filter bar offers (docs/log.md)
LOG_FIELDS = list(LOG_NAMES)

LOG_HELP = """\
[b]Files and batches[/b] (one row per file and per record batch, in file order; kind says
COMMIT / ABORT markers, ABORTED transactions' batches, deleted ones below the log start)
  ↑ ↓ PgUp PgDn Home End   move (the detail follows)
  p / P           next / previous problem: an item with a finding (CRC mismatch, bad index
                  entry, sequence gap...); its offending field is selected
  /               filter: finding == crc_mismatch, record.key == "k", producer_id == 7,
                  base_offset >= 100, aborted, control, deleted, codec == lz4,
                  record.value == null (tombstones), record.key.group == "g" (as
                  kdissect log -Y; Tab or → completes; a caret shows what is wrong;
                  docs/log.md); an empty filter: all
  ctrl+f          search bytes, in compressed batches too: text, 0x…, hex: 00 01; n: next
  o / O           sort: file order, size, records, time, status, producer, codec...
                  / reverse; a click on a header sorts by it
  s               statistics: per partition and segment file (batches, records, bytes,
                  codecs, producers, findings, time range), findings by code
  e               export the item (its batch and records) as JSON lines
  E               export the items listed: JSON lines and their batches as a log dir
                  (one .log segment per partition: kafka-dump-log and kdissect log read it)
  Esc             close the bar, else cancel the work under way or stop reading
[b]Detail[/b]
  tab / v         field tree ⇄ bytes (they take turns below 114 columns)
  *               open every field under the cursor
  → ←             in the tree: open / close the field (→ on an open one: its first field)
  ← → ↑ ↓         in the bytes: move the cursor; the field under it is selected
  offsets in the tree are positions in the file; compressed records are their own buffer
[b]Anywhere[/b]
  ?  this help     q  quit
See docs/log.md and docs/tui.md."""


def _value(tree: Node | None, name: str):
    c = tree.child(name) if tree is not None else None
    return c.value if c is not None else None


def _when(ms) -> str:
    if not isinstance(ms, int) or ms < 0:
        return ""
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[
            :-3
        ]
    except (OverflowError, ValueError, OSError):
        return str(ms)


def _head(item: LogItem) -> dict:
    """A batch's header fields by name: from the bulk path's lines or values, else its
    tree."""
    bulk = item.lines or item.values
    if bulk is not None:
        return bulk[0]
    tree = item.tree
    return {
        n: _value(tree, n)
        for n in (
            "magic",
            "base_offset",
            "offset",
            "last_offset_delta",
            "record_count",
            "attributes",
            "producer_id",
            "producer_epoch",
            "base_timestamp",
            "max_timestamp",
            "timestamp",
        )
    }


def describe(number: int, item: LogItem) -> None:
    """Set what the list keeps of an item (its tree or values are then dropped):
    ``cells``, ``stat`` (records, codec, producer, first and last timestamp, finding
    codes), ``every`` (all its findings), ``severe``, ``problem``, ``base``, ``number``,
    and ``start``/``length`` (its place in its file)."""
    tree = item.tree
    findings = item.all_findings()
    item.number, item.every = number, findings  # type: ignore[attr-defined]
    item.severe = any(f.severity == "error" for f in findings)  # type: ignore[attr-defined]
    item.problem = bool(findings)  # type: ignore[attr-defined]
    codes = tuple(sorted({f.code for f in findings}))
    status = ", ".join(codes)
    item.base = None  # type: ignore[attr-defined]
    if item.kind != "batch" or (tree is None and item.values is None and item.lines is None):
        entries = tree.value if tree is not None and isinstance(tree.value, int) else ""
        item.cells = (  # type: ignore[attr-defined]
            str(number),
            item.kind,
            "",
            "",
            str(entries),
            status,
            "",
            "",
            "",
            item.path.name,
        )
        item.stat = (None, "", None, None, None, codes)  # type: ignore[attr-defined]
        item.start, item.length = 0, min(_WHOLE_FILE, item.path.stat().st_size)  # type: ignore[attr-defined]
        return
    if item.values is not None or item.lines is not None:
        h = _head(item)
        start, length = h["position"], 12 + h["batch_length"]
    else:
        assert tree is not None
        h, start, length = _head(item), tree.offset, tree.length
    item.start, item.length = start, length  # type: ignore[attr-defined]
    magic = h["magic"]
    base, delta = h["base_offset"], h["last_offset_delta"]
    if base is None:
        base = h.get("offset")
    item.base = base if isinstance(base, int) else None  # type: ignore[attr-defined]
    offsets = (
        f"{base}–{base + delta}"
        if isinstance(base, int) and isinstance(delta, int)
        else ""
        if base is None
        else str(base)
    )
    count = h["record_count"]
    if count is None and magic in (0, 1) and tree is not None:
        count = 1 + sum(1 for n in tree.walk() if n.ktype.startswith("message_v") and n is not tree)
    attrs = h["attributes"]
    codec = CODECS[attrs & 7] if isinstance(attrs, int) and attrs & 7 < 5 else ""
    pid = h["producer_id"]
    pid = pid if isinstance(pid, int) and pid >= 0 else None
    producer = f"{pid}/{h['producer_epoch']}" if pid is not None else ""
    first_ts, max_ts = h["base_timestamp"], h["max_timestamp"]
    if first_ts is None:
        first_ts = max_ts = h.get("timestamp")
    control = isinstance(attrs, int) and bool(attrs & 0x20)
    shown_codec = codec + (" control" if control else "")
    kind = f"batch v{magic}" if magic is not None else "damage"
    marker = end_marker(tree) if control and tree is not None else None
    if marker:  # a transaction's end: COMMIT or ABORT
        kind += f" {marker}"
    if item.aborted:  # a batch of an aborted transaction
        kind += " ABORTED"
    item.attrs = attrs if isinstance(attrs, int) else None  # type: ignore[attr-defined]
    gone = item.gone = item.deleted  # type: ignore[attr-defined]
    if gone is not None:  # below the log start offset, on disk
        kind += " deleted" if gone else " part-deleted"
    item.cells = (  # type: ignore[attr-defined]
        str(number),
        kind,
        f"@{start}+{length}",
        offsets,
        "" if count is None else str(count),
        status,
        shown_codec,
        producer,
        _when(max_ts),
        item.path.name,
    )
    item.stat = (  # type: ignore[attr-defined]
        count if isinstance(count, int) else None,
        codec,
        pid,
        first_ts,
        max_ts,
        codes,
    )


def lighten(item: LogItem) -> None:
    """After ``describe``: drop what the list does not keep (a batch's tree, values or
    lines: decoded again from the file when needed); damage at a segment's end keeps its
    tree, offsets counted from its first byte."""
    item.values = item.lines = None
    if item.kind == "batch" and item.tree is not None:
        if item.tree.ktype == "record_batch" or item.tree.ktype.startswith("message_v"):
            item.tree = None
        else:
            _shift(item.tree, -item.start)  # type: ignore[attr-defined]


def whole_batch(item: LogItem) -> bool:
    """Whether the item is a whole batch read from its file (decoded again when needed;
    damage at a segment's end keeps its tree)."""
    return item.kind == "batch" and item.tree is None and hasattr(item, "start")


def _sort_value(item, column: str) -> tuple:
    """(0, value) to sort by; (1, ...) for an empty cell, which stays last."""
    records, codec, pid, _first, max_ts, codes = item.stat
    value = {
        "#": item.number,
        "size": getattr(item, "length", None),
        "records": records,
        "time": max_ts,
        "producer": pid,
        "offsets": item.base,
        "partition": (item.topic or "", item.partition if item.partition is not None else -1),
        "status": ", ".join(codes) or None,
        "codec": codec or None,
        "kind": item.kind,
        "position": (str(item.path), getattr(item, "start", 0)),
        "file": (str(item.path), getattr(item, "start", 0)),
    }.get(column, item.number)
    return (0, value) if value is not None else (1, 0)


def batch_tree(item: LogItem, options: Options) -> tuple[Node, bytes]:
    """(the batch's tree, its bytes) decoded again from its file, offsets counted from
    the batch's first byte (as ``walk`` decodes it: internal topics and control records
    by their schemas)."""
    data = read_span(item.path, item.start, item.length)  # type: ignore[attr-defined]
    holder = Node("", "records", 0)
    read_records(data, holder, 0, len(data), options.for_message())
    tree = holder.children[0]
    family = "metadata" if file_kind(item.path) == "kraft_snapshot" else family_of(item.topic)
    head = Batch(data, 0, len(data))
    if family is not None or (len(data) > CRC_FROM + 1 and head.magic == 2 and head.control):
        decode_records(tree, family, options)
    return tree, data


def read_span(path: Path, start: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(length)


def _shift(tree: Node, delta: int) -> None:
    """Offsets of ``tree`` moved by ``delta``; nodes in a decompressed buffer keep theirs."""
    stack = [tree]
    while stack:
        node = stack.pop()
        node.offset += delta
        if node.buffer is None:
            stack.extend(node.children)


def passes(flt: Filter, item: LogItem, options: Options) -> bool:
    """Whether an item the list keeps passes ``flt``: its findings are kept; a filter on
    a batch's header or its records' keys, values and headers reads the batch again from
    its file as values (the bulk path's: no tree), as a tree only when the batch is not
    clean, holds records of an internal topic, or the filter asks more."""
    if not whole_batch(item):
        return flt(item)
    if flt.fields <= _KEPT:
        return flt(_again(item, None, item.every))  # type: ignore[attr-defined]
    values = batch_values(item, options) if values_answer(flt.fields) else None
    if values is not None:
        return flt(_again(item, None, item.every, values))  # type: ignore[attr-defined]
    tree = batch_tree(item, options)[0]
    return flt(_again(item, tree, item.findings))


def _again(item: LogItem, tree: Node | None, findings: list, values=None) -> LogItem:
    """The kept item as a filter asks it (with its tree or values read again, if any):
    what the list keeps of it (its marks, its attributes) answers too."""
    again = LogItem(
        item.kind,
        item.path,
        item.topic,
        item.partition,
        tree,
        findings,
        values=values,
        aborted=item.aborted,
        log_start=item.log_start,
    )
    again.attrs = getattr(item, "attrs", None)  # type: ignore[attr-defined]
    return again


def batch_values(item: LogItem, options: Options):
    """A whole batch read again from its file as the bulk path reads it (header fields,
    record positions, records as JSON values): None unless it is a clean v2 batch of an
    ordinary topic, neither control nor decoded by value schemas (as ``walk`` decides)."""
    if (
        options.values is not None
        or family_of(item.topic) is not None
        or file_kind(item.path) == "kraft_snapshot"
    ):
        return None
    data = read_span(item.path, item.start, item.length)  # type: ignore[attr-defined]
    batch = Batch(data, 0, len(data))
    if batch.size < HEAD_SIZE or batch.magic != 2 or batch.control:
        return None
    return ondisk.batch_values(
        data, 0, len(data), options.max_decompressed, options.max_nodes, json_bytes
    )


def item_bytes(item: LogItem) -> bytes:
    """An item's bytes in its file (a whole non-segment file up to _WHOLE_FILE)."""
    return read_span(item.path, getattr(item, "start", 0), getattr(item, "length", _WHOLE_FILE))


def holds(item: LogItem, needle: bytes, options: Options) -> bool:
    """Whether ``needle`` is in the item's bytes or in a decompressed buffer of its
    records (v2 batches decompressed without decoding a record)."""
    data = item_bytes(item)
    if needle in data:
        return True
    if not whole_batch(item) or not item.stat[1] or item.stat[1] == "none":  # type: ignore[attr-defined]
        return False
    clean = ondisk.clean_batch(data, 0, len(data), options.max_decompressed, options.max_nodes)
    if clean is not None:  # compressed: its records' bytes, decompressed
        _batch, records, start, end = clean
        return needle in records[start:end]
    tree = batch_tree(item, options)[0]
    return any(needle in (n.buffer or b"") for n in buffer_nodes(tree))


def read_items(
    paths: list[str], options: Options, flt: Filter | None, emit: Callable[[object], None]
) -> None:
    """Every item of ``paths`` (``walk``'s bulk path: clean batches as JSON lines, no
    tree), described for the list and lightened (``describe``, ``lighten``), tested
    against ``flt`` (``item.passed``), with ``Progress`` (bytes read of the total) now
    and then, a ``Warn`` if reading stopped early, then ``Done``: what the log TUI's
    reader (a forked child) sends to the UI."""
    total = _total_size(paths)
    read = done_bytes = 0
    last_path: Path | None = None
    said = 0.0
    try:
        for item in walk(paths, options, lines=record_lines_for()):
            read += 1
            describe(read, item)
            lighten(item)
            if flt is not None:
                item.passed = passes(flt, item, options)  # type: ignore[attr-defined]
            if item.path != last_path:
                if last_path is not None and total is not None:
                    done_bytes += last_path.stat().st_size
                last_path = item.path
            emit(item)
            if total and time.monotonic() - said > _FLUSH:
                emit(Progress(done_bytes + item.start + item.length, total))  # type: ignore[attr-defined]
                said = time.monotonic()
    except LogError as e:
        emit(Warn(str(e)))
    except Exception as e:  # a file that cannot be read: say so, keep rows
        emit(Warn(f"reading stopped: {e}"))
    emit(Done())


def _total_size(paths: list[str]) -> int | None:
    """The bytes under ``paths`` (loading's progress); None for URLs."""
    total = 0
    for text in paths:
        if "://" in text:
            return None
        p = Path(text)
        if p.is_file():
            total += p.stat().st_size
        else:
            for root, _dirs, files in os.walk(p):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


class LogStatsScreen(ModalScreen):
    """The statistics of the items listed (the filter applies)."""

    BINDINGS = [Binding("escape,s,q", "dismiss", "Close")]
    CSS = """
    LogStatsScreen { align: center middle; }
    #stats-box { width: 96%; height: 94%; border: round $accent; background: $surface;
                 border-subtitle-color: $text-muted; }
    """

    def __init__(self, renderable) -> None:
        super().__init__()
        self.renderable = renderable

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stats-box"):
            yield Static(self.renderable, id="stats-tables")
            yield Static(Text("escape closes", style="dim"))

    def on_mount(self) -> None:
        self.ansi_theme_dark, self.ansi_theme_light = ANSI_DARK, ANSI_LIGHT  # legible
        box = self.query_one("#stats-box")
        box.border_subtitle = "↑ ↓ PgUp PgDn or the wheel scroll · Esc closes"
        box.focus()


class LogApp(Sorting, Jobs, App):
    """Browse Kafka's files on disk: ``paths`` as `kdissect log` reads them."""

    TITLE = "kdissect log"
    AUTO_FOCUS = "#items"
    SORT_CYCLE = SORT_CYCLE
    DESCENDING = frozenset({"size", "records"})
    SORT_NAMES = {
        "#": "file order",
        "size": "size, biggest first",
        "records": "records, most first",
        "time": "last timestamp",
    }
    CSS = (
        """
    #items { height: 45%; }
    #detail { height: 1fr; }
    #main { height: 1fr; }
    #bars { height: auto; }
    #empty { height: auto; display: none; padding: 1 2; }
    #empty.visible { display: block; }
    """
        + FILTER_CSS
        + WORK_CSS
    )
    BINDINGS = [
        *BAR_BINDINGS,
        Binding("p", "next_problem", "Problem"),  # short: the footer keeps s ? q at 80
        Binding("P", "next_problem(-1)", "Previous problem", show=False),
        Binding("n", "search_next", "Next match", show=False),
        *SORT_BINDINGS,
        Binding("s", "stats", "Stats"),
        Binding("e", "export", "Export item", show=False),
        Binding("E", "export_shown", "Export"),
        Binding("v", "toggle_pane", "Bytes"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, paths: list[str], options: Options | None = None, filter_text: str = ""):
        super().__init__()
        self.paths = paths
        self.options = options or Options()
        self.items: list[LogItem] = []  # every item read, in file order
        self.read = 0  # items read (the filter may show fewer)
        self._trees: OrderedDict[int, tuple[Node, bytes]] = OrderedDict()
        self.filter_text = filter_text
        self.filter = parse_filter(filter_text, LOG_FIELDS) if filter_text.strip() else None
        self._start_filter = self.filter  # what the reader tests items against
        self._incoming: deque = deque()  # what the reader sent, not yet in the list
        self.sorted_by: tuple[str, bool] = ("#", False)
        self.needle: bytes | None = None
        self.needle_text = ""
        self.loaded = False
        self.error: str | None = None
        self.stop = threading.Event()
        self._stopped = False
        self._progress: tuple[int, int] | None = None
        self._detail_timer: Timer | None = None
        self.detail_item: LogItem | None = None  # what the detail shows
        self._pending: LogItem | None = None  # what it is about to show
        self.seen: dict[str, set[str]] = {"topic": set()}
        self.names = ", ".join(Path(p).name for p in paths)
        self.sub_title = self.names

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="main"):
            yield from work_line()
            yield Static(id="active-filter")
            yield LogList(id="items")
            yield Static(id="empty")
            yield Detail(self.options.show_secrets, id="detail")
        with Vertical(id="bars"):
            yield FilterInput(
                placeholder='display filter, e.g. finding, record.key == "k", '
                "producer_id == 7 (Tab completes, Enter applies, "
                "Esc closes)",
                id="filter",
                classes="bar",
                suggester=FilterSuggester(lambda field: self.seen.get(field, ()), LOG_FIELDS),
            )
            yield Static(id="filter-error")
            yield Input(
                placeholder="search bytes (in compressed batches too): text, or hex "
                "as 0x0001 / hex: 00 01",
                id="search",
                classes="bar",
            )
        yield Footer()

    @property
    def table(self) -> LogList:
        return self.query_one(LogList)

    @property
    def shown(self) -> list[LogItem]:
        """The items in the list, in its order."""
        return self.table.rows

    def on_mount(self) -> None:
        self.table.set_order("#", lambda it: _sort_value(it, "#"), False)
        self._show_active_filter()
        self.run_worker(self._load, thread=True, exclusive=True)
        self.set_interval(0.1, self._show_work)
        self.set_interval(_TICK, self._drain)

    def on_unmount(self) -> None:
        self.stop.set()

    # -- loading (a forked child; a worker thread receives) -------------------------------

    def _load(self) -> None:
        """In the worker: the items read by a forked child (``read_items``), queued for
        ``_drain``; the child's decoding never holds this process's GIL."""
        paths, options, flt = self.paths, self.options, self.filter

        def take(obj) -> None:
            if isinstance(obj, Progress):
                self._progress = (obj.done, obj.total)  # only the latest matters
            else:
                self._incoming.append(obj)

        code = run_forked(lambda emit: read_items(paths, options, flt, emit), take, self.stop)
        if code is not None:
            take(Warn(f"reading stopped: the reader ended unexpectedly (exit {code})"))
            take(Done())
        elif self._stopped:
            take(Warn("reading stopped (Esc): the list holds what was read until then"))
            take(Done())

    def _drain(self) -> None:
        """Add what the reader sent since the last tick, for _SLICE seconds at most: keys
        are answered between slices."""
        if not self._incoming or not self.query(LogList):  # nothing, or closing
            return
        table = self.table
        first = not table.rows
        until = time.monotonic() + _SLICE
        done = False
        while self._incoming and time.monotonic() < until:
            obj = self._incoming.popleft()
            if isinstance(obj, Warn):
                self.error = str(obj.what)
            elif isinstance(obj, Done):
                done = True
            else:
                self._take_item(obj)
        table.grown()
        self.read = len(self.items)
        if done:
            self.loaded = True
            if self.error and table.rows:
                self.notify(self.error, severity="warning", timeout=8)
        self._show_work()
        self._show_empty()
        self._show_active_filter()
        self._update_subtitle()
        if first and table.rows:
            self.show_item(table.rows[0])

    def _take_item(self, item: LogItem) -> None:
        passed = getattr(item, "passed", None)  # tested against the start filter
        if passed is not None:
            item.tested = (self._start_filter, passed)  # type: ignore[attr-defined]
            del item.passed  # type: ignore[attr-defined]
        self.items.append(item)
        if item.topic is not None:
            self.seen["topic"].add(item.topic)
        if self._matches(item):
            self.table.add(item)

    def _matches(self, item: LogItem) -> bool:
        flt = self.filter
        if flt is None:
            return True
        tested = getattr(item, "tested", None)
        if tested is not None and tested[0] is flt:
            return tested[1]
        return passes(flt, item, self.options)

    def _update_subtitle(self) -> None:
        count = f"{len(self.shown)} of {self.read}" if self.filter else str(self.read)
        self.sub_title = f"{self.names}  {count} items{'' if self.loaded else '  loading…'}"

    def _show_empty(self) -> None:
        empty = self.query_one("#empty", Static)
        if self.shown or not self.loaded:
            empty.remove_class("visible")
            return
        if self.error:
            text = Text(self.error, style="bold red")
        elif self.read:
            text = Text(
                f"No item matches the filter {self.filter_text!r} ({self.read} "
                f"read). / changes it; an empty filter shows everything.",
                "yellow",
            )
        else:
            text = Text("No Kafka files found.", style="bold red")
        empty.update(text)
        empty.add_class("visible")

    # -- the list and the detail ---------------------------------------------------------

    def current(self) -> LogItem | None:
        return self.table.current()

    @on(LogList.RowHighlighted, "#items")
    def _highlighted(self, event: LogList.RowHighlighted) -> None:
        """The detail follows the cursor once it rests: keys that scroll stay instant."""
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(_REST, self._show_current)

    def _show_current(self) -> None:
        if not self.query(LogList):  # the app is closing: its widgets are gone
            return
        item = self.current()
        if item is None or item is self.detail_item:
            return
        if not whole_batch(item) or id(item) in self._trees or item.length < _DECODE_HERE:  # type: ignore[attr-defined]
            self.show_item(item)
            return
        # a big batch decodes in a worker thread: keys pressed meanwhile are answered
        self._pending = item
        options = self.options

        def decode() -> None:
            try:
                found = batch_tree(item, options)
            except OSError:
                found = None  # show_item says so
            self.call_from_thread(self._decoded, item, found)

        self.run_worker(decode, thread=True, group="detail")

    def _decoded(self, item: LogItem, found: tuple[Node, bytes] | None) -> None:
        if found is not None:
            self._keep_tree(item, found)
        if self._pending is item and self.current() is item and self.query(LogList):
            self.show_item(item)

    def show_item(self, item: LogItem) -> None:
        self.detail_item = item
        detail = self.query_one(Detail)
        title = Text(f"{item.path}", style="bold")
        if item.topic is not None:
            title.append(f"  {item.topic}-{item.partition}")
        for f in item.findings:  # the checks across batches and files
            title.append(f"  ✗ {f.text()}", "bold red" if f.severity == "error" else "yellow")
        tree, data, start = self.tree_of(item)
        if tree is None:
            detail.show(title, [])
            return
        label = Text(f"{item.kind} at position {start} ({len(data)} bytes)", "bold")
        detail.show(title, [Item(label, data, tree, start)])

    def tree_of(self, item: LogItem) -> tuple[Node | None, bytes, int]:
        """(tree, bytes, their position in the file): a batch decoded again from its
        file (the last few kept), another file's tree as read."""
        start = getattr(item, "start", 0)
        found = self._trees.get(id(item))
        if found is None:
            try:
                if item.tree is not None:  # a file other than a segment, or damage
                    return item.tree, item_bytes(item), start
                if not hasattr(item, "start"):
                    return None, b"", 0
                found = batch_tree(item, self.options)
            except OSError as e:
                self.notify(f"cannot read {item.path}: {e.strerror}", severity="error")
                return None, b"", 0
            self._keep_tree(item, found)
        self._trees.move_to_end(id(item))
        return found[0], found[1], start

    def _keep_tree(self, item: LogItem, found: tuple[Node, bytes]) -> None:
        self._trees[id(item)] = found
        while len(self._trees) > _KEEP_TREES:
            self._trees.popitem(last=False)

    def file_tree(self, item: LogItem) -> Node | None:
        """The item's tree at positions in its file (for the JSON lines); safe off the
        UI thread."""
        start = getattr(item, "start", 0)
        if item.tree is not None:
            if not start:
                return item.tree
            tree = copy.deepcopy(item.tree)
        else:
            tree = batch_tree(item, self.options)[0]
        _shift(tree, start)
        return tree

    def select_item(self, item: LogItem) -> None:
        """Move the list's cursor to ``item`` and show it now."""
        self.table.move_cursor(self.table.index(item))
        self.table.center_cursor()
        self.show_item(item)

    # -- filter ---------------------------------------------------------------------------

    def apply_filter(self, text: str) -> FilterError | None:
        """Show only the items read that pass the filter; returns the error of a bad
        filter. Over many items (a filter that decodes the batches again) it runs on all
        cores in the background, the list staying as it was until it is done."""
        try:
            parsed = parse_filter(text, LOG_FIELDS) if text.strip() else None
        except FilterError as e:
            return e
        items, options = list(self.items), self.options
        if parsed is None or len(items) <= _IN_WORKERS or parsed.fields <= _KEPT:
            self._filtered(parsed, text, items, None)
            return None
        self.run_job(
            f"filter {text}",
            lambda progress, cancel: scan(
                items, lambda item: passes(parsed, item, options), progress, cancel
            ),
            lambda found: self._filtered(parsed, text, items, found),
        )
        return None

    def _filtered(
        self, parsed: Filter | None, text: str, items: list[LogItem], found: list[int] | None
    ) -> None:
        self.filter, self.filter_text = parsed, text
        if parsed is None:
            rows = list(self.items)
        else:
            if found is None:
                rows = [it for it in items if passes(parsed, it, self.options)]
            else:
                rows = [items[i] for i in found]
            for item in rows:
                item.tested = (parsed, True)  # type: ignore[attr-defined]
            rows += [it for it in self.items[len(items) :] if self._matches(it)]
        self.table.set_rows(rows, keep=self.current())
        self._show_active_filter()
        self._update_subtitle()
        self._show_empty()
        self._show_current()

    def _show_active_filter(self) -> None:
        active = self.query_one("#active-filter", Static)
        if self.filter is not None:
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

    # -- actions ------------------------------------------------------------------------

    def action_next_problem(self, step: int = 1) -> None:
        """The next item with a finding (wrapping), on its offending field."""
        rows = self.shown
        n = len(rows)
        for k in range(1, n + 1):
            item = rows[(self.table.cursor_row + step * k) % n]
            if item.problem:  # type: ignore[attr-defined]
                self.select_item(item)
                tree = self.tree_of(item)[0]
                node = anomaly.offending(tree) if tree is not None else None
                if node is None and tree is not None:  # a check across batches: its field
                    node = next(
                        (
                            c
                            for f in item.findings
                            if (name := CHECK_FIELDS.get(f.code))
                            and (c := tree.child(name)) is not None
                        ),
                        None,
                    )
                if node is not None:
                    detail = self.query_one(Detail)
                    detail.select(0, node)
                    detail.field_tree.reveal(node, tree)
                return
        self.notify("no finding among the items shown", timeout=4)

    def sort_value(self, column: str):
        return lambda it: _sort_value(it, column)

    def after_sort(self) -> None:
        self._show_current()

    def action_stats(self) -> None:
        """Statistics of the items listed; over many gathered in the background."""
        from .log_stats import gather, stats_view

        items = list(self.shown)

        def open_screen(stats) -> None:
            self.push_screen(LogStatsScreen(stats_view(stats)))

        if len(items) > 20 * _IN_WORKERS:
            self.run_job(
                "statistics", lambda progress, cancel: gather(items, progress, cancel), open_screen
            )
        else:
            open_screen(gather(items))

    def action_export(self) -> None:
        """The item under the cursor (a batch with its records) as JSON lines."""
        from .log_export import item_jsonl

        item = self.current()
        if item is None:
            return
        where = f"-{item.start}" if item.kind == "batch" else ""  # type: ignore[attr-defined]
        path = unique_path(Path(f"kdissect-log-{item.path.stem}{where}.jsonl"))
        try:
            path.write_text(item_jsonl(item, self.file_tree))
        except OSError as e:
            self.notify(f"could not write {path}: {e.strerror}", severity="error")
            return
        self.notify(f"exported to {path.resolve()}")

    def action_export_shown(self) -> None:
        """The items listed (the filter applies), in the background: JSON lines and
        their whole batches as a log dir (a segment per partition)."""
        from .log_export import export

        items = list(self.shown)
        if not items:
            self.notify("nothing to export: the list is empty", severity="warning")
            return
        directory = unique_path(Path(f"kdissect-log-{len(items)}-items"))

        def finish(result) -> None:
            jsonl, n, segments = result
            self.notify(
                f"exported {n} items to {jsonl.resolve()} and "
                f"{sum(segments.values())} batches as {len(segments)} segment(s) "
                f"under {directory.resolve()} (kdissect log and kafka-dump-log read "
                f"them)",
                timeout=10,
            )

        def work(progress, cancel):
            try:
                return export(
                    directory, items, whole_batch, self.file_tree, item_bytes, progress, cancel
                )
            except OSError as e:
                self.call_from_thread(
                    self.notify, f"could not write {directory}: {e.strerror}", severity="error"
                )
                return None

        self.run_job(f"export {len(items)} items", work, finish)

    def action_toggle_pane(self) -> None:
        self.query_one(Detail).toggle_pane()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(LOG_HELP))

    # -- bars -----------------------------------------------------------------------------

    @on(Input.Changed, "#filter")
    def _validate(self, event: Input.Changed) -> None:
        check_filter(event.input, self.query_one("#filter-error", Static), LOG_FIELDS)

    def action_search_next(self) -> None:
        """The next item (after the cursor, wrapping) whose bytes hold the needle, in
        its file or in a decompressed buffer of its records; the match is selected."""
        if not self.needle:
            self.action_search()
            return
        needle, options = self.needle, self.options
        self.search_from_cursor(
            lambda item: holds(item, needle, options),
            self._show_match,
            f"{self.needle_text!r} is in no item shown (decompressed records included)",
        )

    def _show_match(self, item: LogItem) -> None:
        """Select ``item`` and, in its detail, the field holding the needle."""
        assert self.needle is not None
        self.select_item(item)
        detail = self.query_one(Detail)
        if not detail.items:
            return
        root, data = detail.items[0].root, detail.items[0].data
        at = data.find(self.needle)
        if at >= 0:
            detail.select_at(0, root, at)
            return
        for node in buffer_nodes(root):
            at = (node.buffer or b"").find(self.needle)
            if at >= 0:
                detail.select_at(0, node, at)
                return
