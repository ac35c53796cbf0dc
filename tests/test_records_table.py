"""The records table's fast rows (stream/record_table.py: the values decoder and the
compiled batch walker, native/src/records_table.rs) against the reference, the located
tree (``rows.record_rows(fast=False)``): every record row of every message of every
capture under captures/ (TLS ones decrypted), and of damaged copies of the messages that
carry records, equal -- column values, their types and their order. The walker alone
against its Python reference (``batch_columns_py``) on text of every kind and on mutated
batches: the same columns or a hand-over, never a crash."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import random
from pathlib import Path
from typing import Any

import pytest

from kdissect.protocol import native_ext

from kdissect.capture.tls import KeyLog
from kdissect.protocol.apis import carries_records
from kdissect.sources.pcap import read_captures
from kdissect.stream import record_table, rows as rows_module
from kdissect.stream.model import Exchange
from kdissect.pipeline import columns
from kdissect.stream.record_table import RecordBlock, RowShape, batch_columns_py
from kdissect.stream.rows import record_rows
from kdissect.stream.sink import Collect
from tests.test_log_lines import TEXTS, record

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("**/*.pcap"))
JOINS = {"exchange_id": "c:1", "connection_id": "c", "client_ip": "10.0.0.1"}
SHAPE = RowShape(columns.names(columns.RECORDS))  # the records table's tuple rows


@pytest.fixture(scope="module")
def native():
    try:
        from kdissect import _native  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail(
            "the compiled extension is not built: install with cargo on the PATH "
            "(pip install -e ., as ./scripts/test does)"
        )
    native_ext.refresh()  # (an earlier test may have run with KDISSECT_PURE)
    if record_table._native is None:
        pytest.fail("the compiled walker is off (KDISSECT_PURE=1?): nothing to compare")
    return _native.record_table_rows


def exchanges(path: Path) -> list[Exchange]:
    keys = None
    keylog = path.with_suffix(".keys")
    if keylog.exists():
        keys = KeyLog()
        keys.add_file(str(keylog))
    sink = Collect()
    read_captures([str(path)], sink, keys=keys)
    return sink.exchanges


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types and dict key orders all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def compare(ex: Exchange, fast_hits: list[int]) -> int:
    """The rows of ``ex`` both ways (with and without joins); returns how many."""
    calls = []
    plain = record_table.fast_record_rows

    def spy(*args: Any) -> bool:
        got = plain(*args)
        calls.append(got)
        return got

    rows_module.fast_record_rows = spy
    try:
        for joins in (None, JOINS):
            want = record_rows(ex, "cap", None, joins, fast=False)
            got = record_rows(ex, "cap", None, joins)
            assert same(got, want), (ex.first.api_name, got[:2], want[:2])
            # as the records table takes them: tuples in its column order, blocks of a
            # batch's rows, one-record rows
            held = record_rows(ex, "cap", None, joins, shape=SHAPE)
            rows = [r for b in held for r in (b.rows() if type(b) is RecordBlock else [b])]
            tuples = [SHAPE.row(r) for r in want]
            assert same(rows, tuples), (ex.first.api_name, rows[:2], tuples[:2])
    finally:
        rows_module.fast_record_rows = plain
    fast_hits.append(sum(calls))
    return len(want)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_record_row_of_every_capture(native, path):
    hits: list[int] = []
    rows = sum(compare(ex, hits) for ex in exchanges(path))
    if rows:
        # the fast path did read messages here (not everything handed to the tree)
        assert sum(hits) > 0 or path.name in HANDED_OVER, path.name


# captures whose records the fast path hands to the tree, every message: message sets
# (v0/v1), internal topics, control batches
HANDED_OVER = {"legacy-0.8.2.pcap", "legacy-0.10.0.pcap"}


def carriers(paths: list[Path]) -> list[Exchange]:
    return [
        ex
        for p in paths
        for ex in exchanges(p)
        if any(m is not None and carries_records(m.api_key, m.direction) for m in ex.messages)
    ]


def test_damaged_copies_of_messages_with_records(native):
    rng = random.Random(43)
    found = carriers(CAPTURES)
    assert len(found) > 100
    hits: list[int] = []
    compared = 0
    for ex in rng.sample(found, 150):
        for _ in range(8):
            m = rng.choice([m for m in ex.messages if carries_records(m.api_key, m.direction)])
            data = bytearray(m.data)
            how = rng.randrange(4)
            if how == 0:  # flip bytes
                for _ in range(rng.randint(1, 4)):
                    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            elif how == 1:  # cut
                del data[rng.randrange(len(data)) :]
            elif how == 2:  # a byte set to an extreme
                data[rng.randrange(len(data))] = rng.choice((0, 0x7F, 0x80, 0xFF))
            else:  # bytes moved
                i = rng.randrange(len(data))
                data[i:i] = data[rng.randrange(len(data)) :][: rng.randint(1, 9)]
            damaged = dataclasses.replace(m, data=bytes(data), size=len(data))
            copy = dataclasses.replace(
                ex,
                request=damaged if m is ex.request else ex.request,
                response=damaged if m is ex.response else ex.response,
            )
            compared += compare(copy, hits)
    assert compared > 1000 and sum(hits) > 100  # rows compared, messages read fast


def test_every_kind_of_text(native):
    recs = [record(t, t, [(b"h", t), ("é".encode(), None), (b'q"\x01', t)]) for t in TEXTS] + [
        record(None, None),
        record(b"", b""),
        record(b"k", b"v", ts_delta=-(10**15)),  # before 1970: a null timestamp
        record(b"k", b"v", ts_delta=10**16),  # past 9999: null
    ]
    data = b"".join(recs)
    want = batch_columns_py(data, 0, len(data), len(recs), 42, 1700000000000, False)
    assert want is not None
    assert native(data, 0, len(data), len(recs), 42, 1700000000000, False) == want
    keys = {r[2] for r in want}
    assert "0x6e627370c2a0" in keys  # NBSP is not printable: hex
    assert "é à ü" in keys and "" in keys and None in keys
    assert [r[1] for r in want[-2:]] == [None, None]
    assert want[0][0] == 42 and want[0][1] == 1700000000000 * 1000
    fixed = native(data, 0, len(data), len(recs), 0, 5, True)
    assert fixed is not None and {r[1] for r in fixed} == {5000}


def test_hands_over_what_the_tree_must_judge(native):
    for rec in (
        record(b"k", b"v", [(b"\xff", b"x")]),  # a header key not UTF-8
        record(b"k", b"v", [(None, b"x")]),  # a null header key
    ):
        assert native(rec, 0, len(rec), 1, 0, 0, False) is None
    good = record(b"k", b"v")
    assert native(good, 0, len(good), 2, 0, 0, False) is None  # fewer records than said
    assert native(good + b"\x00", 0, len(good) + 1, 1, 0, 0, False) is None  # trailing
    assert native(good, 0, len(good) - 1, 1, 0, 0, False) is None  # cut
    assert native(good, 0, len(good), 1, 2**63 - 1, 0, False) is not None
    past = record(b"k", b"v", offset_delta=1)
    assert native(past, 0, len(past), 1, 2**63 - 1, 0, False) is None  # past 64 bits


def test_mutated_batches_never_crash(native):
    rng = random.Random(4343)
    seeds = [
        b"".join(
            record(rng.choice(TEXTS), rng.choice(TEXTS), [(b"h", rng.choice(TEXTS))])
            for _ in range(n)
        )
        for n in (1, 3, 9)
    ]
    read = 0
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        count = rng.randint(0, 10)
        fixed = rng.random() < 0.2
        args = (bytes(data), 0, len(data), count, rng.choice((0, 1 << 40)), 1700000000000, fixed)
        got = native(*args)
        assert got is None or got == batch_columns_py(*args)
        read += got is not None
    assert read > 100


def test_cli_tables_agree(tmp_path, native):
    """The command itself, compiled and with KDISSECT_PURE=1 (the tree for every record):
    the same records table, byte for byte, on captures of every client and codec."""
    captures = [
        str(ROOT / "captures" / n)
        for n in (
            "kafka-broker-killed.pcap",
            "kafka-python-codecs.pcap",
            "kafka-java-transactions.pcap",
        )
    ]
    outs = []
    for name, env in (("compiled", {}), ("pure", {"KDISSECT_PURE": "1"})):
        out = tmp_path / f"{name}.parquet"
        subprocess.run(
            [sys.executable, "-m", "kdissect", "pcap", *captures, "--format", "parquet"]
            + ["-o", str(tmp_path / f"{name}-x.parquet"), "--records-output", str(out)],
            capture_output=True,
            timeout=300,
            check=True,
            env={**os.environ, **env},
        )
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    import pyarrow.parquet as pq

    assert pq.read_metadata(tmp_path / "compiled.parquet").num_rows > 1600


def test_blocks_sorted_and_spilled_as_rows(tmp_path, monkeypatch, native):
    """The fast rows reach the table as blocks (a batch's rows as one item, sorted and
    spilled as one): the same records table, byte for byte, as the tree's rows one by
    one, spilled every 5 rows or never."""
    from kdissect.pipeline import spill
    from kdissect.pipeline.local import write_exchanges

    files = [str(ROOT / "captures" / n) for n in ("kafka-broker-killed.pcap", "kcat.pcap")]
    got = []
    for run, fast in ((5, True), (1_000_000, True), (5, False), (1_000_000, False)):
        monkeypatch.setattr(spill, "RUN", run)
        if not fast:
            monkeypatch.setattr(rows_module, "fast_record_rows", lambda *a: False)
        r = tmp_path / f"{run}-{fast}.parquet"
        write_exchanges(
            files,
            str(tmp_path / "x.parquet"),
            ports=(9092,),
            detect=True,
            warn=lambda w: None,
            records_out=str(r),
        )
        got.append(r.read_bytes())
    assert got[0] == got[1] == got[2] == got[3]


def test_carriers_name_one_topic_and_one_partition_a_struct():
    """record_table._follow reads a struct's names in any order: right while no struct
    of a record carrier's layout has two topic fields (a topic_id among them) or two
    partition fields (the tree's walk takes the last one)."""
    from kdissect.protocol import schemas
    from kdissect.stream.cells import PARTITION_FIELDS, TOPIC_FIELDS

    def check(st: Any, where: str) -> None:
        names = [f.name for f in st.fields + st.tagged]
        assert len([n for n in names if n in TOPIC_FIELDS or n == "topic_id"]) <= 1, where
        assert len([n for n in names if n in PARTITION_FIELDS]) <= 1, where
        for f in st.fields + st.tagged:
            if f.struct is not None:
                check(f.struct, f"{where}.{f.name}")

    kinds = 0
    for api_key in range(100):
        for direction in ("request", "response"):
            if carries_records(api_key, direction):
                for version in range(30):
                    st = schemas.layout(api_key, version, direction)
                    if st is not None:
                        check(st, f"{api_key} v{version} {direction}")
                        kinds += 1
    assert kinds > 30


def test_table_read_equals_the_values_decoder(native, monkeypatch):
    """The compiled table read (values.table_values: each records field's batches read
    straight to their rows, the body's dict only what the route reads) against the
    values decoder's read of the same messages (record_table._TABLE off): the same
    rows, on every capture and on damaged copies of the messages with records; and it
    read most of them."""
    from kdissect.protocol import values

    read: list[bool] = []

    def spy(*args: Any) -> Any:
        got = values.table_values(*args)
        read.append(got is not None)
        return got

    monkeypatch.setattr(record_table, "table_values", spy)
    rng = random.Random(4343)
    found = carriers(CAPTURES)
    damaged = []
    for ex in rng.sample(found, 150):
        m = rng.choice([m for m in ex.messages if carries_records(m.api_key, m.direction)])
        data = bytearray(m.data)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        d = dataclasses.replace(m, data=bytes(data), size=len(data))
        damaged.append(
            dataclasses.replace(
                ex,
                request=d if m is ex.request else ex.request,
                response=d if m is ex.response else ex.response,
            )
        )
    got = {}
    for table in (True, False):
        monkeypatch.setattr(record_table, "_TABLE", table)
        monkeypatch.setattr(record_table, "_ROUTES", {})
        got[table] = [
            (record_rows(ex, "cap", None, JOINS), record_rows(ex, "cap", None, JOINS, shape=SHAPE))
            for ex in found + damaged
        ]
    assert len(got[True]) == len(got[False])
    for (a, a_blocks), (b, b_blocks) in zip(got[True], got[False]):
        assert same(a, b)
        assert [type(x) for x in a_blocks] == [type(x) for x in b_blocks]
        assert same(
            [x.rows() if type(x) is RecordBlock else x for x in a_blocks],
            [x.rows() if type(x) is RecordBlock else x for x in b_blocks],
        )
    assert sum(read) > 0.6 * len(read) > 1000, (sum(read), len(read))


def test_tuple_rows_and_blocks_spilled_in_runs_come_back_sorted():
    """SortedRows with the records table's shape: tuple rows and RecordBlocks, spilled
    every 3 rows (to temporary files, pickled) or never, come back as ``sorted`` orders
    the rows made of them (stable: equal keys keep their order)."""
    from operator import itemgetter

    from kdissect.pipeline import spill

    order = SHAPE.order(())
    rng = random.Random(7)
    items: list[Any] = []
    for i in range(60):
        shared = ("cap", "fetch", i, float(rng.randrange(5)), "t", 0)
        records = [(o, None, f"k{o}", 1, []) for o in range(rng.choice((1, 1, 3)))]
        tail = record_table._TAIL
        if len(records) == 1:
            items.append(order(shared + records[0] + tail))
        else:
            items.append(RecordBlock(shared, records, tail, order))
    rows = [r for x in items for r in (x.rows() if type(x) is RecordBlock else [x])]
    key = itemgetter(SHAPE.names.index("capture"), SHAPE.names.index("message_ts"))
    want = sorted(rows, key=key)
    for run in (3, 1_000_000):
        held = spill.SortedRows(key, run=run, shape=SHAPE)
        for x in items:
            held.extend([x])
        assert len(held) == len(rows) > 60
        assert bool(held.files) == (run == 3)
        assert list(held) == want


def test_table_read_looks_for_internal_topics_as_python_does(native, monkeypatch):
    """values.table_values hands the internal topics' needles to the compiled read,
    which looks itself after a read that gave batches: the same answers as asking
    _may_carry_internal after the read (base_needles None), on every message with
    records of every capture, on copies with an internal topic's name or
    __cluster_metadata's id written into them, and with the needles not bound."""
    from kdissect.protocol import internal, values

    names = [n for n in internal._BASE_NEEDLES if n.startswith(b"__")]
    rng = random.Random(4344)
    msgs = []
    for ex in carriers(CAPTURES):
        for m in ex.messages:
            if m is None or not carries_records(m.api_key, m.direction) or m.api_version is None:
                continue
            msgs.append(m)
            data = bytearray(m.data)
            needle = rng.choice(names + [internal._METADATA_ID_BYTES])
            at = rng.randrange(max(1, len(data) - len(needle)))
            data[at : at + len(needle)] = needle
            msgs.append(dataclasses.replace(m, data=bytes(data), size=len(data)))
    assert internal.base_needles() is not None

    def table(m: Any) -> Any:
        route, reader, _head = record_table._route_of(m.api_key, m.api_version, m.direction)
        if route is None or reader is None:
            return "no reader"
        return values.table_values(
            reader,
            bytes(m.data),
            m.api_key,
            m.direction,
            rows_module.RECORDS,
            route.spec,
            record_table.topic_of_id,
        )

    compiled = [table(m) for m in msgs]
    monkeypatch.setattr(values, "base_needles", lambda: None)
    python = [table(m) for m in msgs]
    monkeypatch.setattr(values, "_may_carry_internal", lambda *a: False)
    unchecked = [table(m) for m in msgs]
    assert same(compiled, python)
    # the look decided many: read to batches, then left to the values decoder
    found = sum(a is None and bool(b) for a, b in zip(compiled, unchecked))
    assert found > 100 and sum(bool(x) for x in compiled) > 200, found


def test_the_shared_empty_problems_stay_empty(tmp_path, native):
    """Every fast tuple row holds the one empty ``problems`` list of record_table._TAIL
    (a list per row cost a record's time for nothing): nothing on the way to the table
    (holder, spill, topic naming, writer) may change it, or every row would show it."""
    from kdissect.pipeline import spill
    from kdissect.pipeline.local import write_exchanges

    problems = record_table._TAIL[0]
    assert problems == [] and type(problems) is list
    for run in (5, 1_000_000):
        spill_run = spill.RUN
        spill.RUN = run
        try:
            write_exchanges(
                [str(ROOT / "captures" / n) for n in ("kafka-broker-killed.pcap", "kcat.pcap")],
                str(tmp_path / "x.parquet"),
                ports=(9092,),
                detect=True,
                warn=lambda w: None,
                records_out=str(tmp_path / "r.parquet"),
            )
        finally:
            spill.RUN = spill_run
        assert record_table._TAIL[0] is problems and problems == []
