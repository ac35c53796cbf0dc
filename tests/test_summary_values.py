"""Summaries without trees (issue 28): enrichment reads clean messages, Produce and Fetch
included, with the values-only decoder (record batches as their headers), and what it
learns is what the located summary tree says."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect.protocol import node as node_module
from kdissect.protocol import schemas
from kdissect.protocol.apis import FETCH, PRODUCE
from kdissect.protocol.values import BatchHeads, body_values
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream import enrich as enrich_module
from kdissect.stream.engine import Engine
from kdissect.stream.facts import SUMMARY
from kdissect.stream.sink import CallbackSink

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap")) + sorted((ROOT / "captures").glob("*.pcapng"))


def _exchanges(path: Path) -> list:
    got: list = []
    Engine(CaptureFiles([str(path)]), CallbackSink(got.append)).run()
    return got


def _summaries(path: Path) -> list[tuple]:
    return [
        (ex.stream, ex.seq, ex.status, [(f.code, f.detail, f.where) for f in ex.findings], ex.facts)
        for ex in _exchanges(path)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_values_summary_is_the_located_summary(capture, monkeypatch):
    """Facts (topics, partitions, record counts and bytes, errors), findings (the
    diagnoses' too: producer sequences, consumer lag, clock skew read batch headers) and
    status: the same whether enrichment reads messages carrying records by value or as
    located summary trees."""
    by_value = _summaries(capture)
    plain = enrich_module.body_values

    def located_records(data, direction, api_key, api_version, *rest):
        if schemas.has_records(api_key, api_version, direction):
            return None  # as summaries read them before: a located tree
        return plain(data, direction, api_key, api_version, *rest)

    monkeypatch.setattr(enrich_module, "body_values", located_records)
    located = _summaries(capture)
    assert by_value == located


def test_the_summary_builds_no_node_for_clean_messages(monkeypatch):
    """A capture of clean Produce and Fetch traffic: enrichment builds located nodes only
    for none of them (ApiVersions answers, where versions are learned, are read by value)."""
    built: list[str] = []  # nodes made outside the located decodes watched
    decoded: list[int | None] = []
    inside = [False]
    plain_init = node_module.Node.__init__

    def counting(self, name, *args, **kwargs):
        if not inside[0]:
            built.append(name)
        plain_init(self, name, *args, **kwargs)

    from kdissect.stream.model import KafkaMessage

    plain_method = KafkaMessage.decoded

    def watching(self, options=None):
        decoded.append(self.api_key)
        inside[0] = True
        try:
            return plain_method(self, options)
        finally:
            inside[0] = False

    monkeypatch.setattr(node_module.Node, "__init__", counting)
    monkeypatch.setattr(KafkaMessage, "decoded", watching)
    exchanges = _exchanges(ROOT / "captures" / "kafka-python-codecs.pcap")
    apis = {ex.first.api_key for ex in exchanges}
    assert {PRODUCE, FETCH} <= apis
    assert sum(ex.facts.records for ex in exchanges) >= 40
    assert decoded == [], "no message is read located (ApiVersions answers by value too)"
    assert built == []


def test_batch_heads_say_what_the_batches_say():
    """A Produce request read for a summary: its records field as the headers of its
    batches, with the field's size (length prefix included), no records."""
    req = next(
        ex.request
        for ex in _exchanges(ROOT / "captures" / "acks0.pcap")
        if ex.first.api_key == PRODUCE
    )
    body = body_values(req.data, "request", PRODUCE, req.api_version, SUMMARY, bytes)
    assert body is not None
    (records,) = [p["records"] for t in body["topic_data"] for p in t["partition_data"]]
    assert isinstance(records, BatchHeads)
    assert [b["record_count"] for b in records] == [4] and records[0]["records"] == []
    assert records[0]["magic"] == 2 and records.size == 191
