"""`kdissect log`: Kafka's files on disk. Segments are built with a real client's record
encoder (kafka-python's MemoryRecordsBuilder: magic 0, 1, 2, every codec), the other
files in the layouts Kafka writes them; then damaged the ways a crash damages them."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import pytest
from click.testing import CliRunner
from kafka.record.memory_records import MemoryRecordsBuilder

from kdissect.cli import main
from kdissect.protocol import Options
from kdissect.sources.logunits import walk

ROOT = Path(__file__).resolve().parents[1]
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def batch(
    magic: int,
    codec: int,
    offset: int,
    records,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> bytes:
    ts = 1700000000000 + 10 * offset  # timestamps grow with offsets, as on a broker
    b = MemoryRecordsBuilder(
        magic,
        codec,
        1 << 20,
        offset=offset if magic < 2 else 0,
        transactional=transactional,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    for i, (k, v) in enumerate(records):
        b.append(ts + i, k, v, [("h", b"hv")] if magic == 2 else [])
    b.close()
    data = bytearray(b.buffer())
    # a producer leaves offsets to the broker, which writes them (outside the CRCs): a v2
    # batch's base offset, each plain v0/v1 message's offset, a wrapper's last inner offset
    if magic == 2:
        struct.pack_into(">q", data, 0, offset)
    elif data[17] & 7:
        struct.pack_into(">q", data, 0, offset + len(records) - 1)
    else:
        pos = 0
        for i in range(len(records)):
            struct.pack_into(">q", data, pos, offset + i)
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    data = bytes(data)
    return data


def run_log(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["log", *args], catch_exceptions=False)
    return res.exit_code, res.output


def jsonl(*args: str) -> list[dict]:
    res = CliRunner().invoke(
        main, ["log", *args, "--format", "jsonl", "--records"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines()]  # (notes: stderr)


def findings(objs: list[dict]) -> list[str]:
    return [f["code"] for o in objs for f in o.get("findings", [])]


@pytest.mark.parametrize(
    "magic,codec", [(m, c) for m in (0, 1, 2) for c in CODECS if not (m < 2 and c == 4)]
)
def test_every_magic_and_codec(tmp_path, magic, codec):
    part = tmp_path / "orders-0"
    part.mkdir()
    recs = [(f"k{i}".encode(), f"value {i}".encode() * 3) for i in range(5)] + [(None, None)]
    data = batch(magic, codec, 0, recs) + batch(magic, codec, 6, [(b"x", b"y")])
    (part / "00000000000000000000.log").write_bytes(data)
    objs = jsonl(str(part))
    batches = [o for o in objs if o["type"] == "batch"]
    records = [o for o in objs if o["type"] == "record"]
    assert [r["offset"] for r in records] == list(range(7))
    assert [r["key"] for r in records] == [f"k{i}" for i in range(5)] + [None, "x"]
    assert records[0]["value"] == "value 0" * 3 and records[5]["value"] is None
    assert all(b["crc_valid"] for b in batches)
    assert batches[0]["codec"] == CODECS[codec]
    assert findings(objs) == []
    if magic == 2:
        assert records[0]["headers"] == [{"key": "h", "value": "hv"}]
    # each batch's offsets and count as kafka-dump-log gives them: a compressed v0/v1
    # wrapper's are its inner messages' (its own offset field is its last one's), and
    # the filters read them alike
    spans = [(0, 5, 6), (6, 6, 1)] if magic == 2 or codec else [(i, i, 1) for i in range(7)]
    assert [(b["base_offset"], b["last_offset"], b["record_count"]) for b in batches] == spans
    for expr, want in (
        ("records == 6", 1 if magic == 2 or codec else 0),
        ("base_offset >= 6", 1),
        ("offset == 0", 1),
        ("records == 1", 1 if magic == 2 or codec else 7),
    ):
        shown = [o for o in jsonl(str(part), "-Y", expr) if o["type"] == "batch"]
        assert len(shown) == want, (expr, shown)


def _partition(tmp_path: Path) -> tuple[Path, list[int]]:
    """A partition with idempotent and transactional batches, an index, a time index,
    a leader-epoch checkpoint and a producer snapshot, consistent with each other."""
    part = tmp_path / "pay-0"
    part.mkdir()
    batches = [
        batch(2, 0, 0, [(b"a", b"1"), (b"b", b"2")], pid=7, epoch=0, seq=0),
        batch(2, 1, 2, [(b"c", b"3")], pid=7, epoch=0, seq=2),
        batch(2, 0, 3, [(b"d", b"4"), (b"e", b"5")], pid=9, epoch=1, seq=0),
    ]
    positions, pos = [], 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    (part / "00000000000000000000.log").write_bytes(b"".join(batches))
    # .index: (last offset of the batch - base, its position); preallocated zero tail
    index = struct.pack(">ii", 2, positions[1]) + struct.pack(">ii", 4, positions[2])
    (part / "00000000000000000000.index").write_bytes(index + bytes(8 * 10))
    tindex = struct.pack(">qi", 1700000000020, 2) + struct.pack(">qi", 1700000000031, 4)
    (part / "00000000000000000000.timeindex").write_bytes(tindex + bytes(12 * 4))
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (part / "partition.metadata").write_text("version: 0\ntopic_id: 3J3sOs5eRJ6dK8hiE2FqXw\n")
    entries = struct.pack(">qhiqiqiq", 7, 0, 2, 2, 0, 1700000000000, -1, -1) + struct.pack(
        ">qhiqiqiq", 9, 1, 1, 4, 1, 1700000000001, -1, -1
    )
    body = struct.pack(">i", 2) + entries
    (part / "00000000000000000005.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    return part, positions


def marker_and_damage(offset: int, pid: int, epoch: int, seq: int, recs, marker: int = 1) -> bytes:
    """From ``offset`` on: the producer's transaction marker (1 COMMIT, 0 ABORT), a batch
    with log-append time, a batch whose CRC is wrong and a torn batch (``recs``)."""
    control = bytearray(
        batch(
            2,
            0,
            offset,
            [(struct.pack(">hh", 0, marker), struct.pack(">hi", 0, 3))],
            pid=pid,
            epoch=epoch,
            seq=seq,
            transactional=True,
        )
    )
    struct.pack_into(">h", control, 21, 0x30)  # control + transactional
    struct.pack_into(">i", control, 53, -1)  # markers have no sequence
    struct.pack_into(">I", control, 17, crc32c.crc32c(bytes(control[21:])))
    appended = bytearray(batch(2, 4, offset + 1, [(b"a", b"b")]))
    struct.pack_into(">h", appended, 21, struct.unpack_from(">h", appended, 21)[0] | 0x08)
    struct.pack_into(">I", appended, 17, crc32c.crc32c(bytes(appended[21:])))
    flipped = bytearray(batch(2, 0, offset + 2, [(b"x", b"y")]))
    flipped[-1] ^= 1
    return bytes(control) + bytes(appended) + bytes(flipped) + batch(2, 1, offset + 3, recs)[:-9]


def both_paths(*paths: str) -> tuple[str, str]:
    """The JSON lines of the bulk (values) path and of the located path, with records."""
    from kdissect.cli.log_cmd import item_lines

    return tuple(
        "".join(item_lines(i, True) for i in walk(list(paths), Options(), values=v))
        for v in (True, False)
    )


def test_values_path_agrees_with_the_located_path(tmp_path):
    """The JSON lines' fast path (no trees) writes what the trees say, byte for byte:
    every codec, producers, transactions, a control batch, log-append time, a CRC
    mismatch and a torn tail (those two take the located path)."""
    from kdissect.cli.log_cmd import item_lines

    part = tmp_path / "mix-0"
    part.mkdir()
    recs = [(b"k%d" % i, b"v\x00\xff" * i) for i in range(4)] + [(None, b"")]
    data = b"".join(batch(2, c, 5 * c, recs, pid=3, epoch=0, seq=5 * c) for c in CODECS)
    data += batch(2, 3, 25, [(b"t", "é".encode())], pid=4, epoch=1, seq=0, transactional=True)
    data += marker_and_damage(26, 4, 1, 1, recs)
    (part / "00000000000000000000.log").write_bytes(data)
    fast, located = both_paths(str(part))
    assert fast == located
    items = list(walk([str(part)], Options(), values=True))
    assert sum(i.values is not None for i in items) == 7  # the clean, ordinary batches
    assert '"control_type": "COMMIT"' in fast and "crc_mismatch" in fast
    assert item_lines(items[0], False).count("\n") == 1


def test_partition_dir_consistent(tmp_path):
    part, positions = _partition(tmp_path)
    objs = jsonl(str(part))
    assert findings(objs) == [], [o for o in objs if o.get("findings")]
    kinds = [o["type"] for o in objs]
    assert {
        "checkpoint",
        "properties",
        "producer_snapshot",
        "offset_index",
        "time_index",
        "batch",
        "record",
    } <= set(kinds)
    snap = next(o for o in objs if o["type"] == "producer_snapshot")
    assert [e["producer_id"] for e in snap["content"]["producer_entries"]] == [7, 9]
    idx = next(o for o in objs if o["type"] == "offset_index")
    assert [e["position"] for e in idx["content"][:2]] == positions[1:]
    b = [o for o in objs if o["type"] == "batch"]
    assert [(x["producer_id"], x["base_sequence"]) for x in b] == [(7, 0), (7, 2), (9, 0)]
    # display filters over batches
    code, out = run_log(str(part), "-Y", "producer_id == 9")
    assert code == 0 and out.count("@") == 1 and "producer 9" in out
    code, out = run_log(str(part), "-Y", 'record.key == "c"', "--records")
    assert code == 0 and "offsets 2..2" in out


def test_a_record_filter_with_records_shows_the_records_that_pass_it(tmp_path):
    part, _ = _partition(tmp_path)  # batches: offsets 0-1 (keys a, b), 2 (c), 3-4 (d, e)

    def shown(flt: str) -> list[int]:
        return [o["offset"] for o in jsonl(str(part), "-Y", flt) if o["type"] == "record"]

    assert shown('record.key == "b"') == [1]  # not a, its batch-mate
    assert shown('!(record.key == "a")') == [1, 2, 3, 4]  # b too: asked record by record
    assert shown('record.key == "d" || record.value == "2"') == [1, 3]
    # the other fields are the batch's
    assert shown('record.key ~ "[ad]" && producer_id == 9') == [3]
    # one record must have both: no batch is shown
    assert shown('record.key == "a" && record.value == "2"') == []
    code, out = run_log(str(part), "-Y", 'record.key == "b"', "--records")
    rows = [line for line in out.splitlines() if line.strip().startswith("offset")]
    assert code == 0 and len(rows) == 1 and 'key "b"' in rows[0], out
    assert out.count("@") == 1  # its batch's line
    # without --records, batches: any of its records
    code, out = run_log(str(part), "-Y", 'record.key == "a" && record.value == "2"')
    assert code == 0 and out.count("@") == 1, out


def test_a_record_filter_with_records_keeps_damaged_batches_and_the_files_order(tmp_path):
    """A torn batch (no record read) is asked as a batch: `anomaly || record.key == x`
    still lists it. And the JSON lines keep the files' order when written to a pipe
    (the index files follow their segment)."""
    part, _ = _partition(tmp_path)
    log = part / "00000000000000000000.log"
    log.write_bytes(log.read_bytes() + marker_and_damage(5, 7, 0, 3, [(b"t", b"u")]))
    flt = 'anomaly || record.key == "zz"'
    code, out = run_log(str(part), "-Y", flt, "--records")
    assert code == 0 and "log_size_past_end" in out, out  # the torn one, at its end
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-m", "kdissect", "log", str(part), "--format", "jsonl", "--records"]
        + ["-Y", '!(record.key == "a")'],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    kinds = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    assert done.returncode == 0 and "batch" in kinds and "offset_index" in kinds, done.stderr
    last_batch = max(i for i, k in enumerate(kinds) if k in ("batch", "record"))
    assert last_batch < kinds.index("offset_index"), kinds


def test_checks_find_what_disagrees(tmp_path):
    part, positions = _partition(tmp_path)
    # the index names the wrong position, the time index the wrong timestamp, the epoch
    # checkpoint another epoch, the snapshot another sequence, and a sequence gap
    (part / "00000000000000000000.index").write_bytes(
        struct.pack(">ii", 2, positions[1] + 3) + struct.pack(">ii", 4, 99999)
    )
    (part / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 1, 2))
    (part / "leader-epoch-checkpoint").write_text("0\n1\n3 0\n")
    log = part / "00000000000000000000.log"
    log.write_bytes(log.read_bytes() + batch(2, 0, 5, [(b"f", b"6")], pid=7, epoch=0, seq=9))
    codes = findings(jsonl(str(part)))
    for code in (
        "index_bad_entry",
        "index_past_end",
        "time_index_mismatch",
        "leader_epoch_mismatch",
        "sequence_gap",
    ):
        assert code in codes, (code, codes)


def test_damage_is_found_never_raised(tmp_path):
    good = batch(2, 1, 0, [(b"k", b"v" * 50)]) + batch(2, 0, 1, [(b"k2", b"v2")])
    cases = {
        "truncated": (good[:-10], "log_size_past_end"),
        "flipped": (good[:40] + bytes([good[40] ^ 0xFF]) + good[41:], "crc_mismatch"),
        "nonsense": (good + b"\x13\x37" * 100, "log_nonsense_tail"),
        "zeros": (good + bytes(4096), "log_zero_tail"),
    }
    for name, (data, code) in cases.items():
        d = tmp_path / name / "t-0"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(data)
        objs = jsonl(str(d))
        assert code in findings(objs), (name, findings(objs))
        # what precedes the damage is decoded
        assert objs[1]["type"] == "record" and objs[1]["key"] == "k"
        code_, out = run_log(str(d), "-Y", f"finding == {code}")
        assert code_ == 0 and code in out


def test_internal_topics_on_disk(tmp_path):
    d = tmp_path / "__consumer_offsets-3"
    d.mkdir()
    key = (
        struct.pack(">hh", 1, 5)
        + b"group"
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">i", 2)
    )
    value = (
        struct.pack(">hqi", 3, 42, 7)
        + struct.pack(">h", 4)
        + b"meta"
        + struct.pack(">q", 1700000000000)
    )
    (d / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(key, value)]))
    rec = next(o for o in jsonl(str(d)) if o["type"] == "record")
    assert rec["key_decoded"]["OffsetCommitKey"] == {
        "group": "group",
        "topic": "orders",
        "partition": 2,
    }
    v = rec["value_decoded"]["OffsetCommitValue"]
    assert (v["offset"], v["leader_epoch"], v["metadata"]) == (42, 7, "meta")
    # __cluster_metadata: frame version 1, TopicRecord (type 2) v0, flexible
    m = tmp_path / "__cluster_metadata-0"
    m.mkdir()
    topic = bytes([1, 2, 0]) + bytes([7]) + b"orders" + bytes(range(16)) + b"\x00"
    (m / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(None, topic)]))
    rec = next(o for o in jsonl(str(m)) if o["type"] == "record")
    assert rec["value_decoded"]["TopicRecord"]["name"] == "orders"
    assert rec["value_decoded"]["TopicRecord"]["topic_id"] == "00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_internal_records_in_fetch_responses():
    """The same decoders on the wire: a Fetch response (v12, topic named) carrying a
    __consumer_offsets batch."""
    from kdissect.protocol import decode_response

    key = struct.pack(">hh", 2, 1) + b"g"
    recs = batch(2, 0, 0, [(key, None)])
    topic = b"__consumer_offsets"
    # correlation id; header v1 tagged fields; throttle, error, session id; topics[1]
    msg = struct.pack(">i", 1) + b"\x00" + struct.pack(">ihi", 0, 0, 0) + bytes([2])
    msg += bytes([len(topic) + 1]) + topic + bytes([2])  # partitions[1]
    msg += struct.pack(">ihqqq", 0, 0, 1, 1, 0) + bytes([1]) + struct.pack(">i", -1)
    msg += bytes([len(recs) + 1]) + recs + b"\x00" + b"\x00" + b"\x00"
    m = decode_response(msg, 1, 12)
    keys = [n for n in m.tree.walk() if n.name == "GroupMetadataKey"]
    assert keys and keys[0].child("group").value == "g", m.tree.problems()


def test_zero_seven_kafka_file(tmp_path):
    """0.7 logs, built from the layout in the 0.7 design document (no 0.7 broker exists
    here): 4-byte length, magic, [attributes,] CRC32 of the payload, payload."""

    def message(payload: bytes, magic: int = 1) -> bytes:
        head = bytes([magic]) + (b"\x00" if magic == 1 else b"")
        body = head + struct.pack(">I", zlib.crc32(payload)) + payload
        return struct.pack(">i", len(body)) + body

    data = message(b"hello", 0) + message(b"world") + message(b"bad")[:-1] + b"x"
    d = tmp_path / "t_0"
    d.mkdir()
    (d / "00000000000000000000.kafka").write_bytes(data)
    items = list(walk([str(d / "00000000000000000000.kafka")], Options()))
    assert [i.tree.child("payload").value for i in items[:2]] == [b"hello", b"world"]
    assert items[1].tree.value == {"offset": 14}
    assert [f.code for f in items[2].all_findings()] == ["crc_mismatch"]


def test_text_files(tmp_path):
    (tmp_path / "meta.properties").write_text("#\nversion=1\nnode.id=1\ncluster.id=abc\n")
    (tmp_path / "replication-offset-checkpoint").write_text("0\n1\nt 0 1\n")
    (tmp_path / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":2,"data_version":1}')
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        batch(2, 0, 0, [(b"a", b"1")]) + batch(2, 0, 1, [(b"b", b"2")])
    )
    objs = jsonl(str(tmp_path))
    meta = next(o for o in objs if o["file"].endswith("meta.properties"))
    assert meta["content"]["cluster.id"] == "abc"
    # the high watermark is 1: the second batch is past it; no .kafka_cleanshutdown: the
    # broker runs or did not stop cleanly
    assert findings(objs) == ["unclean_shutdown", "past_high_watermark"]
    (tmp_path / ".kafka_cleanshutdown").write_text("{}")
    assert findings(jsonl(str(tmp_path))) == ["past_high_watermark"]
    qs = jsonl(str(tmp_path / "quorum-state"))
    assert qs[0]["content"]["leaderEpoch"] == 2


def test_bad_paths_are_clear_errors(tmp_path):
    code, out = run_log(str(tmp_path / "missing"))
    assert code == 1 and "no such file" in out
    (tmp_path / "notes.txt").write_text("x")
    code, out = run_log(str(tmp_path / "notes.txt"))
    assert code == 1 and "not a Kafka log file" in out


def test_segment_memory_is_one_batch(tmp_path):
    """Items are yielded as the segment is read: the first comes before the last batch
    is decoded (nothing holds the file's trees)."""
    d = tmp_path / "t-0"
    d.mkdir()
    data = b"".join(batch(2, 0, i, [(b"k", b"v")]) for i in range(200))
    (d / "00000000000000000000.log").write_bytes(data)
    it = walk([str(d)], Options())
    first = next(it)
    assert first.tree.child("base_offset").value == 0
    assert sum(1 for _ in it) == 199


@pytest.mark.slow
def test_internal_schemas_module_is_current():
    """Re-run the dumper on Kafka's jars (Maven Central): the checked-in module matches."""
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dump_internal_schemas.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-2000:]


def test_parquet_tables(tmp_path):
    import pyarrow.parquet as pq

    part, _positions = _partition(tmp_path)
    log = part / "00000000000000000000.log"
    log.write_bytes(log.read_bytes() + b"\x07" * 40)  # a nonsense tail
    code, out = run_log(str(part), "--format", "parquet", "-o", str(tmp_path / "t"))
    assert code == 0, out
    batches = pq.read_table(tmp_path / "t" / "batches.parquet").to_pylist()
    records = pq.read_table(tmp_path / "t" / "records.parquet").to_pylist()
    checks = pq.read_table(tmp_path / "t" / "checks.parquet").to_pylist()
    assert [b["producer_id"] for b in batches[:3]] == [7, 7, 9]
    assert [r["key"] for r in records] == ["a", "b", "c", "d", "e"]
    assert records[0]["headers"] == [{"key": "h", "value": "hv"}]
    assert [c["code"] for c in checks] == ["log_nonsense_tail"]
    code, out = run_log(str(part), "--format", "parquet")
    assert code == 2 and "-o DIR" in out


def _segment_dir(tmp_path: Path, name: str, data: bytes, marker: bool | None = None) -> Path:
    """``data`` as partition t-0's first segment; in a broker's log dir (meta.properties)
    stopped cleanly (marker True) or not (False), or a lone partition dir (None)."""
    root = tmp_path / name
    part = root / "t-0" if marker is not None else root
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(data)
    if marker is not None:
        (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
        if marker:
            (root / ".kafka_cleanshutdown").write_text("{}")
    return root


def test_damage_with_intact_batches_after_it(tmp_path):
    """A magic byte no Kafka writes (its length and CRC intact: Kafka's recovery keeps the
    batch) or a garbage length, with intact batches after it: the scan goes on over them,
    index entries naming them are right, and neither is called a torn write."""
    batches = [batch(2, 0, i, [(b"k%d" % i, b"v" * 30)]) for i in range(6)]
    starts = [sum(map(len, batches[:i])) for i in range(6)]
    for name, at, value, code in (
        ("magic", 16, b"\x07", "log_bad_magic"),
        ("length", 8, struct.pack(">i", 0x7FFF0000), "log_bad_batch"),
        ("short", 8, struct.pack(">i", 3), "log_bad_batch"),
    ):
        data = bytearray(b"".join(batches))
        data[starts[2] + at : starts[2] + at + len(value)] = value
        root = _segment_dir(tmp_path, name, bytes(data), marker=False)
        # index entries at the damaged batch and at the intact ones after it (the time
        # index names the damaged batch too: its header holds when the CRC does)
        (root / "t-0" / "00000000000000000000.index").write_bytes(
            b"".join(struct.pack(">ii", i, starts[i]) for i in (2, 3, 5)) + bytes(80)
        )
        if name == "magic":
            (root / "t-0" / "00000000000000000000.timeindex").write_bytes(
                b"".join(struct.pack(">qi", 1700000000000 + 10 * i, i) for i in (2, 3))
            )
        objs = jsonl(str(root))
        codes = findings(objs)
        assert codes == ["unclean_shutdown", code], (name, codes)
        keys = [o["key"] for o in objs if o["type"] == "record"]
        assert keys == ["k0", "k1", "k3", "k4", "k5"], (name, keys)
        said = next(f["detail"] for o in objs for f in o.get("findings", []) if f["code"] == code)
        if code == "log_bad_magic":
            assert "magic byte 7" in said and "recovery keeps it" in said
        else:
            assert "not a torn write" in said and f"starts at position {starts[3]}" in said
            assert "at the broker's next start, truncates the partition" in said
    # a torn last batch with nothing after it is still one
    data = b"".join(batches)[:-10]
    assert findings(jsonl(str(_segment_dir(tmp_path, "torn", data)))) == ["log_size_past_end"]


def test_time_index_entry_hidden_by_damage_is_no_mismatch(tmp_path):
    """A time-index entry naming an offset that a damaged batch hides (its length is
    garbage: its offsets cannot be read) is not called a time_index_mismatch: the damaged
    batch's own finding says what is wrong. An entry naming an offset that no intact batch
    ends, outside the damage, still is. (A segment, its offset index and its time index,
    as a broker lays them out.)"""
    batches = [
        batch(2, 0, 2 * i, [(b"k%d" % (2 * i + j), b"v" * 30) for j in (0, 1)]) for i in range(4)
    ]
    starts = [sum(map(len, batches[:i])) for i in range(4)]
    data = bytearray(b"".join(batches))
    data[starts[1] + 8 : starts[1] + 12] = struct.pack(">i", 0x7FFF0000)  # offsets 2..3 hidden

    def check(named: int, max_ts: dict[int, int]) -> list[dict]:
        part = tmp_path / f"named-{named}" / "t-0"
        part.mkdir(parents=True)
        (part / "00000000000000000000.log").write_bytes(bytes(data))
        # offset index: a batch's last offset -> its position (the damaged one's too)
        (part / "00000000000000000000.index").write_bytes(
            b"".join(struct.pack(">ii", 2 * i + 1, starts[i]) for i in range(4)) + bytes(80)
        )
        # time index: (max timestamp, offset) of the batches ending at offsets 1 and 7,
        # and between them an entry naming ``named``
        entries = sorted(max_ts.items())
        (part / "00000000000000000000.timeindex").write_bytes(
            b"".join(struct.pack(">qi", ts, off) for off, ts in entries) + bytes(12 * 4)
        )
        return jsonl(str(part))

    # batch() stamps record j of the batch at offset o with 1700000000000 + 10 * o + j
    ts = {off: 1700000000000 + 10 * (off - 1) + 1 for off in (1, 3, 5, 7)}
    objs = check(3, {1: ts[1], 3: ts[3], 7: ts[7]})
    codes = findings(objs)
    assert codes == ["log_bad_batch"], codes
    keys = [o["key"] for o in objs if o["type"] == "record"]
    assert keys == ["k0", "k1", "k4", "k5", "k6", "k7"]
    # offset 4 is read (the batch of offsets 4..5), but ends no batch: a real mismatch
    objs = check(4, {1: ts[1], 4: ts[5] - 1, 7: ts[7]})
    said = [
        f["detail"]
        for o in objs
        for f in o.get("findings", [])
        if f["code"] == "time_index_mismatch"
    ]
    assert said == ["entry names offset 4, which ends no batch of this segment"], findings(objs)
    assert "log_bad_batch" in findings(objs)


def test_crc_mismatch_says_what_recovery_does(tmp_path):
    """Kafka's recovery (LogSegment.recover) checks every batch's CRC past the recovery
    point after an unclean stop, and truncates the partition at the first that fails;
    after a clean stop it reads nothing."""
    good = [batch(2, 0, i, [(b"k", b"v" * 30)]) for i in range(3)]
    flipped = bytearray(good[1])
    flipped[-1] ^= 1
    data = good[0] + bytes(flipped) + good[2]
    said = {}
    for name, marker in (("unclean", False), ("clean", True), ("alone", None)):
        objs = jsonl(str(_segment_dir(tmp_path, name, data, marker)))
        said[name] = [
            f["detail"] for o in objs for f in o.get("findings", []) if f["code"] == "crc_mismatch"
        ]
        assert len(said[name]) == 1, (name, findings(objs))
    assert "at the broker's next start, truncates the partition at this batch" in said["unclean"][0]
    assert "stopped cleanly, so recovery does not read it" in said["clean"][0]
    assert "when it runs over it (after an unclean shutdown)" in said["alone"][0]
    # both CRCs in one base, to compare at a glance
    stored = int.from_bytes(flipped[17:21], "big")
    assert f"stored {stored:#010x}, computed 0x" in said["alone"][0]


def test_producer_snapshot_with_a_bad_crc_is_not_compared(tmp_path):
    part, _ = _partition(tmp_path)
    snap = part / "00000000000000000005.snapshot"
    data = bytearray(snap.read_bytes())
    data[20] ^= 0xFF  # producer 7's epoch: garbage, the CRC fails
    snap.write_bytes(bytes(data))
    assert findings(jsonl(str(part))) == ["crc_mismatch"]


def test_a_newer_epoch_marker_resets_the_producer_state(tmp_path):
    """Transactions v2 (KIP-890) write the COMMIT/ABORT marker with the producer epoch
    bumped: Kafka's producer state then holds that epoch and no batch (last sequence and
    offset -1), as its snapshot does."""
    part = tmp_path / "txn-0"
    part.mkdir()
    data = batch(2, 0, 0, [(b"a", b"1"), (b"b", b"2")], pid=7, epoch=0, seq=0, transactional=True)
    marked = marker_and_damage(2, 7, 1, 0, [(b"x", b"y")])
    control = marked[: 12 + struct.unpack_from(">i", marked, 8)[0]]
    (part / "00000000000000000000.log").write_bytes(data + control)
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 1, -1, -1, 0, 1700000000000, 0, -1)
    (part / "00000000000000000003.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    objs = jsonl(str(part))
    assert [o.get("control_type") for o in objs if o["type"] == "record"] == [None, None, "COMMIT"]
    assert findings(objs) == []
    # the epoch-0 batch as the snapshot's state is what does not match
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 0, 1, 1, 1, 1700000000000, 0, -1)
    (part / "00000000000000000003.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    assert findings(jsonl(str(part))) == ["producer_state_mismatch"]


def test_a_snapshot_naming_a_batch_the_cleaner_may_have_removed_says_so(tmp_path):
    """On a compacted partition the cleaner removes a batch whose records all have newer
    values once its producer has written a later one: a snapshot taken before can name
    it. The mismatch is said with that reading when cleaner-offset-checkpoint shows the
    batch in the cleaned part of the log, and without it otherwise."""
    log_dir = tmp_path / "logs"
    part = log_dir / "compacted-0"
    part.mkdir(parents=True)
    first = batch(2, 0, 0, [(b"a", b"1"), (b"b", b"2")], pid=7, epoch=0, seq=0)
    later = batch(2, 0, 4, [(b"c", b"3"), (b"d", b"4")], pid=7, epoch=0, seq=4)
    (part / "00000000000000000000.log").write_bytes(first + later)  # 2-3: cleaned away
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 0, 3, 3, 1, 1700000000000, 0, -1)
    (part / "00000000000000000004.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    (log_dir / "meta.properties").write_text("version=1\nnode.id=1\n")

    def said(cleaned_below: int | None) -> str:
        checkpoint = log_dir / "cleaner-offset-checkpoint"
        checkpoint.unlink(missing_ok=True)
        if cleaned_below is not None:
            checkpoint.write_text(f"0\n1\ncompacted 0 {cleaned_below}\n")
        objs = jsonl(str(log_dir))
        [detail] = [
            f["detail"]
            for o in objs
            for f in o.get("findings", [])
            if f["code"] == "producer_state_mismatch"
        ]
        return detail

    assert "log cleaner has cleaned below offset 6" in said(6)
    assert "cleaner" not in said(None)
    assert "cleaner" not in said(3)  # the batch the snapshot names is not cleaned yet


def test_a_segment_given_alone_names_what_each_file_read_beside_it_tells(tmp_path):
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"k", b"v")]))
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    res = CliRunner().invoke(main, ["log", str(part / "00000000000000000000.log")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())
    assert "read with its partition's leader-epoch-checkpoint (leader epochs, the log" in said
    assert "aborted transactions" not in said  # no .txnindex was read
    assert f"give the partition's directory ({part})" in said


def test_a_snapshot_or_checkpoint_line_says_how_many_entries(tmp_path):
    part, _ = _partition(tmp_path)
    for name, words in (
        ("00000000000000000005.snapshot", "producer_snapshot  2 producer entries"),
        ("leader-epoch-checkpoint", "checkpoint  "),
    ):
        res = CliRunner().invoke(main, ["log", str(part / name)])
        assert res.exit_code == 0 and words in res.stdout, res.output
    assert " entries" in res.stdout


def test_preallocated_index_is_read_cheaply(tmp_path):
    import time
    from kdissect.protocol.ondisk import offset_index

    data = struct.pack(">ii", 3, 4096) + struct.pack(">ii", 9, 8192) + bytes(10 << 20)
    started = time.process_time()
    tree = offset_index(data, 0)
    assert time.process_time() - started < 0.5
    assert [c.name for c in tree.children] == ["[0]", "[1]", "_preallocated"]


def test_resync_after_damage_is_bounded(tmp_path):
    """After damage the next intact batch is searched for within a MiB, its CRC work
    bounded: heads every 64 bytes that all claim a batch running to the file's end (each
    a CRC over megabytes) cost no more than a few."""
    import time

    size = 3 << 20
    data = bytearray(size)
    data[8:12] = struct.pack(">i", -5)  # no batch at position 0
    for pos in range(64, 1 << 20, 64):
        struct.pack_into(">i", data, pos + 8, size - pos - 12)
        data[pos + 16] = 2
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    started = time.process_time()
    codes = findings(jsonl(str(part)))
    assert time.process_time() - started < 10
    assert codes == ["log_nonsense_tail"], codes


def test_the_directory_holding_log_dirs_reads_them(tmp_path):
    """A broker's data directory (or a copy of one) holding its log dirs: they were not
    looked into ("the Kafka files hold nothing to show", or "no Kafka files found")."""
    for name in ("kraft-combined-logs", "other-logs"):
        root = tmp_path / "data" / name
        part = root / "t-0"
        part.mkdir(parents=True)
        (part / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"a", name.encode())]))
        (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    objs = jsonl(str(tmp_path / "data"))
    files = {o["file"].split("/data/")[1] for o in objs}
    assert "kraft-combined-logs/t-0/00000000000000000000.log" in files, files
    assert "other-logs/meta.properties" in files, files


def test_log_dirs_further_down_are_read_too(tmp_path):
    """Copies of several projects' data, each log dir one level further down
    (project/kraft-combined-logs): only log dirs one level down were read, the others
    skipped without a word."""
    for name in ("a/kraft-combined-logs", "b@v2/kraft-combined-logs", "c"):
        root = tmp_path / "copies" / name
        part = root / "t-0"
        part.mkdir(parents=True)
        (part / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"k", name.encode())]))
        (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    (tmp_path / "copies" / "a" / "notes").mkdir()  # nothing of Kafka's: nothing said
    objs = jsonl(str(tmp_path / "copies"))
    segments = sorted(
        o["file"].split("/copies/")[1]
        for o in objs
        if o["file"].endswith(".log") and o.get("type") == "batch"
    )
    assert segments == [
        f"{name}/t-0/00000000000000000000.log"
        for name in ("a/kraft-combined-logs", "b@v2/kraft-combined-logs", "c")
    ], segments


def test_log_dirs_linked_from_their_disks_are_read_and_loops_end(tmp_path):
    """A data directory of links to each broker's disk (data/broker1 -> /mnt/disk1/...):
    read as before the deeper search (which skipped links); a link back up ends."""
    disk = tmp_path / "disk1" / "kafka-logs"
    (disk / "orders-0").mkdir(parents=True)
    (disk / "orders-0" / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"k", b"v")]))
    (disk / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    data = tmp_path / "data"
    (data / "more").mkdir(parents=True)
    (data / "broker1").symlink_to(disk)
    (data / "more" / "up").symlink_to(data)  # a loop
    objs = jsonl(str(data))
    assert [o["file"].split("/data/")[1] for o in objs if o.get("type") == "batch"] == [
        "broker1/orders-0/00000000000000000000.log"
    ]


def test_a_tree_too_large_to_search_for_log_dirs_is_refused(tmp_path, monkeypatch):
    from kdissect.sources import logdir

    monkeypatch.setattr(logdir, "LOG_DIRS_LOOKED_AT", 50)
    for i in range(60):
        (tmp_path / "home" / f"d{i}").mkdir(parents=True)
    code, out = run_log(str(tmp_path / "home"))
    assert code != 0 and "more than 50 entries" in out, out


def test_a_lines_findings_are_marked_by_severity(tmp_path):
    """A note (a batch past the high watermark: a leader's unreplicated tail) is no
    error: only errors get the cross."""
    part, _ = _partition(tmp_path)
    (tmp_path / "replication-offset-checkpoint").write_text("0\n1\npay 0 3\n")
    code, out = run_log(str(tmp_path))
    assert code == 0, out
    noted = [
        line
        for line in out.splitlines()
        if "past_high_watermark" in line or "high watermark" in line
    ]
    assert noted and all("✗" not in line and "·" in line for line in noted), out


def _offset_index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def test_an_index_without_its_segment_says_where_its_entries_go_backwards(tmp_path):
    """Without the segment no entry can be checked against the batches, but an index
    whose offsets or positions go backwards is damaged whatever the segment holds."""
    import json

    part = tmp_path / "t-0"
    part.mkdir()
    good = part / "00000000000000000100.index"
    good.write_bytes(_offset_index([(5, 0), (9, 4200), (30, 9000)]))
    bad = part / "00000000000000000200.index"
    bad.write_bytes(_offset_index([(5, 0), (9, 4200), (7, 9000), (12, 100)]))
    code, out = run_log(str(good), "--format", "jsonl")
    assert code == 0 and "index_not_monotonic" not in out
    for target in (str(bad), str(part)):
        code, out = run_log(target, "--format", "jsonl")
        lines = [json.loads(x) for x in out.splitlines()]
        found = [
            f["detail"]
            for line in lines
            for f in line.get("findings", ())
            if f["code"] == "index_not_monotonic"
        ]
        assert found == [
            "offsets go backwards: 207 after 209",
            "positions go backwards: 100 after 9000",
        ], target


def test_a_line_lists_three_findings_of_a_kind_then_counts_the_rest(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    index = part / "00000000000000000000.index"
    index.write_bytes(_offset_index([(100 - i, i) for i in range(10)]))  # offsets fall
    code, out = run_log(str(index))
    assert code == 0
    assert out.count("offsets go backwards") == 3
    assert "… 6 more [index_not_monotonic]" in out
    code, out = run_log(str(index), "--format", "jsonl")
    assert out.count("offsets go backwards") == 9


def test_kip848_records_kafka_36_wrote_are_read_with_its_early_access_layout(tmp_path):
    """Kafka 3.6 wrote KIP-848's consumer-group records in layouts 3.7 replaced at the
    same version 0: read with the 4.x layout they were truncated errors and wrong values
    (what Kafka 3.6's classes decode from such a log is the expectation); a 4.x record
    keeps the 4.x layout."""
    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    key = struct.pack(">hh", 8, 12) + b"kip848-group" + struct.pack(">h", 2) + b"m1"
    v36 = struct.pack(">hiii", 0, 5, 4, 5) + b"\x01\x01\x01" + b"\x00" + b"\x00\x00\x01\x00"
    v44 = struct.pack(">hiib", 0, 6, 5, 0) + b"\x01\x01\x00"
    (d / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(key, v36), (key, v44)]))
    objs = jsonl(str(d))
    old, new = [o["value_decoded"] for o in objs if o["type"] == "record"]
    assert old["ConsumerGroupCurrentMemberAssignmentValue"] == {
        "member_epoch": 5,
        "previous_member_epoch": 4,
        "target_member_epoch": 5,
        "assigned_partitions": [],
        "partitions_pending_revocation": [],
        "partitions_pending_assignment": [],
        "error": 0,
        "metadata_version": 0,
        "metadata_bytes": "",
    }
    assert new["ConsumerGroupCurrentMemberAssignmentValue"] == {
        "member_epoch": 6,
        "previous_member_epoch": 5,
        "state": 0,
        "assigned_partitions": [],
        "partitions_pending_revocation": [],
    }
    assert findings(objs) == []
    code, out = run_log(str(d), "--records")
    assert out.count("read with Kafka 3.6's early-access layout") == 1


def test_a_transaction_index_alone_is_read(tmp_path):
    """A segment's files are renamed one at a time when Kafka deletes it: a .txnindex can
    be all that is left of one (the index checks crashed on it)."""
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.txnindex").write_bytes(struct.pack(">hqqqq", 0, 7, 0, 5, 6))
    code, out = run_log(str(part))
    assert code == 0 and "txn_index" in out and "1 entries" in out


def test_kafka_36_member_metadata_value_is_read_with_its_assignors(tmp_path):
    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    key = struct.pack(">hh", 5, 12) + b"kip848-group" + struct.pack(">h", 2) + b"m1"

    def compact(text: bytes) -> bytes:
        return bytes([len(text) + 1]) + text

    value = (
        struct.pack(">h", 0)
        + compact(b"")  # instance id
        + compact(b"r")
        + compact(b"c")
        + compact(b"h")
        + b"\x02"  # one subscribed topic
        + compact(b"demo-topic")
        + compact(b"")  # regex
        + struct.pack(">i", 5000)
        + compact(b"")  # server assignor
        + b"\x02"  # one assignor (3.6's early-access layout)
        + compact(b"range")
        + struct.pack(">hhbh", 0, 1, 0, 1)
        + b"\x01"  # its metadata: empty
        + b"\x00"  # its tags
        + b"\x00"  # the value's tags
    )
    (d / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(key, value)]))
    objs = jsonl(str(d))
    got = next(o for o in objs if o["type"] == "record")["value_decoded"]
    member = got["ConsumerGroupMemberMetadataValue"]
    assert member["subscribed_topic_names"] == ["demo-topic"]
    assert member["assignors"] == [
        {
            "name": "range",
            "minimum_version": 0,
            "maximum_version": 1,
            "reason": 0,
            "version": 1,
            "metadata": "",
        }
    ]
    assert findings(objs) == []


def test_batch_lines_name_their_partition(tmp_path):
    """Reading a log dir, each batch's line names its segment by its partition
    (`orders-0/000….log`): lines of different partitions grep apart."""
    for name, key in (("orders-0", b"o"), ("pay-0", b"p")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(key, b"1")]))
    code, out = run_log(str(tmp_path), "--no-tui")
    firsts = sorted(line.split("  ")[0] for line in out.splitlines() if "@0+" in line)
    assert code == 0 and firsts == [
        "orders-0/00000000000000000000.log",
        "pay-0/00000000000000000000.log",
    ], out


def test_trees_to_a_pipe_wrap_at_pcaps_width_not_80_columns(tmp_path):
    """`log -V` to a pipe or file cropped its tree lines at rich's 80 columns (a value's
    quote never closed, its size lost; findings' texts cut): it wraps them at 160, or at
    COLUMNS, as `pcap -V` does (docs/guide/pcap.md)."""
    part = tmp_path / "wide-0"
    part.mkdir()
    value = b"zstd-value-0 " * 10
    (part / "00000000000000000000.log").write_bytes(batch(2, 4, 0, [(b"k0", value)]))

    def tree(columns: str | None) -> list[str]:
        res = CliRunner().invoke(main, ["log", "-V", str(part)], env={"COLUMNS": columns})
        assert res.exit_code == 0, res.output
        return [line for line in res.stdout.splitlines() if line[:1] in "├└│ "]

    shown = next(line for line in tree(None) if "value  bytes" in line)
    assert shown.endswith(f"(decompressed)  = {value[:64].decode()!r}"[:-1] + "…' (130 bytes)")
    assert max(map(len, tree(None))) <= 160
    assert max(map(len, tree("90"))) <= 90


def test_attribute_bits_no_kafka_defines_are_named_and_noted(tmp_path):
    """A batch whose attributes set a bit no Kafka version defines (0x100, its CRC
    fixed) showed "256 (none)": the unknown bits are named, and a note-level finding
    says Kafka ignores them, on the located and the bulk (JSON lines) paths alike."""
    part = tmp_path / "odd-0"
    part.mkdir()
    odd = bytearray(batch(2, 0, 0, [(b"k", b"v")]))
    struct.pack_into(">h", odd, 21, struct.unpack_from(">h", odd, 21)[0] | 0x100)
    struct.pack_into(">I", odd, 17, crc32c.crc32c(bytes(odd[21:])))
    (part / "00000000000000000000.log").write_bytes(bytes(odd) + batch(2, 0, 1, [(b"x", b"y")]))
    code, out = run_log("-V", str(part))
    assert code == 0
    line = next(line for line in out.splitlines() if "attributes  int16" in line)
    assert line.endswith(
        "= 256  (none; unknown bits 0x100)  · attribute bits 0x100 are "
        "defined by no Kafka version (Kafka ignores them)"
    ), line
    objs = jsonl(str(part))
    batches = [o for o in objs if o["type"] == "batch"]
    assert [f["code"] for f in batches[0]["findings"]] == ["unknown_attribute_bits"]
    assert batches[0]["findings"][0]["severity"] == "note"
    assert batches[1]["findings"] == []
    assert [r["value"] for r in objs if r["type"] == "record"] == ["v", "y"]


def test_header_keys_that_are_not_utf8_are_one_problem_a_batch(tmp_path):
    """A client that writes a header key that is not UTF-8 (kafka-python, given a str whose
    encode() gives such bytes) writes it on every record: one problem a batch says how many
    keys, each shown with U+FFFD as Kafka's classes read it; a finding a record made a
    topic's output hundreds of times its size."""

    class RawKey(str):
        def encode(self, *args, **kwargs) -> bytes:  # type: ignore[override]
            return b"\xfftrace"

    b = MemoryRecordsBuilder(
        2,
        0,
        1 << 20,
        offset=0,
        transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
    )
    for i in range(50):
        b.append(1700000000000 + i, b"k%d" % i, b"v", [(RawKey("x"), b"1"), ("ok", b"2")])
    b.close()
    good = batch(2, 0, 50, [(b"k", b"v")])
    root = _segment_dir(tmp_path, "keys", bytes(b.buffer()) + good)
    items = jsonl(str(root))
    batches = [i for i in items if i["type"] == "batch"]
    assert [[f["code"] for f in b["findings"]] for b in batches] == [["bad_utf8"], []]
    assert "so are 49 more header key(s) of this batch" in batches[0]["findings"][0]["detail"]
    records = [i for i in items if i["type"] == "record"]
    assert [[h["key"] for h in r["headers"]] for r in records] == [["\ufffdtrace", "ok"]] * 50 + [
        ["h"]
    ]


@pytest.mark.parametrize(
    "when", ["before_listing", "after_listing", "shrank", "url", "indexes_left", "being_deleted"]
)
def test_a_segment_gone_mid_read_leaves_the_producers_it_held_unknown(tmp_path, monkeypatch, when):
    """A running broker deletes a segment (retention, compaction's swap) while its log dir
    is read: the producers' states then moved in batches not read. Found in a stress run
    against a live broker: a false producer_state_mismatch against the next snapshot
    (here also a false sequence_gap and offset_gap). Now what the checks across batches
    remember is forgotten at the gap; producers seen after it are still compared. The
    gap: a link to a deleted file when listed, deleted between the listing and the read,
    truncated to nothing once mapped, under file:// a FIFO, which is not copied, and
    deleted before the listing, its indexes after (the log cleaner, in a helper's second
    stress: no item says the segment is gone, its indexes stand alone)."""
    from kdissect.sources import logdir

    part = tmp_path / "pay-0"
    part.mkdir()
    segments = {
        0: [batch(2, 0, 0, [(b"a", b"1"), (b"b", b"2")], pid=7, epoch=0, seq=0)],
        2: [batch(2, 0, 2, [(b"c", b"3")], pid=7, epoch=0, seq=2)],
        3: [
            batch(2, 0, 3, [(b"d", b"4")], pid=7, epoch=0, seq=3),
            batch(2, 0, 4, [(b"e", b"5")], pid=9, epoch=1, seq=0),
        ],
    }
    for base, batches in segments.items():
        (part / f"{base:020d}.log").write_bytes(b"".join(batches))
    entries = struct.pack(">qhiqiqiq", 7, 0, 3, 3, 0, 1700000000000, -1, -1) + struct.pack(
        ">qhiqiqiq", 9, 1, 0, 4, 0, 1700000000001, -1, -1
    )
    body = struct.pack(">i", 2) + entries
    snapshot = part / "00000000000000000005.snapshot"
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    # (a snapshot taken when the segment that goes rolled: producer 7 as it left it)
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 0, 2, 2, 0, 1700000000000, -1, -1)
    (part / "00000000000000000003.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    assert findings(jsonl(str(part))) == []  # whole: consistent

    gone = part / f"{2:020d}.log"
    target = f"file://{part}" if when == "url" else str(part)
    said = {
        "shrank": "log_shrank_while_read",
        "indexes_left": "index_without_segment",
        "being_deleted": None,  # Kafka's own rename says why: nothing to warn of
    }.get(when, "unreadable_file")
    if when == "before_listing":  # listed as a name only: a link to what was deleted
        gone.unlink()
        gone.symlink_to(tmp_path / "deleted")
    elif when == "url":
        gone.unlink()
        os.mkfifo(gone)
    elif when in ("indexes_left", "being_deleted"):
        if when == "indexes_left":
            gone.unlink()
        else:  # retention renames a segment's files one by one, its log first
            gone.rename(gone.with_name(gone.name + ".deleted"))
        gone.with_suffix(".index").write_bytes(bytes(80))  # preallocated, no entry yet
    else:
        real_map = logdir._map

        def deleted_then_mapped(path):
            if path == gone and path.exists():
                if when == "shrank":
                    mm = real_map(path)
                    os.truncate(path, 0)
                    return mm
                path.unlink()
            return real_map(path)

        monkeypatch.setattr(logdir, "_map", deleted_then_mapped)
    objs = jsonl(target)
    named = gone.with_suffix(".index") if when in ("indexes_left", "being_deleted") else gone
    skipped = [o for o in objs if o["file"].endswith(named.name)]
    assert skipped and [f["code"] for o in skipped for f in o["findings"]] == [said] * (
        said is not None
    ), skipped
    assert [f for f in findings(objs) if f != said] == []
    # the producer seen after the gap is still compared with the snapshot
    entries = struct.pack(">qhiqiqiq", 7, 0, 3, 3, 0, 1700000000000, -1, -1) + struct.pack(
        ">qhiqiqiq", 9, 1, 5, 4, 0, 1700000000001, -1, -1
    )
    body = struct.pack(">i", 2) + entries
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    if when in ("after_listing", "shrank", "indexes_left", "being_deleted"):
        gone.write_bytes(b"".join(segments[2]))
    assert "producer_state_mismatch" in findings(jsonl(target))


def test_a_marker_of_a_producer_whose_batches_were_not_read_says_nothing_of_its_state(
    tmp_path,
):
    """The log cleaner removes a transaction's batches before its COMMIT marker (kept for
    delete.retention.ms), and retention may delete the segment that held them: a marker
    then met first said the producer had no batch (sequence and offset -1), against a
    snapshot that holds its last batch (a false producer_state_mismatch, then "sequence
    N follows -1", in a helper's stress of a live compacted partition). A marker of a
    newer epoch than the batches read still starts the producer again (KIP-890)."""
    part = tmp_path / "compacted-0"
    part.mkdir()
    marker = marker_and_damage(6, 5, 1, 0, [(b"x", b"y")])
    marker = marker[: 12 + struct.unpack_from(">i", marker, 8)[0]]
    after = batch(2, 0, 7, [(b"k", b"v")], pid=5, epoch=1, seq=11)
    (part / "00000000000000000006.log").write_bytes(marker + after)
    # the producer as its last batch (offset 5, sequence 10, removed by the cleaner) left it
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 5, 1, 10, 5, 0, 1700000000000, 0, -1)
    (part / "00000000000000000007.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    objs = jsonl(str(part))
    assert [o.get("control_type") for o in objs if o["type"] == "record"] == ["COMMIT", None]
    assert findings(objs) == []
