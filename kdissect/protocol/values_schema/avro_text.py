"""Avro binary straight to JSON text, for JSON lines: the compiled reader (``AvroJson``
of the Rust extension, native/src/avro.rs) runs a program made here once per schema.

The program is a list of ops referring to each other by index, one per schema node
(a record named twice is one op): ``("record", [(field, op), ...])``, ``("array",
op)``, ``("map", op)``, ``("union", [op, ...])``, ``("enum", [symbols])``, ``("int" |
"long", conversion or None)``, ``("decimal", size or None, precision, scale)``,
``("fixed", size)`` and the bare ``("null",)``, ``("boolean",)``, ``("float",)``,
``("double",)``, ``("string",)``, ``("uuid",)``, ``("bytes",)``. It reads what
avro_fast.compile_reader reads, the same way (the reference: tests compare the text
with ``json.dumps`` of its values, byte for byte); where the compiled reader is not sure
to agree it declines and the caller takes avro_fast. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from ..native_ext import extension
from .avro_fast import _TIME, Unsupported, plain, resolve


def native_class() -> Any | None:
    """The compiled reader's class, or None (not built, or ``KDISSECT_PURE`` set)."""
    return getattr(extension(), "AvroJson", None)


def compile_program(schema: Any, named: dict[str, Any]) -> tuple[list[tuple[Any, ...]], int]:
    """(ops, root) for a schema that is not recursive (fast._qualifies); raises
    Unsupported for what avro_fast does not read, or reads in ways not mirrored here."""
    ops: list[tuple[Any, ...]] = []
    records: dict[str, int] = {}

    def add(op: tuple[Any, ...]) -> int:
        ops.append(op)
        return len(ops) - 1

    def build(s: Any) -> int:
        s = resolve(s, named)
        if isinstance(s, list):
            return add(("union", [build(branch) for branch in s]))
        kind, logical = s["type"], s.get("logicalType")
        if kind in ("record", "error"):
            name = s["name"]
            if name not in records:
                at = records[name] = add(("record", []))  # fields filled below
                fields = [(f["name"], build(f["type"])) for f in s["fields"]]
                if len({name for name, _ in fields}) != len(fields):
                    raise Unsupported("a field name twice")
                ops[at] = ("record", fields)
            return records[name]
        if kind == "array":
            return add(("array", build(s["items"])))
        if kind == "map":
            return add(("map", build(s["values"])))
        if not plain(s):
            raise Unsupported(kind)
        if kind in ("int", "long"):
            return add((kind, logical if logical in _TIME else None))
        if kind in ("null", "boolean", "float", "double"):
            return add((kind,))
        if kind in ("bytes", "string", "fixed"):
            size = s["size"] if kind == "fixed" else None
            if logical == "decimal":  # avro_fast._sized: on any of the three
                precision, scale = s.get("precision", 28), s.get("scale", 0)
                if (
                    type(precision) is not int
                    or type(scale) is not int
                    or not 1 <= precision <= 10_000
                    or not 0 <= scale <= 1000
                ):
                    raise Unsupported("decimal")
                return add(("decimal", size, precision, scale))
            if kind == "fixed":
                return add(("fixed", size))
            if kind == "string":
                return add(("uuid",) if logical == "uuid" else ("string",))
            return add(("bytes",))
        if kind == "enum":
            return add(("enum", list(s["symbols"])))
        raise Unsupported(kind)

    root = build(schema)
    return ops, root


def compiled_reader(schema: Any, named: dict[str, Any]) -> Any | None:
    """The compiled reader of ``schema`` (``read(buf, pos) -> (text, end, values)``,
    ValueError when it declines), or None without the extension or for a schema it does
    not read."""
    cls = native_class()
    if cls is None:
        return None
    try:
        ops, root = compile_program(schema, named)
        return cls(ops, root)
    except (Unsupported, ValueError, TypeError, KeyError):
        return None
