"""A record filter on the capture screen opens the record it matched: moving to an
exchange that passed `record.key == "…"` (or a filter on values, headers) selects that
record in the field tree, not the exchange's first field -- also inside a gzip batch, and
in the Fetch response that carries the record back (kafka-python's codecs capture)."""

from __future__ import annotations

import asyncio

import pytest

from kdissect.render.records import record_json
from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import Detail, FieldTree
from tests.support.tui import loaded, settle
from tests.test_tui import CODECS


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_a_record_filter_opens_the_matching_record():
    async def go():
        app = KdissectApp(capture_loader([str(CODECS)]), title=CODECS.name)
        async with app.run_test(size=(160, 45)) as pilot:
            await loaded(app, pilot)
            for flt, part, want in (
                ('record.key == "kp-gzip-key-1"', "key", "kp-gzip-key-1"),
                ('record.value contains "kp-lz4 value 2"', "value", "kp-lz4 value 2"),
            ):
                assert app.apply_filter(flt) is None
                for _ in range(200):
                    if app._job is None:
                        break
                    await pilot.pause(0.05)
                assert len(app.shown) == 2, flt  # Produce and Fetch
                for row in range(len(app.shown)):
                    app.table.move_cursor(row)
                    await settle(app, pilot)
                    detail = app.query_one(Detail)
                    assert detail.selected is not None, flt
                    _, node = detail.selected
                    assert node.ktype == "record", (flt, node.name)
                    assert want in str(record_json(node)[part]), (flt, record_json(node))
                    tree = app.query_one(FieldTree)
                    await pilot.pause(0.1)
                    assert (
                        tree.cursor_node is not None and tree.cursor_node.data[1] is node
                    )  # the tree's cursor on it

    asyncio.run(go())
