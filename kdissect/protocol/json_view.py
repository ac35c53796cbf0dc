"""Plain-JSON views of decoded messages: values with Kafka's field names, bytes as text
when they are text, records as {offset, timestamp, key, value, headers}. Pure (no I/O):
the JSON lines, `kdissect log`, the filters on record values and the TUI all read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .context import Decoding, Options
from .internal import METADATA_TOPIC_ID, decode_records, family_of
from .node import Node
from .ondisk import BATCH_FIELDS
from .records import read_records, record_offset
from .secrets import REDACTED
from .values_schema import by_value_schema, decoded_of, json_value, plain_value, schema_id_of


_LINE_BREAKS = str.maketrans("", "", "\r\n\t")  # allowed in text besides printables


def json_bytes(b: bytes | None) -> Any:
    """Bytes as text when they are printable UTF-8 (tabs and line breaks allowed), else
    as hex. One ``isprintable`` over the whole string: a per-character check was the
    top of the jsonl profile."""
    if b is None:
        return None
    if isinstance(b, str):
        return b
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}
    if text.isprintable() or text.translate(_LINE_BREAKS).isprintable():
        return text
    return {"hex": b.hex()}


def _child_bytes(n: Node, name: str, show: bool = False) -> Any:
    """A child's value as JSON; None when damage left the child out. A key/value decoded
    by its schema (docs/guide/values.md) is its decoded value. A secret (protocol/secrets.py)
    is REDACTED unless ``show``."""
    c = n.child(name)
    if c is not None and c.secret and not show and c.value is not None:
        return REDACTED
    if c is not None and c.children and name in ("key", "value"):
        decoded = decoded_of(c)
        if decoded is not None:
            return json_value(plain_value(decoded))
    return json_bytes(c.value) if c is not None and not isinstance(c.value, int) else None


def _schema_ids(n: Node, out: dict[Any, Any]) -> dict[Any, Any]:
    """``key_schema``/``value_schema`` (the schema ids) of a record with framed data."""
    for role in ("key", "value"):
        c = n.child(role)
        if c is not None and c.children:
            sid = schema_id_of(c)
            if sid is not None:
                out[f"{role}_schema"] = sid
    return out


def plain_json(node: Node, show: bool = False) -> Any:
    """Like Node.plain(), JSON-ready, with record data flattened into records; secrets
    (protocol/secrets.py) REDACTED unless ``show`` (--show-secrets)."""
    if node.secret and not show and not node.children and node.value is not None:
        return REDACTED  # (a secret holder's own bytes: its fields are its children;
        # a null stays null, as secrets.mask_values leaves it)
    kind = node.ktype
    if kind == "records":
        if node.value is None:
            return None
        if isinstance(node.value, bytes):
            return json_bytes(node.value)
        return [batch_json(b, show) for b in node.children if not b.name.startswith("_")]
    if kind == "array":
        if node.value is None:
            return None
        return [plain_json(c, show) for c in node.children if not c.name.startswith("_")]
    if kind == "tagged":
        return plain_json(node.children[-1], show) if node.children else None
    if node.children and kind not in ("bytes",) or kind in ("struct", "message"):
        if kind == "struct" and node.note == "null" and not node.children:
            return None
        out: dict[str, Any] = {}
        for c in node.children:
            if c.ktype == "tagged_fields":
                for t in c.children:
                    if t.ktype == "tagged":
                        out[t.name] = plain_json(t, show)
            elif not c.name.startswith("_"):
                out[c.name] = plain_json(c, show)
        return out
    if node.children:  # bytes holding an embedded structure
        return {c.name: plain_json(c, show) for c in node.children if not c.name.startswith("_")}
    if isinstance(node.value, (bytes, bytearray)):
        return json_bytes(bytes(node.value))
    return node.value


def records_of(node: Node, show: bool = False) -> list[dict[Any, Any]]:
    """Every record (v2) or uncompressed message (v0/v1) under ``node``."""
    out = []
    stack = [node]
    while stack:  # Node.walk, not into records (decoded values can be big)
        n = stack.pop()
        if n.ktype == "record":
            out.append(record_json(n, show))
            continue
        if n.ktype.startswith("message_v"):
            attrs = n.child("attributes")
            if attrs is not None and attrs.value is not None and attrs.value & 7 == 0:
                out.append(record_json(n, show))
        stack.extend(reversed(n.children))
    return out


def decoded_json(n: Node, show: bool = False) -> dict[Any, Any]:
    """``key_decoded``/``value_decoded`` (the struct by name) and ``key_schema``/
    ``value_schema`` ("OffsetCommitValue v3") of a record whose key or value was decoded
    by an internal topic's schema (protocol/internal.py); empty for other records."""
    out: dict[Any, Any] = {}
    for part in ("key", "value"):
        c = n.child(part)
        if c is None or not c.children or by_value_schema(c):
            continue  # a value decoded by a registry schema (docs/guide/values.md), not internal
        decoded = [k for k in c.children if not k.name.startswith("_")]
        if decoded:
            out[f"{part}_decoded"] = {k.name: plain_json(k, show) for k in decoded}
            out[f"{part}_schema"] = decoded[0].note
    return out


def record_json(n: Node, show: bool = False) -> dict[Any, Any]:
    """One record or message; damaged ones lack children, which read as null."""
    if n.ktype == "record":
        value = n.value if isinstance(n.value, dict) else {}
        headers = n.child("headers")
        return _schema_ids(
            n,
            {
                "offset": value.get("offset"),
                "timestamp": value.get("timestamp"),
                "key": _child_bytes(n, "key", show),
                "value": _child_bytes(n, "value", show),
                "headers": [
                    {"key": k.value, "value": _child_bytes(h, "value", show)}
                    for h in (headers.children if headers else [])
                    if (k := h.child("key")) is not None
                ],
                **decoded_json(n, show),
            },
        )
    ts, crc, magic = n.child("timestamp"), n.child("crc"), n.child("magic")
    return _schema_ids(
        n,
        {
            "offset": record_offset(n),
            "crc": crc.value if crc is not None else None,
            "magic": magic.value if magic is not None else None,
            "timestamp": ts.value if ts is not None else None,
            "key": _child_bytes(n, "key", show),
            "value": _child_bytes(n, "value", show),
            "headers": [],
        },
    )


def batch_json(b: Node, show: bool = False) -> dict[Any, Any]:
    if b.ktype == "record_batch":
        # every field of the batch's header (null where a damaged batch lacks it), the
        # attributes as the tree notes them
        head: dict[Any, Any] = {}
        for name in BATCH_FIELDS:
            n = b.child(name)
            head[name] = (n.note if name == "attributes" else n.value) if n is not None else None
        return {**head, "problems": [r for _, r in b.problems()], "records": records_of(b, show)}
    if b.ktype.startswith("message_v"):
        magic = b.child("magic")
        return {
            "magic": magic.value if magic is not None else None,
            "problems": [r for _, r in b.problems()],
            "records": records_of(b, show),
        }
    return {"partial": b.note or b.problem, "length": b.length}


def internal_records_json(
    options: Options,
    topic_ids: Mapping[str, str] | None,
    buf: bytes,
    start: int,
    end: int,
    topic: str | None,
    topic_id: str | None,
    nodes: int,
    decompressed: int,
) -> tuple[str, int, int] | None:
    """A records field of a message that may carry an internal topic's records, for
    ``values.body_json``: its batches as the located decoder reads them in the whole message
    (``internal.decode_wire_records``: the family of the topic its struct names, by name
    or id) and as JSON lines show them; with the node and decompression budgets left
    (``decompressed`` -1: the message's first). None where that tree holds a finding:
    the whole message is then read located."""
    if topic is None and topic_id is not None:
        topic = (
            "__cluster_metadata"
            if topic_id == METADATA_TOPIC_ID
            else (topic_ids.get(topic_id) if topic_ids else None)
        )
    ctx = Decoding(options, topic_ids)
    ctx.budget.nodes = nodes
    if decompressed >= 0:
        ctx.budget.decompressed = decompressed
    node = Node("records", "records", start, end - start, end - start)
    read_records(buf, node, start, end, ctx)
    decode_records(node, family_of(topic), ctx)
    if node.findings():
        return None
    show = options.show_secrets
    text = _ENCODE([batch_json(b, show) for b in node.children if not b.name.startswith("_")])
    return text, ctx.budget.nodes, ctx.budget.decompressed


_ENCODE = json.JSONEncoder(default=str).encode  # json.dumps(x, default=str), as the lines
