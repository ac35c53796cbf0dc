#!/usr/bin/env python3
"""Record the benchmark capture: sustained produce + fetch with every codec
(confluent-kafka, i.e. librdkafka, against Tansu; MTU 1500 so messages span segments).
--mb 180 makes about 150 MB, --mb 1850 about 1.5 GB. As root (it needs a network
namespace, tcpdump and ethtool):

    .venv/bin/python benchmarks/make_bulk_capture.py [OUT.pcap] [--mb 180] [--kafka-python]

--kafka-python: the same traffic from kafka-python speaking Kafka 2.1 (Produce v7,
Fetch v10), which tshark 4.0 decodes completely; it stops early inside librdkafka's
Produce v10 and Fetch v16. For a like-for-like full decode.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import make_captures  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def bulk(target_bytes: int):
    def session(bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer

        noise = os.urandom(1 << 16).hex()
        per_codec = target_bytes // 2 // len(CODECS)  # produce and fetch both count
        for codec in CODECS:
            topic = f"bulk-{codec}"
            p = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "compression.type": codec,
                    "linger.ms": 5,
                    "batch.size": 256 * 1024,
                    "queue.buffering.max.kbytes": 256 * 1024,
                }
            )
            sent, i = 0, 0
            while sent < per_codec:
                # half random hex: codecs get something to do without shrinking it all
                value = (
                    b'{"order":%d,"sku":"item-%d","blob":"' % (i, i % 977)
                    + noise[(i * 37) % 60000 : (i * 37) % 60000 + 180].encode()
                    + b'","pad":"'
                    + b"x" * 180
                    + b'"}'
                )
                while True:
                    try:
                        p.produce(
                            topic,
                            key=b"k%d" % (i % 1000),
                            value=value,
                            partition=i % 4,
                            headers=[("i", str(i).encode())],
                        )
                        break
                    except BufferError:
                        p.poll(0.05)
                sent += len(value) // (1 if codec == "none" else 2)
                i += 1
            p.flush(120)
            c = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"bench-{codec}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 6000,
                    "max.poll.interval.ms": 6000,
                    "fetch.max.bytes": 4 * 1024 * 1024,
                }
            )
            c.subscribe([topic])
            got, deadline = 0, time.time() + 180
            while got < i and time.time() < deadline:
                for m in c.consume(1000, 1.0):
                    if not m.error():
                        got += 1
            c.close()
            print(f"{topic}: {i} records produced, {got} fetched", flush=True)

    return session


def bulk_kafka_python(target_bytes: int):
    def session(bootstrap: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        noise = os.urandom(1 << 16).hex()
        per_codec = target_bytes // 2 // len(CODECS)
        for codec in CODECS:
            topic = f"bulk-{codec}"
            p = KafkaProducer(
                bootstrap_servers=bootstrap,
                api_version=(2, 1, 0),
                compression_type=None if codec == "none" else codec,
                linger_ms=5,
                batch_size=256 * 1024,
                enable_idempotence=False,
            )
            sent, i = 0, 0
            while sent < per_codec:
                value = (
                    b'{"order":%d,"sku":"item-%d","blob":"' % (i, i % 977)
                    + noise[(i * 37) % 60000 : (i * 37) % 60000 + 180].encode()
                    + b'","pad":"'
                    + b"x" * 180
                    + b'"}'
                )
                last = p.send(
                    topic,
                    key=b"k%d" % (i % 1000),
                    value=value,
                    partition=0,
                    headers=[("i", str(i).encode())],
                )
                sent += len(value) // (1 if codec == "none" else 2)
                i += 1
            p.flush(120)
            last.get(10)  # raises if the broker refused the records
            p.close()
            c = KafkaConsumer(
                bootstrap_servers=bootstrap,
                api_version=(2, 1, 0),
                consumer_timeout_ms=3000,
                fetch_max_bytes=4 * 1024 * 1024,
            )
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got = sum(1 for _ in c)
            c.close()
            print(f"{topic}: {i} records produced, {got} fetched", flush=True)

    return session


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=str(ROOT / "benchmarks" / "data" / "bulk.pcap"))
    ap.add_argument("--mb", type=int, default=180)
    ap.add_argument(
        "--kafka-python",
        action="store_true",
        help="kafka-python speaking Kafka 2.1 (tshark decodes every field)",
    )
    args = ap.parse_args()
    make_captures.in_namespace()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    session = (bulk_kafka_python if args.kafka_python else bulk)(args.mb * 1024 * 1024)
    make_captures.record("bulk", session, mtu=1500, out=out)


if __name__ == "__main__":
    main()
