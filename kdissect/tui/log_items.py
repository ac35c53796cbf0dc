"""`kdissect log`'s items as the browser lists them: what the list keeps of a file or a
record batch (``describe``, ``lighten``: its cells, findings and place in its file, not
its tree), a batch decoded again from its file when it is viewed, filtered or searched,
the reader a forked child runs (``read_items``), and the browser's adapter (``LogAdapter``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from ..filters import Filter
from ..protocol import Options, ondisk
from ..protocol.batch import CRC_FROM, HEAD_SIZE, Batch
from ..protocol.context import Decoding
from ..protocol.internal import decode_records, family_of
from ..protocol.node import Node
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
from ..stream.content import buffer_nodes
from ..stream.fields import LOG_NAMES
from .detail import Item
from .loader import Done, Note, Progress

_FLUSH = 0.1  # seconds between reports of how far reading is
_WHOLE_FILE = 64 << 20  # files other than segments are shown whole up to this size
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
# the fields the filter bar offers (docs/guide/log.md)
LOG_FIELDS = list(LOG_NAMES)


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
    # the transaction's word first: a narrow terminal cuts the kind column's end
    word = end_marker(tree) if control and tree is not None else None  # COMMIT or ABORT
    if item.aborted:  # a batch of an aborted transaction
        word = "ABORTED"
    kind = "damage" if magic is None else f"{word or 'batch'} v{magic}"
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
    ctx = Decoding(options)  # one budget for the batch, as a message has
    read_records(data, holder, 0, len(data), ctx)
    tree = holder.children[0]
    family = "metadata" if file_kind(item.path) == "kraft_snapshot" else family_of(item.topic)
    head = Batch(data, 0, len(data))
    if family is not None or (len(data) > CRC_FROM + 1 and head.magic == 2 and head.control):
        decode_records(tree, family, ctx)
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
    and then, a ``Note`` if reading stopped early, then ``Done``: what the log TUI's
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
        emit(Note(str(e), "error"))
    except Exception as e:  # a file that cannot be read: say so, keep rows
        emit(Note(f"reading stopped: {e}", "error"))
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


class LogAdapter:
    """The browser's questions about log items (browser.Adapter)."""

    noun = "item"
    fields: list[str] | None = LOG_FIELDS
    no_problem = "no finding among the items shown"

    def __init__(self, options: Options) -> None:
        self.options = options

    def sort_key(self, item: LogItem, column: str) -> tuple:
        return _sort_value(item, column)

    def matches(self, flt: Filter, item: LogItem) -> bool:
        tested = getattr(item, "tested", None)  # by the reader, against the start filter
        if tested is not None and tested[0] is flt:
            return tested[1]
        return passes(flt, item, self.options)

    def slow(self, flt: Filter) -> bool:
        return not flt.fields <= _KEPT

    def passes(self, flt: Filter, item: LogItem) -> bool:
        return passes(flt, item, self.options)

    def holds(self, item: LogItem, needle: bytes) -> bool:
        return holds(item, needle, self.options)

    def locate(
        self, item: LogItem, needle: bytes, shown: list[Item]
    ) -> tuple[int, Node, int] | None:
        if not shown:
            return None
        root, data = shown[0].root, shown[0].data
        at = data.find(needle)
        if at >= 0:
            return 0, root, at
        for node in buffer_nodes(root):
            at = (node.buffer or b"").find(needle)
            if at >= 0:
                return 0, node, at
        return None

    def is_problem(self, item: LogItem) -> bool:
        return item.problem  # type: ignore[attr-defined]

    def problem_field(self, item: LogItem, root: Node) -> Node | None:
        """A check across batches (a sequence gap, an index entry): its field."""
        return next(
            (
                c
                for f in item.findings
                if (name := CHECK_FIELDS.get(f.code)) and (c := root.child(name)) is not None
            ),
            None,
        )
