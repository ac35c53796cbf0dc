"""Record keys and values as people see them, located to the byte (docs/guide/values.md).

Pure: schemas arrive parsed (``Schema``) from a ``SchemaSource`` the caller built (files,
a registry: kdissect/schemas_source.py does that I/O). ``decode_values`` walks a decoded
message and, for every record, adds under its key/value node the Confluent framing
(``magic``, ``schema_id``, ``message_indexes``) and the decoded value (``decoded``),
each node with its offset and length in the record's buffer. Without a schema, a
heuristic names what the bytes look like (``guess``) and how sure it is.

Every node is charged to the message's budget; nesting is bounded (``MAX_DEPTH``), so a
hostile value cannot amplify.
"""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, time
from typing import Any, Protocol
from uuid import UUID

from ..budget import Budget
from ..node import Node
from ..plain import Plain
from .common import MAX_DEPTH, Cursor, Mismatch, OutOfBudget, rest_node

__all__ = [
    "Schema",
    "SchemaSource",
    "decode_values",
    "decode_one",
    "plain_value",
    "json_value",
    "decoded_of",
    "schema_id_of",
    "guess",
    "value_columns",
]


class Schema(Plain):  # identity: readers are cached per Schema object
    """A parsed schema: ``kind`` avro (``parsed`` = (schema, named types)), protobuf
    (a ``protobuf.ProtoSchema``; ``message`` picks the type for unframed bytes), json
    (``parsed`` = the JSON Schema document; values are checked as JSON only) or text."""

    _fields = ("kind", "parsed", "label", "message")

    def __init__(self, kind: str, parsed: Any, label: str = "", message: str | None = None):
        self.kind, self.parsed, self.label, self.message = kind, parsed, label, message


class SchemaSource(Protocol):
    def by_id(self, schema_id: int) -> Schema | None:
        """The schema registered under ``schema_id``; None when unknown."""

    def for_topic(self, topic: str | None, role: str) -> Schema | None:
        """An override for the topic's ``role`` ("key" or "value"); None if none."""

    # whether values are expected to carry Schema Registry framing (schemas by id were
    # given): an unframed value is then what a Confluent deserializer rejects
    framed: bool


def decode_values(
    body: Node, source: SchemaSource, budget: Budget | None, topic: str | None = None
) -> None:
    """Decode the key and value of every record under ``body`` (a message's body, or a
    batch of ``topic`` read from disk)."""
    stack: list[tuple[Node, str | None]] = [(body, topic)]
    while stack:
        node, topic = stack.pop()
        if node.ktype == "record" or node.ktype.startswith("message_v"):
            for role in ("key", "value"):
                child = node.child(role)
                if child is not None and isinstance(child.value, bytes) and not child.children:
                    decode_one(child, topic, role, source, budget, header_id(node, role))
            continue
        if node.buffer is None and node.ktype in ("bytes", "raw") or not node.children:
            continue
        for c in node.children:
            if c.name in ("name", "topic") and isinstance(c.value, str):
                topic = c.value
                break
        stack.extend((c, topic) for c in node.children)


# Apicurio's serializers may name the schema in record headers instead of framing the
# value: an 8-byte big-endian id (contentId: what /apis/ccompat/v7/schemas/ids/ID serves
# by default; globalId with legacy ids)
APICURIO_HEADERS = ("apicurio.{role}.contentId", "apicurio.{role}.globalId")


def header_id(record: Node, role: str) -> tuple[str, int] | None:
    """(header name, schema id) when the record names its ``role``'s schema in a header."""
    headers = record.child("headers")
    if headers is None or not headers.children:
        return None
    found = {}
    for h in headers.children:
        k, v = h.child("key"), h.child("value")
        if (
            k is not None
            and v is not None
            and isinstance(v.value, bytes)
            and len(v.value) == 8
            and isinstance(k.value, str)
        ):
            found[k.value] = int.from_bytes(v.value, "big")
    for name in APICURIO_HEADERS:
        name = name.format(role=role)
        if name in found:
            return name, found[name]
    return None


def decode_one(
    field: Node,
    topic: str | None,
    role: str,
    source: SchemaSource | None,
    budget: Budget | None,
    by_header: tuple[str, int] | None = None,
) -> None:
    """Decode one record key/value node (``field.value``: its bytes, which end at
    ``field.end``); adds children located in the same buffer as ``field``.
    ``by_header``: (header, schema id) when a record header names the schema."""
    data: bytes = field.value
    if not data:
        return
    base = field.end - len(data)
    cur = Cursor(data, 0, len(data), budget)
    holder = Node(field.name, field.ktype, 0, len(data))
    override = source.for_topic(topic, role) if source is not None else None
    framed = len(data) >= 5 and data[0] == 0
    schema: Schema | None = override
    try:
        cur.charge(2)
        by_id = source is not None and source.framed and override is None
        if by_id and by_header is not None and source is not None:
            name, schema_id = by_header
            schema = source.by_id(schema_id)
            # the id is in the header, not in the value: a zero-length node says so
            note = f"from the record header {name}"
            if schema is not None:
                note += f"; {schema.kind}: {schema.label}" if schema.label else f"; {schema.kind}"
            sid = holder.add(Node("schema_id", "int64", 0, 0, schema_id, note=note))
            if schema is None:
                sid.problem = f"schema id {schema_id} is in no schema source given"
                sid.code = "value_schema_unknown"
                _describe(field, holder, cur, base, None)
                return
            framed = False
        elif by_id and not framed and role == "value":
            bad = holder.add(Node("magic", "int8", 0, 1, data[0]))
            bad.problem = (
                f"first byte is {data[0]:#04x}, not the magic byte 0 of Schema "
                f"Registry framing (a Confluent deserializer says 'Unknown magic "
                f"byte!')"
                if data[0]
                else f"{len(data)} bytes are too short for Schema Registry framing "
                f"(magic byte 0 and a 4-byte schema id)"
            )
            bad.code = "value_unknown_magic"
            _describe(field, holder, cur, base, "guess")
            return
        if framed and (by_id or override is not None):
            holder.add(Node("magic", "int8", 0, 1, 0, note="Schema Registry framing"))
            schema_id = int.from_bytes(data[1:5], "big")
            sid = holder.add(Node("schema_id", "int32", 1, 4, schema_id))
            cur.pos = 5
            if schema is None and source is not None:  # by_id: schemas by their id
                schema = source.by_id(schema_id)
            if schema is None:
                sid.problem = f"schema id {schema_id} is in no schema source given"
                sid.code = "value_schema_unknown"
                rest = holder.add(Node("payload", "raw", 5, len(data) - 5, data[5:]))
                rest.note = "not decoded: schema unknown"
                _describe(field, holder, cur, base, None)
                return
            sid.note = f"{schema.kind}: {schema.label}" if schema.label else schema.kind
        if schema is None:
            _describe(field, holder, cur, base, "guess")
            return
        _decode_with(cur, schema, holder, framed)
        if cur.pos < cur.end:
            rest_node(
                cur,
                holder,
                f"{cur.end - cur.pos} bytes after the {schema.kind} value ends",
                "value_trailing_bytes",
            )
    except Mismatch as e:
        cur.pos = max(min(e.pos, cur.end), 0)
        rest_node(
            cur,
            holder,
            f"does not match its {schema.kind if schema else ''} schema "
            f"at byte {e.pos} of the {role}: {e.reason}",
            "value_schema_mismatch",
        )
    except OutOfBudget:
        rest_node(
            cur,
            holder,
            f"node budget of {budget.max_nodes if budget else 0} fields "
            f"spent; the rest of the {role} is kept raw (raise it with "
            f"--max-nodes)",
            "node_budget",
        )
    _describe(field, holder, cur, base, None)


def _decode_with(cur: Cursor, schema: Schema, holder: Node, framed: bool) -> None:
    from . import avro, jsonv, protobuf  # only with schemas: not at every start-up

    if schema.kind == "avro":
        parsed, named = schema.parsed
        avro.decode(cur, parsed, named, holder, "decoded")
    elif schema.kind == "protobuf":
        message = schema.message
        if framed:
            start = cur.pos
            idx = holder.add(Node("message_indexes", "array", start))
            n = cur.zigzag("message index count")
            if n < 0 or n > cur.end - cur.pos:
                raise Mismatch(start, f"message index count {n} is impossible")
            if n > MAX_INDEXES:  # a path into nested messages: 4 MB of them took 1.4 GB
                raise Mismatch(
                    start,
                    f"message index path of {n} levels (a schema's "
                    f"messages nest at most {MAX_INDEXES} deep here)",
                )
            for _ in range(n):
                cur.charge()
            indexes = [cur.zigzag("message index") for _ in range(n)] if n else [0]
            idx.length, idx.value = cur.pos - start, len(indexes)
            idx.note = "single 0: the first message" if n == 0 else f"path {indexes}"
            for i, v in enumerate(indexes):
                idx.add(Node(f"[{i}]", "varint", start, cur.pos - start, v))
            try:
                message = schema.parsed.message_for(indexes)
            except KeyError as e:
                raise Mismatch(start, e.args[0]) from None
        if message is None:
            message = schema.parsed.message_for([0])
        protobuf.decode(cur, schema.parsed, message, holder, "decoded")
    elif schema.kind == "json":
        jsonv.decode(cur, holder, "decoded")
    else:
        start = cur.pos
        try:
            text = cur.buf[start : cur.end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise Mismatch(start + e.start, f"not UTF-8 ({e.reason})") from None
        holder.add(Node("decoded", "string", start, cur.end - start, text))
        cur.pos = cur.end


def _describe(field: Node, holder: Node, cur: Cursor, base: int, mode: str | None) -> None:
    """Move ``holder``'s children under ``field``, shifted into the record's buffer."""
    if mode == "guess":
        from .guess import guess

        g = guess(cur.buf, cur.pos, cur.end, cur.budget)
        field.note = g.summary
        if g.tree is not None:
            holder.add(g.tree)
    decoded = holder.child("decoded")
    sid = holder.child("schema_id")
    if decoded is not None:
        field.note = f"{sid.note if sid is not None else 'decoded'}" + (
            f", schema {sid.value}" if sid is not None else ""
        )
    if not holder.children:
        return
    for n in holder.walk():
        if n is not holder:
            n.offset += base
    field.children = holder.children


# the names this package gives the children of a record key/value node
MAX_INDEXES = MAX_DEPTH  # Confluent's message-index path: one per nesting level
_PARTS = frozenset({"magic", "schema_id", "message_indexes", "decoded", "guessed"})


def by_value_schema(field: Node) -> bool:
    """Whether a key/value node's children were made here (framing, a value by its schema
    or a guess), not by an internal topic's record schema (protocol/internal.py)."""
    return any(c.name in _PARTS for c in field.children)


def decoded_of(field: Node) -> Node | None:
    """The decoded value under a record key/value node (schema or a sure guess)."""
    for c in field.children:
        if c.name == "decoded":
            return c
    return None


def schema_id_of(field: Node) -> int | None:
    for c in field.children:
        if c.name == "schema_id":
            sid: int | None = c.value
            return sid
    return None


def value_columns(field: Node | None, role: str) -> dict[str, Any]:
    """``{role}_json`` (the value decoded by its schema, as JSON text) and ``{role}_schema``
    (its schema id) of a record key/value node, for tables; None when not decoded."""
    decoded = decoded_of(field) if field is not None and field.children else None
    if field is None or decoded is None:
        return {f"{role}_json": None, f"{role}_schema": None}
    return {
        f"{role}_json": json.dumps(json_value(plain_value(decoded)), ensure_ascii=False),
        f"{role}_schema": schema_id_of(field),
    }


def plain_value(node: Node) -> Any:
    """A decoded value as Python data: records/messages/objects/maps as dicts, arrays as
    lists; bookkeeping (``raw`` nodes: unknown fields, the undecoded rest) left out."""
    if node.ktype == "array":
        return [plain_value(c) for c in node.children if c.ktype != "raw"]
    if node.ktype == "struct":
        return {c.name: plain_value(c) for c in node.children if c.ktype != "raw"}
    return node.value


def json_value(v: Any, tally: list[int] | None = None) -> Any:
    """``plain_value`` made JSON-ready: bytes as base64 (as Protobuf's JSON does), decimals
    as strings (exact), times in ISO 8601, UUIDs as text. ``tally[0]`` counts the values
    (what the located tree would spend of the node budget)."""
    count = [0]
    out = _json(v, count)
    if tally is not None:
        tally[0] += count[0]
    return out


_SAME = frozenset({str, int, bool, type(None)})


def _json(v: Any, count: list[int]) -> Any:
    # type() dispatch: this runs once per value of every record in JSON lines
    count[0] += 1
    t = type(v)
    if t in _SAME:
        return v
    if t is dict:
        return {k: _json(x, count) for k, x in v.items()}
    if t is list:
        return [_json(x, count) for x in v]
    if t is float:
        return str(v) if v != v or v in (float("inf"), float("-inf")) else v
    if t is bytes or t is bytearray:
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    from decimal import Decimal  # rare here; 3 ms to import at every start-up

    if isinstance(v, (Decimal, UUID)):
        return str(v)
    return v
