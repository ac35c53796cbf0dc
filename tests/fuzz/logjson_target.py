"""The fuzz target of `kdissect log --format jsonl`'s compiled record lines
(native/src/logjson.rs): mutated record regions of real v2 batches (kafka-python's
encoder; text of every kind) through the compiled writer and the Python reference
(render/log_lines.py). The compiled one must write exactly the reference's text or hand
over (None); a difference, an exception or a crash is a failure.

An input is: a byte holding the record count, a byte of flags (1: log-append time), then
the records' bytes."""

from __future__ import annotations

import random
from functools import lru_cache

from . import harness as h

_TEXTS = [
    b"plain",
    b"",
    b'q"b\\',
    b"t\tn\nr\r",
    b"\x07",
    b"\x7f",
    "é日😀".encode(),
    "\u00a0\u200b\u2028\ue000".encode(),
    b"\xff\xfe",
    b"\xed\xa0\x80",
    b"x" * 300,
]


@lru_cache(maxsize=1)
def seeds() -> list[bytes]:
    from kafka.record.memory_records import MemoryRecordsBuilder

    rng = random.Random(28)
    out = []
    for n in (1, 3, 7):
        b = MemoryRecordsBuilder(2, 0, 1 << 20, offset=0)
        for i in range(n):
            key = rng.choice(_TEXTS + [None])
            headers = [
                (rng.choice(["h", "é", "k\x01"]), rng.choice(_TEXTS + [None]))
                for _ in range(rng.randint(0, 2))
            ]
            b.append(
                1700000000000 + i * rng.choice((1, 1000, 1 << 40)),
                key,
                rng.choice(_TEXTS + [None]),
                headers,
            )
        b.close()
        out.append(bytes([n, 0]) + bytes(b.buffer())[61:])
    return out


def logjson_input(rng: random.Random) -> bytes:
    data = rng.choice(seeds())
    if rng.random() < 0.2:
        data = bytes([rng.randrange(12), rng.randrange(2)]) + data[2:]
    return h.mutate(rng, data, 4) if rng.random() < 0.8 else data


def _compare(data: bytes, reference, compiled, what: str) -> None:
    """The compiled writer writes exactly the reference's text, or hands over (None)."""
    if len(data) < 2:
        return
    count, fixed = data[0], bool(data[1] & 1)
    args = (data, 2, len(data), count, 1 << 40, 1700000000000, fixed)
    want = reference(*args)
    got = compiled(*args)
    assert got is None or got == want, f"the {what} differ: {got!r} != {want!r}"


def run_logjson(data: bytes) -> None:
    from kdissect import _native  # type: ignore[attr-defined]
    from kdissect.render.log_lines import record_lines_py

    _compare(data, record_lines_py, _native.log_record_lines, "record lines")


def run_jsonrec(data: bytes) -> None:
    """Issue 28's: JSON lines' compiled record-list writer (native/src/jsonrec.rs, the same
    record loop in its list mode) against its reference, on the same inputs."""
    from kdissect import _native  # type: ignore[attr-defined]
    from kdissect.render.jsonl_records import records_json_py

    _compare(data, records_json_py, _native.records_json, "record lists")


def run_views(data: bytes) -> None:
    """The Record views of protocol/batch.py against the generated record loop
    (values_readers/record_loop.py, the hot path's copy of the same walk): where the loop
    reads the records, the views read the same fields; the views fail only with
    BadRecord; batch.record_keys reads the views' keys."""
    from kdissect.protocol.batch import BadRecord, record_keys, records
    from kdissect.protocol.reader import VarintTooLong
    from kdissect.protocol.values import Bail, record_loop

    if len(data) < 2:
        return
    count, fixed, base, ts0 = data[0], bool(data[1] & 1), 1 << 40, 1700000000000
    try:
        want, stop = record_loop(data, 2, len(data), count, base, ts0, fixed, bytes)
    except (Bail, IndexError, VarintTooLong):
        want = None
    try:
        views = [
            (
                base + r.offset_delta,
                ts0 if fixed else ts0 + r.timestamp_delta,
                r.key,
                r.value,
                r.headers,
                r.end,
            )
            for r in records(data, 2, len(data), count)
        ]
    except BadRecord:
        views = None
    if want is not None:
        assert views is not None, "the loop read records the views could not"
        for w, v in zip(want, views):
            assert (w["offset"], w["timestamp"], w["key"], w["value"]) == v[:4]
            assert [(h["key"], h["value"]) for h in w["headers"]] == [
                (k.decode("utf-8", "replace") if k is not None else None, hv) for k, hv in v[4]
            ]
        assert (views[-1][5] if views else 2) == stop
    if views is not None:
        keys: list[str] = []
        assert record_keys(data, 2, len(data), count, keys) == (views[-1][5] if views else 2)
        assert keys == [v[2].decode("utf-8", "replace") for v in views if v[2] is not None]


def run_rectable(data: bytes) -> None:
    """Issue 43's: the records table's compiled batch walker (native/src/records_table.rs)
    against its reference (stream/record_table.batch_columns_py), on the same inputs:
    the same columns, or a hand-over (None)."""
    from kdissect import _native  # type: ignore[attr-defined]
    from kdissect.stream.record_table import batch_columns_py

    _compare(data, batch_columns_py, _native.record_table_rows, "record columns")
