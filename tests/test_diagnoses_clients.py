"""The diagnoses that need clients misbehaving, or a network failing under them, made to
happen with real clients against the real Apache Kafka node (the session's
``apache_kafka``) and read from one tcpdump capture:

- an idempotent producer (librdkafka) whose Produce answer is lost with its connection
  (the node's recording relay drops both): it retries on a new connection
  (``producer_retry``);
- one whose second Produce request is lost on the way (the relay drops it) while the
  next gets through: the broker refuses that one (``producer_sequence_gap``);
- a classic consumer group: a member joins, one is stopped (SIGSTOP) past its session
  timeout and comes back, one leaves (``consumer_rebalance`` with each cause), and a
  KIP-848 group where a member joins and leaves;
- a read_committed consumer held by a transaction left open (``empty_fetches``);
- a consumer committing less than it was given (``commit_behind_fetch``).
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kdissect.sources.pcap import exchanges_in
from tests.support.capture import Tcpdump
from tests.support.kafka_scenarios import create_topic
from tests.test_diagnoses_live import by_client

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
PRODUCE = 0


def _header(message: bytes) -> tuple[int, int, str]:
    """(API key, correlation id, client id) of a request (size included)."""
    api, _, corr, n = struct.unpack_from(">hhih", message, 4)
    return api, corr, message[14 : 14 + n].decode() if n > 0 else ""


class Faults:
    """What the relay does to the two producers' traffic."""

    def __init__(self) -> None:
        self.produces: dict[int, dict[int, str]] = {}  # connection -> corr -> client
        self.gap_requests = 0
        self.lost_answer = False

    def __call__(self, conn, side: int, message: bytes) -> bytes | None:
        if side == 0:
            api, corr, client = _header(message)
            if api == PRODUCE:
                if client == "kd-gap":
                    self.gap_requests += 1
                    if self.gap_requests == 2:
                        return b""  # lost on the way: the broker sees a gap
                self.produces.setdefault(id(conn), {})[corr] = client
        else:
            corr = struct.unpack_from(">i", message, 4)[0]
            if (
                self.produces.get(id(conn), {}).pop(corr, None) == "kd-retry"
                and not self.lost_answer
            ):
                self.lost_answer = True
                return None  # the answer is lost with the connection
        return message


def _producers(bootstrap: str) -> None:
    from confluent_kafka import Producer

    common = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 0,
        "batch.num.messages": 1,
        "request.timeout.ms": 2000,
        "message.timeout.ms": 6000,
    }
    p = Producer({**common, "client.id": "kd-retry"})
    p.produce("kd-retry", b"lost answer, sent again")
    assert p.flush(20) == 0
    p = Producer({**common, "client.id": "kd-gap"})
    p.produce("kd-gap", b"0")
    assert p.flush(20) == 0
    for i in range(1, 4):
        p.produce("kd-gap", b"%d" % i)
    p.flush(8)  # (what librdkafka does after the refusal is its business)


def _member(bootstrap: str, group: str, protocol: str, client: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.group_member",
            bootstrap,
            group,
            "kd-groups",
            protocol,
            client,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "joined", client
    return proc


def _leave(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def _members(bootstrap: str, group: str, clients: set[str], timeout: float = 90) -> None:
    """Wait until the coordinator has ``group`` stable with these members (client ids), as
    Kafka's Admin describes it: what the steps below wait for, however long the machine
    takes (fixed sleeps were a guess of how long the coordinator and clients need)."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kd-watch"})
    deadline = time.monotonic() + timeout
    while True:
        d = admin.describe_consumer_groups([group])[group].result(30)
        got = {m.client_id for m in d.members}
        if got == clients and d.state == ConsumerGroupState.STABLE:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"group {group}: {sorted(got)} {d.state}, not {sorted(clients)}")
        time.sleep(0.2)


def _classic(bootstrap: str) -> None:
    """A joins; B joins (new member); A is stopped past its session timeout (gone without
    a LeaveGroup) and comes back on its connection (joined again); B leaves."""
    a = _member(bootstrap, "kd-classic", "classic", "kd-a")
    b = _member(bootstrap, "kd-classic", "classic", "kd-b")
    try:
        time.sleep(1)
        os.kill(a.pid, signal.SIGSTOP)
        # session 6 s: the coordinator drops A, B rejoins alone
        _members(bootstrap, "kd-classic", {"kd-b"})
    finally:
        os.kill(a.pid, signal.SIGCONT)
    _members(bootstrap, "kd-classic", {"kd-a", "kd-b"})  # A finds out and joins again
    _leave(b)
    _members(bootstrap, "kd-classic", {"kd-a"})
    _leave(a)


def _short_sessions(bootstrap: str, group: str) -> None:
    """The KIP-848 group's session 6 s and heartbeats every 1.5 s (group configs)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (
            ("consumer.session.timeout.ms", "6000"),
            ("consumer.heartbeat.interval.ms", "1500"),
        )
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    ).values():
        f.result(30)


def _consumer_protocol(bootstrap: str) -> None:
    """KIP-848: C joins, D joins (new member), D leaves; E joins, is stopped past its
    session (the coordinator fences it), and joins again when it runs."""
    _short_sessions(bootstrap, "kd-848")
    c = _member(bootstrap, "kd-848", "consumer", "kd-c")
    d = _member(bootstrap, "kd-848", "consumer", "kd-d")
    time.sleep(1)
    _leave(d)
    time.sleep(3)  # C's next heartbeats see the new epoch
    e = _member(bootstrap, "kd-848", "consumer", "kd-e")
    time.sleep(3)
    os.kill(e.pid, signal.SIGSTOP)
    try:
        _members(bootstrap, "kd-848", {"kd-c"})  # session 6 s: the coordinator fences E
    finally:
        os.kill(e.pid, signal.SIGCONT)
    _members(bootstrap, "kd-848", {"kd-c", "kd-e"})  # E is told so and joins again
    _leave(e)
    time.sleep(3)
    _leave(c)


def _open_transaction(bootstrap: str) -> None:
    """A transaction left open holds a read_committed consumer at the last stable
    offset: every fetch returns nothing for 11 s."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "kd-open",
            "client.id": "kd-open-producer",
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("kd-open", b"not committed yet", partition=0)
    p.flush(10)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kd-open-reader",
            "client.id": "kd-held",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition("kd-open", 0, 0)])
    end = time.monotonic() + 11.5
    while time.monotonic() < end:
        assert c.poll(0.2) is None or False, "nothing is readable"
    c.close()
    p.abort_transaction(30)


def _commit_behind(bootstrap: str) -> None:
    """20 records fetched at once; the consumer commits after the 5th."""
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        p.produce("kd-commit", b"record %d" % i, partition=0)
    assert p.flush(10) == 0
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kd-commit",
            "client.id": "kd-commit",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["kd-commit"])
    got = []
    while len(got) < 5:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m)
    time.sleep(0.5)  # (the fetch that gave all 20 is answered)
    c.commit(message=got[-1], asynchronous=False)
    c.close()


@pytest.fixture(scope="module")
def capture(apache_kafka, tmp_path_factory) -> Path:
    """One capture of every scenario (each client has its own client id)."""
    bootstrap = apache_kafka.bootstrap()
    relay = apache_kafka.relay
    create_topic(bootstrap, "kd-groups", partitions=2)
    for topic in ("kd-retry", "kd-gap", "kd-open", "kd-commit"):
        create_topic(bootstrap, topic)
    path = tmp_path_factory.mktemp("diagnoses") / "clients.pcap"
    relay.tamper = Faults()
    errors: list[BaseException] = []

    def run(work, where: str) -> None:
        try:
            work(where)
        except BaseException as e:  # reported by the fixture
            errors.append(e)

    try:
        with Tcpdump(path, [*apache_kafka.ports("PLAINTEXT"), relay.port]) as dump:
            threads = [
                threading.Thread(target=run, args=(work, where))
                for work, where in (
                    (_producers, relay.bootstrap),
                    (_classic, bootstrap),
                    (_consumer_protocol, bootstrap),
                    (_open_transaction, bootstrap),
                    (_commit_behind, bootstrap),
                )
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            dump.stop()
    finally:
        relay.tamper = None
    assert not errors, errors
    return path


@pytest.fixture(scope="module")
def diagnosed(capture):
    """client id -> the exchanges of its connections."""
    return by_client(capture)


def _found(diagnosed, code: str, clients=None) -> list:
    """(exchange, finding) of a code, in the order their exchanges came out."""
    found = [
        (e, f)
        for c, exchanges in diagnosed.items()
        if clients is None or c in clients
        for e in exchanges
        for f in e.findings
        if f.code == code
    ]
    return sorted(found, key=lambda ef: ef[0].messages[-1].ts)


def test_retry_on_a_new_connection(diagnosed):
    retries = _found(diagnosed, "producer_retry", {"kd-retry"})
    assert len(retries) == 1, retries
    detail = retries[0][1].detail
    assert "kd-retry[0]: batch 0-0" in detail and "got no answer in the capture" in detail
    assert "connection" in detail and "was answered ok" in detail


def test_sequence_gap(diagnosed):
    gaps = _found(diagnosed, "producer_sequence_gap", {"kd-gap"})
    assert gaps, [f.code for e in diagnosed["kd-gap"] for f in e.findings]
    assert (
        "kd-gap[0]: batch 2-2 refused (OUT_OF_ORDER_SEQUENCE_NUMBER); the broker "
        "expected 1" in gaps[0][1].detail
    )
    # no other client's traffic makes either up
    assert not _found(diagnosed, "producer_sequence_gap", set(diagnosed) - {"kd-gap"})
    assert not _found(diagnosed, "producer_retry", set(diagnosed) - {"kd-gap", "kd-retry"})


def test_rebalances_and_their_causes(diagnosed):
    classic = [
        f.detail
        for _, f in _found(diagnosed, "consumer_rebalance")
        if "group kd-classic:" in f.detail
    ]
    print("\n".join(classic))
    assert len(classic) == 4, classic
    assert "new member" in classic[0]
    assert "is gone without a LeaveGroup in the capture" in classic[1]
    assert "joined again on its connection as" in classic[2]
    assert "left (LeaveGroup)" in classic[3]
    kip848 = [
        f.detail for _, f in _found(diagnosed, "consumer_rebalance") if "group kd-848:" in f.detail
    ]
    print("\n".join(kip848))
    assert any("new member" in d for d in kip848)
    assert any("left (member_epoch -1)" in d for d in kip848)
    # E's session ran out while it was stopped: told so on its next heartbeat, it joined
    # again with its own id
    assert any(
        "told FENCED_MEMBER_EPOCH on its ConsumerGroupHeartbeat" in d
        or "told UNKNOWN_MEMBER_ID on its ConsumerGroupHeartbeat" in d
        for d in kip848
        if "joined again on its connection" in d
    ), kip848


def test_empty_fetches(diagnosed):
    empty = _found(diagnosed, "empty_fetches", {"kd-held"})
    assert len(empty) == 1, empty
    assert "held at the last stable offset 0 below the high watermark" in empty[0][1].detail
    # (the group members read an idle topic: their empty fetches are true too)
    others = set(diagnosed) - {"kd-held", "kd-a", "kd-b", "kd-c", "kd-d", "kd-e"}
    assert not _found(diagnosed, "empty_fetches", others)


def test_commit_behind_fetch(diagnosed):
    behind = _found(diagnosed, "commit_behind_fetch")
    assert len(behind) == 1, behind
    assert behind[0][1].detail.startswith(
        "group kd-commit: kd-commit[0] committed 5 after this client was given records up to 19"
    )


DIAGNOSED = (
    "producer_retry",
    "producer_sequence_gap",
    "consumer_rebalance",
    "empty_fetches",
    "commit_behind_fetch",
)


def _claims(exchanges) -> set[tuple[str, tuple | None, str]]:
    """(code, client address, what it is about: the producer and partition, the group).
    A rebalance is the group's: whichever member's answer shows it first carries it (a
    damaged capture may lose that answer and show it on another member's), so no client.
    A retry is the producer's: whichever of its two sends comes out second carries it (a
    reordered capture may complete the retry's connection first), so the client's host."""
    return {
        (
            f.code,
            _who(f.code, e.client),
            "" if f.code == "empty_fetches" else f.detail.split(":")[0],
        )
        for e in exchanges
        for f in e.findings
        if f.code in DIAGNOSED
    }


def _who(code: str, client: tuple[str, int]) -> tuple | None:
    if code == "consumer_rebalance":
        return None
    return (client[0],) if code == "producer_retry" else client


@pytest.fixture(scope="module")
def truth(capture) -> set:
    """What the whole capture claims (once for every variant below)."""
    claims = _claims(exchanges_in([str(capture)]).exchanges)
    assert {code for code, _, _ in claims} == set(DIAGNOSED)
    return claims


@pytest.mark.parametrize("variant", ["drop", "reorder", "snaplen", "midstream", "all"])
def test_damaged_capture_claims_nothing_new(capture, truth, tmp_path, variant):
    """The capture damaged (tests/support/damage.py) may lose these diagnoses, never make
    one up: each it gives, the whole capture gives for that client and subject."""
    from tests.support.damage import damage
    from tests.test_damaged import VARIANTS, dissect

    data, _ = damage(capture.read_bytes(), seed=1, **VARIANTS[variant])
    sink, _ = dissect(data, tmp_path)
    made = _claims(sink.exchanges)
    assert made <= truth, made - truth
