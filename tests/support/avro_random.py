"""Random Avro values of a schema, written by fastavro: for comparing the compiled Avro
reader (native/src/avro.rs) with the Python one (values_schema/avro_fast.py), in the
tests and in the fuzzer (tests/fuzz/avro_target.py).

Logical types are written as their underlying types (fastavro is given the schema without
``logicalType``), so values can be anything the bytes can say: timestamps past year 9999,
UUID strings in every spelling, decimals that round, floats of any bit pattern."""

from __future__ import annotations

import io
import random
import struct
from typing import Any

# every type and logical type the readers know, with the spellings of their edge cases
WIDE: dict = {
    "type": "record",
    "name": "Wide",
    "namespace": "t",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "b", "type": "boolean"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "F3", "size": 3}},
        {
            "name": "dec",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 9},
        },
        {
            "name": "dec0",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0},
        },
        {
            "name": "decf",
            "type": {
                "type": "fixed",
                "name": "D16",
                "size": 16,
                "logicalType": "decimal",
                "precision": 38,
                "scale": 3,
            },
        },
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "ltsu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tmu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B_2", "C"]}},
        {"name": "m", "type": {"type": "map", "values": ["null", "long", "string"]}},
        {
            "name": "a",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "k", "type": "string"},
                        {
                            "name": "v",
                            "type": ["null", "double", {"type": "array", "items": "int"}],
                        },
                    ],
                },
            },
        },
        {"name": "u", "type": ["null", "Item", "E", "string"]},
        {
            "name": "dur",
            "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"},
        },
    ],
}

_TEXTS = [
    "",
    "a",
    "o-1",
    'quote" back\\slash',
    "line\nbreak\ttab\r\x00\x1f\x7f",
    "caf\u00e9",
    "\u20ac 5",
    "\U0001f600",
    "\u2028\u2029",
    "\ufeff",
    "<>&'",
]


def strip_logical(schema: Any) -> Any:
    if isinstance(schema, list):
        return [strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    return schema


def _text(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(_TEXTS)
    chars = []
    for _ in range(rng.randint(0, 12)):
        c = rng.choice((rng.randint(32, 126), rng.randint(0, 0xFFFF), rng.randint(0, 0x10FFFF)))
        if 0xD800 <= c <= 0xDFFF:  # surrogates cannot be written as UTF-8
            c = 0x41
        chars.append(chr(c))
    return "".join(chars)


def _uuid(rng: random.Random) -> str:
    h = rng.randbytes(16).hex()
    canonical = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return rng.choice(
        [
            canonical,
            canonical,
            canonical.upper(),
            h,
            "{" + canonical + "}",
            "urn:uuid:" + canonical,
            canonical[:-1],
            canonical[:8] + "-x" + canonical[10:],
            h[:31] + "g",
            " " + h[1:],
        ]
    )


def _long(rng: random.Random, bits: int = 64) -> int:
    edge = [
        0,
        1,
        -1,
        2**31 - 1,
        -(2**31),
        2 ** (bits - 1) - 1,
        -(2 ** (bits - 1)),
        253402300799999,
        253402300800000,
        -62135596800000,
        -62135596800001,
        86400000,
        86399999,
        2932896,
        2932897,
        -719162,
        -719163,
        1700000000123,
        1700000000123456,
    ]
    if rng.random() < 0.4:
        v = rng.choice(edge)
    else:
        v = rng.randint(-(2 ** rng.randint(1, bits - 1)), 2 ** rng.randint(1, bits - 1))
    return max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, v))


def _decimal_bytes(rng: random.Random, size: int | None) -> bytes:
    n = size if size is not None else rng.choice([0, 1, 2, 3, 5, 8, 16, 17, 20])
    if rng.random() < 0.3:
        return (b"\xff" if rng.random() < 0.5 else b"\x00") * n
    return rng.randbytes(n)


def value(rng: random.Random, schema: Any, named: dict, depth: int = 0) -> Any:
    """A random value for fastavro to write with ``strip_logical(schema)``; ``named``:
    its named types (``named_types``)."""
    if isinstance(schema, list):
        branch = rng.randrange(len(schema))
        return value(rng, schema[branch], named, depth)
    if isinstance(schema, str):
        if schema in named:
            return value(rng, named[schema], named, depth)
        schema = {"type": schema}
    kind, logical = schema["type"], schema.get("logicalType")
    if isinstance(kind, (dict, list)):
        return value(rng, kind, named, depth)
    if kind in named:
        return value(rng, named[kind], named, depth)
    if kind == "record":
        return {f["name"]: value(rng, f["type"], named, depth + 1) for f in schema["fields"]}
    if kind == "array":
        return [
            value(rng, schema["items"], named, depth + 1)
            for _ in range(rng.randint(0, 3 if depth < 3 else 0))
        ]
    if kind == "map":
        return {
            _text(rng): value(rng, schema["values"], named, depth + 1)
            for _ in range(rng.randint(0, 3))
        }
    if kind == "enum":
        return rng.choice(schema["symbols"])
    if kind == "null":
        return None
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "int":
        return _long(rng, 32)
    if kind == "long":
        return _long(rng)
    if kind == "float":
        return (
            struct.unpack("<f", rng.randbytes(4))[0]
            if rng.random() < 0.5
            else rng.choice([0.0, -0.0, 1.5, 0.1, 1e-5, 3.4e38, float("inf"), float("nan")])
        )
    if kind == "double":
        return (
            struct.unpack("<d", rng.randbytes(8))[0]
            if rng.random() < 0.5
            else rng.choice(
                [
                    0.0,
                    -0.0,
                    0.1,
                    1e16,
                    1e15,
                    123456789.125,
                    1e-4,
                    1e-5,
                    5e-324,
                    1.7976931348623157e308,
                    float("-inf"),
                    float("nan"),
                    2.5,
                    -7.0,
                ]
            )
        )
    if kind == "string":
        return _uuid(rng) if logical == "uuid" else _text(rng)
    if kind == "bytes":
        return (
            _decimal_bytes(rng, None) if logical == "decimal" else rng.randbytes(rng.randint(0, 9))
        )
    if kind == "fixed":
        return (
            _decimal_bytes(rng, schema["size"])
            if logical == "decimal"
            else rng.randbytes(schema["size"])
        )
    raise ValueError(kind)


def named_types(schema: Any, named: dict | None = None) -> dict:
    """The named types defined in ``schema``, by short and full name."""
    named = {} if named is None else named
    if isinstance(schema, list):
        for s in schema:
            named_types(s, named)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "enum", "fixed") and "name" in schema:
            named[schema["name"]] = schema
            named[f"{schema.get('namespace', 't')}.{schema['name']}"] = schema
        for v in schema.values():
            if isinstance(v, (dict, list)):
                named_types(v, named)
    return named


def encoded(rng: random.Random, schema: Any) -> bytes:
    """Random Avro binary of ``schema``, written by fastavro."""
    import fastavro

    writer = fastavro.parse_schema(strip_logical(schema))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, writer, value(rng, schema, named_types(schema)))
    return out.getvalue()
