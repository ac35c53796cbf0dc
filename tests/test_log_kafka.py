"""`kdissect log` on segments the real Apache Kafka broker wrote, against Kafka's own
DumpLogSegments (`kafka-dump-log --deep-iteration --print-data-log` with its
internal-topic decoders) as the oracle: every batch and record must agree.

One broker for the module, configured so that it writes everything worth reading: every
codec, transactions committed and aborted, a compacted topic after the cleaner ran,
consumer groups of both protocols, the KRaft metadata log and a metadata snapshot. It is
read while it runs, then stopped and read again."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from kdissect.cli import main
from tests.support.dump_log import compare, parse

pytestmark = pytest.mark.slow

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DECODERS = {
    "__consumer_offsets": "--offsets-decoder",
    "__transaction_state": "--transaction-log-decoder",
    "__cluster_metadata": "--cluster-metadata-decoder",
    "__share_group_state": "--share-group-state-decoder",
}


def _produce(bootstrap: str) -> None:
    import threading

    from tests.support.kafka_scenarios import java_session

    # a share group (KIP-932): its records in __consumer_offsets, its acquisition state
    # in __share_group_state. The Java client's session (a JVM; its own topic and group)
    # runs beside the rest, which takes seconds of waits of its own
    shared: list = []

    def share_group() -> None:
        try:
            shared.append(java_session("share-group", bootstrap))
        except BaseException as e:  # said after the join
            shared.append(e)

    java = threading.Thread(target=share_group)
    java.start()
    try:
        _produce_python(bootstrap)
    finally:
        java.join(300)
    assert shared, "the share group's session did not end"
    if isinstance(shared[0], BaseException):
        raise shared[0]
    assert sorted(shared[0]) == [f"s{i}" for i in range(5)]


def _produce_python(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"codec-{c}", 1, 1) for c in CODECS] + [
        NewTopic("txn", 1, 1),
        NewTopic(
            "compacted",
            1,
            1,
            config={
                "cleanup.policy": "compact",
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "0",
                "segment.ms": "200",
            },
        ),
    ]
    for f in admin.create_topics(topics).values():
        f.result(30)
    for codec in CODECS:
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 20,
                "enable.idempotence": codec != "none",
            }
        )
        for i in range(40):
            p.produce(
                f"codec-{codec}",
                key=f"k{i}".encode() if i % 5 else None,
                value=None if i == 7 else f"value {i} ".encode() * (i % 4 + 1),
                headers=[("h", b"v"), ("n", None)] if i % 3 == 0 else None,
            )
        p.flush(30)
    tp = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "kdissect-log",
            "compression.type": "lz4",
        }
    )
    tp.init_transactions(30)
    for commit in (True, False, True):
        tp.begin_transaction()
        for i in range(5):
            tp.produce("txn", key=b"t%d" % i, value=b"committed" if commit else b"aborted")
        tp.flush(30)
        (tp.commit_transaction if commit else tp.abort_transaction)(30)
    cp = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for round_ in range(12):
        for k in range(8):
            cp.produce(
                "compacted",
                key=b"key-%d" % k,
                value=None if (round_ == 11 and k % 4 == 0) else b"v%d-%d" % (round_, k) * 20,
            )
        cp.flush(30)
        time.sleep(0.25)  # segment.ms: a new segment per round
    for protocol in ("classic", "consumer"):
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": f"group-{protocol}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "group.protocol": protocol,
        }
        c = Consumer(conf)
        c.subscribe(["codec-none", "txn"])
        got, deadline = 0, time.time() + 40
        while got < 10 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
                c.commit(m, asynchronous=False)
        c.close()
        assert got >= 10, f"{protocol} consumer read {got} records"


def _fetch_internal(port: int) -> None:
    """A consumer reads __consumer_offsets and __transaction_state through the relay."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "internal-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign(
        [
            TopicPartition(t, p, 0)
            for t in ("__consumer_offsets", "__transaction_state")
            for p in range(3)
        ]
    )
    got, deadline = 0, time.time() + 20
    while time.time() < deadline and got < 20:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.close()


@pytest.fixture(scope="module")
def kafka_dirs(tmp_path_factory):
    from tests.support.apache_kafka import ApacheKafka
    from tests.support.relay import Relay

    relay = Relay()
    kafka = ApacheKafka(
        nodes=1,
        start=False,
        extra={
            "log.cleaner.enable": "true",
            "log.cleaner.backoff.ms": "300",
            "log.index.interval.bytes": "256",
            "metadata.log.max.record.bytes.between.snapshots": "4096",
            "metadata.log.max.snapshot.interval.ms": "2000",
        },
    )
    kafka.advertise(1, "PLAINTEXT", "127.0.0.1", relay.port)
    relay.upstream = ("127.0.0.1", kafka.node(1).ports["PLAINTEXT"])
    try:
        kafka.start()
        _produce(kafka.bootstrap())
        relay.reset()
        _fetch_internal(relay.port)
        wire = relay.snapshot()
        log_dir = kafka.log_dirs[0]
        deadline = time.time() + 60  # the cleaner and a metadata snapshot
        while time.time() < deadline and not (
            _cleaned(log_dir) and list((log_dir / "__cluster_metadata-0").glob("*.checkpoint"))
        ):
            time.sleep(0.5)
        running = _run(str(log_dir))
        kafka.stop_node(1)
        yield log_dir, running, wire
    finally:
        kafka.close()
        relay.close()


def _cleaned(log_dir: Path) -> bool:
    ck = log_dir / "cleaner-offset-checkpoint"
    return ck.exists() and "compacted 0" in ck.read_text()


def _run(*args: str) -> tuple[int, list[dict], str]:
    res = CliRunner().invoke(
        main, ["log", *args, "--format", "jsonl", "--records"], catch_exceptions=False
    )
    return (
        res.exit_code,
        [json.loads(x) for x in res.output.splitlines() if x.startswith("{")],
        res.output,
    )


def _dump(files: list[Path], decoder: str | None) -> dict[str, list[dict]]:
    from tests.support.apache_kafka import DUMP_LOG, run_tool

    args = ["--deep-iteration", "--print-data-log", "--files", ",".join(map(str, files))]
    if decoder:
        args.append(decoder)
    out = run_tool(DUMP_LOG, *args, timeout=300)
    return parse(out.stdout)


def test_read_while_the_broker_runs(kafka_dirs):
    _log_dir, (code, objs, out), _wire = kafka_dirs
    assert code == 0, out[-2000:]
    errors = [
        (o["file"], f) for o in objs for f in o.get("findings", []) if f["severity"] == "error"
    ]
    assert errors == []


def test_a_record_filter_lists_only_the_records_that_pass_it(kafka_dirs):
    """On the broker's own files: `-Y 'record.key == "t3"' --records` over transactions
    of five records to a batch lists the t3 of each, not their batch-mates."""
    log_dir, (_code, objs, _out), _wire = kafka_dirs
    every = [o for o in objs if o["type"] == "record" and o["topic"] == "txn"]
    want = [o["offset"] for o in every if o["key"] == "t3"]
    assert len(want) == 3 and len(every) >= 15
    code, got, out = _run(str(log_dir / "txn-0"), "-Y", 'record.key == "t3"')
    assert code == 0, out[-2000:]
    assert [o["offset"] for o in got if o["type"] == "record"] == want
    assert sum(o["type"] == "batch" for o in got) == 3
    text = CliRunner().invoke(
        main, ["log", str(log_dir / "txn-0"), "-Y", 'record.key == "t3"', "--records"]
    )
    rows = [line for line in text.output.splitlines() if line.strip().startswith("offset")]
    assert len(rows) == 3 and all('key "t3"' in r for r in rows), text.output


def test_every_segment_agrees_with_kafka_dump_log(kafka_dirs):
    log_dir, _running, wire_conns = kafka_dirs
    assert _cleaned(log_dir), "the log cleaner did not run on the compacted topic"
    segments = sorted(log_dir.glob("*/*.log")) + sorted(log_dir.glob("*/*.checkpoint"))
    by_decoder: dict[str | None, list[Path]] = defaultdict(list)
    for s in segments:
        topic = s.parent.name.rsplit("-", 1)[0]
        by_decoder[DECODERS.get(topic)].append(s)
    assert {"--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder"} <= set(
        by_decoder
    )
    dumped: dict[str, list[dict]] = {}
    for decoder, files in by_decoder.items():
        dumped.update(_dump(files, decoder))
    diffs, batches, records, kinds = [], 0, 0, set()
    for s in segments:
        code, objs, out = _run(str(s))
        assert code == 0, out[-2000:]
        mine = dumped.get(str(s))
        assert mine is not None, f"kafka-dump-log printed nothing for {s}"
        diffs += [f"{s.parent.name}/{s.name}: {d}" for d in compare(mine, objs)]
        batches += len(mine)
        records += sum(len(b["records"]) for b in mine)
        for o in objs:
            kinds.update(k for k in ("key_schema", "value_schema", "control_type") if o.get(k))
            if o.get("value_schema"):
                kinds.add(o["value_schema"].split()[0])
            if o.get("control_type"):
                kinds.add(o["control_type"])
            if o["type"] == "batch":
                kinds.add(o["codec"])
    assert diffs == [], "\n".join(diffs[:40])
    assert batches > 100 and records > 300
    # what the broker wrote covers what the comparison is meant to cover
    assert {
        "gzip",
        "snappy",
        "lz4",
        "zstd",
        "COMMIT",
        "ABORT",
        "OffsetCommitValue",
        "GroupMetadataValue",
        "ConsumerGroupMetadataValue",
        "TransactionLogValue",
        "TopicRecord",
        "PartitionRecord",
        "FeatureLevelRecord",
        "ShareGroupMetadataValue",
        "ShareSnapshotValue",
    } <= kinds, kinds


def test_stopped_broker_dir_is_consistent(kafka_dirs, monkeypatch):
    """The whole log dir after a clean shutdown: indexes, time indexes, snapshots, epochs,
    txn indexes and the high watermark all agree with the segments."""
    log_dir, _running, wire_conns = kafka_dirs
    code, objs, out = _run(str(log_dir))
    assert code == 0
    kinds = {o["type"] for o in objs}
    assert {
        "properties",
        "checkpoint",
        "offset_index",
        "time_index",
        "producer_snapshot",
        "batch",
        "record",
    } <= kinds, kinds
    bad = [
        (o["file"], f["code"], f["detail"])
        for o in objs
        for f in o.get("findings", [])
        if f["severity"] != "note"
    ]
    assert bad == [], bad[:20]
    # the JSON lines' values path (no trees) writes what the located trees say
    from tests.test_log import both_paths

    fast, located = both_paths(str(log_dir))
    assert fast == located
    # and so do the record lines the command writes (compiled, and the Python reference:
    # every codec, control batch and internal topic the broker wrote)
    from tests.test_log_lines import lines_of

    assert out == located == lines_of([str(log_dir)], lines=True)
    monkeypatch.setenv("KDISSECT_PURE", "1")
    assert lines_of([str(log_dir)], lines=True) == located


def test_internal_records_in_captured_fetch_responses(kafka_dirs):
    """The Fetch responses a consumer of __consumer_offsets and __transaction_state got
    (recorded by a relay) decode their records by schema, value for value as on disk."""
    log_dir, _running, wire_conns = kafka_dirs
    wire = fetched_records(wire_conns)
    assert any("OffsetCommitValue" in d.get("value_decoded", {}) for d in wire.values())
    assert any("TransactionLogValue" in d.get("value_decoded", {}) for d in wire.values())
    disk = {}
    for part in sorted(log_dir.glob("__consumer_offsets-*")) + sorted(
        log_dir.glob("__transaction_state-*")
    ):
        _code, objs, _ = _run(str(part))
        for o in objs:
            if o["type"] == "record" and o.get("key_decoded"):
                disk[(o["offset"], json.dumps(o["key"]))] = {
                    k: o[k]
                    for k in ("key_decoded", "value_decoded", "key_schema", "value_schema")
                    if k in o
                }
    shared = set(wire) & set(disk)
    assert len(shared) >= 10
    assert all(wire[k] == disk[k] for k in shared), [k for k in shared if wire[k] != disk[k]][:3]


def fetched_records(conns) -> dict[tuple, dict]:
    """(offset, key as JSON) -> the decoded record, of every record decoded by schema in
    the recorded connections' Fetch responses."""
    from kdissect.render.records import decoded_json, record_json
    from tests.support.relay import exchanges

    wire: dict[tuple, dict] = {}
    for ex in exchanges(conns):
        req, resp = ex.decoded
        if req is None or resp is None or ex.first.api_key != 1:
            continue
        for topic in resp.tree.find("responses"):
            for rec in topic.walk():
                if rec.ktype == "record" and decoded_json(rec):
                    wire[(rec.value["offset"], json.dumps(record_json(rec)["key"]))] = decoded_json(
                        rec
                    )
    return wire


def _rows(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    return sorted(
        json.dumps(r, sort_keys=True, default=str) for r in pq.read_table(path).to_pylist()
    )


def test_spark_tables_equal_the_one_process_tables(kafka_dirs, spark, s3, tmp_path):
    """Many log dirs on Spark (the broker's, and a copy as a second broker's), and the
    same log dir copied to a real S3-compatible server (moto): the batches, records and
    checks tables are those of `kdissect log --format parquet` in one process."""
    import shutil

    import boto3

    from kdissect.pipeline.log_job import run_log_job

    log_dir, _running, _wire = kafka_dirs
    second = tmp_path / "broker-2"
    shutil.copytree(log_dir, second)
    boto3.client("s3").create_bucket(Bucket="tiered")
    bucket = boto3.client("s3")
    for f in log_dir.rglob("*"):
        if f.is_file():
            bucket.upload_file(str(f), "tiered", f"logs/{f.relative_to(log_dir)}")
    for name, inputs in (("local", [str(log_dir), str(second)]), ("s3", ["s3://tiered/logs"])):
        one = tmp_path / f"{name}-one"
        res = CliRunner().invoke(
            main, ["log", *inputs, "--format", "parquet", "-o", str(one)], catch_exceptions=False
        )
        assert res.exit_code == 0, res.output
        counts = run_log_job(spark, inputs, str(tmp_path / f"{name}-spark"))
        for table in ("batches", "records", "checks"):
            want = _rows(one / f"{table}.parquet")
            assert _rows(tmp_path / f"{name}-spark" / table) == want, (name, table)
            assert counts[table] == len(want)
        assert counts["batches"] > 100 and counts["records"] > 300
        if name == "s3":
            assert all(
                json.loads(r)["file"].startswith("s3://tiered/logs/")
                for r in _rows(one / "batches.parquet")
            )


def test_the_tui_shows_the_brokers_batches_at_their_file_positions(kafka_dirs):
    """`kdissect log` in the TUI (pilot) on the stopped broker's whole log dir: a row per
    file and batch, each codec's batch as a tree at its file position beside the batch's
    bytes as the segment holds them, its records inside the decompressed buffer."""
    import asyncio

    from kdissect.protocol import Options
    from kdissect.sources.logunits import walk
    from kdissect.tui.detail import HIGHLIGHT, Detail, HexView
    from kdissect.tui.log_app import LogApp
    from tests.support.tui import loaded
    from tests.test_tui_log import shown

    log_dir, _running, _wire = kafka_dirs
    items = list(walk([str(log_dir)], Options()))

    async def go():
        app = LogApp([str(log_dir)], Options())
        async with app.run_test(size=(160, 45)) as pilot:
            await loaded(app, pilot)
            assert app.table.row_count == len(items) and app.error is None
            detail, hexview = app.query_one(Detail), app.query_one(HexView)
            for codec in CODECS:
                row = next(
                    i
                    for i, it in enumerate(app.shown)
                    if it.kind == "batch" and it.topic == f"codec-{codec}"
                )
                app.table.move_cursor(row=row)
                await shown(app, pilot)
                item = detail.items[0]
                segment = app.shown[row].path.read_bytes()
                assert item.data == segment[item.base : item.base + len(item.data)]
                holders = [n for n in item.root.walk() if n.buffer is not None]
                assert bool(holders) == (codec != "none")
                holder = holders[0] if holders else item.root.child("records") or item.root
                record = next(
                    n
                    for n in (holder.children if holders else item.root.walk())
                    if n.ktype == "record"
                )
                detail.select(0, record)
                await pilot.pause()
                assert hexview.data == (holder.buffer if holders else item.data)
                assert (record.offset, record.end, HIGHLIGHT) in hexview.marks

    asyncio.run(go())


def test_the_compiled_walker_agrees_with_the_batch_views(kafka_dirs):
    """native/src/logjson.rs walks records itself: on every segment the broker wrote,
    each line it writes says what the Python Batch/Record views say, field by field."""
    from kdissect import _native  # type: ignore[attr-defined]
    from tests.test_batch import compiled_agrees, segment_batches

    log_dir, _running, _wire = kafka_dirs
    batches = [b for seg in sorted(log_dir.rglob("*.log")) for b in segment_batches(seg)]
    assert len(batches) > 20
    assert compiled_agrees(_native.log_record_lines, batches) > 100
