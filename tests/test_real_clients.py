"""Real clients against real brokers, recorded byte for byte by a relay, then decoded by
kdissect: every message framed and paired, records exactly as produced. Apache Kafka (the
session's node, tests/support/apache_kafka.py) for today's clients; Tansu, which starts in
well under a second and still speaks Kafka 0.8-0.10, for the legacy message formats
Kafka 4 no longer accepts."""

from __future__ import annotations

import time

import pytest

from kdissect.protocol.node import Node
from tests.support.traffic import all_exchanges

pytestmark = pytest.mark.slow  # real clients against a broker

RECORDS = [(f"key-{i}".encode(), f"value-{i} ".encode() * (i + 1)) for i in range(6)]
HEADERS = [("trace", b"abc"), ("n", b"\x00\x01")]


def kafka_python_produce(
    bootstrap: str, topic: str, codec: str | None, api_version=None, headers: bool = False, acks=1
) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    kw = {"api_version": api_version} if api_version else {}
    # no retries: Tansu drops the connection on some legacy formats, and the request
    # bytes, recorded on the way, are what these tests check
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        linger_ms=20,
        acks=acks,
        retries=0,
        request_timeout_ms=4000,
        **kw,
    )
    for k, v in RECORDS:
        p.send(topic, key=k, value=v, partition=0, headers=HEADERS if headers else None)
    try:
        p.flush(timeout=8)
    except KafkaError:
        pass
    try:
        p.close(timeout=2)
    except KafkaError:
        pass


def kafka_python_fetch(bootstrap: str, topic: str, api_version=None, expect=None):
    from kafka import KafkaConsumer, TopicPartition

    kw = {"api_version": api_version} if api_version else {}
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2500, **kw)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)  # not ListOffsets: Tansu's v0 answer to it is malformed
    if expect is None:
        expect = len(RECORDS)
    got = []
    for m in c:
        got.append((m.key, m.value))
        if len(got) >= expect:
            break
    c.close()
    return got


def settle(relay, seconds: float = 0.3):
    time.sleep(seconds)  # let the relay's pumps write the last bytes
    return all_exchanges(relay.snapshot())


def leaf_records(tree: Node) -> list[tuple[bytes | None, bytes | None, list]]:
    """(key, value, headers) of every record or uncompressed message under ``tree``."""
    out = []
    for n in tree.walk():
        if n.ktype == "record":
            hdrs = n.child("headers")
            out.append(
                (
                    n.child("key").value,
                    n.child("value").value,
                    [
                        (h.child("key").value, h.child("value").value)
                        for h in (hdrs.children if hdrs else [])
                    ],
                )
            )
        elif (
            n.ktype.startswith("message_v")
            and n.child("attributes") is not None
            and n.child("attributes").value & 7 == 0
        ):
            out.append((n.child("key").value, n.child("value").value, []))
    return out


def produce_requests(exchanges, topic: str):
    return [
        e
        for e in exchanges
        if e.request.api_key == 0 and topic in {t.value for t in e.request.tree.find("name")}
    ]


def assert_clean(exchanges, allowed=()):
    for e in exchanges:
        assert e.request.problems == [], (e.request.title, e.request.problems)
        if e.response is not None and (e.request.api_key, e.request.api_version) not in allowed:
            assert e.response.problems == [], (e.response.title, e.response.problems)


LEGACY = [((0, 8, 2), 0, 0), ((0, 10, 0), 2, 1)]  # api_version, Produce version, magic


@pytest.mark.parametrize(
    "api_version,produce_version,magic", LEGACY, ids=["kafka-0.8.2", "kafka-0.10.0"]
)
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_legacy_kafka_python(recorded, api_version, produce_version, magic, codec):
    topic = f"legacy-{magic}-{codec}"
    kafka_python_produce(recorded.bootstrap, topic, codec, api_version)
    kafka_python_fetch(recorded.bootstrap, topic, api_version, expect=0)
    ex = settle(recorded)
    produce = produce_requests(ex, topic)
    assert produce and all(e.request.api_version == produce_version for e in produce)
    assert_clean(ex)
    got = [r for e in produce for r in leaf_records(e.request.tree)]
    assert sorted((k, v) for k, v, _ in got) == sorted(RECORDS)
    messages = [
        n for e in produce for n in e.request.tree.walk() if n.ktype.startswith("message_v")
    ]
    assert messages and all(n.child("magic").value == magic for n in messages)
    assert all(n.child("crc").problem is None for n in messages)
    if codec:
        holders = [n for e in produce for n in e.request.tree.walk() if n.buffer is not None]
        assert holders and all(codec in n.note for n in holders)
        if codec == "lz4" and magic == 0:
            # kafka-python reproduces the header checksum bug of Kafka before 0.10
            assert all("pre-0.10 Kafka LZ4 framing" in n.note for n in holders)
        if codec == "snappy":
            assert all("xerial" in n.note for n in holders)
    legacy_fetch = [e for e in ex if e.request.api_key == 1]
    assert legacy_fetch and all(e.request.api_version <= 3 for e in legacy_fetch)


def test_tansu_malformed_list_offsets_v0(recorded):
    """Tansu's ListOffsets v0 response claims more offsets than it sends (kafka-python
    fails on it too): kdissect shows exactly where, without losing the rest."""
    from kafka import KafkaConsumer

    kafka_python_produce(recorded.bootstrap, "lo-v0", None)
    c = KafkaConsumer(
        "lo-v0",
        bootstrap_servers=recorded.bootstrap,
        api_version=(0, 10, 0),
        auto_offset_reset="earliest",
        consumer_timeout_ms=1500,
    )
    try:
        list(c)
    except Exception:
        pass
    c.close()
    ex = settle(recorded)
    lo = [e for e in ex if e.request.api_key == 2 and e.request.api_version == 0 and e.response]
    assert lo
    problems = [p for e in lo for p in e.response.problems]
    assert problems and all("truncated" in reason for _, reason in problems)
    assert all(
        ".old_style_offsets" in path or ".error_code" in path or "partitions" in path
        for path, _ in problems
    )


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.slow
def test_kafka_python_record_batches(apache_recorded, codec):
    topic = f"v2-{codec}"
    kafka_python_produce(apache_recorded.bootstrap, topic, codec, headers=True)
    fetched = kafka_python_fetch(apache_recorded.bootstrap, topic)
    assert sorted(fetched) == sorted(RECORDS)
    ex = settle(apache_recorded)
    assert_clean(ex)
    produced = [r for e in produce_requests(ex, topic) for r in leaf_records(e.request.tree)]
    assert sorted(produced) == sorted((k, v, HEADERS) for k, v in RECORDS)
    fetch = [e for e in ex if e.request.api_key == 1 and e.response is not None]
    from_fetch = [r for e in fetch for r in leaf_records(e.response.tree)]
    assert sorted(set((k, v) for k, v, _ in from_fetch)) == sorted(RECORDS)
    batches = [n for e in fetch for n in e.response.tree.walk() if n.ktype == "record_batch"]
    assert batches and all(b.child("crc").problem is None for b in batches)
    offsets = sorted(
        n.value["offset"] for e in fetch for n in e.response.tree.walk() if n.ktype == "record"
    )
    assert offsets[: len(RECORDS)] == list(range(len(RECORDS)))


@pytest.mark.slow
def test_flipped_byte_gives_crc_problem(apache_recorded):
    from kdissect.protocol import decode_request

    kafka_python_produce(apache_recorded.bootstrap, "crc", "gzip")
    ex = settle(apache_recorded)
    req = produce_requests(ex, "crc")[0].request
    batch = next(n for n in req.tree.walk() if n.ktype == "record_batch")
    data = bytearray(req.data)
    data[batch.end - 3] ^= 0xFF  # inside the compressed records
    msg = decode_request(bytes(data))
    reasons = [r for _, r in msg.problems]
    assert any("CRC32C mismatch" in r for r in reasons)


@pytest.mark.slow
def test_acks_zero_expects_no_response(apache_recorded):
    """Kafka brokers never answer acks=0 (Tansu sometimes does): kdissect expects none."""
    kafka_python_produce(apache_recorded.bootstrap, "acks0", None, acks=0)
    ex = settle(apache_recorded)
    produce = produce_requests(ex, "acks0")
    assert produce and all(e.request.body.child("acks").value == 0 for e in produce)
    assert not any(e.expected for e in produce)
    others = [e for e in ex if e.request.api_key != 0]
    assert others and all(e.expected for e in others)
    assert all(e.response is None for e in produce)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.slow
def test_confluent_kafka_group(apache_recorded, codec):
    from confluent_kafka import Consumer, Producer

    topic = f"ck-{codec}"
    p = Producer(
        {"bootstrap.servers": apache_recorded.bootstrap, "compression.type": codec, "linger.ms": 20}
    )
    for k, v in RECORDS:
        p.produce(topic, key=k, value=v, partition=0, headers=HEADERS)
    assert p.flush(10) == 0
    # Tansu completes a join only after the rebalance timeout (max.poll.interval.ms)
    c = Consumer(
        {
            "bootstrap.servers": apache_recorded.bootstrap,
            "group.id": f"g-{codec}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    c.subscribe([topic])
    got, last, deadline = [], None, time.time() + 25
    while len(got) < len(RECORDS) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.key(), m.value()))
            last = m
    assert sorted(got) == sorted(RECORDS)
    c.commit(message=last, asynchronous=False)
    c.close()
    ex = settle(apache_recorded, 0.5)
    assert_clean(ex)
    produced = [r for e in produce_requests(ex, topic) for r in leaf_records(e.request.tree)]
    assert sorted(produced) == sorted((k, v, HEADERS) for k, v in RECORDS)
    join = [e for e in ex if e.request.api_key == 11]
    subs = [
        n
        for e in join
        for n in e.request.tree.walk()
        if n.note and n.note.startswith("consumer protocol subscription")
    ]
    assert subs and all(topic in s.plain()["topics"] for s in subs)
    sync = [e for e in ex if e.request.api_key == 14 and e.response is not None]
    assignments = [
        n
        for e in sync
        for n in e.response.tree.walk()
        if n.note and n.note.startswith("consumer protocol assignment")
    ]
    assert assignments
    assert any(a["topic"] == topic for n in assignments for a in n.plain()["assigned_partitions"])


@pytest.mark.slow
def test_aiokafka_roundtrip(apache_recorded):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=apache_recorded.bootstrap, compression_type="gzip")
        await p.start()
        for k, v in RECORDS:
            await p.send_and_wait("aio", key=k, value=v, partition=0)
        await p.stop()
        c = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=apache_recorded.bootstrap,
            auto_offset_reset="earliest",
            group_id=None,
        )
        await c.start()
        got = []
        try:
            async with asyncio.timeout(10):
                async for m in c:
                    got.append((m.key, m.value))
                    if len(got) == len(RECORDS):
                        break
        finally:
            await c.stop()
        return got

    assert sorted(asyncio.run(run())) == sorted(RECORDS)
    ex = settle(apache_recorded)
    assert_clean(ex)
    produced = [r for e in produce_requests(ex, "aio") for r in leaf_records(e.request.tree)]
    assert sorted((k, v) for k, v, _ in produced) == sorted(RECORDS)


@pytest.mark.slow
def test_admin_requests(apache_recorded):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=apache_recorded.bootstrap)
    admin.create_topics([NewTopic("admin-made", 3, 1)])
    try:
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "admin-made")])
    except Exception:
        pass  # Tansu answers some admin APIs oddly; the bytes are what we check
    admin.list_topics()
    admin.close()
    ex = settle(apache_recorded)
    for e in ex:
        assert e.request.problems == [], (e.request.title, e.request.problems)
    create = [e for e in ex if e.request.api_key == 19]
    assert create and create[0].response is not None
    names = [
        t.child("name").value
        for t in create[0].response.tree.find("[0]")
        if t.child("name") is not None
    ]
    assert "admin-made" in names


@pytest.mark.slow
def test_transactions_give_control_records(apache_recorded):
    """librdkafka's transactional producer: EndTxn commit/abort, and the Fetch holds the
    COMMIT and ABORT markers the broker wrote."""
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": apache_recorded.bootstrap, "transactional.id": "kd-tx"})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce("tx", key=b"a", value=b"committed", partition=0)
    p.commit_transaction(10)
    p.begin_transaction()
    p.produce("tx", key=b"b", value=b"aborted", partition=0)
    p.flush(10)  # else librdkafka drops it locally and the broker never sees it
    p.abort_transaction(10)
    p.begin_transaction()
    p.produce("tx", key=b"c", value=b"after", partition=0)
    p.commit_transaction(10)
    c = Consumer(
        {
            "bootstrap.servers": apache_recorded.bootstrap,
            "group.id": "g-tx",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 6000,
        }
    )
    c.subscribe(["tx"])
    got, deadline = [], time.time() + 20
    while b"after" not in got and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"committed", b"after"]
    ex = settle(apache_recorded, 0.5)
    assert_clean(ex)
    end_txn = [e.request.body.child("committed").value for e in ex if e.request.api_key == 26]
    assert end_txn == [True, False, True]
    fetched = [e for e in ex if e.request.api_key == 1 and e.response is not None]
    markers = [
        n.note
        for e in fetched
        for n in e.response.tree.walk()
        if n.note and n.note.startswith("control record")
    ]
    assert "control record: COMMIT (v0)" in markers and "control record: ABORT (v0)" in markers
    batches = [n for e in fetched for n in e.response.tree.walk() if n.ktype == "record_batch"]
    assert batches and all("transactional" in n.child("attributes").note for n in batches)
    # read_committed: the Fetch response lists the aborted transaction, so the consumer
    # skips b"aborted" (Tansu lists none)
    assert all(e.request.body.child("isolation_level").value == 1 for e in fetched)
    listed = [
        a
        for e in fetched
        for t in e.response.tree.find("aborted_transactions")
        for a in (t.plain() or [])
    ]
    assert listed and all(a["producer_id"] >= 0 for a in listed)
