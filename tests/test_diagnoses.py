"""Kafka-level diagnoses (kdissect/stream/diagnoses.py) on the repo's real captures: each
fires where the traffic shows it, exactly as often as it does, and nowhere else; and
none fires on damaged captures (test_damaged.py) or a connection seen mid-stream.
tests/test_diagnoses_live.py makes each one happen with real clients and a real broker."""

from __future__ import annotations

import collections
import functools
from pathlib import Path

import pytest

from kdissect.protocol.findings import REGISTRY
from kdissect.sources.pcap import exchanges_in
from tests.support.damage import damage
from tests.test_damaged import dissect

CAPTURES = Path(__file__).parent.parent / "captures"
DIAGNOSES = frozenset(
    {
        "removed_version",
        "no_api_versions",
        "clock_skew",
        "producer_sequence_gap",
        "producer_retry",
        "producer_epoch_bump",
        "leadership_storm",
        "slow_response",
        "consumer_lag",
        "consumer_rebalance",
        "empty_fetches",
        "commit_behind_fetch",
        "controlled_shutdown",
    }
)
# what each repo capture really shows (checked by reading the exchanges; see the notes)
EXPECTED = {
    # Produce v2 / v0 to Tansu from kafka-python told to speak 0.10.0 / 0.8.2
    "legacy-0.10.0": {"removed_version": 3},
    # kafka-python told api_version=(0, 8, 2) never sends ApiVersions (Kafka 0.8.2 had none)
    "legacy-0.8.2": {"removed_version": 3, "no_api_versions": 4},
    # kafkajs opens its fetch connection with Fetch v11 (versions learned elsewhere)
    "kafka-clients": {"no_api_versions": 1},
    # transaction version 2 bumps the producer epoch when a transaction ends
    "kafka-java-transactions": {"producer_epoch_bump": 1},
    # the Raft client's connections open with Fetch; the stopped quorum leader's controlled
    # shutdown. (Its KRaft Fetches answered NOT_LEADER_OR_FOLLOWER 30 times in 0.3 s while
    # the quorum formed are an election, no storm; a KRaft Fetch answered 16 ms beyond its
    # 500 ms max_wait_ms is no slow response)
    "kafka-kraft-cluster": {"no_api_versions": 3, "controlled_shutdown": 1},
    # made at load 30: ApiVersions, Vote, BrokerHeartbeat answered after 0.5-3 s while the
    # nodes started (KRaft Fetches held up to their max_wait_ms are not counted); node 3's
    # controlled shutdown
    "kafka-kraft-snapshot": {"slow_response": 81, "controlled_shutdown": 1},
    # the six replica fetchers' connections open with Fetch v18 (brokers know their
    # versions); made under load: two ConsumerGroupHeartbeats, a StreamsGroupHeartbeat
    # answered after 0.6-1.1 s and an InitProducerId after 4.6 s (the coordinator loading
    # __transaction_state); transaction version 2 bumps the producer epoch
    "kafka44-cluster": {"no_api_versions": 6, "slow_response": 4, "producer_epoch_bump": 1},
    # acks=all Produce while a broker is killed: answers take seconds
    "kafka-broker-killed": {
        "slow_response": 14,
        # two batches sent to the killed leader, sent again to the new
        "producer_retry": 2,
    },
}


@functools.lru_cache(maxsize=None)
def _diagnoses(path: Path) -> tuple[collections.Counter, list]:
    exchanges = exchanges_in([str(path)]).exchanges
    found = [(e, f) for e in exchanges for f in e.findings if f.code in DIAGNOSES]
    return collections.Counter(f.code for _, f in found), found


def test_every_diagnosis_is_registered():
    from kdissect.stream.diagnoses import CODES

    assert DIAGNOSES <= set(REGISTRY) and DIAGNOSES == set(CODES)


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.stem)
def test_repo_captures(path):
    counts, _ = _diagnoses(path)
    assert dict(counts) == EXPECTED.get(path.stem, {})


def test_evidence_in_the_text():
    _, found = _diagnoses(CAPTURES / "kafka-java-transactions.pcap")
    assert [f.detail for _, f in found] == ["producer 10: epoch 0 -> 1 (sequences start again)"]
    _, found = _diagnoses(CAPTURES / "legacy-0.8.2.pcap")
    removed = {f.detail for _, f in found if f.code == "removed_version"}
    assert removed == {
        "Produce v0: Kafka 4.0 no longer accepts it (KIP-896)",
        "Fetch v0: Kafka 4.0 no longer accepts it (KIP-896)",
    }
    opened = [e for e, f in found if f.code == "no_api_versions"]
    assert all(e.opened and e.request.offset == 4 for e in opened)
    _, found = _diagnoses(CAPTURES / "kafka-kraft-cluster.pcap")
    assert [f.detail for _, f in found if f.code == "controlled_shutdown"] == [
        "broker 2 (epoch 18) asks the controller to shut down (BrokerHeartbeat "
        "want_shut_down); the controller lets it go (should_shut_down)"
    ]
    _, found = _diagnoses(CAPTURES / "kafka-kraft-snapshot.pcap")
    held = [
        (e, f.detail) for e, f in found if f.code == "slow_response" and e.first.api_name == "Fetch"
    ]
    # KRaft Fetches held past their wait: the wait is subtracted, and said
    assert len(held) == 2 and all(
        f"; {(e.latency - 0.5) * 1000:.0f} ms beyond the 500 ms its max_wait_ms asked the "
        "broker to hold the Fetch (subtracted)" in d
        for e, d in held
    )
    _, found = _diagnoses(CAPTURES / "kafka-broker-killed.pcap")
    for e, f in found:
        if f.code == "slow_response":
            assert e.latency > 0.5 and f"answered after {e.latency * 1000:.0f} ms" in f.detail
    # the killed broker's connection (5) never answered; the new leader's (4) wrote them
    assert [(e.stream, f.detail) for e, f in found if f.code == "producer_retry"] == [
        (
            4,
            f"producer 0 epoch 0, under-load[1]: batch {b} sent again (a retry: the send on "
            "connection 5 got no answer in the capture; this one was answered ok: written "
            "once)",
        )
        for b in ("28-28", "29-30")
    ]


def test_mid_stream_start_is_not_no_api_versions(tmp_path):
    """legacy-0.8.2 has four connections that open without ApiVersions; cut the capture's
    start and those connections are seen mid-stream: nothing can be said about them."""
    data, _ = damage(
        (CAPTURES / "legacy-0.8.2.pcap").read_bytes(),
        seed=1,
        drop=0,
        reorder=0,
        snaplen=None,
        start=0.05,
    )
    sink, _ = dissect(data, tmp_path)
    clean = {
        e.stream: e
        for e in exchanges_in([str(CAPTURES / "legacy-0.8.2.pcap")]).exchanges
        if e.has("no_api_versions")
    }
    damaged = [e for e in sink.exchanges if e.has("no_api_versions")]
    assert any(not e.opened for e in sink.exchanges)  # a connection seen mid-stream
    assert all(e.opened for e in damaged) and len(damaged) == len(clean) - 1


@pytest.mark.parametrize("variant", ["drop", "reorder", "snaplen", "midstream", "all"])
@pytest.mark.parametrize(
    "capture",
    ["kafka-java-transactions", pytest.param("kafka-broker-killed", marks=pytest.mark.slow)],
)
def test_damaged_captures_claim_nothing_new(tmp_path, capture, variant):
    """A damaged capture may lose a diagnosis (its evidence is gone) but must not make
    one up: every diagnosis it gives is one the whole capture gives on that connection."""
    from tests.test_damaged import VARIANTS

    counts, found = _diagnoses(CAPTURES / f"{capture}.pcap")
    truth = {(e.client, e.first.correlation_id, f.code) for e, f in found}
    for seed in (1, 2):
        data, _ = damage(
            (CAPTURES / f"{capture}.pcap").read_bytes(), seed=seed, **VARIANTS[variant]
        )
        sink, _ = dissect(data, tmp_path)
        made = {
            (e.client, e.first.correlation_id, f.code)
            for e in sink.exchanges
            for f in e.findings
            if f.code in DIAGNOSES
        }
        assert made <= truth, (seed, made - truth)


def _produce(
    seq: int,
    error: int | None,
    order: int,
    epoch: int = 0,
    stream: int = 1,
    corr: int = 1,
    ts: float = 10.0,
):
    """An idempotent producer's Produce of 5 records from ``seq`` on a connection and its
    answer (``error``; None: no answer), as the decoders' values."""
    from kdissect.stream.facts import Facts
    from kdissect.stream.model import Exchange, KafkaMessage

    batch = {
        "magic": 2,
        "attributes": 0,
        "max_timestamp": -1,
        "producer_id": 7,
        "producer_epoch": epoch,
        "base_sequence": seq,
        "record_count": 5,
    }
    body = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": [batch]}]}]}
    req = KafkaMessage(
        0, stream, "request", ts, 1, 100, b"", api_key=0, api_version=9, correlation_id=corr
    )
    resp = (
        None
        if error is None
        else KafkaMessage(1, stream, "response", ts + 0.001, 2, 100, b"", api_key=0, api_version=9)
    )
    answer = (
        None
        if error is None
        else {
            "responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": error}]}]
        }
    )
    ex = Exchange(req, resp, ("c", stream), ("b", 2), stream, seq=order, facts=Facts())
    return ex, body, answer


def _run(sends) -> list[list[str]]:
    from kdissect.stream.diagnoses import Diagnoses

    d = Diagnoses()
    out = []
    for args in sends:
        ex, body, answer = _produce(*args)
        d.observe(ex, body, answer, {})
        out.append([f.detail for f in ex.findings])
    return out


W = "producer 7 epoch 0, t[0]: "


def test_producer_sequences_on_one_connection():
    """The bookkeeping on the values the decoders give: a refused gap names the expected
    sequence, a retry says how each send was answered, an epoch bump starts again."""
    assert _run(
        [
            (0, 0, 0),
            (5, 0, 2),
            (0, None, 1),
            (15, 45, 3),
            (5, 0, 4),
            (10, 19, 5),
            (10, 0, 6),
            (0, 0, 7, 1),
        ]
    ) == [
        [],
        [],
        [
            W + "batch 0-4 sent again (a retry: the send was answered ok; this one got no "
            "answer in the capture)"
        ],
        [
            W + "batch 15-19 refused (OUT_OF_ORDER_SEQUENCE_NUMBER); the broker expected at least "
            "10 (the start of this producer epoch is not in the capture: batches it accepted "
            "later may be missing)"
        ],
        [
            W + "batch 5-9 sent again (a retry: the send was answered ok; this one was "
            "answered ok: written once)"
        ],
        [],
        [
            W + "batch 10-14 sent again (a retry: the send was answered NOT_ENOUGH_REPLICAS; "
            "this one was answered ok: written once)"
        ],
        ["producer 7: epoch 0 -> 1 (sequences start again)"],
    ]


def test_sequence_gap_names_the_expected_sequence_only_from_the_epoch_start():
    """The broker's expected sequence is said exactly only when the capture holds the
    answer that gave the producer its epoch (InitProducerId; EndTxn v5+): then every batch
    it accepted is in the capture."""
    from kdissect.protocol.apis import INIT_PRODUCER_ID
    from kdissect.stream.diagnoses import Diagnoses
    from kdissect.stream.facts import Facts
    from kdissect.stream.model import Exchange, KafkaMessage

    d = Diagnoses()
    req = KafkaMessage(
        0, 1, "request", 9.0, 1, 10, b"", api_key=INIT_PRODUCER_ID, api_version=5, correlation_id=0
    )
    resp = KafkaMessage(
        1, 1, "response", 9.001, 2, 10, b"", api_key=INIT_PRODUCER_ID, api_version=5
    )
    d.observe(
        Exchange(req, resp, ("c", 1), ("b", 2), 1, facts=Facts()),
        {},
        {"error_code": 0, "producer_id": 7, "producer_epoch": 0},
        {},
    )
    found = []
    for args in ((0, 0, 1), (10, 45, 2)):
        ex, body, answer = _produce(*args)
        d.observe(ex, body, answer, {})
        found += [f.detail for f in ex.findings]
    assert found == [
        W + "batch 10-14 refused (OUT_OF_ORDER_SEQUENCE_NUMBER); the broker expected 5"
    ]


def test_producer_retries_across_connections():
    """A send on another connection is a retry only once the first send was over: the
    same request seen on both sides of a proxy (same correlation id, answered after the
    other was sent) is none; an unanswered send reported after its retry says so."""
    # (seq, error, order, epoch, stream, corr, ts)
    assert _run([(0, 0, 0, 0, 2, 5, 10.2), (0, 0, 0, 0, 1, 5, 10.1)]) == [[], []]
    assert _run([(0, None, 0, 0, 1, 5, 10.0), (0, None, 0, 0, 2, 5, 10.1)]) == [[], []]
    assert _run([(0, 0, 0, 0, 2, 9, 12.0), (0, None, 0, 0, 1, 5, 10.0)]) == [
        [],
        [
            W + "batch 0-4 got no answer in the capture; sent again later (a retry: the send "
            "on connection 2 was answered ok)"
        ],
    ]
    assert _run([(0, 19, 0, 0, 1, 5, 10.0), (0, 0, 0, 0, 2, 9, 12.0)]) == [
        [],
        [
            W + "batch 0-4 sent again (a retry: the send on connection 1 was answered "
            "NOT_ENOUGH_REPLICAS; this one was answered ok: written once)"
        ],
    ]


def test_a_produce_read_where_it_says_something():
    """A Produce's diagnoses, in the order said: each batch's CreateTime skew and its
    producer's sequence (with its partition's answer: read only for an idempotent batch),
    then the partitions the broker stamped (LogAppendTime) far from the capture clock --
    topics by name or by id, elements that are not dicts passed over."""
    from kdissect.stream.diagnoses import Diagnoses

    ex, _, _ = _produce(0, 0, 0, ts=1000.0)
    far, near = 1000_000 + 3_600_000, 1000_000 + 1_000

    def batch(stamp, pid, seq=0):
        return {
            "magic": 2,
            "attributes": 0,
            "max_timestamp": stamp,
            "producer_id": pid,
            "producer_epoch": 0,
            "base_sequence": seq,
            "record_count": 5,
        }

    body = {
        "topic_data": [
            "not a topic",
            {"name": "a", "partition_data": [{"index": 0, "records": [batch(far, -1)]}]},
            {
                "topic_id": "id-b",
                "partition_data": [
                    {"index": 1, "records": [batch(near, 7, 0), batch(near, 7, 10)]},
                    {"partition": 2, "records": [batch(1000_000 - 900_000, -1)]},
                ],
            },
        ]
    }
    answer = {
        "responses": [
            {"name": "a", "partition_responses": [{"index": 0, "log_append_time_ms": far}]},
            {
                "topic_id": "id-b",
                "partition_responses": [
                    "not a partition",
                    {"index": 1, "error_code": 45, "log_append_time_ms": -1},
                    {"partition": 2, "log_append_time_ms": 1000_000 - 600_000},
                ],
            },
        ]
    }
    Diagnoses().observe(ex, body, answer, {"id-b": "b"})
    gap = "producer 7 epoch 0, b[1]: batch {} refused (OUT_OF_ORDER_SEQUENCE_NUMBER); no "
    assert [(f.code, f.detail) for f in ex.findings] == [
        ("clock_skew", "records for a[0] stamped 3600 s ahead of the capture clock (CreateTime)"),
        (
            "producer_sequence_gap",
            gap.format("0-4") + "earlier accepted batch of it in the capture",
        ),
        (
            "producer_sequence_gap",
            gap.format("10-14") + "earlier accepted batch of it in the capture",
        ),
        ("clock_skew", "records for b[2] stamped 900 s behind the capture clock (CreateTime)"),
        ("clock_skew", "the broker stamped a[0] 3600 s ahead of the capture clock (LogAppendTime)"),
        ("clock_skew", "the broker stamped b[2] 600 s behind the capture clock (LogAppendTime)"),
    ]
