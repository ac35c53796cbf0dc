"""The client sessions recorded in captures/ (by scripts/make_captures.py), and the
records each one produces, so tests can check the decoded capture against them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from importlib import resources

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def records(topic: str, n: int = 4, size: int = 0) -> list[tuple[bytes, bytes]]:
    """Deterministic keys and values; ``size`` pads values to make big messages."""
    out = []
    for i in range(n):
        value = f"{topic} value {i} ".encode()
        if size:
            value = (value * (size // len(value) + 1))[:size]
        out.append((f"{topic}-key-{i}".encode(), value))
    return out


def kafka_python_codecs(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    for codec in CODECS:
        topic = f"kp-{codec or 'none'}"
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=10)
        for k, v in records(topic):
            p.send(
                topic, key=k, value=v, partition=0, headers=[("codec", (codec or "none").encode())]
            )
        p.flush(10)
        p.close()
        c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1500)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        for i, _ in enumerate(c):
            if i == 3:
                break
        c.close()


def confluent_group(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer

    topic = "ck-group"
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 10})
    for k, v in records(topic):
        p.produce(topic, key=k, value=v, partition=0)
    p.flush(10)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kdissect-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    c.subscribe([topic])
    got, last, deadline = 0, None, time.time() + 20
    while got < 4 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got, last = got + 1, m
    if last is not None:
        c.commit(message=last, asynchronous=False)
    c.close()


def aiokafka_session(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
        await p.start()
        for k, v in records("aio"):
            await p.send_and_wait("aio", key=k, value=v, partition=0)
        await p.stop()
        c = AIOKafkaConsumer("aio", bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await c.start()
        try:
            async with asyncio.timeout(8):
                n = 0
                async for _ in c:
                    n += 1
                    if n == 4:
                        break
        finally:
            await c.stop()

    asyncio.run(run())


def kcat_env() -> dict:
    """The environment for Debian's kcat with the confluent-kafka wheel's librdkafka
    (Debian's librdkafka 2.0.2 cannot read Tansu's ApiVersions v3 answer)."""
    libdir = resources.files("confluent_kafka").joinpath("../confluent_kafka.libs")
    lib = next(str(p) for p in libdir.iterdir() if p.name.startswith("librdkafka"))
    return {**os.environ, "LD_PRELOAD": lib}


def kcat_session(bootstrap: str) -> None:
    """Debian's kcat (see kcat_env)."""
    env = kcat_env()
    lines = b"".join(k + b":" + v + b"\n" for k, v in records("kcat"))
    subprocess.run(
        ["kcat", "-b", bootstrap, "-t", "kcat", "-p", "0", "-K:", "-P"],
        input=lines,
        env=env,
        check=True,
        timeout=30,
    )
    subprocess.run(
        ["kcat", "-b", bootstrap, "-t", "kcat", "-p", "0", "-C", "-o", "beginning", "-e", "-q"],
        env=env,
        check=True,
        timeout=30,
        capture_output=True,
    )


def admin_session(bootstrap: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("admin-made", 3, 1)])
    try:
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "admin-made")])
    except Exception:
        pass
    admin.list_topics()
    try:
        admin.list_consumer_groups()
    except Exception:
        pass
    admin.delete_topics(["admin-made"])
    admin.close()


def acks0_session(bootstrap: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=0, linger_ms=10)
    for k, v in records("acks0"):
        p.send("acks0", key=k, value=v, partition=0)
    p.flush(10)
    time.sleep(0.3)
    p.close()


def legacy(api_version):
    def session(bootstrap: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.errors import KafkaError

        topic = f"legacy-{api_version[0]}-{api_version[1]}-{api_version[2]}"
        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            api_version=api_version,
            compression_type="gzip",
            linger_ms=10,
            retries=0,
            request_timeout_ms=3000,
        )
        for k, v in records(topic):
            p.send(topic, key=k, value=v, partition=0)
        try:
            p.flush(6)
            p.close(timeout=2)
        except KafkaError:
            pass
        c = KafkaConsumer(
            bootstrap_servers=bootstrap, api_version=api_version, consumer_timeout_ms=1000
        )
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        list(c)
        c.close()

    return session


def big_messages(bootstrap: str) -> None:
    """Messages of tens of KB: with a 1500-byte MTU each spans many TCP segments."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, max_request_size=1 << 22)
    for k, v in records("big", n=3, size=40000):
        p.send("big", key=k, value=v, partition=0)
    p.flush(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1500)
    tp = TopicPartition("big", 0)
    c.assign([tp])
    c.seek(tp, 0)
    for i, _ in enumerate(c):
        if i == 2:
            break
    c.close()


SASL_USER, SASL_PASSWORD = "alice", "s3cret-pass"


def sasl_scram(bootstrap: str) -> None:
    """librdkafka: SaslHandshake v1 then SaslAuthenticate carrying SCRAM-SHA-256."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": SASL_USER,
            "sasl.password": SASL_PASSWORD,
        }
    )
    for k, v in records("sasl"):
        p.produce("sasl", key=k, value=v, partition=0)
    p.flush(1.5)  # Tansu drops the connection after authenticating: keep it short


def sasl_v0_raw(bootstrap: str) -> None:
    """kafka-python speaking Kafka 0.10.2: SaslHandshake v0, then SCRAM tokens sent raw
    (size-prefixed, no Kafka header)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    try:
        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            api_version=(0, 10, 2),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=SASL_USER,
            sasl_plain_password=SASL_PASSWORD,
            retries=0,
            request_timeout_ms=3000,
            max_block_ms=4000,
        )
        p.send("sasl0", value=b"v", partition=0).get(timeout=4)
        p.close(timeout=2)
    except KafkaError:
        pass  # what Tansu makes of the raw tokens is what the capture shows


# capture name -> (session, MTU of the loopback while capturing, what it shows[, needs
# an authenticating broker])
SCENARIOS = {
    "kafka-python-codecs": (
        kafka_python_codecs,
        None,
        "kafka-python produce + fetch with each codec (none, gzip, "
        "snappy, lz4, zstd), record headers",
    ),
    "confluent-group": (
        confluent_group,
        None,
        "confluent-kafka (librdkafka) lz4 produce, consumer group "
        "(FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit)",
    ),
    "aiokafka": (aiokafka_session, None, "aiokafka gzip produce and consume"),
    "kcat": (kcat_session, None, "kcat produce and consume"),
    "admin": (
        admin_session,
        None,
        "kafka-python admin: CreateTopics, DescribeConfigs, ListGroups, DeleteTopics",
    ),
    "acks0": (acks0_session, None, "Produce with acks=0 (no response expected)"),
    "legacy-0.8.2": (
        legacy((0, 8, 2)),
        None,
        "kafka-python speaking Kafka 0.8.2: Produce v0 with gzip MessageSet v0, "
        "Metadata v0, Fetch v0 (Tansu rejects the produce)",
    ),
    "legacy-0.10.0": (
        legacy((0, 10, 0)),
        None,
        "kafka-python speaking Kafka 0.10.0: Produce v2 with gzip MessageSet "
        "v1, Metadata v1, Fetch v2",
    ),
    "mtu1500": (
        big_messages,
        1500,
        "40 KB values over a 1500-byte MTU: messages span dozens of segments",
    ),
    "sasl-scram": (
        sasl_scram,
        None,
        "SASL/SCRAM-SHA-256 with SaslHandshake v1 and "
        "SaslAuthenticate (librdkafka); Tansu closes each "
        "connection once authenticated",
        True,
    ),
    "sasl-v0": (
        sasl_v0_raw,
        None,
        "SaslHandshake v0 followed by raw SCRAM tokens (kafka-python speaking Kafka 0.10.2)",
        True,
    ),
}
