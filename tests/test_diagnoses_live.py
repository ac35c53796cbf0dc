"""Each Kafka-level diagnosis made to happen by real clients against the real Apache Kafka
node (the session's ``apache_kafka``), captured by tcpdump and read by kdissect. One
capture holds every scenario (each client has its own client id); the tests read it.
The repo captures cover the rest on real traffic (tests/test_diagnoses.py): epoch bumps
(kafka-java-transactions), leadership storms (kafka-kraft-cluster)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from kdissect.sources.pcap import exchanges_in
from tests.support.capture import Tcpdump
from tests.support.kafka_scenarios import create_topic

LAG_RECORDS = 60
SKEW_MS = 10 * 60 * 1000  # the records' clock 10 minutes ahead


def _old_client(bootstrap: str) -> None:
    """kafka-python told the broker is 0.10.0 (Produce v2) and 0.8.2 (Metadata v0 without
    asking ApiVersions, which 0.8.2 did not have; Produce v0): Kafka 4.0 removed both
    Produce versions, and the broker closes the connection."""
    from kafka import KafkaProducer

    for version in ((0, 10, 0), (0, 8, 2)):
        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            api_version=version,
            client_id="kd-old",
            max_block_ms=4000,
            request_timeout_ms=3000,
            retries=0,
        )
        try:
            p.send("kd-old", b"v").get(timeout=5)
        except Exception:
            pass  # refused, as a 4.x broker does
        finally:
            p.close(timeout=2)


def _skewed(bootstrap: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "kd-skew"})
    p.produce("kd-skew", value=b"from the future", timestamp=int(time.time() * 1000) + SKEW_MS)
    assert p.flush(30) == 0


def _lagging(bootstrap: str) -> int:
    """librdkafka fills a topic, a batch per record; kafka-python reads it 1 KiB per
    fetch (a few batches each)."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(LAG_RECORDS):
        p.produce("kd-lag", value=b"record %04d " % i + b"x" * 40, partition=0)
        p.flush(10)
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="kd-lag",
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
        consumer_timeout_ms=5000,
        enable_auto_commit=False,
    )
    tp = TopicPartition("kd-lag", 0)
    c.assign([tp])
    c.seek(tp, 0)
    got = 0
    for _ in c:
        got += 1
        if got == LAG_RECORDS:
            break
    c.close()
    return got


def _slow(bootstrap: str, pid: int) -> None:
    """A broker that stops answering for 1.5 s (SIGSTOP; the kernel still accepts the
    connection and takes the request)."""
    from kafka import KafkaAdminClient

    done = threading.Event()

    def ask():
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, client_id="kd-slow", request_timeout_ms=10000
        )
        admin.list_topics()
        admin.close()
        done.set()

    os.kill(pid, signal.SIGSTOP)
    try:
        threading.Thread(target=ask, daemon=True).start()
        time.sleep(1.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert done.wait(30)


@pytest.fixture(scope="module")
def diagnosed(apache_kafka, tmp_path_factory):
    """client id -> the exchanges of its connections (by stream), from one capture."""
    bootstrap = apache_kafka.bootstrap()
    create_topic(bootstrap, "kd-lag")
    create_topic(bootstrap, "kd-skew")
    path = tmp_path_factory.mktemp("diagnoses") / "live.pcap"
    with Tcpdump(path, apache_kafka.ports("PLAINTEXT")) as dump:
        _old_client(bootstrap)
        _skewed(bootstrap)
        assert _lagging(bootstrap) == LAG_RECORDS
        _slow(bootstrap, apache_kafka.node(1).proc.pid)
        dump.stop()
    return by_client(path)


def by_client(path) -> dict[str, list]:
    """client id -> the exchanges of its connections (by stream) in a capture."""
    exchanges = exchanges_in([str(path)]).exchanges
    owner = {
        e.stream: e.request.client_id
        for e in exchanges
        if e.request is not None and e.request.client_id
    }
    found: dict[str, list] = {}
    for e in exchanges:
        found.setdefault(owner.get(e.stream, ""), []).append(e)
    return found


def _found(exchanges, code: str) -> list:
    return [(e, f) for e in exchanges for f in e.findings if f.code == code]


def test_removed_version_and_no_api_versions(diagnosed):
    old = diagnosed["kd-old"]
    removed = _found(old, "removed_version")
    assert removed and all(e.request.api_version <= 2 for e, _ in removed)
    assert any(
        f.detail == "Produce v2: Kafka 4.0 no longer accepts it (KIP-896)" for _, f in removed
    )
    opened = _found(old, "no_api_versions")
    assert opened and all(e.request.offset == 4 and e.request.api_key != 18 for e, _ in opened)
    # clients that ask first are not flagged
    for client in ("kd-skew", "kd-lag", "kd-slow"):
        assert not _found(diagnosed[client], "no_api_versions"), client
        assert not _found(diagnosed[client], "removed_version"), client


def test_clock_skew(diagnosed):
    skew = _found(diagnosed["kd-skew"], "clock_skew")
    assert len(skew) == 1
    seconds = int(skew[0][1].detail.split(" stamped ")[1].split(" s ")[0])
    assert abs(seconds - SKEW_MS / 1000) < 30 and "ahead of the capture clock" in skew[0][1].detail
    others = [c for c in diagnosed if c != "kd-skew"]
    assert not any(_found(diagnosed[c], "clock_skew") for c in others)


def test_consumer_lag(diagnosed):
    lag = _found(diagnosed["kd-lag"], "consumer_lag")
    assert len(lag) >= 3
    behind = [int(f.detail.split("kd-lag[0] ")[1].split(" behind")[0]) for _, f in lag]
    assert behind == sorted(behind, reverse=True) and behind[0] < LAG_RECORDS
    # the last fetches that caught up say nothing
    fetches = [e for e in diagnosed["kd-lag"] if e.first.api_key == 1]
    assert not fetches[-1].has("consumer_lag")


def test_slow_response(diagnosed):
    slow = _found(diagnosed["kd-slow"], "slow_response")
    assert slow and all(e.latency > 1.0 for e, _ in slow)
    assert not any(_found(diagnosed[c], "slow_response") for c in ("kd-skew", "kd-lag"))
