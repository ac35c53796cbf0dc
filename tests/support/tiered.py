"""Tiered storage for the tests: one Apache Kafka node whose RemoteStorageManager is
Kafka's own LocalTieredStorage (kafka-storage's test jar, fetched by scripts/kafka/fetch:
"remote" segments copied to a local directory) with the default
TopicBasedRemoteLogMetadataManager, which writes a record to ``__remote_log_metadata`` for
every copy (started, finished) and deletion (segments, then the partition).

    kafka, remote = tiered_kafka(tmp)          # not started: advertise a relay first
    kafka.start()
    copied = fill(kafka, remote, "tiered")     # produce, roll segments, wait for copies
    delete_topic(kafka, "tiered")              # the deletion records, until finished
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.apache_kafka import ApacheKafka, tiered_storage_jars

RSM = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
SEGMENT = 1 << 20  # the smallest segment.bytes Kafka 4 accepts
METADATA = "__remote_log_metadata"


def tiered_kafka(directory: Path) -> tuple[ApacheKafka, Path]:
    """A one-node broker with remote storage (not started) and LocalTieredStorage's root."""
    remote = directory / "remote"
    remote.mkdir(parents=True, exist_ok=True)
    kafka = ApacheKafka(
        nodes=1,
        directory=directory / "kafka",
        start=False,
        jars=tiered_storage_jars(),
        extra={
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": RSM,
            "rsm.config.dir": str(remote),
            "rsm.config.delete.on.close": "false",
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
            "remote.log.manager.task.interval.ms": "500",
            "log.retention.check.interval.ms": "500",
            "log.index.interval.bytes": "4096",
        },
    )
    return kafka, remote


def remote_segments(remote: Path) -> list[Path]:
    return sorted(remote.rglob("*.log"))


def fill(
    kafka: ApacheKafka, remote: Path, topic: str, copies: int = 2, timeout: float = 90
) -> list[Path]:
    """A topic with remote storage and a 1 s local retention: incompressible records
    for ``copies`` + 1 segments of 1 MiB, then the remote segments once ``copies`` are
    there (only rolled segments are copied)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap()})
    for f in admin.create_topics(
        [
            NewTopic(
                topic,
                1,
                1,
                config={
                    "remote.storage.enable": "true",
                    "segment.bytes": str(SEGMENT),
                    "local.retention.ms": "1000",
                    "retention.ms": "-1",
                },
            )
        ]
    ).values():
        f.result(30)
    p = Producer(
        {
            "bootstrap.servers": kafka.bootstrap(),
            "linger.ms": 20,
            "compression.type": "lz4",
            "enable.idempotence": True,
        }
    )
    for i in range((copies + 1) * SEGMENT // 1000 + 50):
        p.produce(topic, key=b"k%d" % i, value=os.urandom(500).hex().encode())
        if i % 500 == 0:
            p.poll(0)
    p.flush(60)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = remote_segments(remote)
        if len(found) >= copies:
            return found
        time.sleep(0.5)
    raise RuntimeError(
        f"LocalTieredStorage copied {len(remote_segments(remote))} segments "
        f"in {timeout:.0f} s (wanted {copies}):\n"
        + kafka.node(1).server_log.read_text(errors="replace")[-3000:]
    )


def delete_topic(kafka: ApacheKafka, topic: str, done, timeout: float = 240) -> None:
    """Delete ``topic``; returns once ``done()`` (e.g. the partition's deletion finished
    in ``__remote_log_metadata``)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap()})
    for f in admin.delete_topics([topic]).values():
        f.result(30)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"the remote deletion of {topic} did not finish in {timeout:.0f} s:\n"
        + kafka.node(1).server_log.read_text(errors="replace")[-3000:]
    )
