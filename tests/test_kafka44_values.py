"""Kafka 4.4 captures read value by value against Kafka's own classes: every message of
captures/kafka44-cluster.pcap (Java 4.4 clients on three 4.4 brokers, and the brokers'
replication) decoded by kdissect and by Kafka's generated message classes
(tests/support/java/KafkaDecode.java through tests/support/oracle.py), every field of
every message compared; none of them unread, malformed or of an unknown API."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from kdissect.protocol import Options, schemas
from kdissect.protocol.layout import Struct
from kdissect.sources.pcap import exchanges_in
from tests.support import oracle

CAPTURES = Path(__file__).parent.parent / "captures"
RAW = Options(records=False, embedded=False)     # records and embedded bytes as Kafka has them


def _key(name: str) -> str:
    """Kafka's JSON names (topicId) and kdissect's (topic_id) alike."""
    return name.replace("_", "").lower()


def _uuid(text: str) -> str:
    """Kafka's JSON of a Uuid (URL-safe base64, unpadded) as kdissect shows it."""
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))


def compare(kafka, ours, layout: Struct | None, path: str, diffs: list[str]) -> int:
    """Every value Kafka's JSON holds against kdissect's: the number of values compared;
    what differs appended to ``diffs``. A field kdissect does not show must be a tagged
    field (absent on the wire: Kafka's JSON shows its default)."""
    if isinstance(kafka, dict):
        if not isinstance(ours, dict):
            diffs.append(f"{path}: Kafka {kafka!r}, kdissect {ours!r}")
            return 1
        mine = {_key(k): v for k, v in ours.items()}
        fields = {} if layout is None else \
            {_key(f.name): f for f in (*layout.fields, *layout.tagged)}
        n = 0
        for name, value in kafka.items():
            k = _key(name)
            if k == "recordssizeinbytes":           # records: Kafka tells their size
                got = mine.pop("records", None)
                n += 1
                if (0 if got is None else len(got)) != value:
                    diffs.append(f"{path}.records: Kafka {value} bytes, kdissect "
                                 f"{None if got is None else len(got)}")
                continue
            f = fields.get(k)
            if k not in mine:
                if f is None or f.tag is None:
                    diffs.append(f"{path}.{name}: not in kdissect's reading")
                continue
            n += compare(value, mine.pop(k), f.struct if f is not None else None,
                         f"{path}.{name}", diffs)
        diffs.extend(f"{path}.{k}: only kdissect has it" for k in mine)
        return n
    if isinstance(kafka, list):
        if not isinstance(ours, list) or len(ours) != len(kafka):
            diffs.append(f"{path}: Kafka {len(kafka)} items, kdissect {ours!r:.80}")
            return 1
        return sum(compare(a, b, layout, f"{path}[{i}]", diffs)
                   for i, (a, b) in enumerate(zip(kafka, ours)))
    if isinstance(ours, (bytes, bytearray)) and isinstance(kafka, str):
        kafka = base64.b64decode(kafka)
    elif isinstance(kafka, str) and isinstance(ours, str) and len(kafka) == 22 and \
            len(ours) == 36:
        kafka = _uuid(kafka)
    if kafka != ours:
        diffs.append(f"{path}: Kafka {kafka!r:.80}, kdissect {ours!r:.80}")
    return 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kafka44-cluster"])
def test_every_value_equals_kafkas(name):
    exchanges = exchanges_in([str(CAPTURES / f"{name}.pcap")]).exchanges
    messages = [m for e in exchanges for m in e.messages]
    truth = oracle.kafka_decoded(exchanges)
    assert len(messages) > 400
    assert [m.index for m in messages if m.status != "ok" or m.holes] == []
    assert sorted(m.index for m in messages) == sorted(truth)     # Kafka read every one
    diffs: list[str] = []
    values = confirmed = 0
    for m in messages:
        body = dict(truth[m.index])
        assert "_unread" not in body
        api = body.pop("_api", None)
        if api is not None:
            assert (api[0], api[1], api[2]) == (m.api_key, m.api_version, True)
        decoded = m.decoded(RAW)
        # the one problem allowed: bytes after the body that Kafka's classes leave too
        # (librdkafka's Metadata v13 request ends with 3 of them)
        trailing = body.pop("_trailing", None)
        want = [] if trailing is None else [f"{trailing} bytes after the end of the body"]
        assert [r for p, r in decoded.problems] == want, (m.index, decoded.problems)
        assert all(p.endswith("body._trailing") for p, _ in decoded.problems)
        confirmed += trailing is not None
        values += compare(body, decoded.body.plain(),
                          schemas.layout(m.api_key, m.api_version, m.direction),
                          f"#{m.index} {m.api_name} v{m.api_version} {m.direction}", diffs)
    assert diffs == [], diffs[:20]
    assert values > 10 * len(messages)
    print(f"{name}: {len(messages)} messages, {values} values equal, "
          f"{confirmed} trailing-bytes problems Kafka's classes confirm")
