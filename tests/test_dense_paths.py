"""The per-message paths of message-dense traffic (issue 43): facts of bodies the values
decoder read, walked through a plan made once per message kind from its layout, are what
the whole walk of the body finds; ApiVersions answers read by value teach the versions
their located trees taught; internal-topic messages without records are read by value."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kdissect.protocol.apis import API_VERSIONS, SASL_AUTHENTICATE
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream import enrich as enrich_module
from kdissect.stream import facts as facts_module
from kdissect.stream.engine import Engine
from kdissect.stream.sink import CallbackSink

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap")) + sorted((ROOT / "captures").glob("*.pcapng"))


def _run(path: Path) -> tuple[list, Engine]:
    got: list = []
    engine = Engine(CaptureFiles([str(path)]), CallbackSink(got.append))
    engine.run()
    return got, engine


def test_planned_facts_are_the_whole_walks(monkeypatch):
    """Every exchange of every capture: the facts through the plans equal the facts of
    the same bodies walked whole (topics, partitions, errors and where, records, bytes),
    and the topic ids each teaches."""
    plain, pair = facts_module.facts, facts_module.pair_facts
    compared = planned = 0

    def both(request, response, plans, topic_ids):
        nonlocal compared, planned
        ids, ids2 = copy.deepcopy(topic_ids), copy.deepcopy(topic_ids)
        whole = plain(request, response, topic_ids=ids)
        by_plans = plain(request, response, topic_ids=ids2, plans=plans)
        got = pair(request, response, plans, topic_ids)  # (enrichment's call)
        assert got == whole == by_plans and topic_ids == ids == ids2
        compared += 1
        planned += any(p is not None and p is not facts_module.GENERIC for p in plans)
        return got

    monkeypatch.setattr(enrich_module, "pair_facts", both)
    for capture in CAPTURES:
        _run(capture)
    assert planned > 1000 and compared > planned * 0.9, (compared, planned)


def test_plans_keep_only_what_teaches_facts():
    """A Fetch request v18 (KRaft replication's): its plan reads topic ids, partitions
    and nothing of replica state, rack or session; BrokerHeartbeat's request, no fact."""
    plan = facts_module.python_plan(1, 18, "request")
    _element, _names, _has_id, items = plan
    assert [k for k, *_ in items] == ["topics", "forgotten_topics_data"]
    topics = items[0][2]
    assert topics[0] is True and topics[2] is True  # an element with a topic id
    assert [k for k, *_ in topics[3]] == ["partitions"]
    assert [k for k, *_ in topics[3][0][2][3]] == ["partition"]
    assert facts_module.body_plan(63, 1, "request") is None
    assert facts_module.python_plan(63, 1, "request") is None


@pytest.mark.parametrize("capture", ["kafka-kraft-cluster.pcap", "kafka-python-codecs.pcap"])
def test_versions_learned_by_value_as_located(capture, monkeypatch):
    """What ApiVersions answers advertised on each connection, and so the findings and
    statuses of the exchanges after them: the same read by value as read located."""
    by_value, engine = _run(ROOT / "captures" / capture)
    advertised = engine.enricher.advertised
    assert advertised and all(API_VERSIONS in r for r in advertised.values())
    monkeypatch.setattr(
        enrich_module, "_LOCATED_APIS", frozenset({API_VERSIONS, SASL_AUTHENTICATE})
    )
    located, engine = _run(ROOT / "captures" / capture)
    assert engine.enricher.advertised == advertised
    assert [(ex.status, ex.findings, ex.facts) for ex in by_value] == [
        (ex.status, ex.findings, ex.facts) for ex in located
    ]


def test_internal_topic_fetches_without_records_are_read_by_value():
    """KRaft's replication Fetch answers name __cluster_metadata (by its fixed id): those
    carrying records go to the located path, which decodes the metadata records by their
    schemas; those carrying none (half of them in this capture) are read by value, as
    any other clean message."""
    from kdissect.protocol import Options
    from kdissect.protocol.apis import FETCH
    from kdissect.protocol.internal import mentions_internal_topic
    from kdissect.protocol.values import body_values
    from kdissect.stream.facts import SUMMARY

    exchanges, engine = _run(ROOT / "captures" / "kafka-kraft-cluster.pcap")
    full, topic_ids = Options(), engine.enricher.topic_ids
    by_value = located = 0
    for ex in exchanges:
        resp = ex.response
        if (
            ex.first.api_key != FETCH
            or resp is None
            or ex.status != "ok"
            or not mentions_internal_topic(resp.data, topic_ids)
        ):
            continue
        heads = body_values(resp.data, "response", FETCH, resp.api_version, SUMMARY, bytes)
        assert heads is not None
        batches = [
            b for t in heads["responses"] for p in t["partitions"] for b in (p["records"] or ())
        ]
        body = body_values(
            resp.data, "response", FETCH, resp.api_version, full, bytes, topic_ids=topic_ids
        )
        assert (body is None) == bool(batches)
        by_value += body is not None
        located += body is None
    assert by_value > 50 and located > 50, (by_value, located)
