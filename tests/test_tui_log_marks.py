"""The log list answers an operator: each row says its topic-partition (the file name
alone did not), and a control batch says which end of a transaction it is (COMMIT or
ABORT), as kafka-dump-log's `endTxnMarker` does."""

from __future__ import annotations

import asyncio

from kdissect.protocol import Options
from kdissect.tui.log_app import LogApp
from tests.support.tui import loaded
from tests.test_log import batch, marker_and_damage


def test_rows_say_topic_partition_and_transaction_markers(tmp_path):
    part = tmp_path / "customers-3"
    part.mkdir()
    records = batch(2, 0, 0, [(b"k", b"v")], pid=7, epoch=0, seq=0, transactional=True)
    # each helper's run ends torn: the ABORT's in a segment of its own
    (part / "00000000000000000000.log").write_bytes(
        records + marker_and_damage(1, 7, 0, 1, [(b"a", b"b")], marker=1))
    (part / "00000000000000000010.log").write_bytes(
        marker_and_damage(10, 7, 0, 2, [(b"c", b"d")], marker=0))

    async def go():
        app = LogApp([str(part)], Options())
        async with app.run_test(size=(200, 40)) as pilot:
            await loaded(app, pilot)
            lines = [app.table.render_line(y).text for y in range(1, app.table.row_count + 1)]
            header = app.table.render_line(0).text
            assert "partition" in header
            batches = [line for line in lines if "batch" in line]
            assert batches and all("customers-3" in line for line in batches)
            assert sum("COMMIT" in line for line in lines) == 1, "\n".join(lines)
            assert sum("ABORT" in line for line in lines) == 1
            # at 80 columns the topic-partition stays
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
            assert "customers-3" in app.table.render_line(1).text
    asyncio.run(go())
