"""The Spark job on a real embedded Spark (local[2]): the same rows as one process,
whether files are split into shards or not, records joined to their exchanges, damage
recovered and recorded, inputs from a real S3-compatible server (moto, on loopback),
output modes, and the docs' queries giving the right numbers in Spark SQL and DuckDB."""

import gzip
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdissect.pipeline.extract import capture_rows
from kdissect.pipeline.local import write_exchanges
from kdissect.pipeline.output import OutputError
from kdissect.pipeline.session import explain
from kdissect.pipeline.spark_job import plan_shards, run_job
from kdissect.pipeline.tables import RECORDS, _micros
from kdissect.pipeline.tracker import STALL_ENV, STALL_SECONDS, stall_seconds
from kdissect.sources.pcap import DEFAULT_PORTS

pytestmark = pytest.mark.slow  # Spark (a JVM)

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"
REPO_FILES = sorted(str(p) for p in CAPTURES.rglob("*.pcap"))  # as the job walks the folder


@pytest.fixture(scope="module")
def repo_tables(spark, tmp_path_factory):
    """The repository's captures through the job once: (result, directory)."""
    out = tmp_path_factory.mktemp("repo") / "t"
    seen = []
    result = run_job(
        spark,
        [str(CAPTURES)],
        str(out),
        ports=DEFAULT_PORTS,
        with_records=True,
        progress=lambda *p: seen.append(p),
    )
    result.seen = seen
    return result, out


def table(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def canonical(rows):
    return sorted(repr(sorted(r.items())) for r in rows)


def test_the_repo_captures_give_the_rows_of_one_process(repo_tables, spark, tmp_path):
    result, out = repo_tables
    write_exchanges(
        REPO_FILES, str(tmp_path / "one.parquet"), ports=DEFAULT_PORTS, detect=True, warn=print
    )
    spark_rows = table(out / "exchanges")
    one_rows = table(tmp_path / "one.parquet")
    assert len(spark_rows) == result.exchanges == len(one_rows) > 250
    assert spark_rows == one_rows  # same rows (and ids), same order
    # Spark reads the file kdissect's own writer made (pipeline/parquet_file.py) as the
    # table it wrote itself: same schema, same rows
    ours, theirs = (
        spark.read.parquet(str(tmp_path / "one.parquet")),
        spark.read.parquet(str(out / "exchanges")),
    )
    assert ours.schema == theirs.schema
    assert ours.exceptAll(theirs).count() == 0 == theirs.exceptAll(ours).count()
    records = table(out / "records")
    expected = capture_rows([(f, f) for f in REPO_FILES], DEFAULT_PORTS, True, True, print).records
    assert len(records) == result.records == len(expected)
    assert canonical(records) == canonical(
        pa.Table.from_pylist([_micros(dict(r)) for r in expected], RECORDS).to_pylist()
    )
    assert result.shards == len(REPO_FILES) and result.warnings == []
    assert ("shards", len(REPO_FILES), len(REPO_FILES)) in result.seen
    captures = {c["capture"]: c for c in table(out / "captures")}
    assert set(captures) == set(REPO_FILES)
    kcat = captures[str(CAPTURES / "kcat.pcap")]
    assert kcat == {
        "capture": str(CAPTURES / "kcat.pcap"),
        "size_bytes": (CAPTURES / "kcat.pcap").stat().st_size,
        "packets": 64,
        "connections": 4,
        "exchanges": 14,
        "records": 8,
        "gaps": 0,
        "warnings": [],
        "status": "ok",
    }
    assert sum(c["exchanges"] for c in captures.values()) == len(spark_rows)


def test_records_join_their_exchange_one_to_one(repo_tables):
    _, out = repo_tables
    exchanges, records = table(out / "exchanges"), table(out / "records")
    ids = Counter(r["exchange_id"] for r in exchanges)
    assert max(ids.values()) == 1  # a key, across all captures
    by_id = {r["exchange_id"]: r for r in exchanges}
    per_exchange = Counter(r["exchange_id"] for r in records)
    assert set(per_exchange) <= set(by_id)  # every record finds its exchange
    for ex_id, n in per_exchange.items():
        ex = by_id[ex_id]
        assert ex["record_count"] == n and ex["api_name"] in ("Produce", "Fetch", "ShareFetch")
    sample = records[0]
    ex = by_id[sample["exchange_id"]]
    assert (
        sample["capture"],
        sample["client_port"],
        sample["broker_port"],
        sample["correlation_id"],
    ) == (ex["capture"], ex["client_port"], ex["broker_port"], ex["correlation_id"])
    # correlation ids repeat across connections: the old join key multiplied rows
    pairs = Counter((r["capture"], r["correlation_id"]) for r in exchanges)
    assert sum(pairs[(r["capture"], r["correlation_id"])] for r in records) > len(records)


@pytest.mark.parametrize("name", ["sasl-scram", "kafka-python-codecs"])
def test_a_capture_split_into_shards_gives_the_rows_of_the_unsplit_run(spark, tmp_path, name):
    path = str(CAPTURES / f"{name}.pcap")
    whole = run_job(spark, [path], str(tmp_path / "whole"), ports=DEFAULT_PORTS, with_records=True)
    size = os.path.getsize(path)
    split = run_job(
        spark,
        [path],
        str(tmp_path / "split"),
        ports=DEFAULT_PORTS,
        with_records=True,
        shard_bytes=size // 9,
        split=True,
    )
    assert whole.shards == 1 and split.shards >= 9
    assert split.warnings == [] and split.packets == whole.packets
    for t in ("exchanges", "records", "captures"):
        a, b = table(tmp_path / "whole" / t), table(tmp_path / "split" / t)
        assert canonical(a) == canonical(b), t
    assert whole.exchanges > 40 and whole.records == (40 if name == "kafka-python-codecs" else 0)


def damaged_copy(tmp_path) -> tuple[Path, int, list[tuple[int, int]]]:
    """mtu1500.pcap with garbage over two stretches, cut short: its path, its size,
    and the damaged byte ranges."""
    data = bytearray((CAPTURES / "mtu1500.pcap").read_bytes())
    rng = random.Random(5)
    damaged = [(len(data) // 3, len(data) // 3 + 300), (len(data) // 2, len(data) // 2 + 300)]
    for a, b in damaged:
        data[a:b] = bytes(rng.randrange(256) for _ in range(b - a))
    broken = tmp_path / "broken.pcap"
    broken.write_bytes(data[: len(data) * 5 // 6])
    return broken, len(data), damaged


def test_a_damaged_capture_read_whole_recovers_what_split_recovers(spark, tmp_path):
    broken, size, damaged = damaged_copy(tmp_path)
    truncated = tmp_path / "truncated.pcap.gz"
    truncated.write_bytes(gzip.compress((CAPTURES / "kcat.pcap").read_bytes())[:-200])
    (tmp_path / "notes.pcap").write_text("not a capture")
    inputs = [str(broken), str(truncated), str(tmp_path / "notes.pcap")]
    split = run_job(
        spark,
        inputs,
        str(tmp_path / "split"),
        ports=DEFAULT_PORTS,
        shard_bytes=size // 5,
        split=True,
    )
    whole = run_job(spark, inputs, str(tmp_path / "whole"), ports=DEFAULT_PORTS, split=False)
    assert split.shards >= 5 + 2 and whole.shards == 3
    rows = {
        m: [r for r in table(tmp_path / m / "exchanges") if r["capture"] == str(broken)]
        for m in ("split", "whole")
    }
    assert rows["whole"] and canonical(rows["whole"]) == canonical(rows["split"])
    assert split.packets == whole.packets
    intact = capture_rows(
        [("x", str(CAPTURES / "mtu1500.pcap"))], DEFAULT_PORTS, True, False, print
    ).exchanges
    clean = [r for r in rows["whole"] if not r["problems"] and r["status"] == "ok"]
    assert len(clean) >= len(intact) // 3
    # damage is data: the captures table says what happened to each file
    status = {c["capture"]: c for c in table(tmp_path / "whole" / "captures")}
    assert status[str(broken)]["status"] == "damaged"
    assert status[str(tmp_path / "notes.pcap")]["status"] == "unreadable"
    assert "not a pcap or pcapng file" in status[str(tmp_path / "notes.pcap")]["warnings"][0]
    assert status[str(truncated)]["status"] == "damaged"
    # warnings name the frame, counted as in the file, after which the damage starts
    offsets = record_offsets((CAPTURES / "mtu1500.pcap").read_bytes())
    hit = next(i for i, o in enumerate(offsets) if any(a < o + 16 and o < b for a, b in damaged))
    damage = [w for w in status[str(broken)]["warnings"] if "damaged bytes" in w]
    assert damage[0].startswith(f"after frame {hit}, byte {offsets[hit]} holds no plausible")
    assert all("--shard-size" not in w for w in whole.warnings + split.warnings)


def record_offsets(data: bytes) -> list[int]:
    """Where the records of an intact little-endian pcap start (frame n at [n - 1])."""
    offsets, pos = [], 24
    while pos + 16 <= len(data):
        offsets.append(pos)
        pos += 16 + int.from_bytes(data[pos + 8 : pos + 12], "little")
    return offsets


def test_captures_are_read_from_a_real_s3_compatible_server(spark, s3, tmp_path):
    import boto3

    client = boto3.client("s3")
    client.create_bucket(Bucket="captures")
    for name in ("kcat.pcap", "aiokafka.pcap"):
        client.upload_file(str(CAPTURES / name), "captures", f"day1/{name}")
    # one file read by byte ranges (split), one whole, both by the executors from S3
    result = run_job(
        spark,
        ["s3a://captures/day1/"],
        str(tmp_path / "t"),
        ports=DEFAULT_PORTS,
        with_records=True,
        split=True,
        shard_bytes=3000,
        partition_by="date",
    )
    assert result.shards > 2 and result.warnings == []
    local = capture_rows(
        [(f"s3a://captures/day1/{n}", str(CAPTURES / n)) for n in ("aiokafka.pcap", "kcat.pcap")],
        DEFAULT_PORTS,
        True,
        True,
        print,
    )
    got = table(tmp_path / "t" / "exchanges")
    assert sorted(r["exchange_id"] for r in got) == sorted(
        r["exchange_id"] for r in local.exchanges
    )
    assert {r["capture"] for r in got} == {
        "s3a://captures/day1/kcat.pcap",
        "s3a://captures/day1/aiokafka.pcap",
    }
    assert len(table(tmp_path / "t" / "records")) == len(local.records) > 0
    # partitioned by the UTC day of each exchange
    assert {d for d in os.listdir(tmp_path / "t" / "exchanges") if d.startswith("date=")} == {
        f"date={r['date']}" for r in got
    }
    assert all(
        str(r["date"]) == (r["request_ts"] or r["response_ts"]).date().isoformat() for r in got
    )


def test_output_modes_refuse_replace_or_append(spark, tmp_path):
    out = tmp_path / "t"
    kcat, admin = str(CAPTURES / "kcat.pcap"), str(CAPTURES / "admin.pcap")
    run_job(spark, [kcat], str(out), ports=DEFAULT_PORTS, with_records=True)
    with pytest.raises(OutputError, match="already exists.*--mode overwrite"):
        run_job(spark, [admin], str(out), ports=DEFAULT_PORTS, with_records=True)
    with pytest.raises(OutputError, match="already in"):
        run_job(spark, [kcat], str(out), ports=DEFAULT_PORTS, with_records=True, mode="append")
    with pytest.raises(OutputError, match="records"):
        run_job(spark, [admin], str(out), ports=DEFAULT_PORTS, mode="append")
    run_job(spark, [admin], str(out), ports=DEFAULT_PORTS, with_records=True, mode="append")
    assert {r["capture"] for r in table(out / "exchanges")} == {kcat, admin}
    assert [c["capture"] for c in table(out / "captures")].count(kcat) == 1
    # overwrite without --records: no records table of the earlier runs survives
    (out / "mine.txt").write_text("not kdissect's")
    run_job(spark, [admin], str(out), ports=DEFAULT_PORTS, mode="overwrite", partition_by="api")
    assert sorted(os.listdir(out)) == ["_kdissect.json", "captures", "exchanges", "mine.txt"]
    assert {r["capture"] for r in table(out / "exchanges")} == {admin}
    assert any(d.startswith("api_name=") for d in os.listdir(out / "exchanges"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        run_job(spark, [kcat], str(tmp_path / "file"), ports=DEFAULT_PORTS)


def test_appends_that_would_corrupt_a_table_are_refused(spark, tmp_path, monkeypatch):
    """The layout recorded in the manifest is checked before any work; a capture is
    known by its content, whatever its name; a run that fails leaves the tables as
    they were."""
    import json

    from kdissect import __version__
    from kdissect.pipeline import output

    out = tmp_path / "t"
    kcat, admin = str(CAPTURES / "kcat.pcap"), str(CAPTURES / "admin.pcap")
    first = run_job(
        spark, [kcat], str(out), ports=DEFAULT_PORTS, with_records=True, partition_by="date"
    )
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    manifest = json.loads((out / "_kdissect.json").read_text())
    assert manifest["kind"] == "capture" and manifest["schema_version"] >= 2
    assert manifest["layout"] == {"records": True, "partition_by": "date"}
    [run] = manifest["runs"]
    assert run["run_id"] == first.run_id and run["kdissect_version"] == __version__
    assert run["options"]["records"] is True and run["options"]["partition_by"] == "date"
    assert [c["capture"] for c in run["captures"]] == [kcat]
    assert run["captures"][0]["content"].startswith(f"{os.path.getsize(kcat)}:")
    # an append without --partition-by into a date-partitioned table
    with pytest.raises(
        OutputError,
        match=r"written with --partition-by date; an append "
        r"with no --partition-by",
    ):
        run_job(spark, [admin], str(out), ports=DEFAULT_PORTS, with_records=True, mode="append")
    # the same file under another name (./x after x), and a copy elsewhere
    monkeypatch.chdir(CAPTURES)
    with pytest.raises(
        OutputError,
        match=r"\./kcat.pcap has the same content as .*kcat"
        r"\.pcap, already in .*rows twice",
    ):
        run_job(
            spark,
            ["./kcat.pcap"],
            str(out),
            ports=DEFAULT_PORTS,
            with_records=True,
            mode="append",
            partition_by="date",
        )
    copy = tmp_path / "copy-of-kcat.pcap"
    copy.write_bytes((CAPTURES / "kcat.pcap").read_bytes())
    with pytest.raises(OutputError, match="same content"):
        run_job(
            spark,
            [str(copy)],
            str(out),
            ports=DEFAULT_PORTS,
            with_records=True,
            mode="append",
            partition_by="date",
        )
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    # all or nothing: a run that fails after writing the exchanges adds no row anywhere
    real = output.write
    calls = []

    def fails_second(df, path, mode, by=None):
        calls.append(path)
        if len(calls) == 2:
            raise RuntimeError("the disk filled up")
        real(df, path, mode, by)

    monkeypatch.setattr(output, "write", fails_second)
    with pytest.raises(RuntimeError, match="disk filled"):
        run_job(
            spark,
            [admin],
            str(out),
            ports=DEFAULT_PORTS,
            with_records=True,
            mode="append",
            partition_by="date",
        )
    monkeypatch.setattr(output, "write", real)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    # a good append joins the table, and the manifest lists both runs
    added = run_job(
        spark,
        [admin],
        str(out),
        ports=DEFAULT_PORTS,
        with_records=True,
        mode="append",
        partition_by="date",
    )
    rows = pq.read_table(out / "exchanges").to_pylist()
    assert Counter(r["capture"] for r in rows) == {kcat: 14, admin: added.exchanges}
    assert len({r["exchange_id"] for r in rows}) == len(rows)
    runs = json.loads((out / "_kdissect.json").read_text())["runs"]
    assert [[c["capture"] for c in r["captures"]] for r in runs] == [[kcat], [admin]]
    assert not [p for p in os.listdir(out) if p.startswith("_staging")]


def test_the_same_content_twice_in_one_run_is_read_once(spark, tmp_path):
    kcat = CAPTURES / "kcat.pcap"
    copy = tmp_path / "again.pcap"
    copy.write_bytes(kcat.read_bytes())
    result = run_job(spark, [str(kcat), str(copy)], str(tmp_path / "t"), ports=DEFAULT_PORTS)
    assert result.exchanges == 14
    assert result.warnings == [f"{copy}: the same content as {kcat}; read once"]
    assert {r["capture"] for r in table(tmp_path / "t" / "exchanges")} == {str(kcat)}


def test_a_python_error_in_a_worker_is_named(spark):
    def fails(batches):
        for _ in batches:
            raise ValueError("capture bytes ran out")
        yield from ()

    with pytest.raises(Exception) as caught:
        spark.range(2).mapInArrow(fails, "id long").collect()
    assert explain(caught.value) == "in a Python worker: ValueError: capture bytes ran out"


def test_shard_plan_keeps_cores_busy_and_leaves_unsplittable_files_whole(tmp_path):
    big = CAPTURES / "sasl-scram.pcap"
    size = big.stat().st_size
    tasks = plan_shards([str(big)], size // 3, parallelism=4)
    assert len(tasks) == 4 and not any(t.whole for t in tasks)
    assert tasks[0].start == 24 and tasks[-1].end == size
    gz = tmp_path / "x.pcap.gz"
    gz.write_bytes(gzip.compress(big.read_bytes()))
    assert [t.whole for t in plan_shards([str(gz)], 100, 4)] == [True]
    # fewer than 4 cores a file: each file is a task, read and decoded where it is read
    assert [t.whole for t in plan_shards([str(big)] * 2, size // 3, 4)] == [True] * 2
    assert [t.whole for t in plan_shards([str(big)], size // 3, 2)] == [True]


def test_the_queries_in_the_docs_give_the_right_numbers_in_spark_and_duckdb(spark, repo_tables):
    import duckdb

    _, out = repo_tables
    for name in ("exchanges", "records", "captures"):
        spark.read.parquet(str(out / name)).createOrReplaceTempView(name)
    db = duckdb.connect()
    for name in ("exchanges", "records", "captures"):
        db.execute(f"CREATE VIEW {name} AS FROM read_parquet('{out / name}/*.parquet')")
    queries = doc_queries()
    assert len(queries) == 6
    exchanges, records = table(out / "exchanges"), table(out / "records")
    results = {}
    for title, (in_spark, in_duckdb) in queries.items():
        a = [tuple(_plain(v) for v in r) for r in spark.sql(in_spark).collect()]
        cur = db.execute(in_duckdb)
        b = [tuple(_plain(v) for v in r) for r in cur.fetchall()]
        assert a == b and a, title
        results[title] = a
    latency, topics, errors, partitions, joined, unclean = results.values()
    # latency: exact percentiles, as numpy computes them from the rows
    import statistics

    produce = sorted(
        r["latency_ms"]
        for r in exchanges
        if r["api_name"] == "Produce" and r["latency_ms"] is not None
    )
    row = next(r for r in latency if r[0] == "Produce")
    assert row[1] == len(produce) and row[2] == pytest.approx(statistics.median(produce))
    # bytes per topic from the records: produced only is 0 fetched, not NULL
    by_topic = {r[0]: r[1:] for r in topics}
    want = Counter()
    for r in records:
        want[(r["topic"], r["direction"])] += r["value_size"] or 0
    for t, (produced, fetched) in by_topic.items():
        assert (produced, fetched) == (want[(t, "produce")], want[(t, "fetch")])
    assert any(f == 0 and p > 0 for p, f in by_topic.values())
    named = {n for r in errors for n in r[-1]}
    assert {"UNKNOWN_PRODUCER_ID", "MEMBER_ID_REQUIRED"} <= named
    assert sum(r[1] for r in errors) == len(exchanges)
    fetched = sum(
        1
        for r in records
        if (r["topic"], r["partition"], r["direction"]) == ("ck-group", 0, "fetch")
    )
    assert fetched and any(r[:4] == ("ck-group", 0, "fetch", fetched) for r in partitions)
    assert sum(r[3] for r in partitions) == len(records)
    assert sum(r[3] for r in joined) == len(records)
    # every capture is clean but those of captures/tls/, which are TLS without their keys
    tls = sum(1 for p in REPO_FILES if Path(p).parent.name == "tls")
    by_status = {r[0]: r[1:] for r in unclean}
    assert set(by_status) == {"ok", "no kafka"} and tls >= 3
    assert by_status["ok"][0] == len(REPO_FILES) - tls and by_status["ok"][2] == len(exchanges)
    assert by_status["no kafka"][0] == tls and by_status["no kafka"][2] == 0
    assert by_status["ok"][1] + by_status["no kafka"][1] == sum(
        c["packets"] for c in table(out / "captures")
    )


def doc_queries() -> dict[str, tuple[str, str]]:
    """docs/guide/spark.md's example queries by title: (Spark SQL, DuckDB). A block headed
    ``-- Spark SQL and DuckDB: title`` runs as is in both."""
    doc = (ROOT / "docs" / "guide" / "spark.md").read_text()
    found: dict[str, dict[str, str]] = {}
    for engines, title, sql in re.findall(
        r"```sql\n-- (Spark SQL and DuckDB|Spark SQL|"
        r"DuckDB): (.*?)\n(.*?)```",
        doc,
        re.S,
    ):
        for engine in ("Spark SQL", "DuckDB"):
            if engine in engines:
                found.setdefault(title, {})[engine] = sql
    assert all(len(v) == 2 for v in found.values()), found
    return {t: (v["Spark SQL"], v["DuckDB"]) for t, v in found.items()}


def _plain(v):
    """Values of both engines compared as Python values (lists sorted)."""
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, (list, tuple)):
        return sorted(_plain(x) for x in v)
    return v


def test_spark_command_end_to_end(tmp_path):
    """Two captures and a file that is none: the tables hold the captures' rows, and the
    run exits 1 with the reason, as `kdissect pcap` does in every format. The refusals
    that need no finished run go on while it runs (a process each: the job's JVM uses
    one core of local[1])."""
    out = tmp_path / "tables"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    junk = tmp_path / "notes.pcap"
    junk.write_text("hello, not a capture")
    said = tmp_path / "job-stderr.txt"
    with open(said, "w") as stderr:
        job = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "spark",
                "captures/kcat.pcap",
                "captures/aiokafka.pcap",
                str(junk),
                "--out",
                str(out),
                "--records",
                "--master",
                "local[1]",
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            cwd=ROOT,
            env=env,
        )
    try:
        _refusals_beside_a_job(tmp_path)
        job.wait(timeout=600)
    finally:
        if job.poll() is None:
            job.kill()
    err = said.read_text()
    assert job.returncode == 1, err
    assert "notes.pcap: not a pcap or pcapng file" in err
    assert "1 capture(s) not read cleanly" in err and "Traceback" not in err
    exchanges = table(out / "exchanges")
    assert f"wrote {len(exchanges)} exchanges and" in err
    assert "hint:" in err and "--format parquet" in err  # small input
    assert "WARN" not in err and "log4j" not in err  # the JVM's noise is kept out
    assert not list(tmp_path.glob("kdissect-spark-*.log"))  # removed after success
    assert {r["capture"] for r in exchanges} == {"captures/kcat.pcap", "captures/aiokafka.pcap"}
    assert table(out / "records")
    status = {c["capture"]: c["status"] for c in table(out / "captures")}
    assert status == {
        "captures/kcat.pcap": "ok",
        "captures/aiokafka.pcap": "ok",
        str(junk): "unreadable",
    }
    # refused before Spark starts: an existing --out
    res = subprocess.run(
        [sys.executable, "-m", "kdissect", "spark", "captures/kcat.pcap", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 2 and "--mode overwrite" in res.stderr
    assert "Traceback" not in res.stderr


def _refusals_beside_a_job(tmp_path: Path) -> None:
    """test_spark_command_end_to_end's runs that fail: a missing input (refused before
    Spark starts), a master that is none, no Java."""
    res = subprocess.run(
        [sys.executable, "-m", "kdissect", "spark", "nowhere.pcap", "--out", str(tmp_path / "n")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "spark",
            "captures/kcat.pcap",
            "--out",
            str(tmp_path / "x"),
            "--master",
            "nowhere://x",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 1 and "Spark did not start" in res.stderr
    assert "Traceback" not in res.stderr
    # no Java: said as such, not as a JVM launch failure
    bare = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    bare["PATH"] = os.path.dirname(sys.executable)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "spark",
            "captures/kcat.pcap",
            "--out",
            str(tmp_path / "y"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=bare,
    )
    assert res.returncode == 1 and "Java was not found" in res.stderr, res.stderr


def test_the_job_runs_over_spark_connect(tmp_path):
    """SPARK_REMOTE=local[2] starts a Spark Connect server here: the job, which uses only
    DataFrame operations, gives the rows of one process, and the server's parallelism
    (2) shapes the shards: 8.6 KB stays whole, 55 KB -> 4 shards (3 of 20k, rounded up
    to a multiple of 2; a parallelism read as 1 gave 3)."""
    files = [str(CAPTURES / "kcat.pcap"), str(CAPTURES / "sasl-scram.pcap")]
    env = {**os.environ, "SPARK_REMOTE": "local[2]"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "spark",
            *files,
            "--out",
            "t",
            "--split",
            "--shard-size",
            "20k",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "(exchanges, captures; 5 shards," in res.stderr
    # the relative --out is resolved here, not in the server's working directory
    assert f"to {tmp_path / 't'} " in res.stderr
    write_exchanges(
        files, str(tmp_path / "one.parquet"), ports=DEFAULT_PORTS, detect=True, warn=print
    )
    assert table(tmp_path / "t" / "exchanges") == table(tmp_path / "one.parquet")


def test_a_cluster_without_free_cores_is_said_after_a_few_seconds(tmp_path):
    """A real standalone master with no worker: Spark waits forever for resources and
    says so only in its log; kdissect says it on the terminal."""
    import threading

    from tests.support.spark_cluster import standalone

    with standalone(tmp_path, workers=0) as cluster:
        job = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "spark",
                "captures/kcat.pcap",
                "--out",
                str(tmp_path / "t"),
                "--master",
                cluster.url,
            ],
            cwd=ROOT,
            env={**cluster.env, STALL_ENV: "3"},  # the warning's wait (10 s by default)
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            watchdog = threading.Timer(240, job.kill)  # a job that never says it ends here
            watchdog.start()
            said = ""
            while "no Spark task has started" not in said:
                line = job.stderr.readline()
                if not line:
                    break
                said += line
            watchdog.cancel()
            waited = re.search(r"no Spark task has started after (\d+) s", said)
            assert waited and int(waited[1]) >= 3, said
            assert "Initial job has not accepted any resources" in said
        finally:
            job.terminate()
            try:
                job.wait(timeout=30)
            except subprocess.TimeoutExpired:
                job.kill()


def test_stall_seconds(monkeypatch):
    """10 s without a task before the warning, unless $KDISSECT_SPARK_STALL_SECONDS says
    another positive number of seconds."""
    monkeypatch.delenv(STALL_ENV, raising=False)
    assert stall_seconds() == STALL_SECONDS == 10
    for value, seconds in (("3", 3), ("0.5", 0.5), ("0", 10), ("-1", 10), ("x", 10)):
        monkeypatch.setenv(STALL_ENV, value)
        assert stall_seconds() == seconds, value
    for value in ("nan", "inf", ""):
        monkeypatch.setenv(STALL_ENV, value)
        assert stall_seconds() == 10, value


def test_tls_capture_decrypted_on_the_executors(spark, tmp_path):
    """spark --keylog: the bundled TLS capture's TLS leg decrypts on the executors, read
    whole or split into shards, to the exchanges one process finds."""
    from kdissect.capture.tls import KeyLog
    from kdissect.sources.pcap import exchanges_in

    keys = KeyLog()
    keys.add_file(str(CAPTURES / "tls13.keys"))
    path = str(CAPTURES / "tls13.pcap")
    want = sorted(
        e.first.correlation_id
        for e in exchanges_in([path], keys=keys).exchanges
        if e.broker[1] == 9093
    )
    assert len(want) >= 15
    for split in (False, True):
        out = tmp_path / f"split-{split}"
        run_job(
            spark,
            [path],
            str(out),
            ports=DEFAULT_PORTS,
            keys=keys,
            split=split,
            shard_bytes=os.path.getsize(path) // 5,
        )
        rows = table(out / "exchanges")
        assert sorted(r["correlation_id"] for r in rows if r["broker_port"] == 9093) == want


def test_the_tasks_honour_the_memory_budget(spark, tmp_path):
    """--max-memory reaches the tasks: a tight budget gives up the same partial messages
    on the executors as in one process (mtu1500: one connection, messages of many
    segments), and the default gives none up."""
    from kdissect.sources.pcap import exchanges_in
    from kdissect.stream.budget import Budget

    path = str(CAPTURES / "mtu1500.pcap")
    tight = 16 * 1024

    def given_up(rows):
        return sorted(
            r["correlation_id"]
            for r in rows
            if any(f["code"] == "memory_budget" for f in r["findings"])
        )

    run_job(spark, [path], str(tmp_path / "tight"), ports=DEFAULT_PORTS, max_memory=tight)
    run_job(spark, [path], str(tmp_path / "roomy"), ports=DEFAULT_PORTS)
    one = [
        {
            "correlation_id": e.first.correlation_id,
            "findings": [{"code": f.code} for f in e.findings],
        }
        for e in exchanges_in([path], budget=Budget(tight)).exchanges
    ]
    assert given_up(table(tmp_path / "tight" / "exchanges")) == given_up(one) != []
    assert given_up(table(tmp_path / "roomy" / "exchanges")) == []


def _one_process_tables(paths: list[str], out: Path) -> tuple[pa.Table, pa.Table]:
    write_exchanges(
        paths,
        str(out / "one.parquet"),
        ports=DEFAULT_PORTS,
        detect=True,
        warn=lambda w: None,
        records_out=str(out / "one-records.parquet"),
    )
    return pq.read_table(out / "one.parquet"), pq.read_table(out / "one-records.parquet")


_RECORD_ORDER = [
    (c, "ascending")
    for c in (
        "capture",
        "exchange_id",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value_size",
    )
]


def assert_same_tables(spark_dir: Path, one: tuple[pa.Table, pa.Table]) -> None:
    """The tables Spark wrote under ``spark_dir`` hold exactly one process's rows."""
    order = [("capture", "ascending"), ("exchange_id", "ascending")]
    exchanges = pq.read_table(spark_dir / "exchanges")
    assert exchanges.num_rows == one[0].num_rows > 0
    assert exchanges.sort_by(order).equals(one[0].cast(exchanges.schema).sort_by(order))
    records = pq.read_table(spark_dir / "records")
    assert records.num_rows == one[1].num_rows > 0
    assert records.sort_by(_RECORD_ORDER).equals(one[1].cast(records.schema).sort_by(_RECORD_ORDER))


def big_capture(path: Path, copies: int) -> Path:
    """``copies`` copies of a real capture (a broker killed under produce and fetch load:
    1,577 records each), every copy's connections its own (tests/support/replicate.py)."""
    from tests.support.replicate import replicate

    with open(path, "wb") as f:
        replicate((CAPTURES / "kafka-broker-killed.pcap").read_bytes(), copies, f)
    return path


def test_a_60_mb_capture_read_whole_with_records_fits_a_700m_python_worker(tmp_path):
    """One task decodes the whole file under Spark's own per-worker limit (RLIMIT_AS of
    700 MiB): rows leave the task as they are made, so its memory does not grow with the
    file (before: 1 GB for 61 MB)."""
    big = big_capture(tmp_path / "big.pcap", 290)
    assert big.stat().st_size >= 60 * 2**20
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.pyspark.memory=700m pyspark-shell",
    }
    stderr = (tmp_path / "stderr.txt").open("w")
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kdissect",
            "spark",
            str(big),
            "--out",
            str(tmp_path / "t"),
            "--records",
            "--no-split",
            "--master",
            "local[1]",
            "--keep-log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        cwd=ROOT,
        env=env,
    )
    stderr.close()  # (the child holds its own copy)
    try:
        # the reference tables are made while the job runs (its one task uses one core)
        one = _one_process_tables([str(big)], tmp_path)
        job.wait(timeout=1500)
    finally:
        if job.poll() is None:
            job.kill()
    err = (tmp_path / "stderr.txt").read_text()
    assert job.returncode == 0, err[-3000:]
    assert "(exchanges, records, captures; 1 shard," in err
    [log] = tmp_path.glob("kdissect-spark-*.log")
    assert f"Setting mem limits to {700 * 2**20}" in log.read_text()  # the limit was on
    assert_same_tables(tmp_path / "t", one)


def test_a_python_worker_out_of_memory_is_said_with_what_to_do(tmp_path):
    """A limit no worker can live with (60 MiB: pyarrow cannot even be mapped) is said as
    memory, with what to do, not as Spark's EOFException or a loader's error."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.pyspark.memory=60m pyspark-shell",
    }
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "spark",
            str(CAPTURES / "kcat.pcap"),
            "--out",
            str(tmp_path / "u"),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=env,
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr
    said = " ".join(res.stderr.split())
    assert "memory" in said and "--split" in said and "spark.executor.pyspark.memory" in said, said
    assert not (tmp_path / "u" / "exchanges").exists()


def test_a_standalone_cluster_that_loses_a_worker_mid_job_gives_the_rows_of_one_process(tmp_path):
    """A real standalone cluster: a master and two workers (1 core, 1 GiB each) as
    separate JVMs. While both run a task of the job (real captures, --records), one
    worker and its executor are killed with SIGKILL; Spark runs the lost tasks again on
    the other, and the tables hold exactly the rows of one process."""
    import signal
    import threading
    import time

    from tests.support.spark_cluster import processes_under, runs_python, standalone

    caps = [big_capture(tmp_path / f"c{n}.pcap", n) for n in (8, 9, 10, 11)]
    caps += [CAPTURES / "kcat.pcap", CAPTURES / "kafka-java-share-group.pcap"]
    killed = threading.Event()
    with standalone(tmp_path, workers=2, cores=1, memory="1g", pythonpath=str(ROOT)) as cluster:
        stderr = (tmp_path / "stderr.txt").open("w")
        job = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "spark",
                *map(str, caps),
                "--out",
                str(tmp_path / "t"),
                "--records",
                "--no-split",
                "--master",
                cluster.url,
            ],
            cwd=ROOT,
            env={**cluster.env, "TMPDIR": str(tmp_path)},
            stderr=stderr,
        )
        stderr.close()  # (the child holds its own copy)
        victim = cluster.workers[0]

        def kill_when_busy():
            deadline = time.monotonic() + 900
            while job.poll() is None and time.monotonic() < deadline:
                if all(runs_python(w.pid) for w in cluster.workers):
                    for pid in processes_under(victim.pid) + [victim.pid]:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    killed.set()
                    return
                time.sleep(0.2)

        killer = threading.Thread(target=kill_when_busy)
        killer.start()
        try:
            # the reference tables are made while the cluster works (the kill waits for
            # both workers to run a task, however slowly they go)
            one = _one_process_tables([str(c) for c in caps], tmp_path)
            job.wait(timeout=1500)
        finally:
            if job.poll() is None:
                job.kill()
            killer.join()
        err = (tmp_path / "stderr.txt").read_text()
        assert job.returncode == 0, err[-3000:]
        assert killed.is_set(), "the job ended before both workers ran a task"
    assert_same_tables(tmp_path / "t", one)
