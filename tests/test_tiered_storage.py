"""Tiered storage from a real broker: Apache Kafka with Kafka's own LocalTieredStorage
(tests/support/tiered.py) copies rolled segments of a topic with `remote.storage.enable`
to its "remote" directory, and its TopicBasedRemoteLogMetadataManager writes every copy
and deletion to `__remote_log_metadata` (the topic is deleted at the end: its remote
segments are deleted one by one). kdissect must decode those records as Kafka's
kafka-dump-log --remote-log-metadata-decoder does (every field), on disk and in the Fetch
responses of a consumer of that topic, and read the remote directory's files (segments,
indexes, producer snapshots, leader-epoch checkpoints named `<offset>-<segment id>.*`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kdissect.cli import main
from tests.support.dump_log import compare, parse
from tests.support.tiered import METADATA, delete_topic, fill, tiered_kafka

pytestmark = pytest.mark.slow

TOPIC = "tiered"


def _jsonl(*args: str) -> list[dict]:
    res = CliRunner().invoke(
        main, ["log", *args, "--format", "jsonl", "--records"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output[-2000:]
    return [json.loads(x) for x in res.stdout.splitlines()]  # (stderr: what was read)


def _decoded(part: Path) -> list[dict]:
    return [o for o in _jsonl(str(part)) if o["type"] == "record" and o.get("value_decoded")]


def _segments_deleted(part: Path) -> bool:
    """Whether every segment copied to remote storage has been deleted there (Kafka
    4.3.1 and 4.4.0 delete a deleted topic's remote segments one by one: DELETE_SEGMENT_STARTED,
    DELETE_SEGMENT_FINISHED; neither writes a RemotePartitionDeleteMetadataRecord)."""
    copied, deleted = set(), set()
    for r in _decoded(part):
        for name, v in r["value_decoded"].items():
            sid = (v.get("remote_log_segment_id") or {}).get("id")
            if name == "RemoteLogSegmentMetadataRecord":
                copied.add(sid)
            elif v.get("remote_log_segment_state") == 3:
                deleted.add(sid)
    return bool(copied) and copied <= deleted


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    """(the stopped broker's log dir, a copy of the remote directory taken before the
    topic was deleted, the connections of a consumer of __remote_log_metadata)."""
    from confluent_kafka import Consumer, TopicPartition

    from tests.support.relay import Relay

    base = tmp_path_factory.mktemp("tiered")
    relay = Relay()
    kafka, remote = tiered_kafka(base)
    kafka.advertise(1, "PLAINTEXT", "127.0.0.1", relay.port)
    relay.upstream = ("127.0.0.1", kafka.node(1).ports["PLAINTEXT"])
    try:
        kafka.start()
        fill(kafka, remote, TOPIC)
        copy = base / "remote-copy"
        shutil.copytree(remote, copy)
        metadata = kafka.log_dirs[0] / f"{METADATA}-0"
        delete_topic(kafka, TOPIC, lambda: _segments_deleted(metadata))
        relay.reset()
        c = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{relay.port}",
                "group.id": "rlm-reader",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition(METADATA, 0, 0)])
        got = 0
        for _ in range(40):
            m = c.poll(0.5)
            got += m is not None and m.error() is None
            if got >= 4:
                break
        c.close()
        wire = relay.snapshot()
        kafka.stop_node(1)
        yield kafka.log_dirs[0], copy, wire
    finally:
        kafka.close()
        relay.close()


def test_remote_log_metadata_agrees_with_kafka_dump_log(tiered):
    from tests.support.apache_kafka import DUMP_LOG, run_tool

    log_dir, copy, _wire = tiered
    segments = sorted((log_dir / f"{METADATA}-0").glob("*.log"))
    dumped = parse(
        run_tool(
            DUMP_LOG,
            "--deep-iteration",
            "--print-data-log",
            "--remote-log-metadata-decoder",
            "--files",
            ",".join(map(str, segments)),
        ).stdout
    )
    records = []
    for s in segments:
        ours = _jsonl(str(s))
        assert compare(dumped[str(s)], ours) == []
        records += [o for o in ours if o["type"] == "record"]
    # every kind of record the broker writes, in the order of the copies and the deletion
    kinds = [
        (
            next(iter(r["value_decoded"])),
            r["value_decoded"][next(iter(r["value_decoded"]))].get(
                "remote_log_segment_state",
                r["value_decoded"][next(iter(r["value_decoded"]))].get(
                    "remote_partition_delete_state"
                ),
            ),
        )
        for r in records
    ]
    assert ("RemoteLogSegmentMetadataRecord", 0) in kinds  # copy started
    assert ("RemoteLogSegmentMetadataUpdateRecord", 1) in kinds  # copy finished
    assert ("RemoteLogSegmentMetadataUpdateRecord", 2) in kinds  # deletion started
    assert ("RemoteLogSegmentMetadataUpdateRecord", 3) in kinds  # segment deleted
    # the segments the records describe are the ones LocalTieredStorage holds
    copied = {
        (v["start_offset"], v["remote_log_segment_id"]["id"])
        for r in records
        for v in [r["value_decoded"].get("RemoteLogSegmentMetadataRecord")]
        if v
    }
    import base64
    import uuid

    files = {
        (int(p.name[:20]), str(uuid.UUID(bytes=base64.urlsafe_b64decode(p.stem[21:] + "=="))))
        for p in copy.rglob("*.log")
    }
    assert files and files <= copied


def test_remote_log_metadata_in_captured_fetch_responses(tiered):
    from tests.test_log_kafka import fetched_records

    log_dir, _copy, wire_conns = tiered
    wire = fetched_records(wire_conns)
    disk = {
        (o["offset"], json.dumps(o["key"])): {
            k: o[k]
            for k in ("key_decoded", "value_decoded", "key_schema", "value_schema")
            if k in o
        }
        for o in _decoded(log_dir / f"{METADATA}-0")
    }
    assert len(wire) >= 4 and set(wire) <= set(disk)
    assert all(wire[k] == disk[k] for k in wire), [k for k in wire if wire[k] != disk[k]][:3]


def test_the_remote_directory_reads_with_kdissect_log(tiered, tmp_path):
    """LocalTieredStorage's files (`tiered-0-<topic id>/<offset>-<segment id>.log`,
    `.index`, `.timeindex`, `.snapshot`, `.leader_epoch_checkpoint`) as a log dir: every
    batch and record as kafka-dump-log reads the segments, the indexes, snapshots and
    leader epochs consistent with them."""
    from tests.support.apache_kafka import DUMP_LOG, run_tool

    _log_dir, copy, _wire = tiered
    root = copy / "kafka-tiered-storage"
    objs = _jsonl(str(root))
    kinds = {o["type"] for o in objs}
    assert {
        "batch",
        "record",
        "offset_index",
        "time_index",
        "producer_snapshot",
        "checkpoint",
    } <= kinds, kinds
    assert {o["topic"] for o in objs} == {TOPIC} and {o["partition"] for o in objs} == {0}
    bad = [
        (o["file"], f["code"])
        for o in objs
        for f in o.get("findings", [])
        if f["severity"] != "note"
    ]
    assert bad == []
    # kafka-dump-log reads a segment's base offset from its name: give it `<offset>.log`
    named = tmp_path / f"{TOPIC}-0"
    named.mkdir()
    segments = {named / f"{s.name[:20]}.log": s for s in sorted(root.rglob("*.log"))}
    for link, s in segments.items():
        link.symlink_to(s)
    dumped = parse(
        run_tool(
            DUMP_LOG,
            "--deep-iteration",
            "--print-data-log",
            "--files",
            ",".join(map(str, segments)),
        ).stdout
    )
    assert len(segments) >= 2
    for link, s in segments.items():
        assert compare(dumped[str(link)], _jsonl(str(s))) == []
