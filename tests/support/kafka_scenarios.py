"""Sessions against Apache Kafka (tests.support.apache_kafka) that the captures under
captures/ record (scripts/make_kafka_captures.py) and the tests replay live."""

from __future__ import annotations

import re
from pathlib import Path
import time

from tests.support.apache_kafka import ApacheKafka


def produce(bootstrap: str, topic: str, n: int, prefix: str = "v", **conf) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 3), value=b"%s%d" % (prefix.encode(), i))
    assert p.flush(60) == 0


def create_topic(bootstrap: str, topic: str, partitions: int = 1, replicas: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(30)


def quorum_leader(kafka: ApacheKafka) -> int:
    """The KRaft quorum's leader, as Kafka's own kafka-metadata-quorum tool reports it."""
    out = kafka.run_tool(
        "org.apache.kafka.tools.MetadataQuorumCommand",
        "--bootstrap-controller",
        kafka.bootstrap("CONTROLLER"),
        "describe",
        "--status",
    ).stdout
    return int(re.search(r"LeaderId:\s*(\d+)", out)[1])


def kraft_cluster(kafka: ApacheKafka) -> int:
    """Replication and the KRaft quorum at work: a topic with three replicas filled with
    acks=all (follower Fetch), the quorum leader stopped (EndQuorumEpoch, Vote,
    BeginQuorumEpoch, a new leader's Fetch of __cluster_metadata) and started again
    (BrokerRegistration, catching up, AlterPartition to rejoin the ISR). Returns the node
    that was stopped."""
    bootstrap = kafka.bootstrap()
    create_topic(bootstrap, "replicated-kraft", 1, 3)
    produce(bootstrap, "replicated-kraft", 20)
    leader = quorum_leader(kafka)
    kafka.stop_node(leader)
    time.sleep(2)
    others = ",".join(
        f"127.0.0.1:{n.ports['PLAINTEXT']}" for n in kafka.nodes if n.node_id != leader
    )
    produce(others, "replicated-kraft", 10, prefix="w")
    kafka.start_node(leader)
    produce(bootstrap, "replicated-kraft", 10, prefix="x")
    in_sync(bootstrap, "replicated-kraft", leader)  # (AlterPartition)
    return leader


def in_sync(bootstrap: str, topic: str, node: int, timeout: float = 90) -> None:
    """Wait until ``node`` is back in the ISR of every partition of ``topic`` (a restarted
    follower catches up and rejoins: how long that takes is the machine's business)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        d = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
        if all(node in {n.id for n in p.isr} for p in d.partitions):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"node {node} is not back in the ISR of {topic}")
        time.sleep(0.2)


# A cluster whose quorum snapshots its metadata often and deletes the log behind the
# snapshots at once (segments of a few KiB, a second of retention): a node that was away
# while that happened finds its offset gone and must fetch a snapshot (FetchSnapshot).
SNAPSHOTTING = {
    "metadata.log.max.record.bytes.between.snapshots": "2048",
    "metadata.log.max.snapshot.interval.ms": "500",
    "internal.metadata.log.segment.bytes": "4096",
    "metadata.log.segment.ms": "500",
    "metadata.max.retention.ms": "1000",
    "metadata.max.retention.bytes": "4096",
    "internal.metadata.delete.delay.millis": "0",
}


def _metadata_offsets(log_dir) -> tuple[int, int]:
    """(first offset, next offset) of a node's __cluster_metadata log on disk (from the
    segments' names and kdissect's reading of the last one)."""
    from kdissect.protocol import Options
    from kdissect.sources.logunits import walk

    segments = sorted((log_dir / "__cluster_metadata-0").glob("*.log"))
    if not segments:
        return 0, 0
    nxt = int(segments[-1].name.split(".")[0])
    for item in walk([str(segments[-1])], Options(), values=True):
        if item.values is not None:
            nxt = item.values[0]["base_offset"] + item.values[0]["last_offset_delta"] + 1
        elif item.tree is not None and item.tree.child("base_offset") is not None:
            last = item.tree.child("last_offset_delta")
            nxt = item.tree.child("base_offset").value + (last.value if last else 0) + 1
    return int(segments[0].name.split(".")[0]), nxt


def kraft_snapshot_fetch(kafka: ApacheKafka, away: int = 3) -> tuple[int, int]:
    """Node ``away`` (a voter) stopped; topics created and deleted until the other nodes
    have snapshotted and deleted the metadata log it ends in (SNAPSHOTTING); node
    ``away`` started again: its Fetch of __cluster_metadata is told to fetch a snapshot,
    and FetchSnapshot brings it. Returns (the log end node ``away`` had, the offset of
    the snapshot it then holds)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    kafka.stop_node(away)
    had = _metadata_offsets(kafka.node(away).log_dir)[1]
    others = [n for n in kafka.nodes if n.node_id != away]
    admin = AdminClient(
        {"bootstrap.servers": ",".join(f"127.0.0.1:{n.ports['PLAINTEXT']}" for n in others)}
    )
    deadline, i = time.monotonic() + 180, 0
    while min(_metadata_offsets(n.log_dir)[0] for n in others) <= had:
        if time.monotonic() > deadline:
            raise AssertionError("the quorum did not delete its old metadata log in time")
        names = [f"churn-{i}-{j}" for j in range(5)]
        for f in admin.create_topics([NewTopic(n, 1, 2) for n in names]).values():
            f.result(30)
        for f in admin.delete_topics(names).values():
            f.result(30)
        i += 1
        time.sleep(0.5)
    kafka.start_node(away)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = [
            int(p.name.split("-")[0])
            for p in (kafka.node(away).log_dir / "__cluster_metadata-0").glob("*.checkpoint")
        ]
        if got and max(got) > had:
            time.sleep(2)  # its Fetch after the snapshot
            return had, max(got)
        time.sleep(0.5)
    raise AssertionError(f"node {away} holds no snapshot past offset {had}")


def java_session(
    mode: str, bootstrap: str, jars: str | None = None, ca: Path | None = None
) -> list[str]:
    """tests/support/java/KafkaScenarios.java in MODE: the values it read. ``jars``: another
    classpath than the pinned release's (apache_kafka.previous_clients_classpath); ``ca``:
    speak TLS, trusting this PEM CA."""
    import subprocess
    from pathlib import Path
    from tests.support.apache_kafka import classpath
    from tests.support.javac import java_command

    source = Path(__file__).parent / "java" / "KafkaScenarios.java"
    out = subprocess.run(
        [
            *java_command(
                source,
                jars or classpath(),
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                *([f"-Dkd.truststore={ca}"] if ca else []),
            ),
            mode,
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    if out.returncode:
        raise RuntimeError(f"KafkaScenarios {mode} failed:\n{out.stderr[-3000:]}")
    return out.stdout.split()


def sasl_logins(kafka: ApacheKafka) -> dict[str, bool]:
    """librdkafka logging in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, once with the right
    password and once with a wrong one: mechanism -> whether each attempt got metadata."""
    from confluent_kafka.admin import AdminClient
    from tests.support.apache_kafka import USERS

    result = {}
    for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for good in (True, False):
            errors: list[str] = []
            admin = AdminClient(
                {
                    "bootstrap.servers": kafka.bootstrap("SASL_PLAINTEXT"),
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": mech,
                    "sasl.username": "alice",
                    "sasl.password": USERS["alice"] if good else "nope",
                    "client.id": f"kd-{mech.lower()}-{'ok' if good else 'bad'}",
                    "reconnect.backoff.ms": 5000,
                    "error_cb": lambda e: errors.append(str(e)),
                }
            )
            try:
                admin.list_topics(timeout=8)
                result[f"{mech} {'good' if good else 'bad'}"] = True
            except Exception:
                result[f"{mech} {'good' if good else 'bad'}"] = False
            del admin
    return result


def tls_session(kafka: ApacheKafka, keylog: Path) -> list[bytes]:
    """kafka-python over the SSL listener with Python's ssl module writing the session
    keys (SSLKEYLOGFILE format) to ``keylog``: produce and consume three records."""
    import ssl
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    context = ssl.create_default_context(cafile=str(kafka.tls.ca))
    context.keylog_filename = str(keylog)
    conf = {
        "bootstrap_servers": kafka.bootstrap("SSL"),
        "security_protocol": "SSL",
        "ssl_context": context,
    }
    p = KafkaProducer(**conf, client_id="kd-tls")
    for i in range(3):
        p.send("tls", key=b"k", value=b"secret %d" % i, partition=0)
    p.flush(30)
    p.close()
    c = KafkaConsumer(**conf, client_id="kd-tls-reader", consumer_timeout_ms=5000)
    tp = TopicPartition("tls", 0)
    c.assign([tp])
    c.seek(tp, 0)
    got = [m.value for m in c][:3]
    c.close()
    return got


def franz_tls_session(kafka: ApacheKafka, keylog: Path, records: int = 5) -> list[str]:
    """franz-go (tests/support/go/franztls, built with the Go toolchain; modules from the
    Go module proxy) over the SSL listener, Go's crypto/tls writing the session keys to
    ``keylog``: produce ``records`` records, read them back in a consumer group."""
    import os
    import subprocess

    source = Path(__file__).parent / "go" / "franztls"
    out = subprocess.run(
        [
            "go",
            "run",
            ".",
            kafka.bootstrap("SSL"),
            str(kafka.tls.ca),
            str(keylog),
            "franz-tls",
            str(records),
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    if out.returncode:
        raise RuntimeError(f"franz-go failed:\n{out.stderr[-3000:]}")
    return out.stdout.splitlines()


def java_tls_session(kafka: ApacheKafka, pcap: Path, keylog: Path) -> list[str]:
    """Java 4.4 clients (KafkaScenarios consumer-group) over TLS through `kdissect proxy`
    with --tls-cert and --upstream-tls to the SSL listener: Java cannot write a key log,
    the proxy's --keylog holds the secrets of both legs. tcpdump records only the
    client<->proxy leg (the Java client's own TLS, on two ports that are not 9092: the
    bootstrap listener and the one standing for node 1) into ``pcap``."""
    import subprocess
    import sys
    from tests.support.broker import free_port
    from tests.support.capture import Tcpdump

    tls = kafka.tls
    assert tls is not None
    listen, base = free_port(), free_port() - 1  # node 1 at base + 1
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kdissect",
            "proxy",
            "--upstream",
            kafka.bootstrap("SSL"),
            "--listen",
            f"127.0.0.1:{listen}",
            "--broker-ports",
            str(base),
            "--upstream-tls",
            "--ca-file",
            str(tls.ca),
            "--tls-cert",
            str(tls.ca.parent / "server.pem"),
            "--tls-key",
            str(tls.ca.parent / "server.key"),
            "--keylog",
            str(keylog),
            "--no-tui",
            "--format",
            "jsonl",
        ],
        stdout=subprocess.DEVNULL,
        text=True,  # its notes on stderr, as they come
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        import socket

        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        with Tcpdump(pcap, [listen, base + 1]):
            got = java_session("consumer-group", f"127.0.0.1:{listen}", ca=tls.ca)
    finally:
        proxy.terminate()
        try:
            proxy.wait(10)
        except subprocess.TimeoutExpired:
            proxy.kill()
    # keep the secrets of the captured leg only: the ClientHellos' randoms in the capture
    randoms = set(
        subprocess.run(
            [
                "tshark",
                "-r",
                str(pcap),
                "-Y",
                "tls.handshake.type==1",
                "-T",
                "fields",
                "-e",
                "tls.handshake.random",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    )
    lines = keylog.read_text().splitlines()
    keylog.write_text(
        "".join(
            f"{line}\n"
            for line in lines
            if line.startswith("#") or (len(line.split()) == 3 and line.split()[1] in randoms)
        )
    )
    return got


def broker_killed(
    kafka: ApacheKafka,
    victim: int = 2,
    bootstrap: str | None = None,
    topic: str = "under-load",
    kill: bool = True,
) -> tuple[int, int]:
    """librdkafka producing acks=all to three partitions with three replicas while node
    ``victim`` is killed (SIGKILL; with kill=False stopped: a controlled shutdown) and
    started again: metadata refreshes, leaders moving. Clients use ``bootstrap`` (the
    cluster's own addresses by default; a proxy's). Returns (records acknowledged, of
    those read back with the same value)."""
    import threading
    from confluent_kafka import Consumer, Producer

    bootstrap = bootstrap or kafka.bootstrap()
    create_topic(bootstrap, topic, 3, 3)
    acked = []
    stop = threading.Event()

    def load():
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 20,
                "enable.idempotence": True,
                "client.id": "kd-under-load",
            }
        )
        i = 0
        while not stop.is_set():
            p.produce(
                topic,
                value=b"n%d" % i,
                on_delivery=lambda err, msg: err is None and acked.append(msg.value()),
            )
            p.poll(0.01)
            i += 1
            time.sleep(0.01)
        assert p.flush(60) == 0

    t = threading.Thread(target=load)
    t.start()
    time.sleep(2)
    kafka.stop_node(victim, kill=kill)
    time.sleep(5)  # fenced after broker.session.timeout.ms (3 s)
    kafka.start_node(victim)
    time.sleep(2)
    stop.set()
    t.join(90)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kd-{topic}",
            "auto.offset.reset": "earliest",
            "client.id": "kd-under-load-reader",
        }
    )
    c.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 40
    while len(seen) < len(acked) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.add(m.value())
    c.close()
    return len(set(acked)), len(seen & set(acked))


def kafkajs_session(bootstrap: str, topic: str = "kafkajs") -> list[str]:
    import os
    import subprocess

    node_dir = Path(os.environ.get("KDISSECT_CACHE", Path.home() / ".cache" / "kdissect")) / "node"
    script = Path(__file__).parent / "js" / "kafkajs-session.js"
    out = subprocess.run(
        ["node", str(script), bootstrap, topic],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(node_dir / "node_modules")},
    )
    if out.returncode:
        raise RuntimeError(f"kafkajs failed: {out.stderr[-2000:]}")
    return out.stdout.split()


def python_clients(kafka: ApacheKafka) -> None:
    """The sessions of the Tansu captures (tests/support/scenarios.py), now against Apache
    Kafka: kafka-python with every codec, a librdkafka consumer group, aiokafka, kcat; and
    kafkajs."""
    from tests.support import scenarios

    bootstrap = kafka.bootstrap()
    for topic in ("ck-group", "aio", "kcat", "kafkajs"):
        create_topic(bootstrap, topic)
    scenarios.kafka_python_codecs(bootstrap)
    scenarios.confluent_group(bootstrap)
    scenarios.aiokafka_session(bootstrap)
    scenarios.kcat_session(bootstrap)
    assert kafkajs_session(bootstrap) == ["js0", "js1", "js2"]


# The 4.4 cluster capture's own cluster: followers hold their empty Fetch 5 s (not 0.5 s), so
# the replication between the sessions stays a few KB (a Fetch with data answers at once).
QUIET_REPLICATION = {"replica.fetch.wait.max.ms": "5000"}


def cluster_sessions(kafka: ApacheKafka) -> list[str]:
    """Java clients of the pinned release on a three-node cluster: a KIP-848 consumer
    group, a transactional producer (transaction version 2) and read_committed consumer,
    a Kafka Streams app with group.protocol=streams; the brokers replicate the groups'
    offsets and the transactions' state (__consumer_offsets, __transaction_state: three
    replicas each) over INTERNAL. After each session librdkafka lists every topic
    (Metadata): the internal topics' ids are named only from then on, so replication of
    them is seen both before and after a reader of the capture can know their names."""
    from confluent_kafka.admin import AdminClient

    got = []
    for mode in ("consumer-group", "transactions", "streams-group"):
        got += java_session(mode, kafka.bootstrap())
        AdminClient(
            {"bootstrap.servers": kafka.bootstrap(), "client.id": "kd-list-topics"}
        ).list_topics(timeout=30)
    return got


# name -> (cluster: 1 node or 3, the listeners captured, session, what it holds)
CAPTURES = {
    "kafka-clients": (
        1,
        ("PLAINTEXT",),
        python_clients,
        "kafka-python (every codec), confluent-kafka group, aiokafka, kcat, kafkajs",
    ),
    "kafka-java-consumer-group": (
        1,
        ("PLAINTEXT",),
        lambda k: java_session("consumer-group", k.bootstrap()),
        "KIP-848 consumer group (group.protocol=consumer): "
        "ConsumerGroupHeartbeat, OffsetCommit, Fetch",
    ),
    "kafka-java-share-group": (
        1,
        ("PLAINTEXT",),
        lambda k: java_session("share-group", k.bootstrap()),
        "KafkaShareConsumer (KIP-932): ShareGroupHeartbeat, ShareFetch, "
        "ShareAcknowledge; group config set by IncrementalAlterConfigs",
    ),
    "kafka-java-streams-group": (
        1,
        ("PLAINTEXT",),
        lambda k: java_session("streams-group", k.bootstrap()),
        "Kafka Streams app with group.protocol=streams (KIP-1071): StreamsGroupHeartbeat",
    ),
    "kafka-java-transactions": (
        1,
        ("PLAINTEXT",),
        lambda k: java_session("transactions", k.bootstrap()),
        "idempotent producer; transactional producer (transaction "
        "version 2): InitProducerId, EndTxn commit and abort; "
        "read_committed consumer",
    ),
    "kafka-java-admin": (
        1,
        ("PLAINTEXT",),
        lambda k: java_session("admin", k.bootstrap()),
        "Admin: CreateTopics, IncrementalAlterConfigs, DescribeConfigs, "
        "Create/Describe/DeleteAcls, Alter/DescribeClientQuotas, "
        "Alter/ListPartitionReassignments, DeleteTopics",
    ),
    "kafka-sasl": (
        1,
        ("SASL_PLAINTEXT",),
        sasl_logins,
        "librdkafka logins with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512: right and wrong passwords",
    ),
    "kafka-tls": (
        1,
        ("SSL",),
        None,
        "kafka-python over TLS 1.3; kafka-tls.keys holds the session keys",
    ),
    "kafka44-tls": (
        1,
        ("SSL",),
        None,
        "franz-go over TLS 1.3 to a 4.4 broker; kafka44-tls.keys holds the session keys",
    ),
    "kafka44-java-tls": (
        1,
        ("SSL",),
        None,
        "Java 4.4 clients (KIP-848 consumer group) over TLS 1.3 through "
        "`kdissect proxy` to a 4.4 broker, the client<->proxy leg; "
        "kafka44-java-tls.keys: the proxy's --keylog",
    ),
    "kafka-kraft-cluster": (
        3,
        ("INTERNAL", "CONTROLLER"),
        kraft_cluster,
        "between the three nodes: follower Fetch, KRaft Fetch of "
        "__cluster_metadata, Vote, BeginQuorumEpoch, EndQuorumEpoch, "
        "BrokerRegistration, BrokerHeartbeat, AlterPartition, Envelope",
    ),
    "kafka-kraft-snapshot": (
        3,
        ("CONTROLLER",),
        kraft_snapshot_fetch,
        "the controllers' listener of a cluster that snapshots and "
        "deletes its metadata log often (SNAPSHOTTING): a voter away "
        "while that happened comes back and fetches a snapshot "
        "(FetchSnapshot), KRaft Fetch, Vote",
    ),
    "kafka44-cluster": (
        3,
        ("PLAINTEXT", "INTERNAL"),
        cluster_sessions,
        "Java 4.4 clients on three nodes (consumer group, transactions, "
        "streams group) and the brokers' replication of __consumer_offsets "
        "and __transaction_state",
    ),
    "kafka-broker-killed": (
        3,
        ("PLAINTEXT",),
        broker_killed,
        "an idempotent librdkafka producer (acks=all) while a broker is "
        "killed and restarted: NOT_LEADER_OR_FOLLOWER, metadata refresh",
    ),
}
