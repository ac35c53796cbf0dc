"""Record values in the TUI, driven with Textual's pilot: Avro values with Schema Registry
framing, produced by a real client (confluent-kafka, plain and lz4) to the real Apache
Kafka broker and captured, open as trees under each record's value, every decoded field
located in the record's buffer (the bytes pane highlights exactly its bytes, inside the
decompressed buffer of a compressed batch); `d` shows them raw and decoded again.
Without schemas, `d` shows what the repo capture's values look like."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kdissect.protocol import Options
from kdissect.schemas_source import Schemas
from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import HIGHLIGHT, Detail, HexView
from tests.support.capture import Tcpdump
from tests.support.tui import drive, settle
from tests.test_tui import CODECS
from tests.test_values_schema import ORDER, ORDER_VALUE, avro_bytes, framed

pytestmark = pytest.mark.slow  # Textual's pilot: seconds per test


def run(path: Path, body, options: Options | None = None, size=(160, 45)) -> None:
    drive(KdissectApp(capture_loader([str(path)], options), options, title=path.name), body, size)


def value_nodes(root):
    """The value nodes of the records under ``root`` (decompressed buffers included)."""
    return [
        n.child("value")
        for n in root.walk()
        if n.ktype == "record" and n.child("value") is not None
    ]


def decoded_id(value) -> str | None:
    decoded = value.child("decoded")
    field = decoded.child("id") if decoded is not None else None
    return field.value if field is not None else None


async def on_record(app, pilot, codec: str, wanted: str):
    """Visit every Produce request to the topic of ``codec``: together their records carry
    the three orders, decoded, however the client batched or retried them (the test must
    not depend on one batch holding all three); then select the request carrying the
    order ``wanted`` and return its tree's root and that record's value node."""
    rows = [
        i
        for i, v in enumerate(app.shown)
        if v.ex.first.api_name == "Produce" and f"orders-{codec}" in v.facts().topics
    ]
    assert rows, f"no Produce to orders-{codec} in the capture"
    ids: set = set()
    at = None
    for row in rows:
        app.table.move_cursor(row)
        await settle(app, pilot)
        assert app.detail_view is app.shown[row], "the detail did not follow the cursor"
        got = [decoded_id(v) for v in value_nodes(app.query_one(Detail).items[0].root)]
        ids.update(got)
        if wanted in got and at is None:
            at = row
    assert {"o-0", "o-1", "o-2"} <= ids, f"orders decoded in orders-{codec}: {ids}"
    assert at is not None
    app.table.move_cursor(at)
    await settle(app, pilot)
    root = app.query_one(Detail).items[0].root
    return root, next(v for v in value_nodes(root) if decoded_id(v) == wanted)


def test_avro_values_from_the_real_broker_are_trees_located_in_their_bytes(apache_kafka, tmp_path):
    from confluent_kafka import Producer

    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "21.avsc").write_text(json.dumps(ORDER))
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = {"bootstrap.servers": apache_kafka.bootstrap("PLAINTEXT")}
    # topics made first (auto-creation made the first send a lone retried record); how
    # the client batches the three records is its business: the test looks at them all
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(f"orders-{c}", 1, 1) for c in ("none", "lz4")]).values():
        f.result(30)
    pcap = tmp_path / "values.pcap"
    with Tcpdump(pcap, apache_kafka.ports("PLAINTEXT")):
        for codec in ("none", "lz4"):
            producer = Producer({**conf, "compression.type": codec})
            for i in range(3):
                producer.produce(
                    f"orders-{codec}",
                    key=f"k{i}",
                    value=framed(21, avro_bytes(ORDER, dict(ORDER_VALUE, id=f"o-{i}"))),
                )
            assert producer.flush(30) == 0
    options = replace(Options(), values=Schemas(schemas))

    async def body(app, pilot):
        detail, hexview = app.query_one(Detail), app.query_one(HexView)
        for codec in ("none", "lz4"):
            root, value = await on_record(app, pilot, codec, "o-1")
            assert [c.name for c in value.children][:3] == ["magic", "schema_id", "decoded"]
            assert value.child("schema_id").value == 21
            field = value.child("decoded").child("id")
            assert field.value == "o-1"
            detail.select(0, field)
            detail.field_tree.reveal(field, root)
            await pilot.pause()
            # the bytes pane: the record's buffer (decompressed for lz4), the field's
            # bytes highlighted, and they are the Avro string "o-1" (length 3, zigzag)
            assert (field.offset, field.end, HIGHLIGHT) in hexview.marks
            assert hexview.data[field.offset : field.end] == b"\x06o-1"
            assert ("decompressed" in hexview.border_title) == (codec == "lz4")
            assert "o-1" in str(app.query_one("#field-line").render())
            # d: raw bytes; the selection falls back to the value, still highlighted
            await pilot.press("d")
            await pilot.pause()
            raw = detail.selected[1]
            assert raw.name == "value" and not raw.children
            assert (raw.offset, raw.end, HIGHLIGHT) in hexview.marks
            await pilot.press("d")  # decoded again
            await pilot.pause()
            again = value_nodes(detail.items[0].root)
            assert again and all(v.child("decoded") is not None for v in again)

    run(pcap, body, options)


def test_without_schemas_d_shows_what_values_look_like():
    async def body(app, pilot):
        row = next(i for i, v in enumerate(app.shown) if v.ex.first.api_name == "Produce")
        app.table.move_cursor(row)
        await settle(app, pilot)
        detail = app.query_one(Detail)
        before = value_nodes(detail.items[0].root)
        assert before and all(not v.children and not v.note for v in before)
        await pilot.press("d")
        await pilot.pause()
        after = value_nodes(detail.items[0].root)
        assert len(after) == len(before) and all(v.note for v in after)
        await pilot.press("d")
        await pilot.pause()
        assert all(not v.note for v in value_nodes(detail.items[0].root))

    run(CODECS, body)
