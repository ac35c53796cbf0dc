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
        heads: list[tuple[int, int, int, int, bool]] = []
        with open(segment, "wb") as out:
            for item in items:
                data = read(item)
                out.write(data)
                head = _v2_head(data)
                if head is not None:
                    heads.append((*head, item.aborted))
                done += 1
                if done % 256 == 0:
                    if cancel is not None and cancel.is_set():
                        return written
                    progress(done, len(batches))
        aborted = _aborted_transactions(heads)
        if aborted:  # (else the marks of aborted transactions are lost on reading it)
            segment.with_suffix(".txnindex").write_bytes(
                b"".join(_TXN_ENTRY.pack(0, pid, lo, hi, lo) for pid, lo, hi in aborted)
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


def _aborted_transactions(
    heads: list[tuple[int, int, int, int, bool]],
) -> list[tuple[int, int, int]]:
    """(producer id, first offset, last offset) of each aborted transaction among
    batches (base, last, producer id, attributes, aborted) in offset order, as a
    .txnindex lists them: from its first batch to its ABORT marker (the control batch
    that ends it), or to its last batch exported when the marker is not."""
    open_: dict[int, list[int]] = {}
    out: list[tuple[int, int, int]] = []
    for base, last, pid, attributes, aborted in sorted(heads):
        if not aborted:
            continue
        span = open_.setdefault(pid, [base, last])
        span[1] = last
        if attributes & batch.CONTROL:  # the control batch: its marker
            out.append((pid, span[0], span[1]))
            del open_[pid]
    out += [(pid, lo, hi) for pid, (lo, hi) in open_.items()]
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
