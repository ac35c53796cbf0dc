"""kdissect log's exports: items as the JSON lines of `kdissect log --format jsonl
--records`, and the batches themselves as a log dir Kafka's tools read: per partition one
``.log`` segment named by its first offset, holding the batches' bytes as they are in
their files, in file order, with a ``.txnindex`` listing the aborted transactions among
them (kafka-dump-log and `kdissect log` open it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
import struct
from pathlib import Path

from ..protocol import batch
from ..protocol.varint import VarintTooLong, varint
from ..render.log_json import item_lines
from ..sources.logdir import LogItem


def item_jsonl(item: LogItem, tree_of: Callable) -> str:
    """The JSON lines of one item (a batch with its records), positions in its file."""
    tree = tree_of(item)
    whole = LogItem(
        item.kind, item.path, item.topic, item.partition, tree, list(item.findings), url=item.url
    )
    return item_lines(whole, True)


def write_jsonl(
    path: Path,
    items: Iterable[LogItem],
    tree_of: Callable,
    progress: Callable[[int, int], None] = lambda d, t: None,
    cancel=None,
    total: int = 0,
) -> int | None:
    """Write the JSON lines of ``items``; how many, or None when cancelled (the file is
    then removed)."""
    n = 0
    with open(path, "w") as out:
        for n, item in enumerate(items, 1):
            out.write(item_jsonl(item, tree_of))
            if n % 256 == 0:
                if cancel is not None and cancel.is_set():
                    break
                progress(n, total)
    if cancel is not None and cancel.is_set():
        path.unlink(missing_ok=True)
        return None
    return n


def _partition_name(item: LogItem) -> str:
    if item.topic is not None and item.partition is not None:
        return f"{item.topic}-{item.partition}"
    return "exported-0"  # a file outside a partition directory


def write_segments(
    directory: Path,
    batches: Sequence[LogItem],
    read: Callable,
    progress: Callable[[int, int], None] = lambda d, t: None,
    cancel=None,
) -> dict[Path, int]:
    """Per partition, one segment with the bytes of its ``batches`` (whole batches with
    ``start``, ``length`` and ``base``: their first offset) in file order; ``read(item)``
    gives an item's bytes. Returns each segment written and its batch count."""
    parts: dict[str, list[LogItem]] = {}
    for item in batches:
        parts.setdefault(_partition_name(item), []).append(item)
    written: dict[Path, int] = {}
    done = 0
    for name, items in parts.items():
        items.sort(key=lambda it: (str(it.path), it.start))  # type: ignore[attr-defined]
        first = items[0].base  # type: ignore[attr-defined]
        part = directory / name
        part.mkdir(parents=True, exist_ok=True)
        segment = part / f"{max(0, first or 0):020d}.log"
        heads: list[tuple[int, int, int, int, int | None, bool]] = []
        with open(segment, "wb") as out:
            for item in items:
                data = read(item)
                out.write(data)
                head = _v2_head(data)
                if head is not None:
                    heads.append((*head, _marker_type(data, head[3]), item.aborted))
                done += 1
                if done % 256 == 0:
                    if cancel is not None and cancel.is_set():
                        return written
                    progress(done, len(batches))
        aborted = _aborted_transactions(heads)
        if aborted:  # (else the marks of aborted transactions are lost on reading it)
            segment.with_suffix(".txnindex").write_bytes(
                b"".join(_TXN_ENTRY.pack(0, *entry) for entry in aborted)
            )
        written[segment] = len(items)
    return written


_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset


def _v2_head(data: bytes) -> tuple[int, int, int, int] | None:
    """(base offset, last offset, producer id, attributes) of a v2 batch's bytes."""
    if len(data) < batch.HEAD_SIZE or data[batch.MAGIC_AT] != 2:
        return None
    head = dict(zip(batch.FIELDS, batch.HEAD.unpack_from(data)))
    base = head["base_offset"]
    return base, base + head["last_offset_delta"], head["producer_id"], head["attributes"]


def _marker_type(data: bytes, attributes: int) -> int | None:
    """A control batch's marker type (0 ABORT, 1 COMMIT), from its first record's key
    (control batches are never compressed); None for any other batch or bytes that do
    not hold one."""
    if not attributes & batch.CONTROL:
        return None
    end = len(data)
    try:
        _size, pos = varint(data, batch.HEAD_SIZE, end)
        _ts_delta, pos = varint(data, pos + 1, end, 10)  # (after the record's attributes)
        _offset_delta, pos = varint(data, pos, end)
        key_size, pos = varint(data, pos, end)
    except (IndexError, VarintTooLong):
        return None
    if key_size < 4 or pos + 4 > end:
        return None
    marker: int = _I16.unpack_from(data, pos + 2)[0]  # (after the key's version)
    return marker


_I16 = struct.Struct(">h")
_ABORT, _COMMIT = 0, 1


def _aborted_transactions(
    heads: list[tuple[int, int, int, int, int | None, bool]],
) -> list[tuple[int, int, int, int]]:
    """(producer id, first offset, last offset, last stable offset) of each aborted
    transaction among batches (base, last, producer id, attributes, marker type, marked
    aborted) in offset order, as the broker's .txnindex lists them: from the
    transaction's first batch to its ABORT marker, the last stable offset then being the
    first offset of a transaction still open, else the one after the marker. A
    transaction exported without its marker but marked aborted (its partition's
    .txnindex said so) ends at its last batch."""
    open_: dict[int, int] = {}  # producer id -> its open transaction's first offset
    aborted_open: dict[int, int] = {}  # ... and the last offset of those marked aborted
    out: list[tuple[int, int, int, int]] = []
    for base, last, pid, attributes, marker, aborted in sorted(heads):
        if not attributes & batch.TRANSACTIONAL:
            continue
        if not attributes & batch.CONTROL:
            open_.setdefault(pid, base)
            if aborted:
                aborted_open[pid] = last
            continue
        if marker not in (_ABORT, _COMMIT):  # (unreadable: the transaction stays open)
            continue
        first = open_.pop(pid, base)
        aborted_open.pop(pid, None)
        if marker == _ABORT:
            out.append((pid, first, last, min(open_.values(), default=last + 1)))
    for pid, last in aborted_open.items():
        first = open_.pop(pid)
        out.append((pid, first, last, min(open_.values(), default=last + 1)))
    return sorted(out, key=lambda t: t[1])


def export(
    directory: Path,
    items: Sequence[LogItem],
    whole: Callable[[LogItem], bool],
    tree_of: Callable,
    read: Callable,
    progress: Callable[[int, int], None] = lambda d, t: None,
    cancel=None,
) -> tuple[Path, int, dict[Path, int]] | None:
    """The items in ``directory`` (created): ``items.jsonl`` and the whole batches among
    them as segments (``whole(item)``). None when cancelled."""
    directory.mkdir(parents=True)
    batches = [it for it in items if whole(it)]
    total = len(items) + len(batches)
    jsonl = directory / "items.jsonl"
    n = write_jsonl(jsonl, items, tree_of, progress, cancel, total)
    if n is None:
        return None
    segments = write_segments(
        directory, batches, read, lambda d, t: progress(len(items) + d, total), cancel
    )
    if cancel is not None and cancel.is_set():
        return None
    return jsonl, n, segments
