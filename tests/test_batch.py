"""The one record-batch model (kdissect/protocol/batch.py): its views against kafka-python's
reader of the same batches, the compiled log writer (native/src/logjson.rs) against the
views field by field, and a guard that the old hand-written walkers stay gone."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kdissect.protocol import batch as model
from kdissect.protocol.batch import Batch, BadRecord, records
from kdissect.render.records import json_bytes
from tests.test_log import CODECS, batch
from tests.test_log_lines import TEXTS, record

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kdissect"
BUDGET = 64 << 20


def client_batches() -> list[bytes]:
    """v2 batches written by kafka-python's producer code, every codec, odd keys and values."""
    rng = random.Random(37)
    out = []
    for codec in CODECS:
        for n in (1, 3, 40):
            recs = [(rng.choice([None, *TEXTS]), rng.choice([None, *TEXTS])) for _ in range(n)]
            out.append(batch(2, codec, 1000 * codec + n, recs, pid=7, epoch=1, seq=0))
    return out


def capture_batches() -> list[bytes]:
    """The intact v2 batches inside the repository's captures (real clients' Produce
    requests and brokers' Fetch responses): found by their CRC, as locate_batches does."""
    out = []
    for path in sorted((ROOT / "captures").glob("*.pcap*")):
        data = path.read_bytes()
        at, crc_budget = 0, 4 * len(data)
        while crc_budget > 0:
            at = data.find(b"\x02", at + 1)
            pos = at - model.MAGIC_AT
            if at < 0:
                break
            if pos < 0 or pos + model.HEAD_SIZE > len(data):
                continue
            b = Batch(data, pos)
            if b.fits(len(data)):
                crc_budget -= b.size
                if b.crc_ok:
                    out.append(data[pos : b.end])
                    at = b.end - 1
    return out


def test_the_layout_is_kafkas():
    assert model.HEAD.format == ">qiibIhiqqqhii" and model.HEAD_SIZE == 61
    assert (model.LENGTH_AT, model.MAGIC_AT, model.CRC_AT, model.CRC_FROM) == (8, 16, 17, 21)
    assert model.VARINT_MAX == {"length": 5, "timestamp_delta": 10, "offset_delta": 5}
    assert model.MIN_LENGTH == {0: 14, 1: 22, 2: 49}


def test_views_agree_with_kafka_python():
    """Header fields, CRC and every record's fields as kafka-python's DefaultRecordBatch
    reads them (another implementation of the same format)."""
    seen = 0
    for raw in client_batches() + capture_batches():
        b = Batch(raw, 0)
        theirs = DefaultRecordBatch(raw)
        h = b.fields()
        assert (
            h["base_offset"],
            h["magic"],
            h["crc"],
            h["attributes"],
            h["last_offset_delta"],
            h["max_timestamp"],
            h["producer_id"],
            h["producer_epoch"],
            h["base_sequence"],
            h["partition_leader_epoch"],
        ) == (
            theirs.base_offset,
            theirs.magic,
            theirs.crc,
            theirs.attributes,
            theirs.last_offset_delta,
            theirs.max_timestamp,
            theirs.producer_id,
            theirs.producer_epoch,
            theirs.base_sequence,
            theirs.leader_epoch,
        )
        assert b.crc_ok == theirs.validate_crc() is True
        assert b.codec == theirs.compression_type and b.control == theirs.is_control_batch
        count, base, ts0, fixed = b.loop_args()
        mine = list(b.records(BUDGET))
        assert len(mine) == count
        for r, t in zip(mine, theirs):
            assert base + r.offset_delta == t.offset
            assert (ts0 if fixed else ts0 + r.timestamp_delta) == t.timestamp
            assert (r.key, r.value) == (t.key, t.value)
            assert [
                (k.decode("utf-8", "replace") if k is not None else None, v) for k, v in r.headers
            ] == list(t.headers)
            seen += 1
        if mine:
            assert mine[-1].end == (b.clean(BUDGET) or (0, 0, -1))[2]
    assert seen > 300


def test_the_key_walk_reads_the_views_keys():
    """batch.record_keys (content search's quick key filter) against the Record views."""
    for raw in client_batches() + capture_batches():
        b = Batch(raw, 0)
        data, pos, end = b.clean(BUDGET) or (b"", 0, 0)
        keys: list[str] = []
        assert model.record_keys(data, pos, end, b.head[12], keys) == end
        assert keys == [
            r.key.decode("utf-8", "replace") for r in b.records(BUDGET) if r.key is not None
        ]
    bad = record(b"key", b"v")
    with pytest.raises(BadRecord):
        model.record_keys(bad[:4], 0, 4, 1, [])


def test_damage_is_seen():
    raw = bytearray(client_batches()[0])
    b = Batch(bytes(raw), 0)
    assert b.crc_ok and b.clean(BUDGET) is not None
    raw[-1] ^= 1
    damaged = Batch(bytes(raw), 0)
    assert not damaged.crc_ok and damaged.clean(BUDGET) is None
    assert Batch(bytes(raw[:60]), 0, 60).clean(BUDGET) is None  # no whole header
    assert not Batch(bytes(61), 0, 61).plausible  # a preallocated tail
    bad = record(b"k", b"v")[:-1]  # a record cut short
    with pytest.raises(BadRecord):
        list(records(bad, 0, len(bad), 1))
    with pytest.raises(BadRecord):
        list(records(b"\x00", 0, 1, 1))  # length 0


def compiled_agrees(native, raws) -> int:
    """How many records ``native`` (log_record_lines: native/src/logjson.rs, which walks
    records itself) wrote exactly as the Python views of the same batches say, field by
    field; any disagreement fails."""
    compared = 0
    for raw in raws:
        b = Batch(raw, 0)
        got = b.clean(BUDGET)
        assert got is not None
        data, pos, end = got
        count, base, ts0, fixed = b.loop_args()
        text = native(data, pos, end, count, base, ts0, fixed)
        if text is None:  # left to the Python reference (an odd header key)
            continue
        lines = text.splitlines()
        views = list(records(data, pos, end, count))
        assert len(lines) == len(views) == count
        for line, r in zip(lines, views):
            position, rest = line.split(", ", 1)
            obj = json.loads("{" + rest)
            assert int(position) == r.start
            assert obj["offset"] == base + r.offset_delta
            assert obj["timestamp"] == (ts0 if fixed else ts0 + r.timestamp_delta)
            assert obj["key"] == json_bytes(r.key) and obj["value"] == json_bytes(r.value)
            assert obj["headers"] == [
                {"key": k.decode() if k is not None else None, "value": json_bytes(v)}
                for k, v in r.headers
            ]
            compared += 1
    return compared


def segment_batches(path: Path) -> list[bytes]:
    """The clean v2 batches of a segment file, walked as the log source walks it."""
    data, pos, out = path.read_bytes(), 0, []
    while pos + model.HEAD_SIZE <= len(data):
        b = Batch(data, pos)
        if not b.plausible or b.end > len(data):
            break
        if b.magic == 2 and b.clean(BUDGET) is not None:
            out.append(data[pos : b.end])
        pos = b.end
    return out


def test_the_compiled_walker_agrees_with_the_views(native):
    """On batches of every codec built by kafka-python and every batch of the captures
    (tests/test_log_kafka.py does the same on segments Apache Kafka wrote)."""
    assert compiled_agrees(native, client_batches() + capture_batches()) > 300


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


# -- the old walkers stay gone ------------------------------------------------------------

GUARDS = [
    # (what, pattern, files allowed to hold it)
    (
        "a batch header's struct format (batch.HEAD is derived from the layout)",
        r"qiibIhiqqqhii",
        set(),
    ),
    (
        "a CRC computed outside protocol/crc.py",
        r"\bcrc32c\(|zlib\.crc32\(|import crc32c\b",
        {"protocol/crc.py"},
    ),
    (
        "a CRC-32C check outside the Batch view (and the producer snapshot's own CRC)",
        r"\bcrc32c_of\(",
        {"protocol/crc.py", "protocol/batch.py", "protocol/ondisk.py"},
    ),
    (
        "a hand-written varint loop outside protocol/varint.py (the generated record loop "
        "inlines its one- and two-byte cases)",
        r">>= 7|<< shift|& 0x7F \| 0x80|<< 7\)",
        {"protocol/varint.py", "protocol/gen_readers.py", "protocol/values_readers/record_loop.py"},
    ),
    (
        "a batch's magic, length or CRC read at a literal offset (batch.MAGIC_AT, LENGTH_AT, ...)",
        r"pos \+ 16\]|pos \+ 8\)\[0\]|pos \+ 17\)|\+ 21:|\[22\] & 0x20|\[16\] != 2",
        set(),
    ),
    (
        "a second constant for the batch header's size or frame",
        r"BATCH_HEAD\b|_BATCH_HEAD\b",
        set(),
    ),
]


@pytest.mark.parametrize("what,pattern,allowed", GUARDS, ids=[g[0][:40] for g in GUARDS])
def test_no_second_batch_walker(what, pattern, allowed):
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in allowed:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(pattern, line):
                found.append(f"kdissect/{rel}:{n}: {line.strip()}")
    assert not found, f"{what}:\n" + "\n".join(found)


def _message_v1(offset: int, value: bytes, attributes: int = 0) -> bytes:
    """A magic 1 message (log entry): offset, size, CRC32 of the rest, magic, attributes,
    timestamp, null key, value."""
    import struct
    import zlib

    rest = struct.pack(">bbqi", 1, attributes, 1_700_000_000_000, -1)
    rest += struct.pack(">i", len(value)) + value
    body = struct.pack(">I", zlib.crc32(rest)) + rest
    return struct.pack(">qi", offset, len(body)) + body


@pytest.mark.parametrize(
    "wrapper,offsets,problem",
    [
        (0, [0, 1, 2, 3], False),  # a producer's wrapper (kafka-python, librdkafka): as is
        (103, [100, 101, 102, 103], False),  # the broker's: the last inner's absolute offset
        (2, [0, 1, 2, 3], True),  # below the last relative offset: Kafka refuses it
    ],
)
def test_magic_1_inner_offsets_are_read_as_kafka_reads_them(wrapper, offsets, problem):
    import gzip

    from kdissect.protocol import Options
    from kdissect.protocol.context import Decoding
    from kdissect.protocol.node import Node
    from kdissect.protocol.records import read_records, record_offset

    inner = b"".join(_message_v1(i, b"v%d" % i) for i in range(4))
    data = _message_v1(wrapper, gzip.compress(inner), attributes=1)
    holder = Node("records", "records", 0, len(data))
    read_records(data, holder, 0, len(data), Decoding(Options()))
    wrapper_node = holder.children[0]
    messages = [n for n in wrapper_node.walk() if n.ktype.startswith("message_v")][1:]
    assert [record_offset(m) for m in messages] == offsets
    assert (wrapper_node.child("offset").code == "malformed_field") is problem
