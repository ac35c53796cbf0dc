"""`kdissect log --format jsonl`'s record lines (render/log_lines.py): the compiled writer
(native/src/logjson.rs) against the Python reference, and both against the values and
located paths, byte for byte: every codec, control batches, damaged batches, text of
every kind (non-ASCII printable or not, controls, quotes), odd varints and null fields."""

from __future__ import annotations

import random
import struct
import subprocess
import sys

import crc32c
import pytest

from kdissect.protocol import Options
from kdissect.proxy.rewrite import uvarint
from kdissect.render.log_lines import record_lines_for, record_lines_py
from kdissect.sources.logunits import walk
from tests.test_log import CODECS, batch, marker_and_damage

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def native():
    try:
        from kdissect import _native  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail(
            "the compiled extension is not built: install with cargo on the PATH "
            "(pip install -e ., as ./scripts/test does)"
        )
    return _native.log_record_lines


def varint(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 127))  # zigzag (any width)


def nullable(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def record(
    key: bytes | None, value: bytes | None, headers=(), ts_delta: int = 0, offset_delta: int = 0
) -> bytes:
    body = (
        b"\x00"
        + varint(ts_delta)
        + varint(offset_delta)
        + nullable(key)
        + nullable(value)
        + varint(len(headers))
        + b"".join(nullable(k) + nullable(v) for k, v in headers)
    )
    return varint(len(body)) + body


TEXTS = [
    b"plain",
    b"",
    b'quote " back \\ slash',
    b"tab\tline\nreturn\r",
    b"bell\x07",
    b"del\x7f",
    b"nul\x00",
    "é à ü".encode(),
    "日本語".encode(),
    "emoji 😀".encode(),
    "nbsp\u00a0".encode(),
    "zero width\u200b".encode(),
    "line sep\u2028".encode(),
    "private\ue000".encode(),
    "\U0001f600\U00010000".encode(),
    b"\xff\xfe bad utf-8",
    b"\xed\xa0\x80 surrogate",
    b"\xc0\xaf overlong",
    "é\x01".encode(),
    "soft\u00adhyphen".encode(),
    bytes(range(256)),
]


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
    py = record_lines_py(data, pos, end, count, base, ts0, fixed)
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
    assert text is not None and text.count("\n") == len(recs)
    assert native(data, 0, len(data), len(recs), 42, 1700000000000, False) == text
    assert '"key": "\\u65e5\\u672c\\u8a9e"' in text  # CJK: printable text
    assert '"key": {"hex": "6e627370c2a0"}' in text  # NBSP is not printable
    assert '"key": "emoji \\ud83d\\ude00"' in text  # surrogate pairs, lowercase


def test_numbers_and_times(native):
    # a 10-byte timestamp delta past int64, a 5-byte offset delta, log-append time
    recs = record(b"a", b"b", ts_delta=-(1 << 68)) + record(b"c", b"d", offset_delta=(1 << 33))
    for fixed in (False, True):
        text = both(native, recs, 2, base=(1 << 62), ts0=-5, fixed=fixed)
        assert text is not None and str((1 << 62) + (1 << 33)) in text
        assert (f'"timestamp": {-5 - (1 << 68)},' in text) != fixed


def test_odd_bytes_take_the_reference(native):
    good = record(b"k", b"v", [(b"h", b"x")])
    cases = {
        "short": good[:-1],
        "long": good + b"\x00",
        "count too high": good,
        "length zero": b"\x00",
        "varint too long": b"\xff" * 6 + b"\x01",
        "key past the record": varint(4) + b"\x00\x00\x00" + varint(9),
        "negative size": varint(5) + b"\x00\x00\x00" + varint(-3) + b"\x00",
        "headers too many": varint(5) + b"\x00\x00\x00\x01\x01" + varint(99),
        "header key not UTF-8": record(b"k", b"v", [(b"\xff", b"x")]),
    }
    for name, data in cases.items():
        count = 2 if name == "count too high" else 1
        # (a header key not UTF-8 too: the tree says so on the key, test_header_keys.py)
        assert both(native, data, count) is None, name
    # a region inside a bigger buffer: the positions are the buffer's
    assert both(native, b"xx" + good + b"yy", 1, pos=2, end=2 + len(good)).startswith("2, ")


def test_random_records_agree(native):
    """Records of random text and random damage: the compiled writer says what the
    reference says, or hands over (None)."""
    rng = random.Random(25)
    alphabet = [t for t in TEXTS] + [rng.randbytes(8) for _ in range(8)]
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
        damage = rng.choice((0, 0, 1, 3))
        for _ in range(damage):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        base = rng.randint(0, 1 << 40)
        py = both(native, bytes(data), len(recs), base=base)
        if not damage:  # clean records: written by the compiled code itself
            assert (
                py is not None
                and native(bytes(data), 0, len(data), len(recs), base, 1700000000000, False) == py
            )


def lines_of(paths: list[str], **how) -> str:
    from kdissect.cli.log_cmd import item_lines

    if how.get("lines"):  # the writer as the command picks it
        how["lines"] = record_lines_for()
    return "".join(item_lines(i, True) for i in walk(paths, Options(), **how))


def test_all_paths_write_the_same_lines(tmp_path, native, monkeypatch):
    """A segment of every codec, producers, a transaction with its COMMIT marker,
    log-append time, text of every kind, a CRC mismatch and a torn tail: the JSON lines
    of the compiled writer, the reference, the values path and the located trees agree
    byte for byte; the clean ordinary batches do take the lines path."""
    part = tmp_path / "mix-0"
    part.mkdir()
    recs = [(t, t[::-1] or None) for t in TEXTS[:-1]]
    data = b"".join(batch(2, c, 50 * c, recs, pid=3, epoch=0, seq=50 * c) for c in CODECS)
    data += marker_and_damage(300, 3, 0, 250, recs, marker=0)  # an ABORT
    (part / "00000000000000000000.log").write_bytes(data)
    compiled = lines_of([str(part)], lines=True)
    items = list(walk([str(part)], Options(), lines=record_lines_for()))
    assert sum(i.lines is not None for i in items) == 6
    assert compiled == lines_of([str(part)], values=True) == lines_of([str(part)])
    monkeypatch.setenv("KDISSECT_PURE", "1")
    assert compiled == lines_of([str(part)], lines=True)
    assert '"control_type": "ABORT"' in compiled and "crc_mismatch" in compiled
    assert "log_size_past_end" in compiled


def test_cli_paths_agree(tmp_path, native):
    """The command itself, compiled and with KDISSECT_PURE=1: the same bytes."""
    part = tmp_path / "t-0"
    part.mkdir()
    recs = [(b"k%d" % i, TEXTS[i % len(TEXTS)]) for i in range(60)]
    (part / "00000000000000000000.log").write_bytes(
        b"".join(batch(2, c, 60 * c, recs) for c in CODECS)
    )
    cmd = [sys.executable, "-m", "kdissect", "log", str(part), "--format", "jsonl", "--records"]
    outs = [
        subprocess.run(
            cmd, capture_output=True, timeout=120, check=True, env={"PATH": "/usr/bin", **env}
        ).stdout
        for env in ({}, {"KDISSECT_PURE": "1"})
    ]
    assert outs[0] == outs[1] and outs[0].count(b'"type": "record"') == 300


def test_a_clean_batch_with_an_overlong_varint(tmp_path):
    """A batch whose CRC is right but whose record has a 6-byte varint (a writer's bug,
    not a crash's): every path hands it to the located decoder, which marks it; before,
    the values path let the varint reader's error escape."""
    part = tmp_path / "t-0"
    part.mkdir()
    data = bytearray(batch(2, 0, 0, [(b"k", b"v")]))
    rec = varint(10) + b"\x00\x00" + b"\x80" * 5 + b"\x01" + b"\x00" * 2  # offset delta
    data = data[:61] + rec
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    located = lines_of([str(part)])
    assert '"crc_valid": true' in located and '"findings": [{' in located
    assert lines_of([str(part)], values=True) == lines_of([str(part)], lines=True) == located


def test_prefixes_alike():
    from kdissect.render.log_lines import _compiled, prefixed_py

    native = _compiled("log_prefix_lines")
    assert native is not None
    long = "".join(f"{i}, {'x' * (i % 37)}}}\n" for i in range(500))
    for prefix, lines in (
        ("p", ""),
        ('{"a": "é", "position": ', "1, x}\n2, y}\n"),
        ("", "1\n"),
        ("pp", "\n\n"),
        ("{", long),
    ):
        assert native(prefix, lines) == prefixed_py(prefix, lines)
