"""The Spark job on a real embedded Spark (local[2]): the same rows as one process,
whether files are split into shards or not, and damage does not fail the job."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.pipeline.extract import capture_rows
from kdissect.pipeline.local import write_exchanges
from kdissect.pipeline.spark_job import get_session, plan_shards, run_job
from kdissect.sources.pcap import DEFAULT_PORTS

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", log=str(log))
    yield session
    session.stop()


def table(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def canonical(rows):
    return sorted(repr(sorted(r.items())) for r in rows)


def test_the_repo_captures_give_the_rows_of_one_process(spark, tmp_path):
    seen = []
    result = run_job(spark, [str(CAPTURES)], str(tmp_path / "out"), ports=DEFAULT_PORTS,
                     with_records=True, progress=lambda *p: seen.append(p))
    files = sorted(str(p) for p in CAPTURES.glob("*.pcap"))
    write_exchanges(files, str(tmp_path / "one.parquet"), ports=DEFAULT_PORTS, detect=True,
                    warn=print)
    spark_rows = table(tmp_path / "out" / "exchanges")
    one_rows = table(tmp_path / "one.parquet")
    assert len(spark_rows) == result.exchanges == len(one_rows) > 250
    assert spark_rows == one_rows                       # same rows, same order
    records = table(tmp_path / "out" / "records")
    expected = capture_rows([(f, f) for f in files], DEFAULT_PORTS, True, True, print).records
    assert len(records) == result.records == len(expected)
    assert {r["key"] for r in records} == {r["key"] for r in expected}
    assert result.shards == len(files) and result.warnings == []
    assert ("shards", len(files), len(files)) in seen


@pytest.mark.parametrize("name", ["sasl-scram", "kafka-python-codecs"])
def test_a_capture_split_into_shards_gives_the_rows_of_the_unsplit_run(spark, tmp_path, name):
    path = str(CAPTURES / f"{name}.pcap")
    whole = run_job(spark, [path], str(tmp_path / "whole"), ports=DEFAULT_PORTS,
                    with_records=True)
    size = os.path.getsize(path)
    split = run_job(spark, [path], str(tmp_path / "split"), ports=DEFAULT_PORTS,
                    with_records=True, shard_bytes=size // 9)
    assert whole.shards == 1 and split.shards >= 9
    assert split.warnings == [] and split.packets == whole.packets
    for t in ("exchanges", "records"):
        a, b = table(tmp_path / "whole" / t), table(tmp_path / "split" / t)
        assert canonical(a) == canonical(b), t
    assert whole.exchanges > 40 and whole.records == (40 if name == "kafka-python-codecs" else 0)


def test_a_damaged_capture_does_not_fail_the_job(spark, tmp_path):
    data = bytearray((CAPTURES / "mtu1500.pcap").read_bytes())
    rng = random.Random(5)
    for at in (len(data) // 3, len(data) // 2):          # garbage over two stretches
        data[at:at + 300] = bytes(rng.randrange(256) for _ in range(300))
    broken = tmp_path / "broken.pcap"
    broken.write_bytes(data[:len(data) * 5 // 6])         # and cut short
    truncated = tmp_path / "truncated.pcap.gz"
    import gzip
    truncated.write_bytes(gzip.compress((CAPTURES / "kcat.pcap").read_bytes())[:-200])
    (tmp_path / "notes.pcap").write_text("not a capture")
    result = run_job(spark, [str(broken), str(truncated), str(tmp_path / "notes.pcap")],
                     str(tmp_path / "out"), ports=DEFAULT_PORTS,
                     shard_bytes=len(data) // 5, split=True)
    assert result.shards >= 5 + 2
    rows = table(tmp_path / "out" / "exchanges")
    by_capture = {r["capture"] for r in rows}
    assert str(broken) in by_capture and str(truncated) in by_capture
    text = "\n".join(result.warnings)
    assert "damaged" in text or "ends inside" in text
    assert "not a pcap or pcapng file" in text
    intact = capture_rows([("x", str(CAPTURES / "mtu1500.pcap"))], DEFAULT_PORTS, True,
                          False, print).exchanges
    clean = [r for r in rows if r["capture"] == str(broken) and not r["problems"]
             and r["status"] == "ok"]
    assert len(clean) >= len(intact) // 3


def test_shard_plan_keeps_cores_busy_and_leaves_unsplittable_files_whole(tmp_path):
    big = CAPTURES / "sasl-scram.pcap"
    size = big.stat().st_size
    tasks = plan_shards([str(big)], size // 3, parallelism=4)
    assert len(tasks) == 4 and not any(t.whole for t in tasks)
    assert tasks[0].start == 24 and tasks[-1].end == size
    gz = tmp_path / "x.pcap.gz"
    import gzip
    gz.write_bytes(gzip.compress(big.read_bytes()))
    assert [t.whole for t in plan_shards([str(gz)], 100, 4)] == [True]
    # as many files as cores: each file is a task, read and decoded where it is read
    assert [t.whole for t in plan_shards([str(big)] * 4, size // 3, 4)] == [True] * 4


def test_spark_command_end_to_end(tmp_path):
    out = tmp_path / "tables"
    res = subprocess.run([sys.executable, "-m", "kdissect", "spark", "captures/kcat.pcap",
                          "captures/aiokafka.pcap", "--out", str(out), "--records",
                          "--master", "local[1]"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr
    exchanges = table(out / "exchanges")
    assert f"wrote {len(exchanges)} exchanges and" in res.stderr
    assert "WARN" not in res.stderr and "log4j" not in res.stderr   # the JVM's noise is kept out
    assert {r["capture"] for r in exchanges} == {"captures/kcat.pcap", "captures/aiokafka.pcap"}
    assert table(out / "records")
    res = subprocess.run([sys.executable, "-m", "kdissect", "spark", "captures/kcat.pcap",
                          "--out", str(out), "--master", "nowhere://x"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 1 and "Spark did not start" in res.stderr
    assert "Traceback" not in res.stderr


def test_the_queries_in_the_docs_run_on_the_tables(spark, tmp_path):
    import re
    run_job(spark, [str(CAPTURES)], str(tmp_path / "t"), ports=DEFAULT_PORTS, with_records=True)
    for name in ("exchanges", "records"):
        spark.read.parquet(str(tmp_path / "t" / name)).createOrReplaceTempView(name)
    doc = (ROOT / "docs" / "spark.md").read_text()
    queries = re.findall(r"```sql\n(.*?)```", doc, re.S)
    assert len(queries) == 4
    results = [spark.sql(q).collect() for q in queries]
    assert all(results)
    latency, topics, errors, records = results
    assert {r["api_name"] for r in latency} >= {"Produce", "Fetch", "Metadata"}
    assert {r["topic"] for r in topics} >= {"ck-group", "kp-gzip"}
    named = {n for r in errors for n in r["error_names"]}
    assert {"UNKNOWN_PRODUCER_ID", "MEMBER_ID_REQUIRED"} <= named
    assert any(r["topic"] == "ck-group" and r["direction"] == "fetch" and r["records"] == 4
               for r in records)


def test_the_job_runs_over_spark_connect(tmp_path):
    """SPARK_REMOTE=local[2] starts a Spark Connect server here: the job, which uses only
    DataFrame operations, gives the rows of one process."""
    files = ["captures/kcat.pcap", "captures/sasl-scram.pcap"]
    env = {**os.environ, "SPARK_REMOTE": "local[2]"}
    res = subprocess.run([sys.executable, "-m", "kdissect", "spark", *files,
                          "--out", str(tmp_path / "t"), "--split", "--shard-size", "20k"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    write_exchanges(files, str(tmp_path / "one.parquet"), ports=DEFAULT_PORTS, detect=True,
                    warn=print)
    assert table(tmp_path / "t" / "exchanges") == table(tmp_path / "one.parquet")
