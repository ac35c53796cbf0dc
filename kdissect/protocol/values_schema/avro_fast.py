"""Avro binary straight to JSON-ready values, for JSON lines: a reader built once per
schema out of closures (one per schema node, nothing compiled), with the JSON forms of
values_schema.json_value (decimals as strings, times in ISO 8601, UUIDs as text, bytes as
base64). Any oddity raises, and the caller takes the located decoder.

Each value read adds one to ``tally[0]`` (what the located tree would hold); a record
adds its own and its plain fields' counts at once, and those fields' readers do not."""

from __future__ import annotations

import base64
import struct
from datetime import date, datetime, timedelta, timezone
from collections.abc import Callable
from typing import Any
from uuid import UUID

from ..reader import uvarint
from .avro import decimal_value

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LOCAL = datetime(1970, 1, 1)
_DAY0 = date(1970, 1, 1)
_F = struct.Struct("<f").unpack_from
_D = struct.Struct("<d").unpack_from


def _long(b: bytes, p: int) -> tuple[int, int]:
    n = b[p]
    if n < 128:  # nearly all of them: one byte, no call
        return (n >> 1) ^ -(n & 1), p + 1
    n, p = uvarint(b, p, len(b), 10)
    return (n >> 1) ^ -(n & 1), p


def _bytes(b: bytes, p: int) -> tuple[bytes, int]:
    n, p = _long(b, p)
    if n < 0 or p + n > len(b):
        raise ValueError("length past the end")
    return b[p : p + n], p + n


class Unsupported(Exception):
    pass


Read = Callable[[bytes, int, list[Any]], tuple[Any, int]]

_TIME: dict[str, Callable[[int], str]] = {
    "timestamp-millis": lambda x: (_EPOCH + timedelta(milliseconds=x)).isoformat(),
    "timestamp-micros": lambda x: (_EPOCH + timedelta(microseconds=x)).isoformat(),
    "local-timestamp-millis": lambda x: (_LOCAL + timedelta(milliseconds=x)).isoformat(),
    "local-timestamp-micros": lambda x: (_LOCAL + timedelta(microseconds=x)).isoformat(),
    "date": lambda x: (_DAY0 + timedelta(days=x)).isoformat(),
    "time-millis": lambda x: (datetime.min + timedelta(milliseconds=x)).time().isoformat(),
    "time-micros": lambda x: (datetime.min + timedelta(microseconds=x)).time().isoformat(),
}


def _counted(read: Read) -> Read:
    def counted(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
        t[0] += 1
        return read(b, p, t)

    return counted


def resolve(s: Any, named: dict[str, Any]) -> Any:
    """The schema ``s`` stands for: a named type's definition, a primitive's name as
    ``{"type": name}``, a ``{"type": {...}}`` wrapper unwrapped; a union stays a list."""
    while True:
        if isinstance(s, str):
            s = named.get(s, {"type": s})
        elif isinstance(s, dict) and (isinstance(s["type"], (dict, list)) or s["type"] in named):
            s = s["type"]
        else:
            return s


def plain(s: Any) -> bool:
    """A (resolved) value read without nested values: its count is known in advance."""
    return isinstance(s, dict) and s["type"] not in ("record", "error", "array", "map")


def compile_reader(schema: Any, named: dict[str, Any]) -> Read:
    """``read(buf, pos, tally) -> (value, pos)``; raises Unsupported at build time for
    what it does not read. ``schema`` is not recursive (fast._qualifies)."""
    records: dict[str, Read] = {}

    def build(s: Any) -> Read:
        """The reader of a value of ``s``, counting itself (unions count their branch)."""
        s = resolve(s, named)
        if isinstance(s, list):
            return union(s)
        if s["type"] in ("record", "error"):
            return record(s)
        if s["type"] in ("array", "map"):
            return _counted(sequence(s))
        return _counted(leaf(s))

    def counting(s: Any) -> tuple[bool, Read]:
        """(whether the caller counts the value, its reader): plain values are counted by
        their caller, saving a call each."""
        s = resolve(s, named)
        return (True, leaf(s)) if plain(s) else (False, build(s))

    def union(schemas: list[Any]) -> Read:
        branches = [counting(branch) for branch in schemas]

        def read(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
            i = b[p]
            if i < 128:
                i = (i >> 1) ^ -(i & 1)
                p += 1
            else:
                i, p = _long(b, p)
            if i < 0:
                raise ValueError("union index")
            counted, r = branches[i]
            if counted:
                t[0] += 1
            return r(b, p, t)

        return read

    def record(s: dict[Any, Any]) -> Read:
        name = s["name"]
        if name in records:
            return records[name]
        # (name, how, reader): how 1 and 2 (plain strings and longs, the commonest) are
        # read inline in the loop below, without a call
        fields: list[tuple[str, int, Read]] = []
        static = 1  # the record, and its plain fields
        for f in s["fields"]:
            resolved = resolve(f["type"], named)
            if plain(resolved):
                static += 1
                how = (
                    0
                    if resolved.get("logicalType")
                    else {"string": 1, "long": 2}.get(resolved["type"], 0)
                )
                fields.append((f["name"], how, leaf(resolved)))
            else:
                fields.append((f["name"], 0, build(resolved)))

        def read(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
            t[0] += static
            d = {}
            for key, how, r in fields:
                if how == 0:
                    d[key], p = r(b, p, t)
                    continue
                n = b[p]
                if n < 128:
                    n = (n >> 1) ^ -(n & 1)
                    p += 1
                else:
                    n, p = _long(b, p)
                if how == 2:
                    d[key] = n
                else:
                    q = p + n
                    if n < 0 or q > len(b):
                        raise ValueError("length past the end")
                    d[key] = b[p:q].decode()
                    p = q
            return d, p

        records[name] = read
        return read

    def sequence(s: dict[Any, Any]) -> Read:
        is_map = s["type"] == "map"
        counted, item = counting(s["values"] if is_map else s["items"])

        def read(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
            out: Any = {} if is_map else []
            while True:
                n, p = _long(b, p)
                if n == 0:
                    return out, p
                if n < 0:
                    n = -n
                    _, p = _long(b, p)  # the block's size in bytes
                if counted:
                    t[0] += n
                for _ in range(n):
                    if is_map:
                        k, p = _bytes(b, p)
                        out[k.decode()], p = item(b, p, t)
                    else:
                        v, p = item(b, p, t)
                        out.append(v)

        return read

    def leaf(s: dict[Any, Any]) -> Read:
        """A value without nested values, not counting itself."""
        kind, logical = s["type"], s.get("logicalType")
        if kind == "null":
            return lambda b, p, t: (None, p)
        if kind == "boolean":

            def boolean(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
                v = b[p]
                if v > 1:
                    raise ValueError("bool")
                return v == 1, p + 1

            return boolean
        if kind in ("int", "long"):
            conv = _TIME.get(logical) if logical else None
            if kind == "int":

                def int_(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
                    v, p = _long(b, p)
                    if not -2147483648 <= v < 2147483648:
                        raise ValueError("int")
                    return (v if conv is None else conv(v)), p

                return int_
            if conv is None:
                return lambda b, p, t: _long(b, p)

            def long_(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
                v, p = _long(b, p)
                return conv(v), p

            return long_
        if kind == "float":
            return lambda b, p, t: (_F(b, p)[0], p + 4)
        if kind == "double":
            return lambda b, p, t: (_D(b, p)[0], p + 8)
        if kind in ("bytes", "string", "fixed"):
            return _sized(kind, logical, s)
        if kind == "enum":
            symbols = tuple(s["symbols"])

            def enum(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
                v, p = _long(b, p)
                if v < 0:
                    raise ValueError("enum")
                return symbols[v], p

            return enum
        raise Unsupported(kind)

    return build(schema)


def _sized(kind: str, logical: str | None, s: dict[Any, Any]) -> Read:
    if kind == "fixed":
        size = s["size"]

        def raw(b: bytes, p: int) -> tuple[bytes, int]:
            q = p + size
            if q > len(b):
                raise ValueError("fixed")
            return b[p:q], q
    else:
        raw = _bytes
    if logical == "decimal":
        precision, scale = s.get("precision", 28), s.get("scale", 0)

        def decimal(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
            v, p = raw(b, p)
            return str(decimal_value(v, precision, scale)), p

        return decimal
    if kind == "string":
        if logical == "uuid":

            def uuid(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
                v, p = raw(b, p)
                return str(UUID(v.decode())), p

            return uuid

        def text(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
            v, p = raw(b, p)
            return v.decode(), p

        return text

    def b64(b: bytes, p: int, t: list[Any]) -> tuple[Any, int]:
        v, p = raw(b, p)
        return base64.b64encode(v).decode("ascii"), p

    return b64
