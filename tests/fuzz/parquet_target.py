"""The fuzz target of kdissect's Parquet writer (pipeline/parquet_file.py, issue 28): random
rows of the three tables (nulls everywhere a value can be missing, empty and null lists,
null structs in lists, extremes and values past each type's range, text of every kind,
lone surrogates included), several row groups; written to memory, read back with pyarrow
and compared with what pyarrow makes of the same rows. A value outside its column's type
must come back null; nothing may escape as an exception."""

from __future__ import annotations

import io
import json
import math
import random

from kdissect.pipeline import columns, parquet_file
from kdissect.pipeline.columns import FLOAT64, INT16, INT32, INT64, STRING, TIMESTAMP, ListOf

TABLES = {"exchanges": columns.EXCHANGES, "records": columns.RECORDS, "captures": columns.CAPTURES}
_BITS = {INT16: 16, INT32: 32, INT64: 64}
TEXTS = [
    "",
    "a",
    "Produce",
    "topic-id:0f0e",
    "ü",
    "日本語",
    "😀",
    "e\u0301",
    "\x00",
    "\udcff",
    "a\ud800b",
    "\u200b",
    " ",
    "\n\t",
    "x" * 300,
]


def _scalar(rng: random.Random, kind: str):
    if rng.random() < 0.15:
        return None
    if kind == STRING:
        if rng.random() < 0.002:
            return "y" * rng.randrange(70_000)
        return "".join(rng.choice(TEXTS) for _ in range(rng.randrange(4)))
    if kind in _BITS:
        bits = _BITS[kind]
        return rng.choice(
            [
                0,
                1,
                -1,
                2 ** (bits - 1) - 1,
                -(2 ** (bits - 1)),
                rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1)),
                2 ** (bits - 1),
                -(2 ** (bits - 1)) - 1,
                2**70,
            ]
        )  # the last 3: too big
    if kind == FLOAT64:
        return rng.choice(
            [
                0.0,
                -0.0,
                1.5,
                1e308,
                -1e-308,
                5e-324,
                math.inf,
                -math.inf,
                math.nan,
                rng.uniform(-1e9, 1e9),
            ]
        )
    assert kind == TIMESTAMP
    return rng.choice(
        [
            0.0,
            1_700_000_000.123456,
            -1.5,
            rng.uniform(0, 4e9),
            3e11,
            9.3e12,
            -9.3e12,
            1e300,
            math.inf,
            math.nan,
        ]
    )  # the last 5: null


def _value(rng: random.Random, kind):
    if not isinstance(kind, ListOf):
        return _scalar(rng, kind)
    if rng.random() < 0.15:
        return None
    items = []
    for _ in range(rng.choice([0, 0, 1, 2, 5, 12])):
        if isinstance(kind.item, str):
            items.append(_scalar(rng, kind.item))
        elif rng.random() < 0.1:
            items.append(None)  # a null struct
        else:
            items.append({f: _scalar(rng, k) for f, k in kind.item if rng.random() < 0.95})
    return items


def parquet_input(rng: random.Random) -> bytes:
    table = rng.choice(sorted(TABLES))
    cols = TABLES[table]
    rows = [
        {name: _value(rng, kind) for name, kind in cols if rng.random() < 0.97}
        for _ in range(rng.choice([0, 1, 3, 17, 60]))
    ]
    return json.dumps(
        {"table": table, "row_group": rng.choice([1, 7, 64, 8192]), "rows": rows}
    ).encode()


def _expected(value, kind):
    """What a value comes back as: µs for times, null past the type's range, text with
    its lone surrogates replaced."""
    if value is None:
        return None
    if isinstance(kind, ListOf):
        if isinstance(kind.item, str):
            return [_expected(v, kind.item) for v in value]
        return [
            None if it is None else {f: _expected(it.get(f), k) for f, k in kind.item}
            for it in value
        ]
    if kind == STRING:
        return value.encode("utf-8", "replace").decode()
    if kind == TIMESTAMP:
        if not math.isfinite(value):
            return None
        value = round(value * 1_000_000)
        return value if -(2**63) <= value < 2**63 else None
    if kind in _BITS:
        bits = _BITS[kind]
        return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None
    return value


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


def run_parquet(data: bytes) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    case = json.loads(data)
    cols = TABLES[case["table"]]
    rows = case["rows"]
    out = io.BytesIO()
    writer = parquet_file.ParquetWriter(out, cols)
    for start in range(0, len(rows), case["row_group"]):
        writer.write(rows[start : start + case["row_group"]])
    writer.close()
    got = pq.read_table(io.BytesIO(out.getvalue()))
    assert got.num_rows == len(rows)
    for i, field in enumerate(got.schema):  # times as µs: datetimes stop at year 9999
        if pa.types.is_timestamp(field.type):
            got = got.set_column(i, field.name, got.column(i).cast(pa.int64()))
    want = [{name: _expected(r.get(name), kind) for name, kind in cols} for r in rows]
    for i, (g, w) in enumerate(zip(got.to_pylist(), want)):
        for name, _kind in cols:
            assert _same(g[name], w[name]), f"row {i}, {name}: {g[name]!r} != {w[name]!r}"
