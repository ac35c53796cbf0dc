"""Avro binary, located: every value of a record keeps its byte span.

The schema is one ``fastavro.parse_schema`` has parsed (full names; a named type is
spelled out once and referenced by name after), with ``named`` mapping full names to
their definitions. Values are what ``fastavro.schemaless_reader`` returns (Decimal,
datetime, date, UUID for logical types), so fastavro serves as the oracle in tests.
"""

from __future__ import annotations

import decimal
import struct
import uuid
from datetime import date, datetime, timedelta, timezone
from typing import Any

from ..node import Node
from .common import Cursor, Mismatch

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LOCAL_EPOCH = datetime(1970, 1, 1)
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def decode(cur: Cursor, schema: Any, named: dict[str, Any], parent: Node, name: str) -> Node:
    """Read one value of ``schema`` at the cursor and add its node to ``parent``."""
    cur.charge()
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _primitive(cur, schema, parent, name)
        if schema not in named:
            raise Mismatch(cur.pos, f"schema names type {schema!r}, which it does not define")
        schema = named[schema]
    if isinstance(schema, list):
        return _union(cur, schema, named, parent, name)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if kind == "record" or kind == "error":
        return _record(cur, schema, named, parent, name)
    if kind == "enum":
        start = cur.pos
        i = cur.zigzag("enum index")
        symbols = schema["symbols"]
        if not 0 <= i < len(symbols):
            raise Mismatch(start, f"enum {schema['name']} has no symbol {i}")
        return parent.add(
            Node(name, "enum", start, cur.pos - start, symbols[i], note=f"{schema['name']} #{i}")
        )
    if kind == "array":
        return _blocks(cur, schema["items"], None, named, parent, name)
    if kind == "map":
        return _blocks(cur, None, schema["values"], named, parent, name)
    if kind == "fixed":
        start = cur.pos
        raw = cur.take(schema["size"], f"fixed {schema['name']}")
        node = parent.add(Node(name, "fixed", start, len(raw), raw))
        if logical == "decimal":
            _decimal(node, schema)
        elif logical == "duration" and len(raw) == 12:
            node.note = "duration: %d months, %d days, %d ms" % struct.unpack("<III", raw)
        return node
    if kind in _PRIMITIVES:
        node = _primitive(cur, kind, parent, name)
        if logical is not None:
            _logical(node, schema, logical)
        return node
    raise Mismatch(cur.pos, f"unsupported Avro type {kind!r}")


def _primitive(cur: Cursor, kind: str, parent: Node, name: str) -> Node:
    start = cur.pos
    if kind == "null":
        value: Any = None
    elif kind == "boolean":
        b = cur.take(1, "boolean")[0]
        if b > 1:
            raise Mismatch(start, f"boolean byte is {b}, not 0 or 1")
        value = b == 1
    elif kind == "int" or kind == "long":
        value = cur.zigzag(kind)
        if kind == "int" and not -(1 << 31) <= value < (1 << 31):
            raise Mismatch(start, f"int {value} does not fit in 32 bits")
    elif kind == "float":
        value = _F32.unpack(cur.take(4, "float"))[0]
    elif kind == "double":
        value = _F64.unpack(cur.take(8, "double"))[0]
    else:  # bytes, string: a long length, then bytes
        n = cur.zigzag(f"{kind} length")
        value = cur.take(n, kind)
        if kind == "string":
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Mismatch(start, f"string is not UTF-8 ({e.reason})") from None
    return parent.add(Node(name, kind, start, cur.pos - start, value))


def _union(
    cur: Cursor, branches: list[Any], named: dict[str, Any], parent: Node, name: str
) -> Node:
    start = cur.pos
    i = cur.zigzag("union branch")
    if not 0 <= i < len(branches):
        raise Mismatch(start, f"union has {len(branches)} branches, the value picks {i}")
    node = decode(cur, branches[i], named, parent, name)
    node.offset, node.length = start, cur.pos - start  # the branch index included
    branch = branches[i]
    label = branch if isinstance(branch, str) else branch.get("name", branch.get("type"))
    node.note = f"union branch {i} ({label})" + (f"; {node.note}" if node.note else "")
    return node


def _record(
    cur: Cursor, schema: dict[Any, Any], named: dict[str, Any], parent: Node, name: str
) -> Node:
    node = parent.add(Node(name, "struct", cur.pos, note=schema["name"]))
    cur.enter()
    try:
        for f in schema["fields"]:
            decode(cur, f["type"], named, node, f["name"])
    finally:
        node.length = cur.pos - node.offset
        cur.leave()
    return node


def _blocks(
    cur: Cursor, items: Any, values: Any, named: dict[str, Any], parent: Node, name: str
) -> Node:
    """An array (``items``) or a map (``values``): blocks of count items, a 0 count ends;
    a negative count is followed by the block's size in bytes."""
    node = parent.add(Node(name, "array" if values is None else "struct", cur.pos))
    cur.enter()
    count = 0
    try:
        while True:
            n = cur.zigzag("block count")
            if n == 0:
                break
            if n < 0:
                n = -n
                cur.zigzag("block size")
            for _ in range(n):
                if values is None:
                    decode(cur, items, named, node, f"[{count}]")
                else:
                    kstart = cur.pos
                    klen = cur.zigzag("map key length")
                    key = cur.take(klen, "map key").decode("utf-8", "replace")
                    child = decode(cur, values, named, node, key)
                    child.offset, child.length = kstart, cur.pos - kstart
                count += 1
    finally:
        node.length = cur.pos - node.offset
        cur.leave()
    if values is None:
        node.value = count
    return node


MAX_DECIMAL_DIGITS = 1000  # no real schema's precision is near: bounds the work


def decimal_value(raw: bytes, precision: int, scale: int) -> decimal.Decimal:
    """An Avro decimal's value (what fastavro returns). Raises ValueError when its
    unscaled integer has more digits than the precision allows (600 KB of bytes took 25
    CPU-s to convert, then overflowed the context): bytes beyond ceil(p * log2(10) / 8)
    + 1, after sign-extension bytes, cannot fit p digits."""
    p = (
        min(precision, MAX_DECIMAL_DIGITS)
        if isinstance(precision, int) and precision > 0
        else MAX_DECIMAL_DIGITS
    )
    pad = b"\xff" if raw[:1] >= b"\x80" else b"\0"
    digits = raw.lstrip(pad)
    if len(digits) > p * 0.4153 + 2:
        raise ValueError(
            f"a decimal of {len(raw)} bytes: more digits than its precision {precision} allows"
        )
    ctx = decimal.Context(prec=p)  # fastavro's (exponent limits included)
    try:
        return ctx.create_decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale, ctx)
    except (decimal.DecimalException, TypeError) as e:  # a scale past the exponents
        raise ValueError(f"decimal out of range ({type(e).__name__})") from None


def _decimal(node: Node, schema: dict[Any, Any]) -> None:
    node.value = decimal_value(node.value, schema.get("precision", 28), schema.get("scale", 0))
    node.ktype = "decimal"


def _logical(node: Node, schema: dict[Any, Any], logical: str) -> None:
    """Turn the primitive value into what fastavro returns for its logical type."""
    v = node.value
    try:
        if logical == "decimal" and isinstance(v, bytes):
            _decimal(node, schema)
            return
        if logical == "timestamp-millis":
            node.value = _EPOCH + timedelta(milliseconds=v)
        elif logical == "timestamp-micros":
            node.value = _EPOCH + timedelta(microseconds=v)
        elif logical == "local-timestamp-millis":
            node.value = _LOCAL_EPOCH + timedelta(milliseconds=v)
        elif logical == "local-timestamp-micros":
            node.value = _LOCAL_EPOCH + timedelta(microseconds=v)
        elif logical == "date":
            node.value = date(1970, 1, 1) + timedelta(days=v)
        elif logical == "time-millis":
            node.value = (datetime.min + timedelta(milliseconds=v)).time()
        elif logical == "time-micros":
            node.value = (datetime.min + timedelta(microseconds=v)).time()
        elif logical == "uuid" and isinstance(v, str):
            node.value = uuid.UUID(v)
        else:
            return
    except (OverflowError, ValueError, TypeError):
        node.note = f"{logical}: {v} is out of range"  # keep the raw number
        return
    node.ktype = logical
    node.note = f"{v} ({logical})"


def parse(schema_json: Any, references: list[Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """(parsed schema, named types) from an .avsc document (dict, list or str); raises
    ValueError with fastavro's reason when it is not a valid schema. ``references``:
    documents defining the named types it uses (Schema Registry references), in any
    order (each is parsed once the types it needs are known)."""
    from fastavro import parse_schema  # a schema parser only: decoding is ours
    from fastavro.schema import SchemaParseException, UnknownType

    named: dict[str, Any] = {}
    pending = list(references or ())
    while pending:  # at most len(references) rounds
        failed = []
        for doc in pending:
            trial = dict(named)
            try:
                parse_schema(doc, named_schemas=trial)
                named = trial
            except UnknownType:
                failed.append(doc)
            except (SchemaParseException, KeyError, TypeError, AttributeError) as e:
                raise ValueError(f"not a valid Avro schema reference: {e}") from None
        if len(failed) == len(pending):
            break  # the main schema's parse says what is missing
        pending = failed
    try:
        parsed = parse_schema(schema_json, named_schemas=named)
    except UnknownType as e:
        raise ValueError(
            f"not a valid Avro schema: unknown type {e} (not defined here nor by a reference)"
        ) from None
    except (SchemaParseException, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a valid Avro schema: {e}") from None
    return parsed, named
