"""Exchanges and records as flat rows (plain dicts) for tables: the Parquet output of
``kdissect pcap --format parquet`` and the Spark job build the same rows here.

Rows hold values only: no raw payload bytes (record keys are kept as text or hex, values
by size), so tables stay small and safe to share.
"""

from __future__ import annotations

from typing import Any

from collections.abc import Iterable, Iterator
from dataclasses import replace

from ..protocol import Options
from ..protocol.apis import carries_records
from ..protocol.names import error_name
from ..protocol.node import Node
from ..protocol.records import record_offset
from ..protocol.values_schema import value_columns
from .facts import UNRESOLVED, topic_of_id
from .fields import PROBLEM_GROUPS
from .cells import PARTITION_FIELDS, TOPIC_FIELDS, ms_micros, text_or_hex
from .model import Exchange, KafkaMessage
from .record_table import RowShape, fast_record_rows


def _body(tree: Node | None, m: KafkaMessage) -> Node | None:
    if tree is None:
        return None
    return tree.children[0] if m.direction == "sasl" else tree.child("body")


def exchange_row(ex: Exchange, capture: str) -> dict[Any, Any]:
    """One enriched exchange as a row. Topics the capture had not named by then are
    left as ``topic-id:<uuid>`` for ``resolve_topics`` to name once the whole capture
    has been read. (Made once per exchange by --format parquet: no comprehension runs
    on an empty list, the topics are sorted once.)"""
    req, resp = ex.request, ex.response
    first = ex.first
    f = ex.facts
    assert f is not None, "rows are made of enriched exchanges"
    top = f.top_error
    topics = sorted(f.topics) if f.topics else []
    findings = ex.findings
    return {
        "capture": capture,
        "client_ip": ex.client[0],
        "client_port": ex.client[1],
        "broker_ip": ex.broker[0],
        "broker_port": ex.broker[1],
        "api_key": first.api_key,
        "api_name": first.api_name,
        "api_version": first.api_version,
        "correlation_id": first.correlation_id,
        "client_id": req.client_id if req is not None else None,
        "request_ts": req.ts if req is not None else None,
        "response_ts": resp.ts if resp is not None else None,
        "latency_ms": ex.latency * 1000 if ex.latency is not None else None,
        "request_size": req.size if req is not None else None,
        "response_size": resp.size if resp is not None else None,
        "error_code": top,
        "error_name": error_name(top) if top is not None else None,
        "errors": [
            {"topic": t, "partition": p, "code": c, "name": error_name(c)}
            for t, p, c in f.error_sites
        ]
        if f.error_sites
        else [],
        "topics": topics,
        "partitions": [{"topic": t, "partition": p} for t in topics for p in sorted(f.topics[t])],
        "record_count": f.records,
        "record_bytes": f.record_bytes,
        "status": ex.status,
        "problems": [x.text() for x in findings if x.kind.group in PROBLEM_GROUPS]
        if findings
        else [],
        "findings": [
            {"code": x.code, "severity": x.severity, "where": x.where, "detail": x.detail}
            for x in findings
        ]
        if findings
        else [],
    }


def resolve_topics(
    rows: Iterable[dict[Any, Any]], topic_ids: dict[str, str]
) -> Iterator[dict[Any, Any]]:
    """Name the topics that were only known by id when their row was made."""
    if not topic_ids:
        yield from rows
        return
    for row in rows:
        if _unresolved(row):
            row = dict(row)

            def name(t: str | None) -> str | None:
                return (
                    topic_ids.get(t[len(UNRESOLVED) :], t) if t and t.startswith(UNRESOLVED) else t
                )

            row["topics"] = sorted({name(t) for t in row["topics"]})
            row["partitions"] = sorted(
                ({**p, "topic": name(p["topic"])} for p in row["partitions"]),
                key=lambda p: (p["topic"], p["partition"]),
            )
            row["errors"] = [{**e, "topic": name(e["topic"])} for e in row["errors"]]
        yield row


def resolve_record_topics(
    records: Iterable[Any], topic_ids: dict[str, str], shape: RowShape | None = None
) -> Iterator[Any]:
    """``resolve_topics`` for record rows (dicts, or ``shape``'s tuples)."""
    if not topic_ids:
        yield from records
        return
    at: Any = "topic" if shape is None else shape.topic
    for r in records:
        t = r[at]
        if t and t.startswith(UNRESOLVED) and t[len(UNRESOLVED) :] in topic_ids:
            name = topic_ids[t[len(UNRESOLVED) :]]
            r = {**r, "topic": name} if shape is None else r[:at] + (name,) + r[at + 1 :]
        yield r


def _unresolved(row: dict[Any, Any]) -> bool:
    """Whether a row names a topic by id (asked of every row: plain loops)."""
    for t in row["topics"]:
        if t and t.startswith(UNRESOLVED):
            return True
    for e in row["errors"]:
        t = e["topic"]
        if t and t.startswith(UNRESOLVED):
            return True
    return False


RECORDS = Options(records=True)


def record_rows(
    ex: Exchange,
    capture: str,
    values: Any = None,
    joins: dict[str, Any] | None = None,
    fast: bool = True,
    shape: RowShape | None = None,
) -> list[Any]:
    """Every record an exchange carries (Produce requests, Fetch and ShareFetch
    responses), with the topic and partition it belongs to; ``values`` (a
    values_schema.SchemaSource) decodes keys and values by schema (docs/guide/values.md).
    ``joins``: columns added to every row. ``fast``: read what it can without a tree
    (stream/record_table.py); False: the located tree only, the reference. ``shape``
    (a record_table.RowShape): the rows as tuples in its column order, and those read
    without a tree as record_table.RecordBlock items (a batch's rows as one; a batch of
    one record as its row), for a holder that takes them (pipeline/spill.py)."""
    options = RECORDS if values is None else replace(RECORDS, values=values)
    out: list[Any] = []
    for m in (ex.request, ex.response):
        if m is None or not carries_records(m.api_key, m.direction):
            continue
        if fast and values is None and fast_record_rows(m, capture, options, out, joins, shape):
            continue
        body = _body(m.decoded(options).tree, m)
        if body is not None:
            found: list[dict[Any, Any]] = []
            _walk_records(body, None, None, m, capture, found)
            if joins:
                found = [r | joins for r in found]
            out += found if shape is None else map(shape.row, found)
    return out


def _walk_records(
    node: Node, topic: Any, partition: Any, m: KafkaMessage, capture: str, out: list[dict[Any, Any]]
) -> None:
    if node.name.startswith("["):
        for c in node.children:
            if c.ktype == "string" and c.name in TOPIC_FIELDS:
                topic = c.value
            elif c.ktype == "uuid" and c.name == "topic_id" and topic is None:
                topic = topic_of_id(str(c.value), {})
            elif c.ktype == "int32" and c.name in PARTITION_FIELDS:
                partition = c.value
    for c in node.children:
        kind = c.ktype
        if kind == "record" or (kind.startswith("message_v") and _plain_message(c)):
            out.append(_record_row(c, topic, partition, m, capture))
        elif c.children:
            _walk_records(c, topic, partition, m, capture, out)


def _plain_message(n: Node) -> bool:
    attrs = n.child("attributes")
    return attrs is not None and attrs.value is not None and attrs.value & 7 == 0


def _record_row(
    n: Node, topic: Any, partition: Any, m: KafkaMessage, capture: str
) -> dict[Any, Any]:
    key, value, headers = n.child("key"), n.child("value"), n.child("headers")
    offset = record_offset(n)
    if n.ktype == "record":
        ts = (n.value or {}).get("timestamp")
    else:  # a v0/v1 message
        t = n.child("timestamp")
        ts = t.value if t is not None else None
    return {
        "capture": capture,
        "direction": "produce" if m.direction == "request" else "fetch",
        "correlation_id": m.correlation_id,
        "message_ts": m.ts,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": ms_micros(ts),
        "key": text_or_hex(key.value) if key is not None else None,
        "value_size": len(value.value) if value is not None and value.value is not None else None,
        "headers": [
            {
                "key": k.value,
                "value": text_or_hex(v.value) if (v := h.child("value")) is not None else None,
            }
            for h in (headers.children if headers is not None else [])
            if (k := h.child("key")) is not None
        ],
        "problems": [r for _, r in n.problems()],
        **value_columns(key, "key"),
        **value_columns(value, "value"),
    }
