"""The Apache Kafka fixtures themselves: every listener answers a real client, the cluster
replicates and survives a stopped node, Kafka's own tools run on the fetched classpath."""

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.apache_kafka import DUMP_LOG, USERS, VERSION, libs

pytestmark = pytest.mark.slow


def client_config(
    kafka, listener: str, mechanism: str = "PLAIN", user: str = "alice", password: str | None = None
) -> dict:
    conf = {"bootstrap.servers": kafka.bootstrap(listener)}
    if listener == "SASL_PLAINTEXT":
        conf.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password or USERS[user],
            }
        )
    if listener == "SSL":
        conf.update({"security.protocol": "SSL", "ssl.ca.location": str(kafka.tls.ca)})
    return conf


def round_trip(conf: dict, topic: str, n: int = 5) -> list[bytes]:
    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, key=b"k")
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return got


@pytest.mark.parametrize(
    "listener,mechanism",
    [
        ("PLAINTEXT", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SSL", None),
    ],
)
def test_every_listener_serves_a_real_client(apache_kafka, listener, mechanism):
    conf = client_config(apache_kafka, listener, mechanism or "PLAIN")
    topic = f"smoke-{listener}-{mechanism}".lower().replace("_", "-")
    assert round_trip(conf, topic) == [b"v%d" % i for i in range(5)]


def test_wrong_password_is_refused(apache_kafka):
    conf = client_config(apache_kafka, "SASL_PLAINTEXT", "SCRAM-SHA-256", password="wrong")
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and "invalid credentials" in errors[0]


def test_dump_log_segments_reads_the_node_log(apache_kafka):
    round_trip(client_config(apache_kafka, "PLAINTEXT"), "dumped", n=2)
    segment = next((apache_kafka.log_dirs[0] / "dumped-0").glob("*.log"))
    out = apache_kafka.run_tool(DUMP_LOG, "--files", str(segment), "--print-data-log").stdout
    assert "payload: v0" in out and "payload: v1" in out


def test_the_release_is_the_pinned_one(apache_kafka):
    jars = {p.name for p in libs().iterdir()}
    assert f"kafka_2.13-{VERSION}.jar" in jars and f"kafka-tools-{VERSION}.jar" in jars


def test_cluster_replicates_and_survives_a_stopped_node(apache_cluster):
    conf = client_config(apache_cluster, "PLAINTEXT")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(30)
    assert round_trip(conf, "replicated") == [b"v%d" % i for i in range(5)]
    apache_cluster.stop_node(2)
    try:
        one = f"127.0.0.1:{apache_cluster.node(1).ports['PLAINTEXT']}"
        assert len(round_trip(conf | {"bootstrap.servers": one}, "replicated-after", n=3)) == 3
    finally:
        apache_cluster.start_node(2)
