"""Kafka's log directories as a source: segment files, partition directories and whole
log dirs (``log.dirs``, with ``meta.properties``) turned into items (files and record
batches) with the checks broker recovery and ``kafka-dump-log`` make, as findings.

Segments are memory-mapped and read one batch at a time: a batch's tree is built from the
map and dropped by the consumer, so memory is bounded by one batch (plus per-producer
state), not by the file. Index files are checked in the same pass, merged by position
and offset. Decoding itself is ``protocol`` (records.py, ondisk.py, internal.py).
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import re
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, NamedTuple
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import cast

from ..bounded import InputError, read_file
from ..capture.native import map_faulted, map_guard, map_unguard
from ..stream.filter_values import of_record
from ..protocol import ondisk
from ..protocol.context import Decoding, Options
from ..protocol.codecs import CODECS
from ..protocol.batch import AT, FRAME, HEAD_SIZE, LOG_OVERHEAD, MAGIC_AT, Batch
from ..protocol.findings import Finding
from ..protocol.internal import decode_records, family_of
from ..protocol.node import Node
from ..protocol.records import message_set_span, read_records

# tiered storage (Kafka's LocalTieredStorage) adds the topic id to a partition's directory
# and the segment's id to its files: topic-0-<base64 Uuid>/<offset>-<base64 Uuid>.log
_UUID = r"-[A-Za-z0-9_-]{22}"
_PARTITION_DIR = re.compile(
    r"^(?P<topic>.+)-(?P<partition>\d+)(?:\.[0-9a-f]+-(?:delete|future|stray)"
    r"|" + _UUID + r")?$"
)
_OFFSET_NAME = re.compile(
    r"^(?P<base>\d{20})(?:" + _UUID + r")?\.(?P<ext>log|index|timeindex|txnindex"
    r"|snapshot|checkpoint|leader_epoch_checkpoint)"
    r"(?P<suffix>\.deleted|\.cleaned|\.swap)?$"
)
_REMOTE_NAME = re.compile(r"^\d{20}" + _UUID + r"\.")
_KAFKA07 = re.compile(r"^(?P<base>\d+)\.kafka$")
_OFFSET_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
CHECKPOINT_COLUMNS = {
    "leader-epoch-checkpoint": ("epoch", "start_offset"),
    **{n: ("topic", "partition", "offset") for n in _OFFSET_CHECKPOINTS},
}


class Lines(NamedTuple):
    """The bulk path for JSON lines (``logunits.walk(lines=...)``): a clean batch's records
    are written as text by ``write`` (render/log_lines.py's ``record_lines_for()``)."""

    write: Callable[..., str | None]


Conv = Callable[[bytes], Any] | Lines | None


class LogError(Exception):
    """A path that is no Kafka log file or directory (the CLI says so and exits 1)."""


@dataclass
class LogItem:
    """One file (``kind`` is its file kind) or one batch (``kind == "batch"``) of a
    segment. ``tree`` is the located tree (file positions); ``findings`` are the checks
    across batches and files (the tree's own problems are in ``tree.findings()``)."""

    kind: str
    path: Path
    topic: str | None
    partition: int | None
    tree: Node | None = None
    findings: list[Finding] = field(default_factory=list)
    # the bulk path's clean v2 batch, instead of a tree: (header fields by name, each
    # record's position, the records as JSON values) -- see walk(values=True)
    values: tuple[dict, list[int], list[dict]] | None = None
    # the JSON lines path's clean v2 batch (walk(lines=True)): (header fields by name,
    # its records' lines as render/log_lines.py writes them)
    lines: tuple[dict, str] | None = None
    url: str | None = None  # where the file really is, when read from a copy
    # a transactional batch of a transaction its partition's .txnindex lists as aborted
    aborted: bool = False
    # the partition's log start offset when the batch starts below it (its records below
    # it are deleted -- DeleteRecords, retention -- but still on disk), else None
    log_start: int | None = None

    @property
    def deleted(self) -> bool | None:
        """True: the whole batch is below the log start offset; False: part of it;
        None: none of it (or no evidence of the log start)."""
        if self.log_start is None:
            return None
        last = self._last_offset()
        return last is not None and last < self.log_start

    def _last_offset(self) -> int | None:
        h = (
            self.values[0]
            if self.values is not None
            else self.lines[0]
            if self.lines is not None
            else None
        )
        if h is not None:
            return h["base_offset"] + h["last_offset_delta"]
        return _last_offset(self.tree) if self.tree is not None else None

    @property
    def file(self) -> str:
        """The file's name in output: its URL, or its path."""
        return self.url or str(self.path)

    def all_findings(self) -> list[Finding]:
        own = [
            Finding(code, reason, path)
            for path, code, reason in (self.tree.findings() if self.tree is not None else [])
        ]
        return own + self.findings

    def values_of(self, name: str) -> list:
        """Values for display filters (kdissect.filters)."""
        t = self.tree
        if name in ("finding", "severity", "anomaly"):
            fs = self.all_findings()
            if name == "finding":
                return [f.code for f in fs]
            if name == "severity":
                return [f.kind.rank for f in fs]
            return [True] if fs else []
        if name == "topic":
            return [self.topic] if self.topic else []
        if name == "partition":
            return [self.partition] if self.partition is not None else []
        if name == "aborted":
            return [True] if self.aborted else []
        if name == "deleted":
            return [True] if self.log_start is not None else []
        if name in ATTRIBUTE_FIELDS:
            return attribute_values(name, self.attributes())
        head = self.values[0] if t is None and self.values is not None else None
        if t is None and head is None:
            return []
        if name.startswith("record."):
            part = name[len("record.") :]
            if t is None:  # the bulk path's values: records as JSON shows them
                recs = self.values[2]  # type: ignore[index]
            else:
                from ..protocol.json_view import records_of

                recs = records_of(t)
                from ..stream.filter_values import needs_records, of_records

                if needs_records(name):
                    return of_records(recs, name)
            if part in ("key", "value", "header") or part.startswith("header."):
                return [v for r in recs for v in of_record(r, name)]  # each record's
            return []
        if head is not None:  # a clean v2 batch: its header's fields
            value = head.get({"records": "record_count", "offset": "base_offset"}.get(name, name))
            return [value] if value is not None and name in _HEAD_FIELDS else []
        assert t is not None
        if t.ktype.startswith("message_v") and name in _SPAN_FIELDS:
            value = message_set_span(t)[_SPAN_FIELDS[name]]  # (kafka-dump-log's reading)
            return [value] if value is not None else []
        if name == "records":
            return [sum(1 for n in t.walk() if n.ktype == "record")]
        if name == "offset":
            c = t.child("base_offset")
            return [c.value] if c is not None else []
        c = t.child(name)
        return [c.value] if c is not None and c.value is not None else []

    def attributes(self) -> int | None:
        """A v2 batch's attributes (codec, transactional, control), from what is kept."""
        kept = getattr(self, "attrs", None)  # the TUI's list keeps them
        if kept is not None:
            return kept
        h = (
            self.values[0]
            if self.values is not None
            else self.lines[0]
            if self.lines is not None
            else None
        )
        if h is not None:
            return h["attributes"]
        if self.tree is None or self.tree.ktype != "record_batch":
            return None
        value = _value(self.tree, "attributes")
        return value if isinstance(value, int) else None


# the filter fields read from a v2 batch's attributes
ATTRIBUTE_FIELDS = frozenset({"control", "transactional", "codec"})


def attribute_values(name: str, attrs: int | None) -> list:
    """The values of ``control``, ``transactional`` or ``codec`` for these attributes."""
    if attrs is None:
        return []
    if name == "codec":
        codec = CODECS.get(attrs & 7)
        return [codec] if codec is not None else []
    bit = 0x20 if name == "control" else 0x10
    return [True] if attrs & bit else []


# the filter fields a clean v2 batch read as values answers as its tree does (the tree's
# other names -- its records, its compressed buffer -- need the tree)
_HEAD_FIELDS = frozenset(ondisk.BATCH_FIELDS) | {"records", "offset"}
# what a v0/v1 message answers for them: message_set_span's (first, last, records)
_SPAN_FIELDS = {"offset": 0, "base_offset": 0, "records": 2}
VALUES_FIELDS = (
    _HEAD_FIELDS
    | ATTRIBUTE_FIELDS
    | {
        "finding",
        "severity",
        "anomaly",
        "topic",
        "partition",
        "aborted",
        "deleted",
        "record.key",
        "record.value",
        "record.header",
    }
)


def values_answer(fields: frozenset[str] | set[str]) -> bool:
    """Whether a filter on ``fields`` gives the same answer for a clean v2 batch read as
    values (``walk(values=True)``) as for its located tree."""
    return all(f in VALUES_FIELDS or f.startswith("record.header.") for f in fields)


@dataclass
class _Partition:
    topic: str | None
    partition: int | None
    hw: int | None = None  # high watermark, if known
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    snapshots: dict[int, dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    # whether its log dir holds .kafka_cleanshutdown (None: not read as a log dir)
    clean: bool | None = None
    conv: Conv = None  # set: the bulk path (walk(values=True)) with this converter
    # aborted transactions its .txnindex files list: producer id -> [(first, last offset)]
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    # the log start offset: log-start-offset-checkpoint's, or leader-epoch-checkpoint's
    # first start offset (Kafka moves it there when the log start moves); "checkpoint" or
    # "epochs" says which
    log_start: int | None = None
    log_start_from: str = ""
    cleaned: int | None = None  # cleaner-offset-checkpoint's: the log is cleaned below it


def partition_of(path: Path) -> tuple[str | None, int | None]:
    m = _PARTITION_DIR.match(path.name)
    return (m["topic"], int(m["partition"])) if m else (None, None)


# files decoded whole (indexes, snapshots, checkpoints, properties, quorum-state): Kafka's
# largest default is a 10 MiB preallocated index (segment.index.bytes)
MAX_WHOLE = 64 << 20


def _read(path: Path) -> bytes:
    return read_file(path, MAX_WHOLE, "Kafka file")


def _map(path: Path):
    """A read-only map of the file, or b"" for an empty one (mmap refuses size 0)."""
    size = path.stat().st_size
    if size == 0:
        return b""
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # emptied since its size was read
            return b""


def _mapped(
    path: Path,
    topic: str | None,
    partition: int | None,
    read: Callable[[Any], Generator[LogItem, None, None]],
) -> Iterator[LogItem]:
    """``read``'s items of the file's map, guarded: a running broker may truncate a segment
    while it is read (a follower truncating to its leader), and touching a page past the
    new end would raise SIGBUS and end the process. native/src/mapped.rs's guard reads
    such a page as zeros and notes it. Before each item is given, the file's size is
    checked too (a cut inside the map's last page reads as zeros without a fault): once
    the file is shorter than its map, that item and the rest are not given, but one
    saying the file shrank. (Without the compiled extension, with ``KDISSECT_PURE``, or
    with all the guard's slots taken, the map is not guarded.)"""
    try:
        mm = _map(path)
    except OSError as gone:
        yield cannot_read(path, topic, partition, gone)
        return
    mapped = isinstance(mm, mmap.mmap)
    # (guarded with KDISSECT_PURE too: a segment cannot be read whole instead of mapped)
    guard, faulted = (map_guard(True), map_faulted(True)) if mapped else (None, None)
    slot = guard(mm) if guard is not None else None
    vanished: Callable[[int], bool] = faulted or (lambda _slot: False)
    items = read(mm)
    try:
        for item in items:
            # mm.size(): the size of the file mapped, through the map's own descriptor (a
            # segment the log cleaner replaced under the same name is another file); not
            # asked of a batch the bulk paths read clean (its CRC held: its bytes are the
            # file's), 1.6 µs a batch
            clean = item.values is not None or item.lines is not None
            if mapped and (
                (slot is not None and vanished(slot)) or (not clean and mm.size() < len(mm))
            ):
                yield _shrank(path, topic, partition, len(mm), mm.size())
                return
            yield item
    finally:
        items.close()
        if slot is not None:
            map_unguard(slot)
        if mapped:
            mm.close()


def _shrank(path: Path, topic: str | None, partition: int | None, mapped: int, now: int) -> LogItem:
    why = (
        f"the file shrank while it was read (a running broker truncated it: {mapped} bytes "
        f"when it was opened, {now} now); what followed the items above is not shown"
    )
    tree = Node(path.name, "file", 0, 0, problem=why, code="log_shrank_while_read")
    return LogItem(file_kind(path) or "file", path, topic, partition, tree)


def _unreadable(
    path: Path, topic: str | None, partition: int | None, want_dir: bool = False
) -> LogItem | None:
    """An item saying why ``path`` cannot be read (then skipped), or None if it can:
    a regular file that opens, or (``want_dir``) a directory that lists."""
    why = None
    try:
        if want_dir:
            os.listdir(path)
        elif not path.is_file():
            if not os.path.lexists(path):  # listed, then gone
                return cannot_read(path, topic, partition, FileNotFoundError(errno.ENOENT, ""))
            why = "a directory, not a file" if path.is_dir() else NOT_REGULAR
        else:
            os.close(os.open(path, os.O_RDONLY))
    except OSError as e:
        return cannot_read(path, topic, partition, e)
    if why is None:
        return None
    if why == NOT_REGULAR:
        return not_regular(path, topic, partition)
    return _skipped(path, topic, partition, f"{why}; skipped ({_RIGHTS})")


_RIGHTS = "run kdissect as a user who can read the whole log dir"
NOT_REGULAR = "not a regular file (a FIFO, socket, device or dangling link)"


def not_regular(path: Path, topic: str | None, partition: int | None) -> LogItem:
    """The item of a listed name that is no regular file (never opened: a FIFO blocks)."""
    return _skipped(path, topic, partition, f"{NOT_REGULAR}; skipped (only regular files are read)")


def _skipped(path: Path, topic: str | None, partition: int | None, why: str) -> LogItem:
    tree = Node(path.name, "file", 0, 0, problem=why, code="unreadable_file")
    return LogItem(file_kind(path) or "file", path, topic, partition, tree)


def cannot_read(path: Path, topic: str | None, partition: int | None, e: OSError) -> LogItem:
    """The item of a file or directory that would not open or list. One that is gone was
    there when its directory was listed: in a live log dir the broker deletes and renames
    segments and partition directories while they are being read."""
    return _skipped(path, topic, partition, _cannot_read_text(e))


def _cannot_read_text(e: OSError) -> str:
    if isinstance(e, FileNotFoundError):  # (s3fs's carry no errno)
        why = "No such file or directory"
        hint = "a live log dir: the broker may have deleted or renamed it after it was listed"
    else:
        why, hint = e.strerror or str(e), _RIGHTS
    return f"cannot read it: {why}; skipped ({hint})"


def file_kind(path: Path) -> str | None:
    name = path.name
    m = _OFFSET_NAME.match(name)
    if m:
        return {
            "log": "segment",
            "index": "offset_index",
            "timeindex": "time_index",
            "txnindex": "txn_index",
            "snapshot": "producer_snapshot",
            "checkpoint": "kraft_snapshot",
            "leader_epoch_checkpoint": "checkpoint",
        }[m["ext"]]
    if _KAFKA07.match(name):
        return "kafka07"
    if name in CHECKPOINT_COLUMNS:
        return "checkpoint"
    if name in ("partition.metadata", "meta.properties"):
        return "properties"
    if name == "quorum-state":
        return "quorum_state"
    if name.endswith(".checkpoint"):  # bootstrap.checkpoint: record batches too
        return "kraft_snapshot"
    return None


def decode_file(path: Path, kind: str, options: Options) -> Node:
    """The located tree of one non-segment file (read whole: these files are small)."""
    try:
        data = _read(path)
    except InputError as e:
        if os.path.lexists(path):  # (its message names the file: the item does already)
            why = f"{str(e).removeprefix(f'{path}: ')}; skipped"
        else:  # listed, then gone
            why = _cannot_read_text(FileNotFoundError(errno.ENOENT, ""))
        return Node(path.name, "file", 0, 0, problem=why, code="unreadable_file")
    base = _base_offset(path)
    if kind == "offset_index":
        return ondisk.offset_index(data, base)
    if kind == "time_index":
        return ondisk.time_index(data, base)
    if kind == "txn_index":
        return ondisk.txn_index(data)
    if kind == "producer_snapshot":
        return ondisk.producer_snapshot(data, options)
    if kind == "checkpoint":
        return ondisk.checkpoint(
            data,
            path.name,
            CHECKPOINT_COLUMNS.get(path.name, CHECKPOINT_COLUMNS["leader-epoch-checkpoint"]),
        )
    if kind == "properties":
        return ondisk.properties(data, path.name)
    if kind == "quorum_state":
        return ondisk.quorum_state(data)
    raise LogError(f"{path}: not a file kind kdissect decodes whole")


def _base_offset(path: Path) -> int:
    digits = path.name.split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else 0


# -- walking ---------------------------------------------------------------------------


def conv_for(values: bool = False, lines: Callable[..., str | None] | None = None) -> Conv:
    """How clean batches' records come (``logunits.walk``'s ``values``/``lines``)."""
    if lines is not None:
        return Lines(lines)
    if values:
        from ..protocol.json_view import json_bytes

        return json_bytes
    return None


def not_file_or_dir(text: str) -> LogError:
    return LogError(
        f"{text}: not a regular file or directory (a FIFO, socket or "
        f"device); give a segment, a partition directory or a log dir"
    )


def path_items(text: str, options: Options, conv: Conv = None) -> Iterator[LogItem]:
    """Every item of one local path: a segment or other file, a partition directory, or a
    log dir's files then its partitions (URLs: logunits.py)."""
    path = Path(text)
    if not path.exists():
        raise LogError(f"{text}: no such file or directory")
    if not path.is_file() and not path.is_dir():
        raise not_file_or_dir(text)
    try:
        if path.is_dir():
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_RDONLY))
    except OSError as e:
        raise LogError(
            f"{text}: cannot read it: {e.strerror or e} (run kdissect as a user who can read it)"
        ) from None
    if path.is_file():
        yield from _single_file(path, options, conv)
    elif _is_log_dir(path):
        yield from _log_dir(path, options, conv)
    else:
        # the directory holding log dirs (a broker's data directory, copies of several
        # brokers' ones, a project holding its kraft-combined-logs): the log dirs below
        # it, when it holds no Kafka file itself
        below = _log_dirs_below(path)
        if below and not any(p.is_file() and file_kind(p) for p in path.iterdir()):
            for log_dir in below:
                yield from _log_dir(log_dir, options, conv)
        else:
            yield from _partition_dir(path, options, None, conv)


LOG_DIRS_DEPTH = 3  # levels below a directory searched for log dirs
LOG_DIRS_LOOKED_AT = 10_000  # entries at most (a home directory given by mistake)


def _log_dirs_below(path: Path) -> list[Path]:
    """The log dirs below ``path``, up to LOG_DIRS_DEPTH levels down (none inside one),
    in path order; symbolic links followed once each (a broker's log dir linked from
    its disk), never in a loop. Below the first level a log dir must show it: its
    meta.properties, or a partition directory holding a Kafka file (a ``name-N``
    directory alone is common: /usr/lib/llvm-14). (Only one level was searched: a copy
    of a project's ``kraft-combined-logs`` one level further down was skipped, unsaid.)
    LogError when there are more than LOG_DIRS_LOOKED_AT entries to look at."""
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    level, looked = [path], 0
    for depth in range(LOG_DIRS_DEPTH):
        deeper: list[Path] = []
        for parent in level:
            try:
                children = sorted(parent.iterdir())
            except OSError:
                continue
            looked += len(children)
            if looked > LOG_DIRS_LOOKED_AT:
                raise LogError(
                    f"{path}: more than {LOG_DIRS_LOOKED_AT} entries in the directories "
                    f"below it, and no log dir found in them yet: give a log dir, a "
                    f"partition directory or a segment"
                )
            for p in children:
                try:
                    st = p.stat()  # (follows a link)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                if _is_log_dir(p) if depth == 0 else _shows_log_dir(p):
                    found.append(p)
                elif not partition_of(p)[0]:
                    deeper.append(p)
        level = deeper
    return sorted(found)


def _shows_log_dir(path: Path) -> bool:
    """A log dir by firmer evidence than ``_is_log_dir``'s: its meta.properties, or a
    partition directory holding a file of Kafka's."""
    if (path / "meta.properties").is_file():
        return True
    try:
        return any(
            partition_of(p)[0] and p.is_dir() and any(file_kind(f) for f in p.iterdir())
            for p in path.iterdir()
        )
    except OSError:
        return False


def _is_log_dir(path: Path) -> bool:
    """A broker's log dir: partition directories in it, or its meta.properties."""
    try:
        return (
            any(partition_of(p)[0] and p.is_dir() for p in path.iterdir())
            or (path / "meta.properties").exists()
        )
    except OSError:  # (unreadable: not this; said where it is read)
        return False


def _single_file(path: Path, options: Options, conv: Conv = None) -> Iterator[LogItem]:
    kind = file_kind(path)
    topic, partition = partition_of(path.parent)
    if kind is None:
        raise LogError(
            f"{path}: not a Kafka log file (expected a .log segment, an index, a "
            f"snapshot, a checkpoint, partition.metadata, meta.properties, "
            f"quorum-state or a 0.7 .kafka file)"
        )
    state = _Partition(topic, partition, conv=conv)
    if kind == "segment":
        _read_beside(path, options, state)
    if kind in ("segment", "kraft_snapshot"):
        yield from _segment(path, options, state, kind)
    elif kind == "kafka07":
        yield from _kafka07(path, topic, partition)
    else:
        tree = decode_file(path, kind, options)
        if kind in ("offset_index", "time_index"):
            _check_alone(path, {kind: tree})
        yield LogItem(kind, path, topic, partition, tree)


CLEAN_SHUTDOWN = ".kafka_cleanshutdown"  # a broker's log dir after a clean stop


def _log_dir(path: Path, options: Options, conv: Conv = None) -> Iterator[LogItem]:
    clean = (path / CLEAN_SHUTDOWN).exists() if (path / "meta.properties").exists() else None
    for item in log_dir_files(path, options, conv):
        if clean is False and item.path.name == "meta.properties":
            item.findings.append(
                Finding(
                    "unclean_shutdown",
                    f"no {CLEAN_SHUTDOWN}: the broker is running, or did not "
                    "stop cleanly (killed, crashed); its indexes may be preallocated, and at its "
                    "next start it recovers each partition's segments past its recovery point "
                    "(reading every batch, rebuilding their indexes)",
                )
            )
        yield item
    marks = dir_checkpoints(path)
    for p in sorted(path.iterdir()):
        # (one gone since the listing is said: a running broker renames a deleted topic's)
        if partition_of(p)[0] and (p.is_dir() or not os.path.lexists(p)):
            bad = _unreadable(p, *partition_of(p), want_dir=True)
            if bad is not None:
                yield bad
                continue
            yield from _partition_dir(p, options, marks, conv, clean)


def is_partition_name(name: str) -> bool:
    return _PARTITION_DIR.match(name) is not None


def is_partition_dir(path: Path) -> bool:
    return path.is_dir() and is_partition_name(path.name)


def single_file(path: Path, options: Options, conv: Conv = None) -> Iterator[LogItem]:
    """The items of one file (its partition named by its directory)."""
    return _single_file(path, options, conv)


def log_dir_files(path: Path, options: Options, conv: Conv = None) -> Iterator[LogItem]:
    """The files of a log dir itself (meta.properties, the offset checkpoints...)."""
    for p in sorted(path.iterdir()):
        kind = file_kind(p) if not partition_of(p)[0] else None
        if kind is not None and (bad := _unreadable(p, None, None)) is not None:
            yield bad
        elif kind in ("segment", "kraft_snapshot", "kafka07"):
            yield from _single_file(p, options, conv)
        elif kind is not None:
            yield LogItem(kind, p, None, None, decode_file(p, kind, options))


class DirCheckpoints(NamedTuple):
    """What a log dir's offset checkpoints say of its partitions, (topic, partition) ->
    offset: high watermarks (replication-offset-checkpoint), log start offsets, and how
    far the log cleaner has cleaned each compacted one."""

    hws: dict[tuple[str, int], int]
    starts: dict[tuple[str, int], int]
    cleaned: dict[tuple[str, int], int]


# DirCheckpoints' files, in its order
DIR_CHECKPOINTS = (
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)


def dir_checkpoints(log_dir: Path) -> DirCheckpoints:
    return DirCheckpoints(*(checkpoint_offsets(log_dir, name) for name in DIR_CHECKPOINTS))


def checkpoint_offsets(log_dir: Path, name: str) -> dict[tuple[str, int], int]:
    """Each partition's offset in the log dir's checkpoint file ``name`` (empty without
    one)."""
    p = log_dir / name
    hws: dict[tuple[str, int], int] = {}
    if not p.is_file():
        return hws
    tree = decode_file(p, "checkpoint", Options())
    for e in tree.find("offset"):
        entry = (tree.path_to(e) or [e, e])[-2]  # found in it: a path
        t, n = entry.child("topic"), entry.child("partition")
        if t is not None and n is not None and isinstance(e.value, int):
            hws[(t.value, n.value)] = e.value
    return hws


def partition_items(
    path: Path,
    options: Options,
    marks: DirCheckpoints | None,
    conv: Conv = None,
    not_read: Iterable[Path] = (),
) -> Iterator[LogItem]:
    """One partition directory's items (``marks``: its log dir's checkpoints, if known;
    ``not_read``: files of it listed elsewhere and not readable, said elsewhere: a URL's
    files it could not copy)."""
    return _partition_dir(path, options, marks, conv, not_read=not_read)


def _partition_dir(
    path: Path,
    options: Options,
    marks: DirCheckpoints | None,
    conv: Conv = None,
    clean: bool | None = None,
    not_read: Iterable[Path] = (),
) -> Iterator[LogItem]:
    topic, partition = partition_of(path)
    state = _Partition(topic, partition, conv=conv, clean=clean)
    if marks is not None and topic is not None and partition is not None:
        key = (topic, partition)
        state.hw, state.cleaned = marks.hws.get(key), marks.cleaned.get(key)
        if key in marks.starts:
            state.log_start, state.log_start_from = marks.starts[key], "checkpoint"
    try:
        files = sorted(p for p in path.iterdir() if p.is_file() or file_kind(p) is not None)
        names = {p.name for p in files}
    except OSError as e:  # e.g. deleted (renamed to -delete) after its log dir was listed
        yield cannot_read(path, topic, partition, e)
        return
    by_base: dict[int, dict[str, Path]] = {}
    # segments listed but not readable: gaps in what is read
    unread = {b: p for p in not_read if (b := _gap_at(p)) is not None}
    for p in files:
        kind = file_kind(p)
        if kind is not None and (bad := _unreadable(p, topic, partition)) is not None:
            yield bad
            if (gap := _gap_at(p)) is not None:
                unread[gap] = p
            continue
        if kind is None or p.suffix in _BEING_REPLACED:
            continue  # being deleted or swapped in: not part of the partition's log
        if kind in ("offset_index", "time_index", "txn_index", "segment"):
            by_base.setdefault(_base_offset(p), {})[kind] = p
            continue
        if kind == "kafka07":
            yield from _kafka07(p, topic, partition)
            continue
        if kind == "kraft_snapshot":
            yield from _segment(p, options, _Partition(topic, partition), kind)
            continue
        tree = decode_file(p, kind, options)
        if p.name.endswith(("leader-epoch-checkpoint", ".leader_epoch_checkpoint")):
            _take_epochs(state, tree)
        # a tiered copy's snapshot is named by its segment's first offset but holds the
        # state at the segment's end: no offset to compare it at; nor has one whose CRC
        # fails (Kafka's recovery deletes it and rebuilds the state from the log)
        crc = tree.child("crc") if kind == "producer_snapshot" else None
        if (
            kind == "producer_snapshot"
            and not _REMOTE_NAME.match(p.name)
            and not (crc is not None and crc.code == "crc_mismatch")
        ):
            entries = tree.child("producer_entries")
            state.snapshots[_base_offset(p)] = {
                _value(e, "producer_id"): (
                    _value(e, "epoch"),
                    _value(e, "last_sequence"),
                    _value(e, "last_offset"),
                )
                for e in (entries.children if entries is not None else [])
                if not e.name.startswith("_") and e.child("last_offset") is not None
            }
        yield LogItem(kind, p, topic, partition, tree)
    _epochs_log_start(state, path)
    # every aborted transaction first: its batches come before the .txnindex that lists it
    # (that of the segment holding its ABORT marker)
    txns = {
        base: decode_file(group["txn_index"], "txn_index", options)
        for base, group in by_base.items()
        if "txn_index" in group
    }
    for txn in txns.values():
        _take_aborted(state, txn)
    prev = _Running()
    for base in sorted(by_base.keys() | unread.keys()):
        group = by_base.get(base, {})
        if base in unread:
            yield from _lost_sight(state, prev, unread[base], base)
        index_files: dict[str, Path] = {
            k: group[k] for k in ("offset_index", "time_index") if k in group
        }
        inodes = {k: _inode(p) for k, p in index_files.items()}  # (before they are read)
        indexes: dict[str, Node] = {
            kind: decode_file(p, kind, options) for kind, p in index_files.items()
        }
        if base in txns:
            indexes["txn_index"] = txns[base]
        if "segment" in group:
            indexes_replaced = partial(_replaced, index_files, inodes)
            for item in _segment(
                group["segment"], options, state, "segment", indexes, prev, indexes_replaced
            ):
                yield item
                if item.tree is not None and item.tree.code in _NOT_READ_WHOLE:
                    # none of it read (gone), or up to where it shrank
                    gone = item.tree.code == "unreadable_file"
                    yield from _lost_sight(state, prev, item.path, base if gone else None)
        elif index_files:
            alone = next(iter(index_files.values()))
            _check_alone(alone, indexes)
            # indexes without their segment: one a running broker deleted (the cleaner,
            # retention) between their listing and its own, or lost: a gap in the log
            yield from _lost_sight(state, prev, alone, base)
        # after their segment: the checks against it have marked their entries
        for kind, tree in indexes.items():
            item = LogItem(kind, group[kind], topic, partition, tree)
            # said only of a segment without a trace: one listed and not readable has
            # its own item, and Kafka renames a segment it deletes or swaps file by
            # file, its log first (to .deleted, or from .swap: retention's normal path)
            if (
                "segment" not in group
                and base not in unread
                and tree.code != "unreadable_file"
                and not any(n.startswith(f"{base:020d}.log") for n in names)
            ):
                item.findings.append(
                    Finding(
                        "index_without_segment",
                        f"no {base:020d}.log beside it: a running broker was deleting or "
                        f"swapping in that segment when the directory was listed, or it "
                        f"is lost (Kafka deletes such an index when it starts)",
                    )
                )
            yield item


# a file being deleted (retention), or swapped in by the log cleaner: not part of the log
_BEING_REPLACED = (".deleted", ".cleaned", ".swap")
# a segment's items that say it was not read (whole): deleted or truncated by a running
# broker between the listing and the read
_NOT_READ_WHOLE = ("unreadable_file", "log_shrank_while_read")


def _gap_at(path: Path) -> int | None:
    """The base offset of a segment of the partition's log that could not be read (not
    one being deleted or swapped in)."""
    if file_kind(path) != "segment" or path.suffix in _BEING_REPLACED:
        return None
    return _base_offset(path)


def _lost_sight(
    state: _Partition, run: _Running, path: Path, read_below: int | None
) -> Iterator[LogItem]:
    """What the checks across batches remember, forgotten where part of the log could not
    be read (``path``): a producer's state may have moved in the batches not read (a
    false producer_state_mismatch or sequence_gap against the next snapshot or batch),
    and the offsets not read were in the log (no offset_gap). The snapshots the batches
    read decide are compared first (those up to ``read_below``, the gap's first offset,
    or None: up to the last batch read); later ones hold only for producers seen after
    the gap."""
    found = _check_snapshots(state, run, read_below)
    if found:
        yield LogItem("check", path, state.topic, state.partition, None, found)
    run.last_offset = None
    run.producers.clear()


def _take_epochs(state: _Partition, tree: Node) -> None:
    """The (epoch, start offset) entries of a leader-epoch checkpoint."""
    state.epochs = [
        (epoch, start)
        for e in (tree.child("entries") or Node("", "", 0)).children
        if isinstance(epoch := _value(e, "epoch"), int)
        and isinstance(start := _value(e, "start_offset"), int)
    ]


def _epochs_log_start(state: _Partition, part: Path) -> None:
    """Kafka moves the first epoch's start to the log start offset when that moves
    (DeleteRecords, retention): the checkpoint of log starts is only flushed each minute
    (the partition's own checkpoint only: a tiered copy's .leader_epoch_checkpoint
    files are per remote segment, each starting at its segment)."""
    if (
        state.epochs
        and (part / "leader-epoch-checkpoint").is_file()
        and (state.log_start is None or state.epochs[0][1] > state.log_start)
    ):
        state.log_start, state.log_start_from = state.epochs[0][1], "epochs"


def _take_aborted(state: _Partition, txn: Node) -> None:
    """The aborted transactions a .txnindex lists."""
    for e in txn.children:
        pid, first, last = (_value(e, n) for n in ("producer_id", "first_offset", "last_offset"))
        if isinstance(pid, int) and isinstance(first, int) and isinstance(last, int):
            state.aborted.setdefault(pid, []).append((first, last))


def read_beside(segment: Path) -> list[Path]:
    """The files of a segment's partition directory that a segment given alone is read
    with, as its partition directory would be: every .txnindex (an aborted transaction is
    listed by the segment holding its ABORT marker, perhaps a later one) and the
    leader-epoch-checkpoint (leader epochs, and the log start offset Kafka moves its
    first entry to). Nothing for a segment outside a partition directory."""
    part = segment.parent
    if partition_of(part)[0] is None:
        return []
    try:
        files = sorted(part.iterdir())
    except OSError:
        return []
    return [
        p
        for p in files
        if (
            file_kind(p) == "txn_index"
            and not p.name.endswith(_BEING_REPLACED)
            or p.name == "leader-epoch-checkpoint"
        )
        and p.is_file()
        and _unreadable(p, None, None) is None
    ]


def _read_beside(segment: Path, options: Options, state: _Partition) -> None:
    """``state`` as the partition's files beside a segment given alone say it
    (``read_beside``): what marks its batches ABORTED or deleted, and checks their
    leader epochs."""
    for p in read_beside(segment):
        tree = decode_file(p, file_kind(p) or "", options)
        if p.name == "leader-epoch-checkpoint":
            _take_epochs(state, tree)
        else:
            _take_aborted(state, tree)
    _epochs_log_start(state, segment.parent)


# -- one segment -----------------------------------------------------------------------


@dataclass
class _Running:
    """What the checks remember across batches of a partition (bounded: per producer)."""

    last_offset: int | None = None
    max_ts: int | None = None
    # producer id -> (epoch, last sequence, last data offset, offset of its last batch or
    # marker): what Kafka's producer state holds of it
    producers: dict[int, tuple[int | None, int, int, int]] = field(default_factory=dict)
    aborts: list[tuple[int, int]] = field(default_factory=list)  # this segment's (pid, offset)
    checked_snapshots: set[int] = field(default_factory=set)


def _entries(indexes: dict[str, Node], base: int) -> tuple[list, list]:
    """A segment's index entries in file order: the offset index's (entry, offset,
    position), the time index's (entry, timestamp, offset); offsets absolute."""
    oidx = [
        (e, base + rel, pos)
        for e, rel, pos in _index_entries(
            indexes.get("offset_index"), ("relative_offset", "position")
        )
    ]
    tidx = [
        (e, ts, base + rel)
        for e, ts, rel in _index_entries(
            indexes.get("time_index"), ("timestamp", "relative_offset")
        )
    ]
    return oidx, tidx


def _index_entries(tree: Node | None, fields: tuple[str, str]) -> list[tuple[Node, int, int]]:
    out = []
    for e in tree.children if tree is not None else ():
        if e.name.startswith("["):
            out.append((e, _value(e, fields[0]), _value(e, fields[1])))
    return out


def _segment(
    path: Path,
    options: Options,
    state: _Partition,
    kind: str,
    indexes: dict[str, Node] | None = None,
    run: _Running | None = None,
    indexes_replaced: Callable[[], bool] = lambda: False,
) -> Iterator[LogItem]:
    """``indexes_replaced``: whether the files ``indexes`` were read from have been
    replaced by others of the same names since."""
    opened = _mtime(path)
    inode = _inode(path)

    def written(lately: bool = False) -> bool:
        """Written since it was opened (``lately``: or in the last seconds: mtimes move in
        the kernel's coarse ticks, so a segment written just before and just after it was
        opened may show one mtime, and a read of a small segment is quicker than that)."""
        now = _mtime(path)
        return now != opened or (lately and now is not None and time.time_ns() - now < _LATELY)

    def swapped() -> bool:
        """The segment or its indexes replaced by files of another generation since they
        were read: the log cleaner swaps a cleaned segment in file by file (renames), so
        a listing may pair a new segment with its predecessor's index (a helper's stress
        of a live broker: "points past the end of the 0-byte segment"). Asked only before
        index entries are said to name no batch, of a segment renamed or changed in the
        last seconds, a moment later (the cleaner's renames follow each other)."""
        try:
            changed = os.stat(path).st_ctime_ns
        except OSError:
            return True
        if time.time_ns() - changed >= _LATELY:
            return False
        _pause()
        return _inode(path) != inode or indexes_replaced()

    yield from _mapped(
        path,
        state.topic,
        state.partition,
        lambda mm: _segment_items(
            path, mm, options, state, kind, indexes or {}, run or _Running(), written, swapped
        ),
    )


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _replaced(files: dict[str, Path], inodes: dict[str, int | None]) -> bool:
    return any(_inode(p) != inodes[k] for k, p in files.items())


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


# A running broker appends to a preallocated segment (log.preallocate) in place: its size
# never changes, and a batch being written can be read half-copied (a length, a magic
# byte not there yet). Damage met in a segment written since it was opened is looked at
# again a few times, a moment apart, before it is said (a helper's stress of a live
# broker: 29 false errors in ~300 reads of such a segment, each clean 1.5 s later).
_LOOKS_AGAIN = 5
_LATELY = 5 * 10**9  # ns
_NO_HEAD = bytes(LOG_OVERHEAD)


def _pause() -> None:
    time.sleep(0.02)


def _segment_items(
    path: Path,
    mm: Any,
    options: Options,
    state: _Partition,
    kind: str,
    indexes: dict[str, Node],
    run: _Running,
    written: Callable[..., bool] = lambda lately=False: False,
    swapped: Callable[[], bool] = lambda: False,
) -> Generator[LogItem, None, None]:
    run.aborts = []
    base_name = _base_offset(path)
    family = "metadata" if kind == "kraft_snapshot" else family_of(state.topic)
    size = len(mm)
    # index entries, in file order (positions and offsets grow: merged as batches pass)
    oidx, tidx = _entries(indexes, base_name)
    _monotonic(oidx, 1, "offsets")
    _monotonic(tidx, 1, "timestamps")
    oi = ti = 0
    batch_ends: dict[int, tuple[int, int]] = {}  # last offset -> (position, max ts), this segment
    starts: set[int] = set()  # where damaged batches start (index entries may name them)
    # offsets damage hides: open intervals (after, before) between the batches read on
    # either side of a damaged one, and where an open one began (a time-index entry
    # naming a hidden offset is not evidence of a bad entry)
    hidden: list[tuple[int, int]] = []
    hidden_after: int | None = None
    known_last = -1  # the last offset of the last batch read
    pos = released = 0
    looks = _LOOKS_AGAIN
    reread = -1  # where a batch read as damage was read once more
    changed = 0  # batch heads read again as they changed under the reader
    while pos < size:
        if pos - released > _RELEASE and isinstance(mm, mmap.mmap):
            released = _release(mm, released, pos)
        left = size - pos
        b = Batch(mm, pos) if left >= FRAME else None
        total = b.size if b is not None else LOG_OVERHEAD
        while (
            b is not None
            and (not b.plausible or total > left)
            and looks
            and mm[pos : pos + LOG_OVERHEAD] != _NO_HEAD  # (zeros: preallocated, not begun)
            and written(lately=True)
        ):
            looks -= 1  # (a batch being written: see _LOOKS_AGAIN)
            seen = bytes(mm[pos : pos + FRAME])
            _pause()
            b = Batch(mm, pos)
            total = b.size
            if bytes(mm[pos : pos + FRAME]) == seen:  # unchanged: damage, not a write
                looks = 0
        if b is not None and (not b.plausible or total > left):
            # damage, not a torn write, when intact batches follow: say what Kafka does
            # with it and go on at the next batch
            resume = _next_batch(mm, pos, size, [e[2] for e in oidx[oi:]])
            if resume is not None and reread != pos:
                # the search took a while: a batch being written may be whole by now
                # (read as damage, it was said as "magic byte 2, which no Kafka writes")
                now = Batch(mm, pos)
                if now.plausible and now.size <= left:
                    reread = pos
                    continue
            if resume is not None:
                node = _damaged(mm, pos, resume, state)
                yield LogItem("batch", path, state.topic, state.partition, node)
                starts.add(pos)
                # a batch whose CRC holds says its offsets (and the time index may
                # name it); other damage hides them
                run.last_offset = None
                if node.code == "log_bad_magic":
                    h = Batch(mm, pos).fields()
                    run.last_offset = h["base_offset"] + h["last_offset_delta"]
                    batch_ends[run.last_offset] = (pos, h["max_timestamp"])
                elif hidden_after is None:
                    hidden_after = known_last
                pos = resume
                continue
        if b is None or not b.plausible:
            yield _tail_item(path, state, pos, mm, size)
            break
        if total != LOG_OVERHEAD + b.length and changed < _LOOKS_AGAIN:
            # its size was read once, its length and magic byte as asked: a batch a
            # running broker wrote meanwhile gave a size from before the write and a
            # magic byte from after (a helper's stress: a 12-byte batch, then its rest
            # said as damage). Read again.
            changed += 1
            continue
        if total > left:
            node = Node(
                "batch",
                "bytes",
                pos,
                left,
                left,
                problem=f"batch of {total} bytes at position {pos} runs "
                f"{total - left} bytes past the end of the file",
                code="log_size_past_end",
            )
            yield LogItem("batch", path, state.topic, state.partition, node)
            break
        control = b.magic == 2 and b.control
        bulk = (
            state.conv if family is None and not control and options.values is None else None
        )  # values by schema need the tree
        got: Any = None
        if isinstance(bulk, Lines):  # the JSON lines path: a clean batch as text
            got = ondisk.batch_lines(
                mm, pos, pos + total, options.max_decompressed, options.max_nodes, bulk.write
            )
            if got is not None:
                item = LogItem("batch", path, state.topic, state.partition, lines=got)
        elif bulk is not None:  # the bulk path: a clean batch, no tree
            got = ondisk.batch_values(
                mm, pos, pos + total, options.max_decompressed, options.max_nodes, bulk
            )
            if got is not None:
                item = LogItem("batch", path, state.topic, state.partition, values=got)
        if got is not None:
            got[0]["position"] = pos
            head = _head_of_values(got[0])
        else:
            holder = Node("", "records", pos)
            # one budget a batch, as one message's on the wire: its records and
            # what they hold (internal topics' structs, schema'd values)
            batch = Decoding(options)
            read_records(mm, holder, pos, pos + total, batch)
            tree = holder.children[0]
            if family is not None or control:
                decode_records(tree, family, batch)  # internal topics, control records
            elif options.values is not None and options.records is True:
                from ..protocol.values_schema import SchemaSource, decode_values

                decode_values(
                    tree, cast(SchemaSource, options.values), batch.budget, state.topic
                )  # docs/guide/values.md
            item = LogItem("batch", path, state.topic, state.partition, tree)
            head = _head_of(tree)
            _what_recovery_does(tree, state)
        _check_batch(item, head, state, run)
        _mark(item, head, state)
        last, max_ts = head.last, head.max_ts
        if hidden_after is not None and head.base is not None:
            hidden.append((hidden_after, head.base))
            hidden_after = None
        if last is not None:
            batch_ends[last] = (pos, max_ts if max_ts is not None else -1)
            known_last = last
        # offset index entries at this position name this batch's last offset
        while oi < len(oidx) and oidx[oi][2] <= pos:
            e, off, ipos = oidx[oi]
            if ipos in starts:
                pass  # the damaged batch there says what is wrong
            elif ipos < pos or off != last:
                _flag(
                    e,
                    "index_bad_entry",
                    f"entry (offset {off}, position {ipos}) does not point at a batch start"
                    if ipos < pos
                    else f"entry names offset {off}; the batch at position {ipos} ends at "
                    f"offset {last}",
                )
            oi += 1
        while ti < len(tidx) and last is not None and tidx[ti][2] <= last:
            e, ts, off = tidx[ti]
            found = batch_ends.get(off)
            if found is None and (
                any(a < off < b for a, b in hidden)
                or (hidden_after is not None and off > hidden_after)
            ):
                pass  # an offset of a damaged batch: its own finding says what is wrong
            elif found is None:
                _flag(
                    e,
                    "time_index_mismatch",
                    f"entry names offset {off}, which ends no batch of this segment",
                )
            elif found[1] != ts:
                _flag(
                    e,
                    "time_index_mismatch",
                    f"entry says timestamp {ts}; the batch "
                    f"ending at offset {off} has max "
                    f"timestamp {found[1]}",
                )
            ti += 1
        if len(batch_ends) > 4096:  # keep only batches a time-index entry can still name
            needed = tidx[ti][2] if ti < len(tidx) else None
            batch_ends = {k: v for k, v in batch_ends.items() if needed is not None and k >= needed}
        yield item
        pos += total
    if written() or ((oi < len(oidx) or ti < len(tidx)) and swapped()):
        # entries past the batches read may name batches written since, or be of
        # another generation of the segment
        oidx, oi, tidx, ti = [], 0, [], 0
    for e, off, ipos in oidx[oi:]:
        _flag(
            e,
            "index_past_end" if ipos >= size else "index_bad_entry",
            f"entry (offset {off}, position {ipos}) points past the end of the {size}-byte segment"
            if ipos >= size
            else f"entry (offset {off}, position {ipos}) points at no batch start",
        )
    for e, _ts, off in tidx[ti:]:
        _flag(e, "time_index_mismatch", f"entry names offset {off}, past the segment's last batch")
    txn = indexes.get("txn_index")
    if txn is not None:
        _check_txn(txn, run.aborts, path)
    late = _check_snapshots(state, run, None)
    if late:
        yield LogItem("check", path, state.topic, state.partition, None, late)


_RELEASE = 16 << 20


def _release(mm: mmap.mmap, start: int, pos: int) -> int:
    """Drop the map's pages before ``pos`` from the process (the kernel keeps them in its
    page cache; a later read faults them back in): a whole segment read through a map
    would otherwise stay in the reader's resident memory until it is closed."""
    end = pos - pos % mmap.PAGESIZE
    if hasattr(mm, "madvise") and end > start:
        mm.madvise(mmap.MADV_DONTNEED, start, end - start)
    return end


_RESYNC_SCAN = 1 << 20  # bytes searched for the next batch after damage
_RESYNC_CRC = 16 << 20  # bytes CRC-checked in one search (crafted heads that all
# claim long batches cannot make it quadratic)


def _intact_v2(mm, pos: int, size: int, budget: list[int] | None = None) -> int | None:
    """The end of an intact v2 batch at ``pos`` (length fits, CRC32C holds), else None.
    ``budget``: [bytes it may still CRC-check], spent."""
    if pos < 0 or pos + HEAD_SIZE > size or mm[pos + MAGIC_AT] != 2:
        return None
    b = Batch(mm, pos)
    if not b.fits(size):
        return None
    if budget is not None:
        if budget[0] < b.size:
            return None
        budget[0] -= b.size
    return b.end if b.crc_ok else None


def _next_batch(mm, pos: int, size: int, indexed: list[int]) -> int | None:
    """Where the next intact v2 batch after damage at ``pos`` starts: where the damaged
    batch's own length ends, an index entry's position, or within the next MiB; None when
    none (what is left is a torn or nonsense tail)."""
    length = Batch(mm, pos).length if pos + LOG_OVERHEAD <= size else -1
    candidates = [pos + LOG_OVERHEAD + length] if length > 0 else []
    candidates += [p for p in indexed if p > pos][:4]
    budget = [_RESYNC_CRC]
    for c in candidates:
        if c < size and _intact_v2(mm, c, size, budget) is not None:
            return c
    end = min(size, pos + _RESYNC_SCAN)
    c = pos + 1
    while c + HEAD_SIZE <= end and budget[0] > 0:
        magic = mm.find(b"\x02", c + MAGIC_AT, end)  # a v2 batch's magic byte
        if magic < 0:
            return None
        c = magic - MAGIC_AT
        if _intact_v2(mm, c, size, budget) is not None:
            return c
        c += 1
    return None


def _damaged(mm, pos: int, resume: int, state: _Partition) -> Node:
    """Bytes where a batch should start that are no batch Kafka reads, intact batches
    after them, and what Kafka does with them (LogSegment.recover: a batch whose length
    runs past the end ends the scan; one whose CRC fails throws; the magic byte is not
    under the CRC and is not checked)."""
    n = resume - pos
    b = Batch(mm, pos, resume)
    length, magic = b.length, b.magic
    crc_ok = (
        pos + AT["attributes"] <= resume and LOG_OVERHEAD + length == n and magic >= 2 and b.crc_ok
    )
    if LOG_OVERHEAD + length == n and crc_ok:
        what = (
            f"a batch of {n} bytes at position {pos} with magic byte {magic}, which no "
            f"Kafka writes; its length and CRC hold (the CRC does not cover the magic "
            f"byte): Kafka's recovery keeps it, and kafka-dump-log lists it; kept as "
            f"bytes, the batches after it are read"
        )
        code = "log_bad_magic"
    else:
        said = (
            f"magic byte {magic}"
            if LOG_OVERHEAD + length == n
            else f"a length of {length} bytes"
            + (" (past the end of the file)" if pos + LOG_OVERHEAD + length > len(mm) else "")
        )
        what = (
            f"{n} bytes at position {pos} are no batch ({said}), and an intact batch "
            f"starts at position {resume}: damage, not a torn write; "
            + _recovery(
                state,
                "truncates the partition at this position (the batches "
                "after it, in this segment and later ones, are deleted)",
            )
        )
        code = "log_bad_batch"
    return Node(
        "damaged", "bytes", pos, n, bytes(mm[pos : pos + min(n, 64)]), problem=what, code=code
    )


def _what_recovery_does(tree: Node, state: _Partition) -> None:
    """Add to a batch's CRC or decompression problem what Kafka's recovery does with it:
    it checks each batch's CRC (a mismatch truncates the partition there) and decompresses
    nothing."""
    bad = {n.code: n for n in tree.walk() if n.code in ("crc_mismatch", "decompression_failed")}
    if "crc_mismatch" in bad:
        n = bad["crc_mismatch"]
        n.problem = f"{n.problem}; " + _recovery(
            state,
            "truncates the partition at this batch (it and every later batch, in "
            "this segment and later ones, are deleted)",
        )
    elif "decompression_failed" in bad:
        n = bad["decompression_failed"]
        n.problem = (
            f"{n.problem}; its CRC holds, so Kafka's recovery keeps it (it checks "
            "CRCs and decompresses nothing); consumers fail to read it"
        )


def _recovery(state: _Partition, what: str) -> str:
    """What Kafka's recovery does with damage, as far as the log dir tells whether it
    runs: after an unclean shutdown (no .kafka_cleanshutdown) it reads the segments past
    each partition's recovery point; after a clean one, none."""
    if state.clean is True:
        return (
            "the broker stopped cleanly, so recovery does not read it at the next start "
            f"(if it ran: it {what}); consumers reading it fail"
        )
    if state.clean is False:
        return f"Kafka's recovery, at the broker's next start, {what}"
    return f"Kafka's recovery, when it runs over it (after an unclean shutdown), {what}"


_CHUNK = 1 << 20


def _all_zero(path: Path, start: int, end: int) -> bool:
    """Whether bytes ``start:end`` of the file are all zero. A preallocated segment's
    tail (log.preallocate: a sparse file) is skipped by seeking to its next data
    (SEEK_DATA: holes are never read); data is read a MiB at a time with pread, never
    mapped nor copied whole."""
    seek_data = getattr(os, "SEEK_DATA", None)
    with open(path, "rb") as f:
        fd, at = f.fileno(), start
        while at < end:
            if seek_data is not None:
                try:
                    at = os.lseek(fd, at, seek_data)
                except OSError:  # ENXIO: only holes from here to the end
                    return True
                if at >= end:
                    return True
            chunk = os.pread(fd, min(_CHUNK, end - at), at)
            if not chunk:
                return True
            if chunk.count(0) != len(chunk):
                return False
            at += len(chunk)
    return True


def _tail_item(path: Path, state: _Partition, pos: int, buf, end: int) -> LogItem:
    """The item for ``buf[pos:end]``, where no batch starts (only its first bytes kept)."""
    n = end - pos
    tail = bytes(buf[pos : min(end, pos + 64)])
    if _all_zero(path, pos, end):
        node = Node(
            "tail",
            "bytes",
            pos,
            n,
            n,
            problem=f"{n} zero bytes after the last batch "
            f"(preallocated space: log.preallocate, or a segment an unclean stop left "
            f"untrimmed)",
            code="log_zero_tail",
        )
    else:
        node = Node(
            "tail",
            "bytes",
            pos,
            n,
            tail,
            problem=f"{n} bytes of nonsense at the end (from position {pos}): no "
            f"batch starts here; broker recovery truncates the segment here",
            code="log_nonsense_tail",
        )
    return LogItem("batch", path, state.topic, state.partition, node)


def _flag(node: Node, code: str, reason: str) -> None:
    if node.problem is None:
        node.problem, node.code = reason, code


def _check_alone(path: Path, indexes: dict[str, Node]) -> None:
    """What an index shows without its segment: offsets (and, in a time index,
    timestamps) that go backwards; an offset index's positions too. (With the segment,
    ``_segment`` checks every entry against the batches.)"""
    oidx, tidx = _entries(indexes, _base_offset(path))
    _monotonic(oidx, 1, "offsets")
    _monotonic(oidx, 2, "positions")
    _monotonic(tidx, 1, "timestamps")
    _monotonic(tidx, 2, "offsets")


def _monotonic(entries: list, col: int, what: str) -> None:
    prev = None
    for e in entries:
        v = e[col]
        if prev is not None and v < prev:
            _flag(e[0], "index_not_monotonic", f"{what} go backwards: {v} after {prev}")
        prev = v if prev is None else max(prev, v)


def _value(tree: Node, name: str):
    c = tree.child(name)
    return c.value if c is not None else None


def _last_offset(tree: Node) -> int | None:
    if tree.ktype == "record_batch":
        base, delta = _value(tree, "base_offset"), _value(tree, "last_offset_delta")
        return base + delta if isinstance(base, int) and isinstance(delta, int) else None
    if tree.ktype.startswith("message_v"):
        return message_set_span(tree)[1]
    return None


def _max_ts(tree: Node) -> int | None:
    if tree.ktype == "record_batch":
        return _value(tree, "max_timestamp")
    if tree.ktype.startswith("message_v"):
        return _value(tree, "timestamp")
    return None


class _Head(NamedTuple):
    """What the checks read of a batch (or v0/v1 message), from its tree or its values."""

    base: int | None
    last: int | None
    max_ts: int | None
    epoch: int | None  # v2 only, as are the rest
    producer_id: int | None = None
    producer_epoch: int | None = None
    sequence: int | None = None
    attributes: int = 0
    abort: bool = False  # a control batch holding an ABORT marker
    v2: bool = True


def _head_of_values(h: dict) -> _Head:
    return _Head(
        h["base_offset"],
        h["base_offset"] + h["last_offset_delta"],
        h["max_timestamp"],
        h["partition_leader_epoch"],
        h["producer_id"],
        h["producer_epoch"],
        h["base_sequence"],
        h["attributes"],
    )


def _head_of(tree: Node) -> _Head:
    max_ts = _max_ts(tree)
    if tree.ktype.startswith("message_v"):  # a wrapper: its inner offsets count
        base, last, _ = message_set_span(tree)
        return _Head(base, last, max_ts, None, v2=False)
    last = _last_offset(tree)
    if tree.ktype != "record_batch":
        return _Head(_value(tree, "offset"), last, max_ts, None, v2=False)
    attrs = _value(tree, "attributes") or 0
    abort = False
    if attrs & 0x20:
        key = next((n for n in tree.walk() if n.name == "key" and isinstance(n.value, bytes)), None)
        abort = key is not None and len(key.value) >= 4 and key.value[2:4] == b"\0\0"
    return _Head(
        _value(tree, "base_offset"),
        last,
        max_ts,
        _value(tree, "partition_leader_epoch"),
        _value(tree, "producer_id"),
        _value(tree, "producer_epoch"),
        _value(tree, "base_sequence"),
        attrs,
        abort,
    )


# the batch header field each check across batches is about (the TUI's `p` selects it)
CHECK_FIELDS = {
    "offset_not_monotonic": "base_offset",
    "offset_gap": "base_offset",
    "timestamp_not_monotonic": "max_timestamp",
    "past_high_watermark": "last_offset_delta",
    "leader_epoch_mismatch": "partition_leader_epoch",
    "producer_state_mismatch": "producer_id",
    "sequence_gap": "base_sequence",
}


def _check_batch(item: LogItem, head: _Head, state: _Partition, run: _Running) -> None:
    base, last = head.base, head.last
    add = item.findings.append
    if not isinstance(base, int) or last is None:
        return
    if run.last_offset is not None:
        if base <= run.last_offset:
            add(
                Finding(
                    "offset_not_monotonic",
                    f"batch starts at offset {base}, not after "
                    f"the previous batch's last offset "
                    f"{run.last_offset}",
                )
            )
        elif base > run.last_offset + 1:
            add(
                Finding(
                    "offset_gap", f"offsets {run.last_offset + 1}..{base - 1} are not in the log"
                )
            )
    run.last_offset = max(last, run.last_offset if run.last_offset is not None else last)
    max_ts = head.max_ts
    # (a COMMIT/ABORT marker carries the transaction coordinator's clock at the end of
    # the transaction, not its records' CreateTime: it may well be below them)
    if isinstance(max_ts, int) and max_ts >= 0 and not (head.v2 and head.attributes & 0x20):
        if run.max_ts is not None and max_ts < run.max_ts:
            add(
                Finding(
                    "timestamp_not_monotonic",
                    f"max timestamp {max_ts} is lower than an earlier batch's {run.max_ts}",
                )
            )
        run.max_ts = max(max_ts, run.max_ts or max_ts)
    if state.hw is not None and last >= state.hw:
        add(
            Finding(
                "past_high_watermark",
                f"last offset {last} is at or past the high watermark {state.hw} of "
                f"replication-offset-checkpoint: not replicated yet, or written after "
                f"the checkpoint (a running broker writes it every 5 s by default)",
            )
        )
    if not head.v2:  # a v0/v1 message: no epochs, producers or transactions
        return
    epoch = head.epoch
    if state.epochs and isinstance(epoch, int) and epoch >= 0:
        expected = None
        for e, start in state.epochs:
            if start <= base:
                expected = e
        if expected is not None and expected != epoch:
            add(
                Finding(
                    "leader_epoch_mismatch",
                    f"batch at offset {base} has leader epoch "
                    f"{epoch}; leader-epoch-checkpoint says "
                    f"{expected} from its start offset",
                )
            )
    item.findings += _check_snapshots(state, run, base)
    pid, pepoch, seq = head.producer_id, head.producer_epoch, head.sequence
    if isinstance(pid, int) and pid >= 0:
        if head.attributes & 0x20:
            if head.abort:
                run.aborts.append((pid, base))
            # a COMMIT/ABORT marker of a newer epoch (transactions v2, KIP-890, bumps it
            # at each end) starts the producer again: Kafka's ProducerStateEntry drops its
            # batches (last sequence and offset -1), as its snapshots then hold. A marker
            # of a producer none of whose batches was read says nothing of its state: its
            # batches may be in segments gone (retention) or removed by the cleaner, which
            # keeps markers longer (a live broker's compacted partition: a false
            # producer_state_mismatch, "the log's last batch: sequence -1")
            known = run.producers.get(pid)
            if isinstance(pepoch, int) and known is not None and known[0] != pepoch:
                run.producers[pid] = (pepoch, -1, -1, last)
            return
        if isinstance(seq, int) and seq >= 0:
            count = last - base
            known = run.producers.get(pid)
            if known is not None and known[0] == pepoch and seq != (known[1] + 1) & 0x7FFFFFFF:
                add(
                    Finding(
                        "sequence_gap",
                        f"producer {pid} epoch {pepoch}: sequence {seq} "
                        f"follows {known[1]} (expected {known[1] + 1}; "
                        f"compaction can remove batches)",
                    )
                )
            run.producers[pid] = (pepoch, (seq + count) & 0x7FFFFFFF, last, last)


def end_marker(tree: Node) -> str | None:
    """A control batch's record type as Kafka names it (COMMIT, ABORT, LEADER_CHANGE...)."""
    from ..protocol.internal import control_of

    for node in tree.walk():
        if node.ktype == "record":
            found = control_of(node)
            if found is not None:
                return found[0]
    return None


def _mark(item: LogItem, head: _Head, state: _Partition) -> None:
    """Whether the batch is of an aborted transaction, and below the log start offset
    (leader-epoch evidence holds for v2 batches only: v0/v1 ones have no epoch)."""
    base, pid = head.base, head.producer_id
    if not isinstance(base, int):
        return
    if head.v2 and head.attributes & 0x30 == 0x10 and isinstance(pid, int):
        item.aborted = any(first <= base <= last for first, last in state.aborted.get(pid, ()))
    if (
        state.log_start is not None
        and base < state.log_start
        and (head.v2 or state.log_start_from == "checkpoint")
    ):
        item.log_start = state.log_start


def _check_snapshots(state: _Partition, run: _Running, next_base: int | None) -> list[Finding]:
    """A snapshot at offset S holds each producer's state after the log's batches below S:
    compare when the log passes S (or ends). Only producers seen in the log are compared
    (older segments may be gone; expired producers leave the snapshot)."""
    out = []
    for at, entries in state.snapshots.items():
        if at in run.checked_snapshots or (next_base is not None and next_base < at):
            continue
        if next_base is None and (run.last_offset is None or run.last_offset + 1 < at):
            continue  # the log (so far) ends before the snapshot's offset
        run.checked_snapshots.add(at)
        for pid, (epoch, seq, last) in entries.items():
            seen = run.producers.get(pid)
            if seen is not None and seen[3] < at and seen[:3] != (epoch, seq, last):
                # the cleaner removes a batch whose records all have newer values, unless
                # it is its producer's last: one the snapshot names can be gone since
                why = ""
                if state.cleaned is not None and last < state.cleaned:
                    why = (
                        f" (the log cleaner has cleaned below offset {state.cleaned}: it "
                        f"removes a batch whose records all have newer values once its "
                        f"producer has written a later one)"
                    )
                out.append(
                    Finding(
                        "producer_state_mismatch",
                        f"snapshot {at}: producer {pid} epoch {epoch}, last sequence "
                        f"{seq} at offset {last}; the log's last batch before it: "
                        f"epoch {seen[0]}, sequence {seen[1]}, offset {seen[2]}{why}",
                    )
                )
    return out


def _check_txn(txn: Node | None, aborts: list[tuple[int, int]], path: Path) -> None:
    listed = {}
    for e in txn.children if txn is not None else ():
        if e.name.startswith("["):
            listed[(_value(e, "producer_id"), _value(e, "last_offset"))] = e
    for key in aborts:
        if key not in listed and txn is not None:
            txn.add(
                Node(
                    "_missing",
                    "struct",
                    txn.length,
                    0,
                    problem=f"the log aborts producer {key[0]}'s transaction at offset "
                    f"{key[1]}; the .txnindex does not list it",
                    code="txnindex_mismatch",
                )
            )
    seen = set(aborts)
    for key, e in listed.items():
        if key not in seen:
            _flag(
                e,
                "txnindex_mismatch",
                f"producer {key[0]}'s aborted transaction ending at "
                f"offset {key[1]} has no ABORT marker in the segment",
            )


def _kafka07(path: Path, topic: str | None, partition: int | None) -> Iterator[LogItem]:
    yield from _mapped(
        path, topic, partition, lambda mm: _kafka07_items(path, mm, topic, partition)
    )


def _kafka07_items(
    path: Path, mm: Any, topic: str | None, partition: int | None
) -> Generator[LogItem, None, None]:
    base = _base_offset(path)
    size = len(mm)
    pos = 0
    while pos < size:
        if size - pos < 4:
            yield _tail_item(path, _Partition(topic, partition), pos, mm, size)
            return
        node = ondisk.kafka07_message(mm, pos, size, base)
        n = _value(node, "length")
        if node.children[0].problem:
            if _all_zero(path, pos, size):
                yield _tail_item(path, _Partition(topic, partition), pos, mm, size)
            else:
                node.children[0].code = "log_size_past_end" if n > 0 else "log_nonsense_tail"
                yield LogItem("message", path, topic, partition, node)
            return
        yield LogItem("message", path, topic, partition, node)
        pos += 4 + n
