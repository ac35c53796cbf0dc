"""Tables of exchanges without Spark: shards of a pcap file, the rows made from them, and
``kdissect pcap --format parquet``."""

import itertools
from collections import Counter
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.capture.shards import HEADER, find_start, plan, read_header, read_shard
from kdissect.pipeline.extract import TaskSettings, capture_rows, flow_rows, shard_segments
from kdissect.stream.diagnoses import ACROSS_CONNECTIONS
from kdissect.stream.rows import UNRESOLVED, resolve_record_topics, resolve_topics
from kdissect.sources.pcap import DEFAULT_PORTS
from tests.support.cli import kdissect_text

pytestmark = pytest.mark.slow  # whole Parquet/Spark pipelines

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"
ALL = sorted(CAPTURES.glob("*.pcap"))


def record_offsets(path: Path) -> list[int]:
    """Where each pcap record starts, by walking the file from its header."""
    data = path.read_bytes()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    offsets, pos = [], HEADER
    while pos + 16 <= len(data):
        offsets.append(pos)
        pos += 16 + int.from_bytes(data[pos + 8 : pos + 12], "little" if endian == "<" else "big")
    return offsets


def test_plan_covers_the_file_in_even_ranges():
    assert plan(24 + 1000, 300) == [(24, 274), (274, 524), (524, 774), (774, 1024)]
    assert plan(24 + 10, 1 << 20) == [(24, 34)]
    assert plan(24, 100) == [(24, 24)]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_a_chain_of_headers_finds_the_next_record_from_any_byte(path):
    starts = record_offsets(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        h = read_header(f)
        for probe in range(HEADER + 1, size, max(1, size // 97)):
            expected = next((s for s in starts if s >= probe), None)
            got = find_start(f, h, probe, size, size)
            assert got == expected, probe


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_shards_meet_and_hold_every_packet_once(path):
    size = path.stat().st_size
    shards = [read_shard(str(path), s, e) for s, e in plan(size, max(size // 7, 500))]
    offsets = [off for found, records in shards for off, _ in records]
    assert offsets == record_offsets(path)
    for (a, _), (b, _) in zip(shards, shards[1:]):
        assert a.next == b.first and not a.warnings


def sharded_rows(path: Path, shard_bytes: int):
    """The pipeline's two stages run by hand: shards -> segments grouped by flow -> rows."""
    size = path.stat().st_size
    segments, summaries = [], []
    for i, (s, e) in enumerate(plan(size, shard_bytes)):
        summary, rows = shard_segments(path.name, str(path), i, s, e, True)
        segments += rows
        summaries.append(summary)
    base = dict(
        zip(range(len(summaries)), itertools.accumulate([0] + [s.packets for s in summaries]))
    )
    segments.sort(key=lambda r: (r[1], r[2], r[4]))
    exchanges, records, ids = [], [], {}
    for _, flow in itertools.groupby(segments, key=lambda r: r[1]):
        rows = flow_rows(path.name, flow, base.__getitem__, TaskSettings(DEFAULT_PORTS, True, True))
        exchanges += rows.exchanges
        records += rows.records
        ids.update(rows.topic_ids)
    return (
        list(resolve_topics(exchanges, ids)),
        list(resolve_record_topics(records, ids)),
        summaries,
    )


def canonical(rows):
    return sorted(repr(sorted(r.items())) for r in rows)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_rows_from_shards_equal_rows_from_the_whole_file(path):
    whole = capture_rows([(path.name, str(path))], DEFAULT_PORTS, True, True, print)
    exchanges, records, summaries = sharded_rows(path, max(path.stat().st_size // 6, 600))
    assert len(summaries) >= 5
    # diagnoses drawn from several connections see one flow at a time in a shard: fewer
    # of them, never others; everything else is equal
    assert whole.exchanges and canonical(within_connections(exchanges)) == canonical(
        within_connections(whole.exchanges)
    )
    assert not across_connections(exchanges) - across_connections(whole.exchanges)
    assert canonical(records) == canonical(whole.records)


def within_connections(rows):
    return [
        {**r, "findings": [f for f in r["findings"] if f["code"] not in ACROSS_CONNECTIONS]}
        for r in rows
    ]


def across_connections(rows) -> Counter:
    return Counter(
        repr(sorted(f.items()))
        for r in rows
        for f in r["findings"]
        if f["code"] in ACROSS_CONNECTIONS
    )


def test_exchange_rows_say_what_was_exchanged():
    rows = capture_rows(
        [("cg", str(CAPTURES / "confluent-group.pcap"))], DEFAULT_PORTS, True, True, print
    )
    produce = next(r for r in rows.exchanges if r["api_name"] == "Produce")
    assert produce["topics"] == ["ck-group"] and produce["record_count"] == 4
    assert produce["partitions"] == [{"topic": "ck-group", "partition": 0}]
    assert produce["record_bytes"] > 0 and produce["latency_ms"] > 0
    assert produce["broker_port"] == 9092 and produce["client_id"] == "rdkafka"
    join = next(r for r in rows.exchanges if r["api_name"] == "JoinGroup")
    assert join["error_code"] == 79 and join["error_name"] == "MEMBER_ID_REQUIRED"
    assert join["errors"] == [
        {"topic": None, "partition": None, "code": 79, "name": "MEMBER_ID_REQUIRED"}
    ]
    keys = {r["key"] for r in rows.records}
    assert {f"ck-group-key-{i}" for i in range(4)} <= keys
    fetched = [r for r in rows.records if r["direction"] == "fetch"]
    assert fetched and all(r["topic"] == "ck-group" and r["offset"] is not None for r in fetched)
    legacy = capture_rows(
        [("l", str(CAPTURES / "legacy-0.8.2.pcap"))], DEFAULT_PORTS, True, False, print
    )
    errors = [e for r in legacy.exchanges for e in r["errors"]]
    assert {
        "topic": "legacy-0-8-2",
        "partition": 0,
        "code": 59,
        "name": "UNKNOWN_PRODUCER_ID",
    } in errors


def test_topics_known_by_id_are_named_from_the_whole_capture():
    fetch = {
        "topics": [UNRESOLVED + "abc"],
        "partitions": [{"topic": UNRESOLVED + "abc", "partition": 3}],
        "errors": [
            {
                "topic": UNRESOLVED + "abc",
                "partition": 3,
                "code": 6,
                "name": "NOT_LEADER_OR_FOLLOWER",
            }
        ],
    }
    other = {"topics": ["t"], "partitions": [], "errors": []}
    named = list(resolve_topics([fetch, other], {"abc": "orders"}))
    assert named[0]["topics"] == ["orders"]
    assert named[0]["partitions"] == [{"topic": "orders", "partition": 3}]
    assert named[0]["errors"][0]["topic"] == "orders" and named[1] is other
    assert list(resolve_topics([fetch], {}))[0] is fetch  # unknown ids stay as they are
    assert list(resolve_record_topics([{"topic": UNRESOLVED + "abc"}], {"abc": "o"})) == [
        {"topic": "o"}
    ]


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "kdissect", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_pcap_writes_the_exchanges_table(tmp_path):
    out = tmp_path / "x.parquet"
    res = run_cli(
        "pcap", "captures/kcat.pcap", "captures/admin.pcap", "--format", "parquet", "-o", str(out)
    )
    assert res.returncode == 0, res.stderr
    table = pq.read_table(out)
    assert f"wrote {table.num_rows} exchanges" in res.stderr
    rows = table.to_pylist()
    assert {r["capture"] for r in rows} == {"captures/kcat.pcap", "captures/admin.pcap"}
    times = [
        r["request_ts"] or r["response_ts"] for r in rows if r["capture"].endswith("kcat.pcap")
    ]
    assert times == sorted(times)
    assert str(table.schema.field("request_ts").type) == "timestamp[us, tz=UTC]"
    filtered = tmp_path / "f.parquet"
    res = run_cli(
        "pcap",
        "captures/kcat.pcap",
        "--format",
        "parquet",
        "-o",
        str(filtered),
        "-Y",
        "api == Fetch",
    )
    assert res.returncode == 0
    assert {r["api_name"] for r in pq.read_table(filtered).to_pylist()} == {"Fetch"}


def test_parquet_needs_an_output_file():
    res = run_cli("pcap", "captures/kcat.pcap", "--format", "parquet")
    assert res.returncode == 2 and "needs -o FILE.parquet" in res.stderr
    res = run_cli("pcap", "captures/kcat.pcap", "-o", "x.parquet")
    assert res.returncode == 2 and "for --format parquet" in res.stderr
    res = run_cli(
        "pcap", "captures/kcat.pcap", "--format", "parquet", "-o", "/nonexistent/x.parquet"
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "cannot write /nonexistent/x.parquet: No such file or directory" in res.stderr


def test_topic_ids_are_named_across_connections_on_real_traffic():
    """kcat fetches with Fetch v16 (topics by id only) on a connection that never asked
    for Metadata: the name comes from another connection of the capture."""
    path = CAPTURES / "kcat.pcap"
    whole = capture_rows([(path.name, str(path))], DEFAULT_PORTS, True, True, print)
    fetches = [r for r in whole.exchanges if r["api_name"] == "Fetch"]
    assert fetches and all(r["api_version"] >= 13 for r in fetches)
    metadata_ports = {r["client_port"] for r in whole.exchanges if r["api_name"] == "Metadata"}
    assert not metadata_ports & {r["client_port"] for r in fetches}
    assert all(r["topics"] == ["kcat"] for r in fetches)
    assert {r["topic"] for r in whole.records} == {"kcat"}
    # shard by shard, each flow alone cannot name it; the capture-wide pass does
    exchanges, records, _ = sharded_rows(path, max(path.stat().st_size // 6, 600))
    assert all(r["topics"] == ["kcat"] for r in exchanges if r["api_name"] == "Fetch")
    assert {r["topic"] for r in records} == {"kcat"}
    # the fetching connection alone knows the topic only by its id
    port = fetches[0]["client_port"]
    _, segments = shard_segments(path.name, str(path), 0, 0, path.stat().st_size, False)
    flow = [s for s in segments if port in (s[7], s[9])]
    alone = flow_rows(path.name, flow, lambda shard: 0, TaskSettings(DEFAULT_PORTS, True, False))
    fetched = [t for r in alone.exchanges if r["api_name"] == "Fetch" for t in r["topics"]]
    assert fetched and all(t.startswith(UNRESOLVED) for t in fetched)


def requests_by_tshark(path: Path) -> list[tuple[int, int, int]]:
    """(client port, api key, correlation id) of every request, as tshark reads them."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-d",
            "tcp.port==9092,kafka",
            "-Y",
            "kafka && tcp.dstport==9092",
            "-T",
            "fields",
            "-e",
            "tcp.srcport",
            "-e",
            "kafka.api_key",
            "-e",
            "kafka.correlation_id",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(tuple(int(v) for v in line.split("\t")) for line in out.splitlines())


def without_packet(path: Path, out: Path, drop) -> Path:
    """A copy of the pcap at ``path`` without the packets whose TCP segment ``drop``
    picks."""
    from kdissect.capture.packet import tcp_segment

    data = path.read_bytes()
    linktype = int.from_bytes(data[20:24], "little")
    kept, pos = [data[:HEADER]], HEADER
    while pos + 16 <= len(data):
        incl, orig = (int.from_bytes(data[pos + 8 + i : pos + 12 + i], "little") for i in (0, 4))
        seg = tcp_segment(linktype, data[pos + 16 : pos + 16 + incl], orig)
        if seg is None or not drop(seg):
            kept.append(data[pos : pos + 16 + incl])
        pos += 16 + incl
    out.write_bytes(b"".join(kept))
    return out


def test_the_acks0_capture_gives_one_row_per_request_and_orphans_stay_rows(tmp_path):
    path = CAPTURES / "acks0.pcap"
    rows = capture_rows([(path.name, str(path))], DEFAULT_PORTS, True, True, print)
    sent = [
        (r["client_port"], r["api_key"], r["correlation_id"])
        for r in rows.exchanges
        if r["request_ts"] is not None
    ]
    assert sorted(sent) == requests_by_tshark(path) and len(sent) == len(rows.exchanges)
    produce = [r for r in rows.exchanges if r["api_name"] == "Produce"]
    assert len(produce) == 1  # the broker answered acks=0: still one exchange
    assert produce[0]["response_ts"] is not None and produce[0]["record_count"] == 4
    assert "acks0_answered" in {f["code"] for f in produce[0]["findings"]}
    assert [r["exchange_id"] for r in rows.records] == [produce[0]["exchange_id"]] * 4
    # the Metadata request of the last connection not captured: its answer is an orphan row
    cut = without_packet(
        path, tmp_path / "cut.pcap", lambda s: s.sport == 32960 and s.payload[4:6] == b"\x00\x03"
    )
    cut_rows = capture_rows([(path.name, str(cut))], DEFAULT_PORTS, True, True, print)
    assert len(cut_rows.exchanges) == len(rows.exchanges)
    orphan = [r for r in cut_rows.exchanges if r["request_ts"] is None]
    assert len(orphan) == 1 and orphan[0]["status"].startswith("orphan")
    assert orphan[0]["api_name"] == "Metadata"  # guessed from its bytes
    ids = [r["exchange_id"] for r in cut_rows.exchanges]
    assert len(set(ids)) == len(ids)
    # the ids of everything before the hole are those of the intact capture
    assert {r["exchange_id"] for r in cut_rows.exchanges if r["client_port"] != 32960} == {
        r["exchange_id"] for r in rows.exchanges if r["client_port"] != 32960
    }


def test_records_join_their_exchange_one_to_one_in_one_process():
    rows = capture_rows([(p.name, str(p)) for p in ALL], DEFAULT_PORTS, True, True, print)
    by_id = {r["exchange_id"]: r for r in rows.exchanges}
    assert len(by_id) == len(rows.exchanges)  # a key across captures
    carried = Counter(r["exchange_id"] for r in rows.records)
    assert set(carried) <= set(by_id)
    assert all(by_id[i]["record_count"] == n for i, n in carried.items())
    assert sum(carried.values()) == len(rows.records) > 60


def test_a_damaged_pcap_read_as_one_shard_recovers_what_shards_recover(tmp_path):
    data = bytearray((CAPTURES / "mtu1500.pcap").read_bytes())
    starts = record_offsets(CAPTURES / "mtu1500.pcap")
    for at in (starts[40] + 5, starts[41] + 900, starts[120] - 3):  # headers and payload
        data[at : at + 200] = bytes(range(200))
    broken = tmp_path / "broken.pcap"
    broken.write_bytes(data)
    size = len(data)
    whole, records = read_shard(str(broken), HEADER, size)
    offsets = [off for off, _ in records]
    split = [read_shard(str(broken), s, e) for s, e in plan(size, size // 7)]
    assert offsets == [off for _, recs in split for off, _ in recs]
    damaged = {
        s
        for s in starts
        if any(
            a < s + 16 and s < a + 200 for a in (starts[40] + 5, starts[41] + 900, starts[120] - 3)
        )
    }
    assert damaged == {starts[40], starts[120], starts[121]}  # 120: a bare ACK
    assert set(offsets) == set(starts) - damaged  # only what the damage hit
    # after packet 40 (record 40's header is garbage), and after 119 (41..119 were read)
    assert [n for n, _ in whole.warnings] == [40, 119]
    assert f"skipped {starts[41] - starts[40]} damaged bytes" in whole.warnings[0][1]


def test_inputs_given_as_urls_are_found_and_read_like_paths():
    from kdissect.pipeline import storage

    every = sorted(CAPTURES.rglob("*.pcap"))  # directories are searched recursively
    assert storage.expand([CAPTURES.as_uri()]) == [p.as_uri() for p in every]
    assert storage.expand([str(CAPTURES)]) == [str(p) for p in every]
    assert storage.expand([str(ALL[0]), str(CAPTURES)]) == [str(p) for p in every]  # once each
    url = (CAPTURES / "kcat.pcap").as_uri()
    assert storage.size(url) == (CAPTURES / "kcat.pcap").stat().st_size
    by_url = list(
        shard_segments("k", url, 0, HEADER, storage.size(url), True, storage.open_input)[1]
    )
    by_path = list(
        shard_segments("k", str(CAPTURES / "kcat.pcap"), 0, HEADER, storage.size(url), True)[1]
    )
    assert by_url == by_path and by_url
    with pytest.raises(storage.StorageError, match="no such file"):
        storage.expand([str(CAPTURES / "nowhere.pcap")])


def test_a_worker_out_of_memory_is_said_with_what_to_do():
    """Spark's reports of a Python worker out of memory (the texts its exceptions carry)
    become one line with the remedy; other errors stay themselves."""
    from kdissect.pipeline.session import explain

    def said(text: str) -> str:
        return explain(Exception(text))

    trace = 'Traceback (most recent call last):\n  File "worker.py", line 1\n'
    for last in (
        "kdissect.pipeline.spark_job.TaskMemoryError: a task ran out",
        "MemoryError",
        "ImportError: /v/pyarrow/lib.so: failed to map segment from shared object",
    ):
        text = said(trace + last)
        assert text.startswith("in a Python worker: out of memory: ")
        assert "--split" in text and "spark.executor.pyspark.memory" in text
    assert (
        said(trace + "ValueError: capture bytes ran out")
        == "in a Python worker: ValueError: capture bytes ran out"
    )
    died = said("org.apache.spark.SparkException: Job aborted\ncaused by java.io.EOFException")
    assert died.startswith("a Python worker died without saying why (Spark: EOFException)")
    assert "--split" in died


def test_log_tables_of_a_directory_without_kafka_files_are_refused(tmp_path):
    """`kdissect log DIR --format parquet` on a directory holding no log dir exits 1 and
    writes nothing (empty tables would say the log was read and found empty)."""
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "sub" / "notes.txt").write_text("not Kafka's")
    res = kdissect_text(
        "log", str(tmp_path / "in"), "--format", "parquet", "-o", str(tmp_path / "t")
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "no Kafka log files in" in res.stderr
    assert not (tmp_path / "t").exists()
