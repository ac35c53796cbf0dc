"""`kdissect log` in the terminal UI: Kafka's files and record batches in a list (files
and positions where the capture screens have connections), the selected item's byte tree
beside its bytes, with the keys of the exchange screens: / filters (the display-filter
language, as `kdissect log -Y`, with completion and a caret under what is wrong), ctrl+f
searches bytes (inside compressed batches too), o/O and the headers sort, s shows
statistics, e/E export, p goes to the next problem (a finding), ? helps, q quits.

Items come from ``sources.logunits.walk`` in a forked child (``read_items``: one batch
decoded at a time, its decoding never holding this process's GIL) and are added to the
list in slices of a few milliseconds (browser.Arrived), so the screen answers keys while
a big log dir is read. Memory stays bounded as in `kdissect log`: the list keeps each
batch's cells, findings and place in its file, not its tree; the selected batch is decoded
again from the file (the last few are kept). Filters over the items read, searches,
statistics and exports run in the background (filters and searches on every core:
work.py), with progress on the work line; Esc cancels them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.binding import Binding

from ..filters import parse_filter
from ..protocol import Options
from ..protocol.node import Node
from ..sources.logdir import LogItem
from .browser import Browser, unique_path
from .detail import Detail, Item, findings_item
from .filterbar import FILTER_CSS
from .jobs import IN_WORKERS as _IN_WORKERS
from .jobs import BAR_BINDINGS, WORK_CSS
from .loader import Done, Forked, Note
from .log_items import (
    LOG_FIELDS,
    LogAdapter,
    _shift,
    batch_tree,
    item_bytes,
    read_items,
    whole_batch,
)
from .log_list import LogList
from .sorting import SORT_BINDINGS

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
                  docs/guide/log.md); an empty filter: all
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
See docs/guide/log.md and docs/guide/tui.md."""


class LogApp(Browser):
    """Browse Kafka's files on disk: ``paths`` as `kdissect log` reads them."""

    TITLE = "kdissect log"
    AUTO_FOCUS = "#items"
    LIST = LogList
    LIST_ID = "items"
    FILTER_HINT = (
        'display filter, e.g. finding, record.key == "k", '
        "producer_id == 7 (Tab completes, Enter applies, "
        "Esc closes)"
    )
    SEARCH_HINT = "search bytes (in compressed batches too): text, or hex as 0x0001 / hex: 00 01"
    HELP = LOG_HELP
    STATS_HERE = 20 * _IN_WORKERS
    STOPPED = "reading stopped (Esc): the list holds what was read until then"
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
        self.adapter = LogAdapter(self.options)
        self.items: list[LogItem] = []  # every item read, in file order
        flt = parse_filter(filter_text, LOG_FIELDS) if filter_text.strip() else None
        self.init_browser(", ".join(Path(p).name for p in paths), filter_text, flt)
        self._start_filter = self.filter  # what the reader tests items against
        self.sorted_by: tuple[str, bool] = ("#", False)
        self.error: str | None = None

    # -- loading -------------------------------------------------------------------------

    def start_loading(self) -> None:
        """The items read by a child forked now (``read_items``), handed to the screen by
        a worker thread; the child's decoding never holds this process's GIL."""
        paths, options, flt = self.paths, self.options, self.filter
        forked = Forked(lambda emit: read_items(paths, options, flt, emit))

        def receive(take) -> bool:
            code = forked.receive(take, self.stop)
            if code is not None:
                why = f"reading stopped: the reader ended unexpectedly (exit {code})"
                take([Note(why, "error"), Done()])
            return code is not None

        self.load_in_worker(receive)

    def admit(self, item: LogItem) -> LogItem:
        passed = getattr(item, "passed", None)  # tested against the start filter
        if passed is not None:
            item.tested = (self._start_filter, passed)  # type: ignore[attr-defined]
            del item.passed  # type: ignore[attr-defined]
        if item.topic is not None:
            self.seen["topic"].add(item.topic)
        return item

    def noted(self, text: str, level: str) -> None:
        self.error = text  # shown when the reading ends

    def finished(self) -> None:
        if self.error and self.shown:
            self.notify(self.error, severity="warning", timeout=8)

    def empty_text(self) -> Text:
        if self.error:
            return Text(self.error, style="bold red")
        if self.read:
            return Text(
                f"No item matches the filter {self.filter_text!r} ({self.read} "
                f"read). / changes it; an empty filter shows everything.",
                "yellow",
            )
        return Text("No Kafka files found.", style="bold red")

    # -- the list and the detail ---------------------------------------------------------

    def follow_cursor(self) -> None:
        self.show_current()

    def decode_cost(self, item: LogItem) -> int:
        if not whole_batch(item) or id(item) in self.trees:
            return 0  # a tree read with the item, or kept
        return item.length  # type: ignore[attr-defined]

    def decode(self, item: LogItem) -> tuple[Node, bytes] | None:
        try:
            return batch_tree(item, self.options)
        except OSError:
            return None  # show says so

    def keep_decoded(self, item: LogItem, decoded: tuple[Node, bytes] | None) -> None:
        if decoded is not None:
            self.trees.keep(id(item), decoded)

    def show(self, item: LogItem) -> None:
        self.detail_item = item
        detail = self.query_one(Detail)
        title = Text(f"{item.path}", style="bold")
        if item.topic is not None:
            title.append(f"  {item.topic}-{item.partition}")
        # the checks across batches and files: an item of their own (a long path would
        # cut them off the title's line)
        found = [findings_item(list(item.findings))] if item.findings else []
        tree, data, start = self.tree_of(item)
        if tree is None:
            detail.show(title, found)
            return
        label = Text(f"{item.kind} at position {start} ({len(data)} bytes)", "bold")
        detail.show(title, [Item(label, data, tree, start), *found])

    def tree_of(self, item: LogItem) -> tuple[Node | None, bytes, int]:
        """(tree, bytes, their position in the file): a batch decoded again from its
        file (the last few kept), another file's tree as read."""
        start = getattr(item, "start", 0)
        found = self.trees.recall(id(item))
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
            self.trees.keep(id(item), found)
        return found[0], found[1], start

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

    # -- actions ------------------------------------------------------------------------

    def stats_of(self, items: list) -> Callable:
        from .log_stats import gather

        return lambda progress, cancel: gather(items, progress, cancel)

    def open_stats(self, items: list, gathered) -> None:
        from .log_stats import LogStatsScreen

        self.push_screen(LogStatsScreen(gathered))

    def export_of(self, item: LogItem) -> tuple[Path, Callable[[Path], object]]:
        """`e`: the item (a batch with its records) as JSON lines."""
        from .log_export import item_jsonl

        where = f"-{item.start}" if item.kind == "batch" else ""  # type: ignore[attr-defined]
        path = unique_path(Path(f"kdissect-log-{item.path.stem}{where}.jsonl"))
        return path, lambda to: to.write_text(item_jsonl(item, self.file_tree))

    def action_export_shown(self) -> None:
        """The items listed (the filter applies), in the background: JSON lines and
        their whole batches as a log dir (a segment per partition)."""
        from .log_export import export

        def work(directory: Path, items: list, progress, cancel):
            return export(
                directory, items, whole_batch, self.file_tree, item_bytes, progress, cancel
            )

        def finish(directory: Path, result) -> None:
            jsonl, n, segments = result
            self.notify(
                f"exported {n} items to {jsonl.resolve()} and "
                f"{sum(segments.values())} batches as {len(segments)} segment(s) "
                f"under {directory.resolve()} (kdissect log and kafka-dump-log read "
                f"them)",
                timeout=10,
            )

        self.export_listed(lambda n: unique_path(Path(f"kdissect-log-{n}-items")), work, finish)
