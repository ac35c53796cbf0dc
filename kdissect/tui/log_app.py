"""`kdissect log` in the terminal UI: a partition's files and record batches in a list
(files and positions where the capture screens have connections), the selected item's
byte tree beside its bytes, with the keys of the exchange screens: / filters (the
display-filter language, as `kdissect log -Y`), p goes to the next problem (a finding),
v and Tab move between the tree and the bytes, * opens every field, ? helps, q quits.

Items come from ``sources.logdir.walk`` in a worker thread (one batch decoded at a
time) and are added to the list in batches, so the screen answers keys while a big
partition is read. Memory stays bounded as in `kdissect log`: the list keeps each
batch's cells, findings and place in its file, not its tree; the selected batch is
decoded again from the file (the last few are kept). A new filter reads the files again
in the worker, as `kdissect log -Y` would."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Header, Input, Static

from ..filters import FilterError, parse_filter
from ..protocol import Options
from ..protocol.node import Node
from ..protocol.internal import decode_records, family_of
from ..protocol.records import read_records
from ..sources.logdir import LogError, LogItem, file_kind, walk
from ..stream import anomaly
from .detail import Detail, Item
from .filterbar import FILTER_CSS, FilterInput
from .screens import HelpScreen

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# the status (findings) before the file name: it stays in sight at 80 columns, and the
# detail's title names the file in full
COLUMNS = ("#", "kind", "position", "offsets", "records", "status", "codec", "producer",
           "file")
_BATCH = 500               # items handed to the UI at once
_WHOLE_FILE = 64 << 20     # files other than segments are shown whole up to this size
_KEEP_TREES = 16           # trees of the batches viewed last

LOG_HELP = """\
[b]Files and batches[/b] (one row per file and per record batch, in file order)
  ↑ ↓ PgUp PgDn Home End   move (the detail follows)
  p / P           next / previous problem: an item with a finding (CRC mismatch, bad index
                  entry, sequence gap...); its offending field is selected
  /               filter: finding, record.key == "k", producer_id == 7, base_offset >= 100
                  (as kdissect log -Y; docs/filters.md); Esc closes, an empty filter: all
[b]Detail[/b]
  tab / v         field tree ⇄ bytes (they take turns below 114 columns)
  *               open every field under the cursor
  ← → ↑ ↓         in the bytes: move the cursor; the field under it is selected
  offsets in the tree are positions in the file; compressed records are their own buffer
[b]Anywhere[/b]
  ?  this help     q  quit
See docs/log.md and docs/tui.md."""


def _value(tree: Node | None, name: str):
    c = tree.child(name) if tree is not None else None
    return c.value if c is not None else None


def row_of(number: int, item: LogItem) -> tuple:
    """The list's cells for an item."""
    tree = item.tree
    findings = item.all_findings()
    status = Text(", ".join(sorted({f.code for f in findings})),
                  style="red" if any(f.severity == "error" for f in findings) else "yellow")
    if item.kind != "batch" or tree is None:
        entries = tree.value if tree is not None and isinstance(tree.value, int) else ""
        return (str(number), item.kind, "", "", str(entries), status, "", "",
                Text(item.path.name, style="bold"))
    magic = _value(tree, "magic")
    base, delta = _value(tree, "base_offset"), _value(tree, "last_offset_delta")
    offsets = (f"{base}–{base + delta}" if isinstance(base, int) and isinstance(delta, int)
               else str(_value(tree, "offset") if base is None else base))
    count = _value(tree, "record_count")
    attrs = _value(tree, "attributes")
    codec = CODECS[attrs & 7] if isinstance(attrs, int) and attrs & 7 < 5 else ""
    if isinstance(attrs, int) and attrs & 0x20:
        codec += " control"
    pid = _value(tree, "producer_id")
    producer = f"{pid}/{_value(tree, 'producer_epoch')}" if isinstance(pid, int) and \
        pid >= 0 else ""
    return (str(number), f"batch v{magic}" if magic is not None else "damage",
            f"@{tree.offset}+{tree.length}", offsets, "" if count is None else str(count),
            status, codec, producer, item.path.name)


def _batch(item: LogItem) -> bool:
    """Whether the item is a whole batch (its tree can be decoded again from the file)."""
    t = item.tree
    return item.kind == "batch" and t is not None and (
        t.ktype == "record_batch" or t.ktype.startswith("message_v"))


def batch_tree(item: LogItem, options: Options) -> tuple[Node, bytes]:
    """(the batch's tree, its bytes) decoded again from its file, offsets counted from
    the batch's first byte (as ``walk`` decodes it: internal topics and control records
    by their schemas)."""
    data = read_span(item.path, item.start, item.length)   # type: ignore[attr-defined]
    holder = Node("", "records", 0)
    read_records(data, holder, 0, len(data), options.for_message())
    tree = holder.children[0]
    family = "metadata" if file_kind(item.path) == "kraft_snapshot" else family_of(item.topic)
    if family is not None or (len(data) > 22 and data[16] == 2 and data[22] & 0x20):
        decode_records(tree, family, options)
    return tree, data


def read_span(path: Path, start: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(length)


def _relative(tree: Node, start: int) -> None:
    """Offsets of ``tree`` counted from ``start`` (its bytes are shown alone); nodes in a
    decompressed buffer keep theirs."""
    stack = [tree]
    while stack:
        node = stack.pop()
        node.offset -= start
        if node.buffer is None:
            stack.extend(node.children)


class LogApp(App):
    """Browse Kafka's files on disk: ``paths`` as `kdissect log` reads them."""

    TITLE = "kdissect log"
    AUTO_FOCUS = "#items"
    CSS = """
    #items { height: 45%; }
    #detail { height: 1fr; }
    #empty { height: auto; display: none; padding: 1 2; }
    #empty.visible { display: block; }
    """ + FILTER_CSS
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("p", "next_problem", "Next problem"),
        Binding("P", "next_problem(-1)", "Previous problem", show=False),
        Binding("v", "toggle_pane", "Tree⇄bytes"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "close_bars", "Close bar", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, paths: list[str], options: Options | None = None,
                 filter_text: str = ""):
        super().__init__()
        self.paths = paths
        self.options = options or Options()
        self.read = 0                  # items read (the filter may show fewer)
        self.shown: list[LogItem] = []
        self._trees: OrderedDict[int, tuple[Node, bytes]] = OrderedDict()
        self.filter_text = filter_text
        self.filter = parse_filter(filter_text) if filter_text.strip() else None
        self.loaded = False
        self.error: str | None = None
        self.stop = threading.Event()
        self.sub_title = ", ".join(Path(p).name for p in paths)

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static(id="active-filter")
            table: DataTable = DataTable(id="items", cursor_type="row", zebra_stripes=True)
            table.add_columns(*COLUMNS)
            yield table
            yield Static(id="empty")
            yield Detail(self.options.show_secrets, id="detail")
        yield FilterInput(placeholder="display filter, e.g. finding, record.key == \"k\", "
                                      "producer_id == 7 (Enter applies, Esc closes)",
                          id="filter", classes="bar")
        yield Static(id="filter-error")
        yield Footer()

    @property
    def table(self) -> DataTable:
        return self.query_one("#items", DataTable)

    def on_mount(self) -> None:
        self._show_active_filter()
        self._start()

    def _start(self) -> None:
        """(Re)read the files with the current filter, in a worker thread."""
        self.stop.set()                            # the reading under way, if any
        self.stop = threading.Event()
        self.read, self.shown, self.loaded, self.error = 0, [], False, None
        self.table.clear()
        stop, flt = self.stop, self.filter
        self.run_worker(lambda: self._load(stop, flt), thread=True, exclusive=True)

    def on_unmount(self) -> None:
        self.stop.set()

    # -- loading (worker thread) ---------------------------------------------------------

    def _load(self, stop: threading.Event, flt) -> None:
        """In the worker: the items passing ``flt``, with their cells and findings; a
        batch's tree is dropped once they are known (decoded again when viewed)."""
        batch: list[LogItem] = []
        read, error = 0, None
        try:
            for item in walk(self.paths, self.options):
                if stop.is_set():
                    return
                read += 1
                if flt is not None and not flt(item):
                    continue
                item.cells = row_of(read, item)          # type: ignore[attr-defined]
                item.problem = bool(item.all_findings())  # type: ignore[attr-defined]
                if item.kind == "batch" and item.tree is not None:
                    item.start, item.length = item.tree.offset, item.tree.length  # type: ignore[attr-defined]
                    if _batch(item):
                        item.tree = None            # decoded again when viewed
                    else:                           # the damage at a segment's end: kept
                        _relative(item.tree, item.start)  # type: ignore[attr-defined]
                batch.append(item)
                if len(batch) >= _BATCH:
                    self.call_from_thread(self._add, stop, batch, read)
                    batch = []
        except LogError as e:
            error = str(e)
        except Exception as e:              # a file that cannot be read: say so, keep rows
            error = f"reading stopped: {e}"
        if not stop.is_set():
            self.call_from_thread(self._add, stop, batch, read, True, error)

    def _add(self, stop: threading.Event, batch: list[LogItem], read: int,
             done: bool = False, error: str | None = None) -> None:
        if stop is not self.stop or not self.query("#items"):   # stale, or closing
            return
        first = not self.shown
        self.read = read
        for item in batch:
            self.shown.append(item)
            self.table.add_row(*item.cells)               # type: ignore[attr-defined]
        if done:
            self.loaded, self.error = True, error
            self._show_empty()
        self._update_subtitle()
        if first and self.shown:
            self.show_item(self.shown[0])

    def _update_subtitle(self) -> None:
        names = ", ".join(Path(p).name for p in self.paths)
        count = f"{len(self.shown)} of {self.read}" if self.filter else str(self.read)
        self.sub_title = f"{names}  {count} items{'' if self.loaded else '  loading…'}"

    def _show_empty(self) -> None:
        empty = self.query_one("#empty", Static)
        if self.shown:
            empty.remove_class("visible")
            return
        if self.error:
            text = Text(self.error, style="bold red")
        elif self.read:
            text = Text(f"No item matches the filter {self.filter_text!r} ({self.read} "
                        f"read). / changes it; an empty filter shows everything.", "yellow")
        else:
            text = Text("No Kafka files found.", style="bold red")
        empty.update(text)
        empty.add_class("visible")

    # -- the list and the detail ---------------------------------------------------------

    def current(self) -> LogItem | None:
        row = self.table.cursor_row
        return self.shown[row] if 0 <= row < len(self.shown) else None

    @on(DataTable.RowHighlighted, "#items")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        item = self.current()
        if item is not None:
            self.show_item(item)

    def show_item(self, item: LogItem) -> None:
        detail = self.query_one(Detail)
        title = Text(f"{item.path}", style="bold")
        if item.topic is not None:
            title.append(f"  {item.topic}-{item.partition}")
        for f in item.findings:                 # the checks across batches and files
            title.append(f"  ✗ {f.text()}", "bold red" if f.severity == "error" else "yellow")
        tree, data, start = self.tree_of(item)
        if tree is None:
            detail.show(str(title), [])
            return
        label = Text(f"{item.kind} at position {start} ({len(data)} bytes)", "bold")
        detail.show(str(title), [Item(label, data, tree, start)])

    def tree_of(self, item: LogItem) -> tuple[Node | None, bytes, int]:
        """(tree, bytes, their position in the file): a batch decoded again from its
        file (the last few kept), another file's tree as read."""
        start = getattr(item, "start", 0)
        found = self._trees.get(id(item))
        if found is None:
            try:
                if item.tree is not None:         # a file other than a segment, or damage
                    return item.tree, read_span(item.path, start, getattr(
                        item, "length", _WHOLE_FILE)), start
                if not hasattr(item, "start"):
                    return None, b"", 0
                found = batch_tree(item, self.options)
            except OSError as e:
                self.notify(f"cannot read {item.path}: {e.strerror}", severity="error")
                return None, b"", 0
            self._trees[id(item)] = found
            while len(self._trees) > _KEEP_TREES:
                self._trees.popitem(last=False)
        self._trees.move_to_end(id(item))
        return found[0], found[1], start

    def apply_filter(self, text: str) -> FilterError | None:
        try:
            parsed = parse_filter(text) if text.strip() else None
        except FilterError as e:
            return e
        self.filter, self.filter_text = parsed, text
        self._show_active_filter()
        self._start()                 # read again: a batch's tree is not kept
        self._update_subtitle()
        return None

    def _show_active_filter(self) -> None:
        active = self.query_one("#active-filter", Static)
        if self.filter is not None:
            active.update(Text.assemble(("filter ", "dim"), (self.filter_text, "bold"),
                                        ("  / edits it", "dim")))
        active.set_class(self.filter is not None, "visible")

    # -- actions ------------------------------------------------------------------------

    def action_next_problem(self, step: int = 1) -> None:
        """The next item with a finding (wrapping), on its offending field."""
        n = len(self.shown)
        for k in range(1, n + 1):
            row = (self.table.cursor_row + step * k) % n
            item = self.shown[row]
            if item.problem:                              # type: ignore[attr-defined]
                self.table.move_cursor(row=row)
                self.show_item(item)
                tree = self.tree_of(item)[0]
                node = anomaly.offending(tree) if tree is not None else None
                if node is not None:
                    detail = self.query_one(Detail)
                    detail.select(0, node)
                    detail.field_tree.reveal(node, tree)
                return
        self.notify("no finding among the items shown", timeout=4)

    def action_toggle_pane(self) -> None:
        self.query_one(Detail).toggle_pane()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(LOG_HELP))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("visible")
        self.screen.set_focus(box)

    def action_close_bars(self) -> None:
        self.query_one("#filter").remove_class("visible")
        self.query_one("#filter-error").remove_class("visible")
        self.table.focus()

    @on(Input.Submitted, "#filter")
    def _submit(self, event: Input.Submitted) -> None:
        error = self.apply_filter(event.value)
        if error is not None:
            box = self.query_one("#filter-error", Static)
            box.update(Text(str(error).splitlines()[0], "bold"))
            box.add_class("visible")
            return
        self.action_close_bars()
