"""Tiered storage for the tests: one Apache Kafka node whose RemoteStorageManager is
Kafka's own LocalTieredStorage (kafka-storage's test jar: "remote" segments copied to a
local directory) with the default TopicBasedRemoteLogMetadataManager, which writes a
record to ``__remote_log_metadata`` for every copy (started, finished) and deletion.

    kafka, remote = tiered_kafka(tmp)          # started; remote: LocalTieredStorage's root
    copied = fill(kafka, remote, "tiered")     # produce, roll segments, wait for copies
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.apache_kafka import ApacheKafka, tiered_storage_jar

RSM = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
SEGMENT = 1 << 20          # the smallest segment.bytes Kafka 4 accepts


def tiered_kafka(directory: Path) -> tuple[ApacheKafka, Path]:
    remote = directory / "remote"
    remote.mkdir(parents=True, exist_ok=True)
    kafka = ApacheKafka(nodes=1, directory=directory / "kafka", jars=(tiered_storage_jar(),),
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
    })
    return kafka, remote


def remote_segments(remote: Path) -> list[Path]:
    return sorted(remote.rglob("*.log"))


def fill(kafka: ApacheKafka, remote: Path, topic: str, copies: int = 2,
         timeout: float = 90) -> list[Path]:
    """A topic with remote storage and tiny local retention: records enough for a few
    1 MiB segments, then the remote segments once ``copies`` of them are there."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap()})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": str(SEGMENT),
            "local.retention.ms": "1000", "retention.ms": "-1"})]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": kafka.bootstrap(), "linger.ms": 20,
                  "compression.type": "lz4", "enable.idempotence": True})
    value = bytes(range(256)) * 4                    # 1 KiB that lz4 does not shrink much
    for i in range((copies + 1) * SEGMENT // 900):
        p.produce(topic, key=b"k%d" % i, value=value[i % 256:] + b"%d" % i)
        if i % 500 == 0:
            p.poll(0)
    p.flush(60)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = remote_segments(remote)
        if len(found) >= copies:
            return found
        time.sleep(0.5)
    raise RuntimeError(f"LocalTieredStorage copied {len(remote_segments(remote))} segments "
                       f"in {timeout:.0f} s (wanted {copies}):\n"
                       + kafka.node(1).server_log.read_text(errors="replace")[-3000:])
