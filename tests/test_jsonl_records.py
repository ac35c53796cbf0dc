"""JSON lines' record batches written by the compiled writer (native/src/jsonrec.rs,
render/jsonl_records.py) against the Python reference (the values decoder's record loop
and ``json``), byte for byte: text of every kind, odd varints, damage, and every message
of every repo capture (clean and damaged), through ``body_values`` as JSON lines call it."""

from __future__ import annotations

import random

import pytest

from kdissect.protocol import Options
from kdissect.protocol.values import body_values
from kdissect.protocol.values_schema.fast import JsonText, dumps
from kdissect.render import jsonl_records
from kdissect.render.jsonl_records import records_json_py
from kdissect.render.records import json_bytes
from tests.test_log_lines import TEXTS, record, varint
from tests.test_values import CAPTURES, messages


@pytest.fixture(scope="module")
def native():
    try:
        from kdissect import _native  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail(
            "the compiled extension is not built: install with cargo on the PATH "
            "(pip install -e ., as ./scripts/test does)"
        )
    return _native.records_json


def both(
    native,
    data: bytes,
    count: int,
    base: int = 0,
    ts0: int = 1700000000000,
    fixed: bool = False,
    pos: int = 0,
    end: int | None = None,
) -> str | None:
    end = len(data) if end is None else end
    py = records_json_py(data, pos, end, count, base, ts0, fixed)
    got = native(data, pos, end, count, base, ts0, fixed)
    assert got is None or got == py, (got, py)
    return py


def test_every_kind_of_text(native):
    recs = [record(t, t, [(b"h", t), ("é".encode(), None), (b'q"\x01', t)]) for t in TEXTS] + [
        record(None, None),
        record(b"k", None, [(None, b"v")]),
    ]
    data = b"".join(recs)
    text = both(native, data, len(recs), base=42)
    assert text is not None and text.startswith('[{"offset": 42, "timestamp": ')
    assert native(data, 0, len(data), len(recs), 42, 1700000000000, False) == text
    assert '"key": {"hex": "6e627370c2a0"}' in text  # NBSP is not printable
    assert '"key": "emoji \\ud83d\\ude00"' in text  # surrogate pairs, lowercase
    assert native(b"", 0, 0, 0, 0, 0, False) == records_json_py(b"", 0, 0, 0, 0, 0, False) == "[]"


def test_numbers_times_and_regions(native):
    recs = record(b"a", b"b", ts_delta=-(1 << 68)) + record(b"c", b"d", offset_delta=(1 << 33))
    for fixed in (False, True):
        text = both(native, recs, 2, base=(1 << 62), ts0=-5, fixed=fixed)
        assert text is not None and str((1 << 62) + (1 << 33)) in text
        assert (f'"timestamp": {-5 - (1 << 68)},' in text) != fixed
    good = record(b"k", b"v", [(b"h", b"x")])
    assert both(native, b"xx" + good + b"yy", 1, pos=2, end=2 + len(good)) == native(
        b"xx" + good + b"yy", 2, 2 + len(good), 1, 0, 1700000000000, False
    )


def test_odd_bytes_take_the_reference(native):
    good = record(b"k", b"v", [(b"h", b"x")])
    for data, count in (
        (good[:-1], 1),
        (good + b"\x00", 1),
        (good, 2),
        (b"\x00", 1),
        (b"\xff" * 6 + b"\x01", 1),
        (varint(5) + b"\x00\x00\x00" + varint(-3) + b"\x00", 1),
    ):
        assert native(data, 0, len(data), count, 0, 0, False) is None
        assert records_json_py(data, 0, len(data), count, 0, 0, False) is None
    # a header key that is not UTF-8: both leave it to the tree, which says so on the key
    # (tests/test_header_keys.py)
    odd_key = record(b"k", b"v", [(b"\xff", b"x")])
    assert native(odd_key, 0, len(odd_key), 1, 0, 0, False) is None
    assert records_json_py(odd_key, 0, len(odd_key), 1, 0, 0, False) is None


def test_random_records_agree(native):
    rng = random.Random(28)
    alphabet = list(TEXTS) + [rng.randbytes(8) for _ in range(8)]
    written = 0
    for _ in range(400):
        recs = [
            record(
                rng.choice(alphabet + [None]),
                rng.choice(alphabet + [None]),
                [
                    (rng.choice(alphabet[:12]), rng.choice(alphabet + [None]))
                    for _ in range(rng.randint(0, 2))
                ],
                rng.randint(-3, 1 << rng.randint(0, 40)),
                rng.randint(0, 1 << 20),
            )
            for _ in range(rng.randint(0, 4))
        ]
        data = bytearray(b"".join(recs))
        for _ in range(rng.choice((0, 0, 1, 3))):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        both(native, bytes(data), len(recs), base=rng.randint(0, 1 << 40))
        written += native(bytes(data), 0, len(data), len(recs), 0, 0, False) is not None
    assert written > 200


def line_body(data: bytes, direction: str, key: int, version: int, batch_text) -> str:
    """A message's body as its JSON line writes it (each batch handed over at once)."""
    return dumps(
        body_values(
            data,
            direction,
            key,
            version,
            Options(),
            json_bytes,
            lambda records: records,
            True,
            batch_text,
        )
    )


@pytest.mark.slow  # every message of every capture: ~4 s
def test_repo_capture_messages_alike(native):
    """Every message of every repo capture, and 1,500 damaged copies of the record
    carriers: the JSON lines' bodies are the same with and without the compiled writer,
    which writes most batches itself."""
    took = [0, 0]

    def counted(*args):
        got = jsonl_records._batch_text()(*args)
        took[got is None] += 1
        return got

    corpus = [m for p in CAPTURES for m in messages(p)]
    for m in corpus:
        assert line_body(*m, counted) == line_body(*m, None)
    assert took[0] > 100 and took[0] > 10 * took[1], took
    rng = random.Random(28)
    carriers = [m for m in corpus if m[2] in (0, 1) and len(m[0]) > 80]
    for _ in range(1500):
        data, direction, key, version = rng.choice(carriers)
        b = bytearray(data)
        i = rng.randrange(8, len(b))
        b[i] ^= 1 << rng.randrange(8)
        assert line_body(bytes(b), direction, key, version, counted) == line_body(
            bytes(b), direction, key, version, None
        )


def test_kdissect_pure_turns_it_off(monkeypatch):
    assert isinstance(jsonl_records._batch_text()(b"", 0, 0, 0, 0, 0, False), JsonText)
    monkeypatch.setenv("KDISSECT_PURE", "1")
    assert jsonl_records._batch_text() is None
