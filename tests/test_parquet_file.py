"""kdissect's own Parquet writer (pipeline/parquet_file.py): the tables it writes read back,
with pyarrow and with DuckDB, as the rows they were made of, in the Arrow schemas of
pipeline/tables.py (the Spark job's; tests/test_spark.py has Spark read them too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdissect.pipeline import columns, parquet_file
from kdissect.pipeline.extract import capture_rows
from kdissect.pipeline.parquet_file import write_table
from kdissect.pipeline.tables import EXCHANGES, RECORDS, _micros, arrow_schema
from tests.support.cli import kdissect_text

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted(str(p) for p in (ROOT / "captures").rglob("*.pcap"))


def expected(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """What pyarrow makes of the rows itself (times as µs)."""
    return pa.Table.from_pylist([_micros(dict(r)) for r in rows], schema=schema)


def check(rows: list[dict], cols: columns.Columns, path: Path) -> pa.Table:
    """Write ``rows``, read them back with pyarrow and DuckDB, compare with ``rows``."""
    schema = arrow_schema(cols)
    assert write_table(rows, cols, str(path)) == len(rows)
    got = pq.read_table(path)
    assert got.schema.equals(schema)  # types, logical types, nullability, UTC µs
    want = expected(rows, schema)
    assert got.equals(want)
    assert got.to_pylist() == want.to_pylist()
    # DuckDB: the same values, lists and structs, times as the same instants
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    names = ", ".join(f'"{f.name}"' for f in schema)
    by_duck = con.execute(f"SELECT {names} FROM read_parquet('{path}')").fetchall()
    assert by_duck == [tuple(r.values()) for r in want.to_pylist()]
    return got


def test_tuple_rows_are_the_dict_rows_and_odd_ones_are_refused(tmp_path):
    """Rows as tuples in the columns' order write the file their dicts write; a group
    mixing dicts and tuples, or tuples of another length, is refused (zip would read a
    dict as its keys and cut a longer tuple)."""
    names = [name for name, _kind in columns.EXCHANGES]
    dicts = [
        {name: None for name in names} | {"capture": f"c{i}", "seq": i, "request_ts": i + 0.5}
        for i in range(5)
    ]
    tuples = [tuple(r[name] for name in names) for r in dicts]
    write_table(dicts, columns.EXCHANGES, str(tmp_path / "d.parquet"))
    write_table(tuples, columns.EXCHANGES, str(tmp_path / "t.parquet"))
    assert (tmp_path / "d.parquet").read_bytes() == (tmp_path / "t.parquet").read_bytes()
    for odd in ([tuples[0], dicts[1]], [tuples[0], tuples[1][:-1]], [tuples[0] + (1,)]):
        writer = parquet_file.ParquetWriter(open(tmp_path / "o.parquet", "wb"), columns.EXCHANGES)
        with pytest.raises(ValueError):
            writer.write(odd)
        writer.out.close()


def test_nulls_empties_and_odd_values_read_back(tmp_path):
    """Every way a value can be missing (a null column, a null or empty list, a null
    struct in a list, a null field of a struct, a null string in a list), extremes of
    each type, text that is not ASCII."""
    base = {name: None for name, _kind in columns.EXCHANGES}
    rows = [
        base,
        base | {"errors": [], "topics": [], "partitions": [], "problems": [], "findings": []},
        base
        | {
            "capture": "c ✓ 日本",
            "seq": -(2**31),
            "api_key": 2**15 - 1,
            "api_version": -(2**15),
            "record_count": 2**63 - 1,
            "record_bytes": -(2**63),
            "latency_ms": 0.1 + 0.2,
            "request_ts": 1_700_000_000.123456,
            "response_ts": 0.0,
            "errors": [
                None,
                {"topic": None, "partition": 3, "code": -1, "name": "x"},
                {"topic": "t", "partition": None, "code": None, "name": None},
            ],
            "topics": ["a", None, "", "b"],
            "partitions": [{"topic": "t", "partition": 0}, None],
            "findings": [{"code": "c", "severity": None, "where": "", "detail": "d"}],
        },
        base | {"topics": [None], "errors": [None], "problems": ["p" * 70_000]},
    ]
    check(rows, columns.EXCHANGES, tmp_path / "x.parquet")


def test_row_groups_and_empty_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_file, "ROW_GROUP", 7)
    rows = [
        {
            "capture": f"c{i}",
            "topic": None if i % 3 else "t",
            "offset": i,
            "headers": [{"key": "k", "value": None}] * (i % 4) if i % 5 else None,
            "message_ts": i + 0.5,
        }
        for i in range(50)
    ]
    got = check(rows, columns.RECORDS, tmp_path / "r.parquet")
    assert pq.ParquetFile(tmp_path / "r.parquet").num_row_groups == 8
    assert got.num_rows == 50
    empty = check([], columns.RECORDS, tmp_path / "e.parquet")
    assert empty.num_rows == 0


def test_text_that_is_not_utf8_is_replaced_not_a_traceback(tmp_path):
    write_table([{"capture": "a\udcff"}], columns.CAPTURES, str(tmp_path / "c.parquet"))
    assert pq.read_table(tmp_path / "c.parquet").column("capture").to_pylist() == ["a?"]


@pytest.mark.parametrize(
    "capture", ["captures/kafka-java-transactions.pcap", "captures/legacy-0.8.2.pcap"]
)
def test_capture_tables_read_back(capture, tmp_path):
    rows = capture_rows([(capture, str(ROOT / capture))], (9092,), True, True, lambda w: None)
    assert rows.exchanges and rows.records
    check(rows.exchanges, columns.EXCHANGES, tmp_path / "x.parquet")
    check(rows.records, columns.RECORDS, tmp_path / "r.parquet")


@pytest.mark.slow  # every repo capture: some seconds
def test_every_capture_reads_back(tmp_path):
    rows = capture_rows([(c, c) for c in CAPTURES], (9092,), True, True, lambda w: None)
    assert len(rows.exchanges) > 250 and len(rows.records) > 250
    check(rows.exchanges, columns.EXCHANGES, tmp_path / "x.parquet")
    check(rows.records, columns.RECORDS, tmp_path / "r.parquet")


PROBE = """
import sys
sys.modules["pyarrow"] = None           # as where the spark extra is not installed
from kdissect.cli.entry import main
sys.argv = ["kdissect", "pcap", "captures/kafka-python-codecs.pcap", "--format", "parquet",
            "-o", sys.argv[1], "--records-output", sys.argv[2]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print(sorted(m for m in ("pyarrow", "numpy", "pandas") if sys.modules.get(m)))
"""


def test_the_cli_writes_parquet_without_pyarrow(tmp_path):
    """``--format parquet`` needs neither pyarrow nor numpy (0.18 CPU-s and 43 MiB of
    imports, more than writing the tables takes) and writes what capture_rows makes."""
    ex, rec = tmp_path / "x.parquet", tmp_path / "r.parquet"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ex), str(rec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]
    assert "wrote 50 exchanges" in done.stderr
    path = "captures/kafka-python-codecs.pcap"
    rows = capture_rows([(path, path)], (9092,), True, True, lambda w: None)
    assert pq.read_table(ex).num_rows == 50
    assert sorted(map(repr, pq.read_table(ex).to_pylist())) == sorted(
        map(repr, expected(rows.exchanges, EXCHANGES).to_pylist())
    )
    assert sorted(map(repr, pq.read_table(rec).to_pylist())) == sorted(
        map(repr, expected(rows.records, RECORDS).to_pylist())
    )


def test_rows_spilled_to_disk_come_back_in_the_same_order(tmp_path, monkeypatch):
    """Past spill.RUN rows, runs are sorted on disk and merged: the same files, byte for
    byte, as when every row stays in memory (a stable sort either way)."""
    from kdissect.pipeline import spill
    from kdissect.pipeline.local import write_exchanges

    files = [
        str(ROOT / "captures" / n)
        for n in ("kafka-clients.pcap", "kcat.pcap", "kafka-python-codecs.pcap")
    ]
    got = {}
    for run in (1_000_000, 5):
        monkeypatch.setattr(spill, "RUN", run)
        x, r = tmp_path / f"{run}-x.parquet", tmp_path / f"{run}-r.parquet"
        n, errors = write_exchanges(
            files, str(x), ports=(9092,), detect=True, warn=lambda w: None, records_out=str(r)
        )
        assert errors == 0
        got[run] = (n, x.read_bytes(), r.read_bytes())
    assert got[5][0] == got[1_000_000][0] > 200
    assert got[5] == got[1_000_000]
    rows = sorted(range(100), key=lambda i: i % 7)
    many = spill.SortedRows(lambda row: row["k"] % 7, run=9)
    many += ({"k": i} for i in range(100))
    assert [row["k"] for row in many] == rows and len(many) == 100


def test_the_files_say_what_wrote_them(tmp_path):
    """The key-value metadata of --format parquet's files: kind, schema version, kdissect
    version and options (the manifest of a Spark output says the same)."""
    import json

    import pyarrow.parquet as pq

    from kdissect import __version__
    from kdissect.pipeline.local import write_exchanges
    from kdissect.pipeline.manifest import SCHEMA_VERSION

    x, r = tmp_path / "x.parquet", tmp_path / "r.parquet"
    write_exchanges(
        [str(ROOT / "captures" / "kcat.pcap")],
        str(x),
        ports=(9092,),
        detect=True,
        warn=lambda w: None,
        records_out=str(r),
    )
    for path in (x, r):
        meta = {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items()}
        assert meta["kdissect.kind"] == "capture"
        assert meta["kdissect.schema_version"] == str(SCHEMA_VERSION)
        assert meta["kdissect.version"] == __version__
        assert json.loads(meta["kdissect.options"])["records"] is True
    stamp = pq.read_table(r).schema.field("timestamp").type
    assert str(stamp) == "timestamp[us, tz=UTC]"


@pytest.mark.parametrize(
    "content, says",
    [
        (b"hello, not a capture", "not a pcap or pcapng file"),
        # a pcap header and no packet (little-endian, v2.4, Ethernet)
        (bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"), "holds no packets"),
    ],
)
def test_parquet_exits_as_the_other_formats_on_an_unreadable_input(tmp_path, content, says):
    """An input that cannot be read (or holds no Kafka traffic) makes every format exit 1
    with the same message: the table writer counts the notes of level "error" too (it
    once dropped their level and exited 0)."""
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(content)
    out = tmp_path / "x.parquet"

    def run(*args: str) -> subprocess.CompletedProcess:
        return kdissect_text("pcap", str(bad), *args)

    for done in (
        run("--format", "jsonl"),
        run("--format", "parquet", "-o", str(out)),
        run("--format", "parquet", "-o", str(out), "--records-output", str(tmp_path / "r.parquet")),
    ):
        assert done.returncode == 1, done.stderr
        assert says in done.stderr and "Traceback" not in done.stderr
    # with a readable capture beside it, its rows are still written, and the status says
    # one input was not read
    good = str(ROOT / "captures" / "kcat.pcap")
    done = kdissect_text("pcap", good, str(bad), "--format", "parquet", "-o", str(out))
    assert done.returncode == 1 and says in done.stderr
    assert pq.read_table(out).num_rows > 0


def test_compiled_columns_are_the_python_ones():
    """native/src/parquet_plain.rs against _Leaf.levels and _Leaf.plain: for every kind,
    on columns of every sort of value (nulls, bounds and past them, huge and non-finite
    times, bools, lone surrogates, values of another type), the same bytes, or None
    (the Python path writes the column: the same bytes or the same exception)."""
    import random

    from kdissect.protocol import native_ext

    native_ext.refresh()
    if parquet_file._plain_native is None:
        pytest.skip("the compiled extension is not built (or KDISSECT_PURE)")
    rng = random.Random(43)
    odd = [
        None, 0, 1, -1, True, False, 2**15 - 1, 2**15, -(2**15) - 1, 2**31 - 1, 2**31,
        -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**80, 0.5, 1.5, 2.5, -0.5,
        1e-7, 1.0000005e-6, 1796112730.241378, 9.3e12, 9.3e15, 1e300, float("inf"),
        float("-inf"), float("nan"), -1e300, "", "a", "ü€𝄞", "\ud800", "x\udcff", b"b", [],
        5e-07, 2.5e-06, -2.5e-06, 4.5e-06, -0.0,  # (times on a .5 µs tie: rounded to even)
    ]  # fmt: skip
    written = 0
    for kind in (columns.STRING, columns.INT16, columns.INT32, columns.INT64,
                 columns.FLOAT64, columns.TIMESTAMP):  # fmt: skip
        leaf = parquet_file._Leaf("c", kind, False, None)
        for n in range(400):
            pool = odd if n % 2 else [v for v in odd if type(v) in _TYPES[kind]]
            values = [rng.choice(pool) for _ in range(rng.randint(0, 12))]
            col = {"c": tuple(values) if n % 3 else values}
            try:
                want: object = leaf.levels(col, {})
                want = (want[1], leaf.plain(want[2]))  # type: ignore[index]
            except Exception as e:
                want = type(e)
            got = parquet_file._plain_native(col["c"], parquet_file._NATIVE_KIND[kind])
            if got is not None:
                assert got == want, (kind, values)
                written += 1
            elif not isinstance(want, type):  # handed back: the Python path writes it
                assert leaf.encoded(col, {})[1:] == want
            else:  # handed back where Python raises: the writer raises the same
                with pytest.raises(want):
                    leaf.encoded(col, {})
    assert written > 1000  # (the compiled path did write most columns of its types)


# the types a column of each kind holds in rows
_TYPES = {
    columns.STRING: (str, type(None)),
    columns.INT16: (int, bool, type(None)),
    columns.INT32: (int, bool, type(None)),
    columns.INT64: (int, bool, type(None)),
    columns.FLOAT64: (float, type(None)),
    columns.TIMESTAMP: (float, int, type(None)),
}
