"""Every finding kdissect raises on real Apache Kafka 4.x traffic and log dirs, checked
against the truth (tests/support/oracle.py: a rule per code, Kafka's own classes reading
every message). One node, captured on its client and controller listeners: consumers
long-polling while records trickle in (Fetches held until max_wait_ms that return
records), an idempotent producer sending 25,000 requests (beside it: an idle consumer,
members joining and leaving a classic and a KIP-848 group), a consumer reading a little
at a time that commits behind what it was given, a producer retrying on a connection a
quota muted, records stamped two hours back, a sequence pushed ahead, a KIP-848 consumer
group, a share group (ShareFetch), a transactional producer (transactions v2: commits
and aborts, each bumping the epoch), and the node's controlled shutdown. Then its log
dir after that clean stop, read by `kdissect log`; then damaged, and the node started on
it (what Kafka's recovery keeps is the truth); then killed."""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kdissect.cli import main
from kdissect.sources.pcap import exchanges_in
from tests.support import oracle
from tests.support.capture import Tcpdump
from tests.support.kafka_scenarios import create_topic, java_session

pytestmark = pytest.mark.slow

WAIT_MS = 500


def _long_polls(bootstrap: str, seconds: float = 8) -> None:
    """A record every 75 ms while kafka-python and librdkafka fetch, side by side, with
    min_bytes no trickle reaches: the broker holds each Fetch for its max_wait_ms, then
    answers with the records it has. (~100 records: _lagging reads 60 of them.)"""
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, TopicPartition

    create_topic(bootstrap, "longpoll")
    stop = threading.Event()

    def trickle():
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "client.id": "kd-trickle"})
        i = 0
        while not stop.is_set():
            p.produce("longpoll", value=b"r%d" % i)
            p.poll(0)
            i += 1
            time.sleep(0.075)
        p.flush(30)

    def kafka_python():
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id="kd-longpoll",
            fetch_min_bytes=1_000_000,
            fetch_max_wait_ms=WAIT_MS,
        )
        c.assign([TopicPartition("longpoll", 0)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            c.poll(timeout_ms=1000)
        c.close()

    def librdkafka():
        rd = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "kd-longpoll-rd",
                "client.id": "kd-longpoll-rd",
                "fetch.wait.max.ms": WAIT_MS,
                "fetch.min.bytes": 1_000_000,
                "auto.offset.reset": "earliest",
            }
        )
        rd.subscribe(["longpoll"])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rd.poll(0.5)
        rd.close()

    failed: list[BaseException] = []

    def run(f):
        try:
            f()
        except BaseException as e:  # said after the join
            failed.append(e)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        readers = [threading.Thread(target=run, args=(f,)) for f in (kafka_python, librdkafka)]
        for r in readers:
            r.start()
        for r in readers:
            r.join(120)
        assert not failed, failed
    finally:
        stop.set()
        t.join(60)


BULK = 25_000  # records produced a request each: 50,000 messages


def _bulk(bootstrap: str) -> None:
    """An idempotent librdkafka producer sending every record in its own request (five
    in flight): the bulk of the messages the oracle checks."""
    from confluent_kafka import Producer

    create_topic(bootstrap, "bulk", 3)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "enable.idempotence": True,
            "client.id": "kd-bulk",
        }
    )
    for i in range(BULK):
        while True:
            try:
                p.produce("bulk", key=b"%d" % (i % 7), value=b"bulk %d" % i)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0


def _idle(bootstrap: str) -> None:
    """A consumer of a topic nothing is written to, long-polling for 11.5 s after its first
    poll: its fetches return nothing (empty_fetches, said after 10 s)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kd-idle", fetch_max_wait_ms=WAIT_MS)
    c.assign([TopicPartition("idle", 0)])
    assert not c.poll(timeout_ms=500)
    deadline = time.monotonic() + 11.5
    while time.monotonic() < deadline:
        assert not c.poll(timeout_ms=500)
    c.close()


def _rebalances(bootstrap: str) -> None:
    """A classic group and a KIP-848 consumer group, each with a member joining a running
    member, then leaving (consumer_rebalance: new generations / epochs, and their causes)."""
    from confluent_kafka import Consumer

    for protocol in ("classic", "consumer"):
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": f"kd-rebalance-{protocol}",
            "group.protocol": protocol,
        }
        if protocol == "classic":
            conf.update({"heartbeat.interval.ms": 200, "session.timeout.ms": 6000})
        first, second = (Consumer({**conf, "client.id": f"kd-member-{i}"}) for i in (1, 2))

        def assigned(c, n=None) -> bool:
            c.poll(0.1)
            return bool(c.assignment()) if n is None else len(c.assignment()) == n

        first.subscribe(["rebalance"])
        _until(lambda: assigned(first, 3))
        second.subscribe(["rebalance"])
        # (both polled each time: each serves its own part of the rebalance)
        _until(lambda: all([assigned(first), assigned(second)]) and len(first.assignment()) < 3)
        second.close()  # LeaveGroup / a heartbeat leaving
        _until(lambda: assigned(first, 3))
        first.close()


def _until(done, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not reached in time"


def _lagging(bootstrap: str) -> None:
    """A consumer reading the long-polled topic a little at a time (consumer_lag), that commits
    an offset behind what it was given (commit_behind_fetch)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    tp = TopicPartition("longpoll", 0)
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="kd-lagging",
        group_id="kd-lagging",
        enable_auto_commit=False,
        max_partition_fetch_bytes=512,
        auto_offset_reset="earliest",
    )
    c.assign([tp])
    got, deadline = 0, time.monotonic() + 60
    while got < 60:
        assert time.monotonic() < deadline, got
        got += sum(map(len, c.poll(timeout_ms=500).values()))
    c.commit({tp: OffsetAndMetadata(1, "", -1)})
    c.close()


def _read_committed(bootstrap: str) -> None:
    """A read_committed consumer at the end of what it may read while a transaction is
    open after it: the answers' last stable offset is below their high watermark, and
    the consumer is not behind (Kafka's clients count its lag from the last stable
    offset; kdissect said "3 behind")."""
    from confluent_kafka import Consumer, Producer

    create_topic(bootstrap, "committed")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "client.id": "kd-rc-writer"})
    for i in range(20):
        p.produce("committed", value=b"readable %d" % i)
    assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kd-rc-open", "linger.ms": 0})
    t.init_transactions(30)
    t.begin_transaction()
    for i in range(3):
        t.produce("committed", value=b"not yet %d" % i)
    assert t.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kd-rc",
            "client.id": "kd-rc",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    c.subscribe(["committed"])
    got, deadline = 0, time.monotonic() + 60
    while got < 20 or time.monotonic() < deadline - 57:  # then a few fetches at the end
        assert time.monotonic() < deadline, got
        m = c.poll(0.2)
        got += m is not None and m.error() is None
    c.close()
    t.abort_transaction(30)


def _quota(bootstrap: str) -> None:
    """A produce quota of 1 byte/s for the client id kd-retrying (Kafka's kafka-configs)."""
    from tests.support.apache_kafka import run_tool

    run_tool(
        "org.apache.kafka.tools.ConfigCommand",
        "--bootstrap-server",
        bootstrap,
        "--alter",
        "--add-config",
        "producer_byte_rate=1",
        "--entity-type",
        "clients",
        "--entity-name",
        "kd-retrying",
    )


def _producer_troubles(bootstrap: str) -> None:
    """An idempotent librdkafka producer under a produce quota of 1 byte/s: the broker
    answers its first request with a throttle time and mutes the connection (KIP-219), so
    the next request is not read; the client gives it up after socket.timeout.ms and
    sends it again on a new connection (producer_retry). Records stamped two hours back
    (clock_skew). And a kafka-python idempotent producer whose sequence is pushed ahead by
    5, as a client bug would: the broker refuses the batch (producer_sequence_gap) and the
    client bumps its epoch (producer_epoch_bump)."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer, TopicPartition

    for topic in ("throttled", "skewed", "gap"):
        create_topic(bootstrap, topic)
    throttled: list = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "client.id": "kd-retrying",
            "socket.timeout.ms": 1000,
            "linger.ms": 0,
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
        }
    )
    deadline = time.monotonic() + 30
    while not any(throttled):  # (until the broker has the quota)
        assert time.monotonic() < deadline, "no throttle"
        p.produce("throttled", value=b"x" * 100)
        assert p.flush(30) == 0
    p.produce("throttled", value=b"sent while the connection is muted")
    assert p.flush(60) == 0
    p.close()
    s = Producer({"bootstrap.servers": bootstrap, "client.id": "kd-skewed", "linger.ms": 0})
    s.produce("skewed", value=b"two hours ago", timestamp=int(time.time() * 1000) - 7_200_000)
    assert s.flush(30) == 0
    s.close()
    k = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, client_id="kd-gap", linger_ms=0
    )
    k.send("gap", b"first").get(30)
    k._transaction_manager.increment_sequence_number(TopicPartition("gap", 0), 5)
    try:
        k.send("gap", b"skipped ahead").get(30)
    except Exception:  # (kafka-python may give up the batch the broker refused)
        pass
    k.close(10)


DAMAGED = ("dmg-crc", "dmg-length", "dmg-magic")  # a topic per kind of damage
BATCHES = 12  # batches written to each
HIT = 5  # the batch damaged


def _batches_to_damage(bootstrap: str) -> None:
    from confluent_kafka import Producer

    for topic in DAMAGED:
        create_topic(bootstrap, topic)
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "client.id": "kd-dmg"})
        for i in range(BATCHES):
            p.produce(topic, key=b"k%d" % i, value=b"value %d " % i * 20)
            assert p.flush(30) == 0  # a batch per record


JAVA_MODES = ("consumer-group", "share-group", "transactions")  # KafkaScenarios.java


def _python_clients(bootstrap: str) -> None:
    _lagging(bootstrap)
    _read_committed(bootstrap)
    _producer_troubles(bootstrap)
    _batches_to_damage(bootstrap)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """(the node, the capture, a copy of its log dir after the controlled shutdown)."""
    import shutil
    from tests.support.apache_kafka import ApacheKafka

    tmp = tmp_path_factory.mktemp("oracle")
    path = tmp / "kafka44.pcap"
    # index entries every few batches (indexes to check against damaged segments)
    kafka = ApacheKafka(nodes=1, start=False, extra={"log.index.interval.bytes": "300"})
    dump = None
    try:
        # from before the start: every connection is seen from its first byte
        dump = Tcpdump(path, kafka.ports("PLAINTEXT", "CONTROLLER"))
        kafka.start()
        bootstrap = kafka.bootstrap()
        _long_polls(bootstrap)
        for topic, parts in (("idle", 1), ("rebalance", 3)):
            create_topic(bootstrap, topic, parts)
        failed: list[BaseException] = []

        def beside(f):
            try:
                f(bootstrap)
            except BaseException as e:  # said after the join
                failed.append(e)

        others = [threading.Thread(target=beside, args=(f,)) for f in (_idle, _rebalances, _quota)]
        for t in others:  # while the bulk is sent: no time of their own
            t.start()
        _bulk(bootstrap)
        for t in others:
            t.join(120)
        assert not failed, failed
        # then the rest side by side: the Python clients' scenarios one after the other
        # (the produce quota _quota set is in place), and the Java clients' three sessions
        # (a JVM each, their own topics, groups and transactional ids), 18 s one after the
        # other, mostly start-up and waits
        others = [
            threading.Thread(target=beside, args=(f,))
            for f in (
                _python_clients,
                *(functools.partial(java_session, mode) for mode in JAVA_MODES),
            )
        ]
        for t in others:
            t.start()
        for t in others:
            t.join(300)
        assert not failed, failed
        assert not any(t.is_alive() for t in others), "a scenario did not end"
        kafka.stop_node(1)  # SIGTERM: a controlled shutdown
        dump.stop()
        shutil.copytree(kafka.log_dirs[0], tmp / "clean")
        yield kafka, path, tmp / "clean"
    finally:
        if dump is not None:
            dump.stop()
        kafka.close()


@pytest.fixture(scope="module")
def stopped(node):
    """(the capture, the log dir after the controlled shutdown)."""
    return node[1], node[2]


def _exchanges(node) -> list:
    # the node's ports given: Kafka 4.4's Java clients open with ApiVersions v5, which
    # kdissect's schemas do not know yet, so it cannot tell their side by the first bytes
    return exchanges_in([str(node[1])], ports=node[0].ports("PLAINTEXT", "CONTROLLER")).exchanges


@pytest.fixture(scope="module")
def traffic(node):
    """(the capture's exchanges as kdissect gives them, Kafka's reading of them)."""
    exchanges = _exchanges(node)
    return exchanges, oracle.kafka_decoded(exchanges)


def test_no_false_finding_on_kafka_4_traffic(node, traffic):
    exchanges, truth = traffic
    checked, false = oracle.check(exchanges, truth)
    print("findings checked per code:", dict(checked))
    assert false == [], false[:10]
    assert oracle.unchecked(exchanges) == set()
    # each code the workload provokes was raised and checked (a slow consumer, an idle
    # one, members joining and leaving both kinds of group, a commit behind, a retry on a
    # muted connection, an old timestamp, a sequence pushed ahead, transactions v2's bumps)
    assert set(oracle.CLIENT_RULES) <= set(checked), checked
    # ... and the rules are no rubber stamps: a finding with its first or its last number
    # changed (a producer id, a partition, a generation, a count, an offset) is false
    state: dict = {}
    for e in exchanges:
        for f in e.findings:
            if f.code in oracle.CLIENT_RULES:
                for wrong in (
                    re.sub(r"\d+", lambda m: str(int(m[0]) + 1), f.detail, count=1),
                    re.sub(r"\d+(?=\D*$)", lambda m: str(int(m[0]) + 1), f.detail),
                ):
                    assert oracle.judge(e, f.code, wrong, exchanges, truth, state), wrong
    # Kafka's classes read every message kdissect read whole: at scale
    whole = [
        m
        for e in exchanges
        for m in (e.request, e.response)
        if m is not None and m.status == "ok" and m.api_key is not None
    ]
    assert len(truth) == len(whole) >= 2 * BULK
    # the cases the rules are about happened: Fetches held to their wait that returned
    # records, ShareFetches, the controlled shutdown
    held = [
        e
        for e in exchanges
        if e.first.api_name == "Fetch"
        and e.facts.records
        and e.latency is not None
        and e.latency >= WAIT_MS / 1000 * 0.9
    ]
    assert len(held) >= 5, len(held)
    assert any(e.first.api_name == "ShareFetch" and e.response is not None for e in exchanges)
    assert checked["controlled_shutdown"] >= 1, checked
    for e in held:
        assert not e.has("slow_response") or e.latency - WAIT_MS / 1000 > oracle.SLOW_S


def test_a_read_committed_consumer_is_behind_its_last_stable_offset_only(traffic):
    """(_read_committed) Its Fetches at the last stable offset, a transaction open after
    it, say no lag; the high watermark (as Kafka's classes read the answers) was past it."""
    exchanges, truth = traffic
    fetches = [
        e
        for e in exchanges
        if e.first.api_name == "Fetch" and e.first.client_id == "kd-rc" and e.response
    ]
    waiting = [
        e
        for e in fetches
        if any(
            p["lastStableOffset"] < p["highWatermark"]
            for t in truth.get(e.response.index, {}).get("responses") or ()
            for p in t.get("partitions") or ()
        )
    ]
    assert len(waiting) >= 3, len(fetches)
    assert not [e for e in fetches if e.has("consumer_lag")]


def _tail(pcap: Path, after: float, out: Path) -> None:
    """The packets of a classic pcap file captured after a time (a capture started then)."""
    data = pcap.read_bytes()
    scale = 1e-9 if data[:4] in (b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1") else 1e-6
    order = "little" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else "big"
    kept, pos = [data[:24]], 24
    while pos + 16 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], order)
        ts = (
            int.from_bytes(data[pos : pos + 4], order)
            + int.from_bytes(data[pos + 4 : pos + 8], order) * scale
        )
        if ts > after:
            kept.append(data[pos : pos + 16 + size])
        pos += 16 + size
    out.write_bytes(b"".join(kept))


def test_a_capture_started_late_claims_no_expected_sequence(node, traffic, tmp_path):
    """The capture cut after the kd-gap producer was given its epoch (InitProducerId):
    what the broker expected of its refused batch is not known, only a floor (the
    accepted batch in the capture); the exact wording, which kdissect gave before, is
    what the oracle calls unprovable."""
    exchanges, _ = traffic
    init = next(
        e
        for e in exchanges
        if e.first.api_name == "InitProducerId"
        and e.request.client_id == "kd-gap"
        and e.response is not None
    )
    cut = tmp_path / "late.pcap"
    _tail(node[1], init.response.ts, cut)
    late = exchanges_in([str(cut)], ports=node[0].ports("PLAINTEXT", "CONTROLLER")).exchanges
    truth = oracle.kafka_decoded(late)
    checked, false = oracle.check(late, truth)
    assert false == [], false[:10]
    gaps = [(e, f.detail) for e in late for f in e.findings if f.code == "producer_sequence_gap"]
    assert (
        len(gaps) == 1
        and "gap[0]: batch 6-6 refused (OUT_OF_ORDER_SEQUENCE_NUMBER); the "
        "broker expected at least 1 (the start of this producer epoch is not in the "
        "capture"
        in gaps[0][1]
    ), gaps
    exact = re.sub(r"at least (\d+) \(.*\)$", r"\1", gaps[0][1])
    assert oracle.judge(gaps[0][0], "producer_sequence_gap", exact, late, truth, {})


def _log(*args: str) -> tuple[int, list[dict], str]:
    res = CliRunner().invoke(main, ["log", *args, "--format", "jsonl"], catch_exceptions=False)
    return (
        res.exit_code,
        [json.loads(x) for x in res.output.splitlines() if x.startswith("{")],
        res.output,
    )


def test_clean_stop_log_dir_has_no_finding(stopped):
    """After a controlled shutdown the log dir is consistent: Kafka 4.x's transactional
    producer (transactions v2) wrote its COMMIT/ABORT markers with the epoch bumped, and
    its producer snapshots hold that epoch, no batch: no producer_state_mismatch."""
    _, log_dir = stopped
    code, objs, out = _log(str(log_dir))
    assert code == 0, out[-2000:]
    found = [(o["file"], f["code"], f["detail"]) for o in objs for f in o.get("findings", [])]
    assert found == [], found[:10]
    # the case happened: a marker of a later epoch than the transaction's batches
    txn = [o for o in objs if o.get("type") == "batch" and "/txn-0/" in o["file"]]
    data = {o["producer_epoch"] for o in txn if not o.get("control")}
    markers = {o["producer_epoch"] for o in txn if o.get("control")}
    assert markers and data and max(markers) > min(data), (data, markers)
    assert list((log_dir / "txn-0").glob("*.snapshot"))


def _positions(segment) -> list[int]:
    data = segment.read_bytes()
    pos, out = 0, []
    while pos + 12 <= len(data):
        out.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return out


def _damage(log_dir) -> dict[str, int]:
    """Each dmg- topic's segment damaged at its batch HIT (the others intact): a CRC-covered
    byte flipped, a garbage length, magic byte 7 (not under the CRC). Returns each topic's
    base offset of the damaged batch."""
    at = {}
    for topic in DAMAGED:
        seg = next((log_dir / f"{topic}-0").glob("*.log"))
        data = bytearray(seg.read_bytes())
        positions = _positions(seg)
        assert len(positions) == BATCHES, (topic, len(positions))
        pos = positions[HIT]
        at[topic] = int.from_bytes(data[pos : pos + 8], "big")
        if topic == "dmg-crc":
            data[pos + 70] ^= 0xFF
        elif topic == "dmg-length":
            data[pos + 8 : pos + 12] = (0x7FFF0000).to_bytes(4, "big")
        else:
            data[pos + 16] = 7
        seg.write_bytes(bytes(data))
    return at


def _kept(log_dir, topic: str) -> int:
    """How many batches Kafka kept of a partition (after its recovery)."""
    return sum(len(_positions(s)) for s in (log_dir / f"{topic}-0").glob("*.log"))


@pytest.fixture(scope="module")
def recovered(node, tmp_path_factory):
    """The node's log dir damaged (and its clean-shutdown marker removed: recovery runs),
    what kdissect said of it, what Kafka 4.4 kept after starting on it, then the log dir
    after a SIGKILL (preallocated indexes, no marker)."""
    import shutil

    kafka, _, _ = node
    log_dir = kafka.log_dirs[0]
    at = _damage(log_dir)
    (log_dir / ".kafka_cleanshutdown").unlink()
    said = _log(str(log_dir))
    copy = tmp_path_factory.mktemp("damaged") / "kafka-logs"
    shutil.copytree(log_dir, copy)
    kafka.start_node(1)
    server_log = kafka.node(1).server_log.read_text(errors="replace")
    kept = {t: _kept(log_dir, t) for t in DAMAGED}
    kafka.stop_node(1, kill=True)
    return at, said, kept, server_log, log_dir


def _said(objs: list[dict], topic: str) -> list[tuple[str, str]]:
    return [
        (f["code"], f["detail"])
        for o in objs
        if f"/{topic}-0/" in o["file"]
        for f in o.get("findings", [])
    ]


def test_damaged_segments_say_what_kafka_recovery_does(recovered):
    at, (code, objs, out), kept, server_log, _ = recovered
    assert code == 0, out[-2000:]
    # a CRC mismatch: recovery truncates the partition at that batch (it did)
    crc = _said(objs, "dmg-crc")
    # (and what the flipped byte did to the record under it)
    assert [c for c, _ in crc][0] == "crc_mismatch", crc
    assert not {c for c, _ in crc} & {"log_bad_batch", "log_size_past_end"}, crc
    assert (
        "Kafka's recovery, at the broker's next start, truncates the partition at this "
        "batch" in crc[0][1]
    )
    assert kept["dmg-crc"] == HIT
    # a garbage length with intact batches after it: no torn write; recovery truncates
    # there (it did); the intact batches after it are read, and index entries naming them
    # are no errors
    length = _said(objs, "dmg-length")
    assert [c for c, _ in length] == ["log_bad_batch"], length
    assert "not a torn write" in length[0][1] and "truncates the partition" in length[0][1]
    assert kept["dmg-length"] == HIT
    read = [
        o
        for o in objs
        if o["type"] == "batch" and "/dmg-length-0/" in o["file"] and "base_offset" in o
    ]
    assert len(read) == BATCHES - 1
    # magic byte 7 with its length and CRC intact: recovery keeps the segment (it did)
    magic = _said(objs, "dmg-magic")
    assert [c for c, _ in magic] == ["log_bad_magic"], magic
    assert "recovery keeps it" in magic[0][1]
    assert kept["dmg-magic"] == BATCHES
    assert [
        o
        for o in objs
        if o["type"] == "batch" and "/dmg-magic-0/" in o["file"] and "base_offset" in o
    ].__len__() == BATCHES - 1
    # the log dir says it was not stopped cleanly; nothing else is claimed
    others = [
        (o["file"], f["code"])
        for o in objs
        for f in o.get("findings", [])
        if not any(f"/{t}-0/" in o["file"] for t in DAMAGED)
    ]
    assert others == [(str(recovered[4] / "meta.properties"), "unclean_shutdown")] or [
        c for _, c in others
    ] == ["unclean_shutdown"], others


def test_after_sigkill_the_unclean_stop_is_said(recovered):
    """A broker killed: no .kafka_cleanshutdown, indexes preallocated to 10 MiB with zero
    tails. Said once, read cheaply, and no error made up."""
    *_, log_dir = recovered
    big = [p for p in log_dir.glob("*/*.index") if p.stat().st_size >= 10 << 20]
    assert big, "no preallocated index after SIGKILL"
    started = time.process_time()
    code, objs, out = _log(str(log_dir))
    took = time.process_time() - started
    assert code == 0
    found = [(o["file"], f["code"]) for o in objs for f in o.get("findings", [])]
    assert "unclean_shutdown" in [c for _, c in found]
    # the magic-7 batch Kafka kept is still there; nothing else is an error
    errors = [(f, c) for f, c in found if c not in ("unclean_shutdown", "log_bad_magic")]
    assert errors == [], errors
    # the zero tails are one node each, not an entry each
    listed = {o["file"]: len(o["content"]) for o in objs if o["type"] == "offset_index"}
    assert all(listed[str(p)] * 8 < p.stat().st_size // 4 for p in big), listed
    assert took < 60


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in (Path(__file__).parent.parent / "captures").glob("*.pcap"))
)
def test_no_false_finding_on_the_repo_captures(name):
    """The oracle over every repo capture: no finding a rule checks is false, and every
    diagnosis raised has a rule or is one of the few listed without."""
    path = Path(__file__).parent.parent / "captures" / f"{name}.pcap"
    exchanges = exchanges_in([str(path)]).exchanges
    truth = oracle.kafka_decoded(exchanges)
    _, false = oracle.check(exchanges, truth)
    assert false == [], false[:10]
    assert oracle.unchecked(exchanges) == set()


def test_a_group_leader_s_sync_group_is_broker_time_a_follower_s_a_wait(node):
    """(_rebalances' classic group) A follower's SyncGroup is held until the leader's
    brings the assignments: its latency is a wait. The leader's waits for no one: its
    latency is the broker's (writing the group's metadata); --stats showed '-' for it."""
    import json

    def synced(flt: str) -> list[int]:
        res = CliRunner().invoke(
            main,
            ["pcap", str(node[1]), "-Y", f"api == SyncGroup and {flt}", "--format", "jsonl"],
            catch_exceptions=False,
        )
        objs = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
        return [len(o["body"]["assignments"]) for o in objs if o["direction"] == "request"]

    leaders, followers = synced("service_time > 0"), synced("service_time == 0")
    assert leaders and all(leaders), leaders
    assert followers and not any(followers), followers
