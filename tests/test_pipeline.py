"""Tables of exchanges without Spark: shards of a pcap file, the rows made from them, and
``kdissect pcap --format parquet``."""

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.capture.shards import HEADER, find_start, plan, read_header, read_shard
from kdissect.pipeline.extract import capture_rows, flow_rows, shard_segments
from kdissect.stream.rows import UNRESOLVED, resolve_record_topics, resolve_topics
from kdissect.sources.pcap import DEFAULT_PORTS

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
        pos += 16 + int.from_bytes(data[pos + 8:pos + 12], "little" if endian == "<" else "big")
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
    base = dict(zip(range(len(summaries)),
                    itertools.accumulate([0] + [s.packets for s in summaries])))
    segments.sort(key=lambda r: (r[1], r[2], r[4]))
    exchanges, records, ids = [], [], {}
    for _, flow in itertools.groupby(segments, key=lambda r: r[1]):
        rows = flow_rows(path.name, flow, base.__getitem__, DEFAULT_PORTS, True, True)
        exchanges += rows.exchanges
        records += rows.records
        ids.update(rows.topic_ids)
    return (list(resolve_topics(exchanges, ids)), list(resolve_record_topics(records, ids)),
            summaries)


def canonical(rows):
    return sorted(repr(sorted(r.items())) for r in rows)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_rows_from_shards_equal_rows_from_the_whole_file(path):
    whole = capture_rows([(path.name, str(path))], DEFAULT_PORTS, True, True, print)
    exchanges, records, summaries = sharded_rows(path, max(path.stat().st_size // 6, 600))
    assert len(summaries) >= 5
    assert whole.exchanges and canonical(exchanges) == canonical(whole.exchanges)
    assert canonical(records) == canonical(whole.records)


def test_exchange_rows_say_what_was_exchanged():
    rows = capture_rows([("cg", str(CAPTURES / "confluent-group.pcap"))], DEFAULT_PORTS,
                        True, True, print)
    produce = next(r for r in rows.exchanges if r["api_name"] == "Produce")
    assert produce["topics"] == ["ck-group"] and produce["record_count"] == 4
    assert produce["partitions"] == [{"topic": "ck-group", "partition": 0}]
    assert produce["record_bytes"] > 0 and produce["latency_ms"] > 0
    assert produce["broker_port"] == 9092 and produce["client_id"] == "rdkafka"
    join = next(r for r in rows.exchanges if r["api_name"] == "JoinGroup")
    assert join["error_code"] == 79 and join["error_name"] == "MEMBER_ID_REQUIRED"
    assert join["errors"] == [{"topic": None, "partition": None, "code": 79,
                               "name": "MEMBER_ID_REQUIRED"}]
    keys = {r["key"] for r in rows.records}
    assert {f"ck-group-key-{i}" for i in range(4)} <= keys
    fetched = [r for r in rows.records if r["direction"] == "fetch"]
    assert fetched and all(r["topic"] == "ck-group" and r["offset"] is not None
                           for r in fetched)
    legacy = capture_rows([("l", str(CAPTURES / "legacy-0.8.2.pcap"))], DEFAULT_PORTS, True,
                          False, print)
    errors = [e for r in legacy.exchanges for e in r["errors"]]
    assert {"topic": "legacy-0-8-2", "partition": 0, "code": 59,
            "name": "UNKNOWN_PRODUCER_ID"} in errors


def test_topics_known_by_id_are_named_from_the_whole_capture():
    fetch = {"topics": [UNRESOLVED + "abc"], "partitions": [{"topic": UNRESOLVED + "abc",
                                                            "partition": 3}],
             "errors": [{"topic": UNRESOLVED + "abc", "partition": 3, "code": 6,
                         "name": "NOT_LEADER_OR_FOLLOWER"}]}
    other = {"topics": ["t"], "partitions": [], "errors": []}
    named = list(resolve_topics([fetch, other], {"abc": "orders"}))
    assert named[0]["topics"] == ["orders"]
    assert named[0]["partitions"] == [{"topic": "orders", "partition": 3}]
    assert named[0]["errors"][0]["topic"] == "orders" and named[1] is other
    assert list(resolve_topics([fetch], {}))[0] is fetch      # unknown ids stay as they are
    assert list(resolve_record_topics([{"topic": UNRESOLVED + "abc"}], {"abc": "o"})) == \
        [{"topic": "o"}]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_pcap_writes_the_exchanges_table(tmp_path):
    out = tmp_path / "x.parquet"
    res = run_cli("pcap", "captures/kcat.pcap", "captures/admin.pcap", "--format", "parquet",
                  "-o", str(out))
    assert res.returncode == 0, res.stderr
    table = pq.read_table(out)
    assert f"wrote {table.num_rows} exchanges" in res.stderr
    rows = table.to_pylist()
    assert {r["capture"] for r in rows} == {"captures/kcat.pcap", "captures/admin.pcap"}
    times = [r["request_ts"] or r["response_ts"] for r in rows if r["capture"].endswith("kcat.pcap")]
    assert times == sorted(times)
    assert str(table.schema.field("request_ts").type) == "timestamp[us, tz=UTC]"
    filtered = tmp_path / "f.parquet"
    res = run_cli("pcap", "captures/kcat.pcap", "--format", "parquet", "-o", str(filtered),
                  "-Y", "api == Fetch")
    assert res.returncode == 0
    assert {r["api_name"] for r in pq.read_table(filtered).to_pylist()} == {"Fetch"}


def test_parquet_needs_an_output_file():
    res = run_cli("pcap", "captures/kcat.pcap", "--format", "parquet")
    assert res.returncode == 2 and "needs -o FILE.parquet" in res.stderr
    res = run_cli("pcap", "captures/kcat.pcap", "-o", "x.parquet")
    assert res.returncode == 2 and "for --format parquet" in res.stderr


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
    alone = flow_rows(path.name, flow, lambda shard: 0, DEFAULT_PORTS, True, False)
    fetched = [t for r in alone.exchanges if r["api_name"] == "Fetch" for t in r["topics"]]
    assert fetched and all(t.startswith(UNRESOLVED) for t in fetched)
