"""Apache Kafka and today's clients: the captures/kafka-*.pcap recorded by
scripts/make_kafka_captures.py (Kafka 4.3.1, Java clients 4.3.1) decode with no problem
markers but the real ones (each explained here), tshark agrees where it decodes, and the same
sessions replayed live against the pinned release's broker and three-node cluster (Java
clients of the pinned release, and one of the previous line) decode the same way."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from kdissect.protocol import schemas
from kdissect.sources.pcap import exchanges_in
from tests.support.apache_kafka import PREVIOUS_CLIENTS, VERSION, previous_clients_classpath
from tests.support.capture import Tcpdump
from tests.support.cli import kdissect_text
from tests.support.kafka_scenarios import (
    CAPTURES,
    SNAPSHOTTING,
    broker_killed,
    java_session,
    kraft_cluster,
    kraft_snapshot_fetch,
)

ROOT = Path(__file__).resolve().parents[1]
NAMES = sorted(n for n in CAPTURES if not n.endswith("tls"))  # (in tls/)

# API keys each capture must hold (beyond ApiVersions/Metadata)
HOLDS = {
    "kafka-clients": {0, 1, 2, 8, 9, 10, 11, 12, 13, 14, 19, 22},
    "kafka-java-consumer-group": {68, 0, 1, 8, 9},
    "kafka-java-share-group": {76, 78, 79, 44},
    "kafka-java-streams-group": {88, 0, 1},
    "kafka-java-transactions": {22, 26, 0, 1},
    "kafka-java-admin": {19, 20, 29, 30, 31, 32, 44, 45, 46, 48, 49, 60},
    "kafka-sasl": {17, 36},
    "kafka-kraft-cluster": {1, 52, 53, 54, 56, 58, 62, 63},
    "kafka-broker-killed": {0, 3},
    "kafka-kraft-snapshot": {1, 52, 53, 59, 62, 63},
    "kafka44-cluster": {0, 1, 8, 9, 22, 24, 26, 27, 28, 68, 88},
}

# The real problems, explained: librdkafka 2.16's AdminClient.list_topics() sends a Metadata
# v13 request with 3 bytes after the body (01 00 00); Kafka's own MetadataRequestData reads
# the same fields and leaves the same 3 bytes unread (checked with kafka-clients 4.3.1).
REAL_PROBLEMS = {
    "kafka-sasl": {("Metadata v13 Request", "3 bytes after the end of the body")},
    # librdkafka 2.16's list_topics() again (tests/test_kafka44_values.py: Kafka 4.4's
    # classes leave the same bytes)
    "kafka44-cluster": {("Metadata v13 Request", "3 bytes after the end of the body")},
}
# Findings that follow from how a capture ends: the KRaft capture (recorded from before the
# nodes start, so no connection is seen mid-stream) stops with long-poll Fetch and
# BrokerHeartbeat requests in flight, and a stopped node leaves requests to it unanswered;
# the killed broker never answers the requests it had in flight.
EDGE_FINDINGS = {
    "kafka-kraft-cluster": {"unanswered"},
    "kafka-broker-killed": {"unanswered"},
    "kafka-kraft-snapshot": {"unanswered"},
    # the six replica fetchers' Fetch long-polls in flight when it stops
    "kafka44-cluster": {"unanswered"},
}


def decoded(path: Path):
    got = exchanges_in([str(path)])
    titles, problems, findings = Counter(), Counter(), Counter()
    keys = set()
    for ex in got.exchanges:
        findings.update(f.code for f in ex.findings)
        for m in (ex.request, ex.response):
            if m is None:
                continue
            d = m.decoded()
            keys.add(m.api_key)
            titles[d.title] += 1
            if m.status.startswith("truncated") and ex.has("message_truncated") and not got.gaps:
                # cut by the end of the capture (a live recording is stopped while the
                # nodes go on replicating): the cut explains what the body lacks
                continue
            for _where, text in d.problems:
                problems[(d.title, text)] += 1
    return got, keys, problems, findings


def assert_clean(name: str, path: Path) -> set[int]:
    got, keys, problems, findings = decoded(path)
    assert got.gaps == [] and got.notes == []
    assert set(problems) <= REAL_PROBLEMS.get(name, set()), problems
    odd = {"orphan_response", "guessed_api", "unanswered", "truncated"}
    assert set(findings) & odd <= EDGE_FINDINGS.get(name, set()), findings
    assert HOLDS[name] <= keys, HOLDS[name] - keys
    return keys


@pytest.mark.slow  # seconds each: captures of hundreds of KB
@pytest.mark.parametrize("name", NAMES)
def test_capture_decodes_cleanly(name):
    assert_clean(name, ROOT / "captures" / f"{name}.pcap")


def test_sasl_capture_holds_successes_and_failures():
    got, _, _, _ = decoded(ROOT / "captures" / "kafka-sasl.pcap")
    outcome = Counter()
    for ex in got.exchanges:
        if ex.request is not None and ex.request.api_key == 36 and ex.response is not None:
            ok = ex.response.decoded().body.plain()["error_code"] == 0
            outcome[(ex.request.client_id, ok)] += 1
    for mech in ("plain", "scram-sha-256", "scram-sha-512"):
        assert outcome[(f"kd-{mech}-ok", True)] >= 1
        assert outcome[(f"kd-{mech}-bad", False)] >= 1
    # PLAIN fails in its one step; SCRAM's first step (the server's nonce) succeeds even
    # with a wrong password, the proof then fails
    assert outcome[("kd-plain-bad", True)] == 0


def leaders_seen(got) -> list[dict[int, int]]:
    """under-load's partition -> leader, from each Metadata response, in order."""
    out = []
    for ex in sorted(got.exchanges, key=lambda e: e.response.ts if e.response else 0):
        if ex.request is None or ex.request.api_key != 3 or ex.response is None:
            continue
        for t in ex.response.decoded().body.plain()["topics"]:
            if t["name"] == "under-load" and t["partitions"]:
                out.append({p["partition_index"]: p["leader_id"] for p in t["partitions"]})
    return out


@pytest.mark.slow
def test_broker_killed_capture_shows_the_leader_moving():
    """The killed broker leaves Produce requests unanswered; the client refreshes metadata
    and follows the leaders to the surviving brokers (librdkafka sees the dead connection
    first, so no NOT_LEADER_OR_FOLLOWER answer is needed)."""
    got, _, _, findings = decoded(ROOT / "captures" / "kafka-broker-killed.pcap")
    assert findings["unanswered"] >= 1
    maps = leaders_seen(got)
    assert len({tuple(sorted(m.items())) for m in maps}) >= 2, maps


# -- tshark -----------------------------------------------------------------------------
def tshark_messages(path: Path, ports: set[int], keylog: Path | None = None) -> Counter:
    """(frame, correlation id, api key) of the messages tshark finds (requests carry the
    key; responses are matched by tshark itself)."""
    args = [
        "tshark",
        "-r",
        str(path),
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-e",
        "frame.number",
        "-e",
        "kafka.correlation_id",
        "-e",
        "kafka.request_frame",
    ]
    for port in sorted(ports):
        args += ["-d", f"tcp.port=={port},{'tls' if keylog else 'kafka'}"]
    if keylog:
        args += [
            "-o",
            f"tls.keylog_file:{keylog}",
            "-o",
            "tls.desegment_ssl_records:TRUE",
            "-o",
            "tls.desegment_ssl_application_data:TRUE",
        ]
        for port in sorted(ports):
            args += ["-d", f"tls.port=={port},kafka"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    found = Counter()
    for line in out.splitlines():
        frame, _, rest = line.partition("\t")
        corrs = rest.split("\t")[0]
        for c in filter(None, corrs.split(",")):
            found[(int(frame), int(c))] += 1
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_tshark_finds_the_same_messages(name):
    path = ROOT / "captures" / f"{name}.pcap"
    got, _, _, _ = decoded(path)
    ours = Counter(
        (m.frame, m.correlation_id)
        for ex in got.exchanges
        for m in (ex.request, ex.response)
        if m is not None
    )
    theirs = tshark_messages(path, {ex.broker[1] for ex in got.exchanges})
    assert theirs == ours


@pytest.mark.slow
def test_tls_capture_opens_with_its_key_log():
    """kafka-tls.keys (written by Python's ssl module) lets tshark read the Kafka messages
    inside kafka-tls.pcap; without it there is nothing to read."""
    path = ROOT / "captures" / "tls" / "kafka-tls.pcap"
    keys = path.with_suffix(".keys")
    assert keys.read_text().count("CLIENT_TRAFFIC_SECRET_0") >= 2
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.dstport"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ports = Counter(int(p) for p in out.split() if p)
    port = ports.most_common(1)[0][0]
    assert len(tshark_messages(path, {port}, keys)) >= 10
    assert len(tshark_messages(path, {port})) == 0


# -- live: the same sessions against the session's broker and cluster -------------------
def cli_lines(path: Path, ports: list[int]) -> list[dict]:
    """`kdissect pcap PATH -p PORT... --format jsonl`, as a user runs it: its messages."""
    args = ["pcap", str(path), "--format", "jsonl"]
    for port in ports:
        args += ["-p", str(port)]
    out = kdissect_text(*args)
    assert out.returncode == 0, out.stderr[-2000:]
    return [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]


# what a clean reading has none of: every malformed finding, and those saying the tables
# did not know what the client spoke
NOT_KNOWN = {
    "unknown_api",
    "assumed_version",
    "unknown_version",
    "version_not_advertised",
    "guessed_api",
    "orphan_response",
}


def assert_cli_clean(lines: list[dict], clients: str) -> None:
    """Every connection opens with an ApiVersions request from a kafka-clients of release
    ``clients`` (the pinned release's opens with the newest version: Kafka 4.4's v5,
    KIP-1242), and no message has a problem or a malformed/unknown-version finding."""
    from kdissect.protocol.findings import REGISTRY

    first: dict[int, dict] = {}
    for line in lines:
        first.setdefault(line["stream"], line)
    newest = schemas.all_versions()[18][-1]
    openings = {
        (
            m["direction"],
            m["api_name"],
            m["api_version"] if clients == VERSION else None,
            m["body"].get("client_software_version"),
        )
        for m in first.values()
    }
    assert openings == {
        ("request", "ApiVersions", newest if clients == VERSION else None, clients)
    }, openings
    assert [(m["api_name"], m["api_version"], m["problems"]) for m in lines if m["problems"]] == []
    bad = {c for c, k in REGISTRY.items() if k.group == "malformed"} | NOT_KNOWN
    found = Counter(f["code"] for m in lines for f in m["findings"])
    assert not set(found) & bad, found


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode,expect,clients",
    [
        ("consumer-group", [f"c{i}" for i in range(5)], VERSION),
        ("share-group", [f"s{i}" for i in range(5)], VERSION),
        ("streams-group", [f"T{i}" for i in range(5)], VERSION),
        ("transactions", [f"committed{i}" for i in range(3)], VERSION),
        # a client of the previous release line (scripts/kafka/PREVIOUS_CLIENTS) on this broker
        ("admin", ["retention.ms=3600000", "acls=1"], PREVIOUS_CLIENTS),
    ],
)
def test_java_clients_live(apache_kafka, tmp_path, mode, expect, clients):
    """Java clients against the pinned broker, recorded, decode cleanly (as the checked-in
    captures do) and, through the CLI, without a false malformed finding: before kdissect
    knew Kafka 4.4, every connection of a 4.4 client opened with one (ApiVersions v5)."""
    name = f"kafka-java-{mode}"
    jars = None if clients == VERSION else previous_clients_classpath()
    with Tcpdump(tmp_path / "live.pcap", apache_kafka.ports("PLAINTEXT")) as dump:
        got = java_session(mode, apache_kafka.bootstrap(), jars)
    if mode == "admin":
        assert set(expect) <= set(got), got
    else:
        assert sorted(got) == sorted(expect)
    assert_clean(name, dump.path)
    lines = cli_lines(dump.path, apache_kafka.ports("PLAINTEXT"))
    assert_cli_clean(lines, clients)
    if mode == "transactions":
        # offsets committed in the transaction (TxnOffsetCommit: by topic id from 4.4's v6)
        # and the group deleted (DeleteGroups)
        txn = [
            m for m in lines if m["api_name"] == "TxnOffsetCommit" and m["direction"] == "request"
        ]
        assert txn and {m["api_version"] for m in txn} == {schemas.all_versions()[28][-1]}
        assert [
            (p["partition_index"], p["committed_offset"])
            for m in txn
            for t in m["body"]["topics"]
            for p in t["partitions"]
        ] == [(0, 3)]
        deleted = [
            m for m in lines if m["api_name"] == "DeleteGroups" and m["direction"] == "response"
        ]
        assert [
            (g["group_id"], g["error_code"]) for m in deleted for g in m["body"]["results"]
        ] == [("kd-txn-offsets", 0)]


@pytest.mark.slow
def test_kraft_traffic_live(apache_cluster):
    """The cluster's traffic between nodes, recorded from its start (see conftest), with
    the quorum leader stopped and started."""
    kraft_cluster(apache_cluster)
    assert_clean("kafka-kraft-cluster", apache_cluster.kraft_capture.stop())


@pytest.mark.slow
def test_broker_killed_live(apache_cluster, tmp_path):
    with Tcpdump(tmp_path / "killed.pcap", apache_cluster.ports("PLAINTEXT")) as d:
        acked, read_back = broker_killed(apache_cluster, victim=3)
    assert acked > 100 and read_back == acked  # nothing acknowledged was lost
    assert_clean("kafka-broker-killed", d.path)


def fetched_snapshots(path: Path) -> list[tuple[dict, bytes, list[str]]]:
    """Each FetchSnapshot response's partition (plain values), the snapshot bytes it
    carried, and the names of the metadata records decoded in them, in order."""
    got = exchanges_in([str(path)])
    out = []
    for ex in got.exchanges:
        if ex.request is None or ex.request.api_key != 59 or ex.response is None:
            continue
        body = ex.response.decoded().body
        for t in body.child("topics").children:
            for p in t.child("partitions").children if t.child("partitions") else ():
                recs = p.child("unaligned_records")
                if recs is None:
                    continue
                names = [
                    n.name
                    for n in recs.walk()
                    if n.ktype == "struct" and n.name.endswith("Record") and n.note
                ]
                batches = [b for b in recs.children if b.ktype == "record_batch"]
                raw = ex.response.data[batches[0].offset : recs.end] if batches else b""
                out.append(
                    (
                        {
                            c.name: c.plain()
                            for c in p.children
                            if c.name != "unaligned_records" and not c.name.startswith("_")
                        },
                        raw,
                        names,
                    )
                )
    return out


@pytest.mark.slow
def test_fetch_snapshot_carries_the_metadata_snapshot():
    """A voter that was away while the quorum snapshotted and deleted its metadata log
    fetches a snapshot: the FetchSnapshot response's bytes are a KRaft snapshot (the
    .checkpoint format), decoded with the metadata records: SnapshotHeader first,
    SnapshotFooter last, the cluster's metadata in between."""
    ((part, raw, names),) = fetched_snapshots(ROOT / "captures" / "kafka-kraft-snapshot.pcap")
    assert part["error_code"] == 0 and part["position"] == 0 and part["size"] == len(raw)
    assert names[0] == "SnapshotHeaderRecord" and names[-1] == "SnapshotFooterRecord", names
    assert {"FeatureLevelRecord", "RegisterBrokerRecord", "RegisterControllerRecord"} <= set(
        names
    ), names


class _SnapshotScenario:
    """The live FetchSnapshot scenario on a cluster of its own (SNAPSHOTTING), run in a
    thread from the module's first test on: most of its minute is Kafka waiting for its
    metadata log cleaner, whose period is fixed (60 s from the node's start:
    KafkaRaftClient's RaftMetadataLogCleanerManager, no setting shortens it), and the
    module's other tests run meanwhile instead of waiting with it. ``result()`` waits
    for it: (the cluster, stopped with its files, the capture of its CONTROLLER
    listeners)."""

    def __init__(self, directory: Path):
        import threading

        from tests.support.apache_kafka import ApacheKafka

        self.kafka = ApacheKafka(nodes=3, start=False, extra=SNAPSHOTTING)
        self.path = directory / "snap.pcap"
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with Tcpdump(self.path, self.kafka.ports("CONTROLLER")):
                self.kafka.start()
                kraft_snapshot_fetch(self.kafka)
        except BaseException as e:  # raised in the test
            self.failed = e
        finally:
            # SIGKILL: the files stay as they are (node 3's new checkpoint, which its own
            # cleaner would delete a minute on) until close(), and the JVMs stop working
            for node in self.kafka.nodes:
                self.kafka.stop_node(node.node_id, kill=True)

    def result(self):
        self.thread.join()
        if self.failed is not None:
            raise self.failed
        return self.kafka, self.path

    def close(self) -> None:
        self.kafka.close()  # (its admin calls then fail, and the thread ends)
        self.thread.join(60)


@pytest.fixture(scope="module", autouse=True)
def snapshot_scenario(request, tmp_path_factory):
    """Started with the module when test_fetch_snapshot_live is to run (not in the fast
    tier, which leaves it out), else None."""
    if not any(
        getattr(i, "originalname", "") == "test_fetch_snapshot_live" for i in request.session.items
    ):
        yield None
        return
    scenario = _SnapshotScenario(tmp_path_factory.mktemp("snapshot"))
    try:
        yield scenario
    finally:
        scenario.close()


@pytest.mark.slow
def test_fetch_snapshot_live(snapshot_scenario):
    """The same, live, on a cluster of its own (SNAPSHOTTING): the snapshot bytes the
    response carried are the .checkpoint file the voter then wrote, and `kdissect log`
    reads that file as the same records."""
    import json

    from click.testing import CliRunner

    from kdissect.cli import main

    kafka, capture = snapshot_scenario.result()
    assert_clean("kafka-kraft-snapshot", capture)
    fetched = fetched_snapshots(capture)
    assert fetched
    for part, raw, names in fetched:
        sid = part["snapshot_id"]
        ck = (
            kafka.node(3).log_dir
            / "__cluster_metadata-0"
            / f"{sid['end_offset']:020d}-{sid['epoch']:010d}.checkpoint"
        )
        assert ck.read_bytes() == raw
        res = CliRunner().invoke(
            main, ["log", str(ck), "--format", "jsonl", "--records"], catch_exceptions=False
        )
        on_disk = [
            o.get("value_schema", "").split(" ")[0]
            for o in map(json.loads, res.output.splitlines())
            if o["type"] == "record"
        ]
        assert on_disk == names
