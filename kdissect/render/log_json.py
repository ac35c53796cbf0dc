"""`kdissect log`'s JSON objects and lines (docs/guide/log.md): one object per file and per
batch (with ``records``, per record too), from a located tree, or from the bulk paths'
values and lines (``sources.logunits.walk(values=True)`` / ``walk(lines=...)``) without
building objects: what every record line of a batch shares is encoded once
(log_lines.py). Used by ``kdissect log --format jsonl`` and ``--format parquet``, its Spark
tasks and the log TUI's exports, so they all write the same JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from ..protocol.findings import Finding
from ..protocol.internal import control_of
from ..protocol.node import Node
from ..protocol.ondisk import BATCH_FIELDS
from ..protocol.records import message_set_span
from .log_lines import encode as _encode, prefixed
from .records import plain_json, record_json


class LogItemLike(Protocol):
    """What the writer reads of an item (``sources.logdir.LogItemLike``: render sits below
    sources, so it is named by its shape)."""

    kind: str
    path: Path
    topic: str | None
    partition: int | None
    tree: Node | None
    findings: list[Finding]
    values: Any
    lines: Any
    aborted: bool
    log_start: int | None

    @property
    def file(self) -> str: ...

    @property
    def deleted(self) -> bool | None: ...

    def all_findings(self) -> list[Finding]: ...


def field_value(item: LogItemLike, name: str):
    """A field of the item's tree by name (None: no tree or no such field)."""
    c = item.tree.child(name) if item.tree is not None else None
    return c.value if c is not None else None


def batch_records(item: LogItemLike) -> list:
    """The records of a batch item: a v2 batch's (in its decompressed buffer if any), a
    compressed v0/v1 wrapper's inner messages, or the v0/v1 message itself."""
    tree = item.tree
    assert tree is not None, "batch items have a tree"
    if tree.ktype == "record_batch":
        holder = tree.child("records")
        kids = (
            holder.children if holder is not None and holder.buffer is not None else tree.children
        )
        return [n for n in kids if n.ktype == "record"]
    if tree.ktype.startswith("message_v"):
        return [
            n
            for n in tree.walk()
            if n.ktype.startswith("message_v") and (_child_value(n, "attributes") or 0) & 7 == 0
        ]
    return []


def _child_value(n, name):
    c = n.child(name)
    return c.value if c is not None else None


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # by the attributes' low 3 bits


def _marks(item: LogItemLike) -> dict:
    """What the partition's other files say of the batch: ``aborted`` (its transaction
    is in a .txnindex), ``deleted`` ("all"/"part" of it below ``log_start_offset``, the
    log start offset: deleted for Kafka, still on disk; null when none of it is or
    nothing shows the log start)."""
    deleted = item.deleted
    return {
        "aborted": item.aborted,
        "deleted": None if deleted is None else "all" if deleted else "part",
        "log_start_offset": item.log_start,
    }


def _values_batch_json(item: LogItemLike) -> dict:
    """``batch_json`` of a batch the bulk path read as values or lines (a clean v2 batch)."""
    got = item.values or item.lines
    assert got is not None
    h = got[0]
    attrs = h["attributes"]
    return {
        "type": "batch",
        "file": item.file,
        "topic": item.topic,
        "partition": item.partition,
        "position": h["position"],
        "size": 12 + h["batch_length"],
        **{n: h[n] for n in BATCH_FIELDS},
        "last_offset": h["base_offset"] + h["last_offset_delta"],
        "codec": CODECS[attrs & 7] if attrs & 7 < 5 else attrs & 7,
        "transactional": bool(attrs & 0x10),
        "control": bool(attrs & 0x20),
        "crc_valid": True,
        **_marks(item),
        "findings": [f.to_json() for f in item.findings],
    }


def batch_json(item: LogItemLike) -> dict:
    """One batch (or v0/v1 message set entry, or damage) as a JSON object (docs/guide/log.md)."""
    if item.values is not None or item.lines is not None:
        return _values_batch_json(item)
    tree = item.tree
    assert tree is not None, "batch items have a tree or values"
    out: dict = {
        "type": "batch",
        "file": item.file,
        "topic": item.topic,
        "partition": item.partition,
        "position": tree.offset,
        "size": tree.length,
    }
    if tree.ktype == "record_batch":
        for name in BATCH_FIELDS:
            out[name] = field_value(item, name)
        attrs = out["attributes"] or 0
        out["last_offset"] = (
            out["base_offset"] + out["last_offset_delta"]
            if isinstance(out["base_offset"], int) and isinstance(out["last_offset_delta"], int)
            else None
        )
        out["codec"] = CODECS[attrs & 7] if attrs & 7 < 5 else attrs & 7
        out["transactional"] = bool(attrs & 0x10)
        out["control"] = bool(attrs & 0x20)
    elif tree.ktype.startswith("message_v"):
        for name in ("offset", "magic", "crc", "attributes", "timestamp"):
            out[name] = field_value(item, name)
        # (its own offset is its last record's, for a compressed wrapper)
        out["base_offset"], out["last_offset"], out["record_count"] = message_set_span(tree)
        attrs = out["attributes"] or 0
        out["codec"] = CODECS[attrs & 7] if attrs & 7 < 5 else attrs & 7
    crc = tree.child("crc")
    if crc is not None:
        out["crc_valid"] = crc.problem is None
    if tree.ktype == "record_batch" or tree.ktype.startswith("message_v"):
        out.update(_marks(item))
    out["findings"] = [f.to_json() for f in item.all_findings()]
    return out


def _record_obj(item: LogItemLike, n) -> dict:
    r = record_json(n)  # with key_decoded/value_decoded for internal topics
    assert item.tree is not None, "records come from batch items"
    obj = {**_record_head(item, item.tree.offset), "position": n.offset, **r}
    attrs = item.tree.child("attributes")
    if (
        n.ktype == "record"
        and attrs is not None
        and isinstance(attrs.value, int)
        and attrs.value & 0x20
    ):
        found = control_of(n)
        if found is not None:
            obj["control_type"] = found[0]
            if found[1] is not None:
                obj["coordinator_epoch"] = found[1]
    return obj


def _record_head(item: LogItemLike, batch_position: int) -> dict:
    return {
        "type": "record",
        "file": item.file,
        "topic": item.topic,
        "partition": item.partition,
        "batch_position": batch_position,
    }


def _record_prefix(item: LogItemLike, batch_position: int) -> str:
    """What every record line of a batch starts with, up to its position's value."""
    return _encode(_record_head(item, batch_position))[:-1] + ', "position": '


def item_chunks(item: LogItemLike, records: bool) -> list[bytes]:
    """``item_lines`` as UTF-8 (ASCII: the JSON is written with ``ensure_ascii``) in
    pieces: a batch of the JSON lines path is its batch line and its record lines, which
    are prefixed straight into bytes (render/log_lines.py)."""
    if item.lines is None:
        return [item_lines(item, records).encode()]
    h, body = item.lines
    text = (_encode(_values_batch_json(item)) + "\n").encode()
    return [text, prefixed(_record_prefix(item, h["position"]), body)] if records else [text]


def item_lines(item: LogItemLike, records: bool) -> str:
    """``item_json``'s objects as JSON lines. A batch the bulk path read as values or
    lines is encoded without building its objects: what every record line shares is
    encoded once (render/log_lines.py)."""
    if item.lines is not None:
        return b"".join(item_chunks(item, records)).decode()
    if item.values is None:
        return "".join(_encode(obj) + "\n" for obj in item_json(item, records))
    text = _encode(_values_batch_json(item)) + "\n"
    if not records:
        return text
    h, starts, recs = item.values
    prefix = _record_prefix(item, h["position"])
    enc = _encode
    return text + "".join([f"{prefix}{p}, {enc(r)[1:]}\n" for p, r in zip(starts, recs)])


def item_json(item: LogItemLike, records: bool) -> list[dict]:
    if item.lines is not None:  # (the JSON lines path's items: parsed back)
        return [json.loads(line) for line in item_lines(item, records).splitlines()]
    if item.values is not None:
        h, starts, recs = item.values
        head = _record_head(item, h["position"])
        return [_values_batch_json(item)] + (
            [{**head, "position": p, **r} for p, r in zip(starts, recs)] if records else []
        )
    if item.kind in ("batch", "message") and item.tree is not None:
        objs = [batch_json(item)]
        if records:
            objs += [_record_obj(item, n) for n in batch_records(item)]
        return objs
    obj: dict = {
        "type": item.kind,
        "file": item.file,
        "topic": item.topic,
        "partition": item.partition,
    }
    if item.tree is not None:
        obj["content"] = plain_json(item.tree)
    obj["findings"] = [f.to_json() for f in item.all_findings()]
    return [obj]
