"""JSON lines carry everything the `-V` tree shows: on every message of every repo
capture, each field of the located tree (record batches' headers, records, internal-topic
records decoded by their schemas, embedded structures) has its key at the same place in
the message's JSON line, whichever decoder wrote the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kdissect.protocol import Options
from kdissect.protocol.node import Node
from kdissect.render.lines import message_json
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream.engine import Engine
from kdissect.stream.sink import Collect

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap*"))
FAST = [p for p in CAPTURES if p.stat().st_size < 200_000]

# A record's fields that JSON gives in their resolved form: the deltas as the absolute
# ``offset`` and ``timestamp``, the lengths and counts as the values and lists they
# measure. A v0/v1 message's ``message_size``: the bytes of its key and value.
RESOLVED = {
    "length",
    "attributes",
    "timestamp_delta",
    "offset_delta",
    "key_length",
    "value_length",
    "headers_count",
    "header_key_length",
    "header_value_length",
    "message_size",
}


def tree_paths(node: Node, path: str, out: set[str]) -> None:
    """The places of the tree's fields, as JSON keys would spell them (arrays as ``[]``)."""
    kind = node.ktype
    if kind == "records":
        if isinstance(node.value, bytes) or node.value is None:
            out.add(path)
            return
        for batch in node.children:
            if not batch.name.startswith("_"):
                _batch_paths(batch, path + "[]", out)
        return
    if kind == "array":
        out.add(path)
        for c in node.children:
            if not c.name.startswith("_"):
                tree_paths(c, path + "[]", out)
        return
    if kind == "tagged":
        if node.children:
            tree_paths(node.children[-1], path, out)
        else:
            out.add(path)
        return
    if node.children and kind != "bytes" or kind in ("struct", "message"):
        for c in node.children:
            if c.ktype == "tagged_fields":
                for t in c.children:
                    if t.ktype == "tagged":
                        tree_paths(t, f"{path}.{t.name}", out)
            elif not c.name.startswith("_"):
                tree_paths(c, f"{path}.{c.name}", out)
        return
    if node.children:  # bytes holding an embedded structure
        for c in node.children:
            if not c.name.startswith("_"):
                tree_paths(c, f"{path}.{c.name}", out)
        return
    out.add(path)


def _batch_paths(batch: Node, path: str, out: set[str]) -> None:
    if batch.ktype == "record_batch":
        for c in batch.children:
            if c.ktype != "record" and c.name != "records" and not c.name.startswith("_"):
                out.add(f"{path}.{c.name}")
    elif batch.ktype.startswith("message_v"):
        out.add(f"{path}.magic")
    stack = list(batch.children)
    while stack:
        n = stack.pop()
        if n.ktype == "record" or n.ktype.startswith("message_v"):
            _record_paths(n, f"{path}.records[]", out)
        if n.ktype != "record":
            stack.extend(n.children)


def _record_paths(rec: Node, path: str, out: set[str]) -> None:
    for c in rec.children:
        name = c.name
        if name.startswith("_") or name in RESOLVED or c.ktype == "records":
            continue
        if name == "headers":
            for h in c.children:
                for f in h.children:
                    if not f.name.startswith("_") and f.name not in RESOLVED:
                        out.add(f"{path}.headers[].{f.name}")
            continue
        if name in ("key", "value") and c.children:  # decoded by a schema
            out.add(f"{path}.{name}")
            decoded = _decoded(c)
            if decoded is not None:
                tree_paths(decoded, f"{path}.{name}_decoded.{decoded.name}", out)
            continue
        if c.ktype in ("wrapped", "message_set"):
            continue  # a compressed wrapper's inner messages: walked above
        out.add(f"{path}.{name}")


def _decoded(n: Node) -> Node | None:
    """The struct an internal topic's schema read from a key or value, if any."""
    for c in n.children:
        if c.ktype in ("struct", "message") and not c.name.startswith("_"):
            return c
    return None


def json_paths(value: Any, path: str, out: set[str], opaque: set[str]) -> None:
    """The places of the JSON's keys into ``out``; those holding null or bytes (where the
    tree has nothing below either) also into ``opaque``."""
    out.add(path)
    if isinstance(value, dict):
        if set(value) in ({"hex"}, {"base64"}, {"text"}):
            opaque.add(path)  # bytes as JSON
            return
        for k, v in value.items():
            json_paths(v, f"{path}.{k}", out, opaque)
    elif isinstance(value, list):
        for v in value:
            json_paths(v, path + "[]", out, opaque)
    elif value is None or isinstance(value, str):
        opaque.add(path)


def missing_fields(paths: list[Path]) -> tuple[int, dict[str, set[str]]]:
    missing: dict[str, set[str]] = {}
    checked = 0
    for capture in paths:
        # as the command line: one dict of topic ids the engine fills and JSON lines read
        # (records of internal topics fetched by id); the tree with what the engine learnt
        options, topic_ids = Options(), {}
        sink = Collect()
        engine = Engine(CaptureFiles([str(capture)]), sink, options, topic_ids=topic_ids)
        engine.run()
        for ex in sink.exchanges:
            for m in ex.messages:
                if m.api_key is None or m.direction == "sasl":
                    continue
                decoded = m.decoded(options, topic_ids)
                if decoded.body is None:
                    continue
                want: set[str] = set()
                tree_paths(decoded.body, "body", want)
                have: set[str] = set()
                opaque: set[str] = set()
                body = message_json(m, options, ex, topic_ids=topic_ids)["body"]
                json_paths(body, "body", have, opaque)
                lost = {p for p in want - have if not _under_opaque(p, opaque)}
                checked += 1
                if lost:
                    missing.setdefault(f"{capture.name} {m.api_name} {m.direction}", set()).update(
                        lost
                    )
    return checked, missing


def _under_opaque(path: str, opaque: set[str]) -> bool:
    """A field under a value JSON has as null or as bytes (a nullable struct, a records
    field left raw): the tree shows the same null or bytes."""
    parts = path.split(".")
    return any(".".join(parts[:i]) in opaque for i in range(1, len(parts)))


def test_every_tree_field_is_in_json_lines():
    checked, missing = missing_fields(FAST)
    assert checked > 500
    assert missing == {}


@pytest.mark.slow
def test_every_tree_field_is_in_json_lines_of_the_big_captures():
    checked, missing = missing_fields([p for p in CAPTURES if p not in FAST])
    assert checked > 1000
    assert missing == {}
