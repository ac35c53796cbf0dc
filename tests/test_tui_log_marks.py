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
        records + marker_and_damage(1, 7, 0, 1, [(b"a", b"b")], marker=1)
    )
    (part / "00000000000000000010.log").write_bytes(
        marker_and_damage(10, 7, 0, 2, [(b"c", b"d")], marker=0)
    )

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
            # at 80 columns the topic-partition and the transaction's marks stay
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
            assert "customers-3" in app.table.render_line(1).text
            lines = [app.table.render_line(y).text for y in range(1, app.table.row_count + 1)]
            assert sum("COMMIT v2" in line for line in lines) == 1, "\n".join(lines)
            assert sum("ABORT v2" in line for line in lines) == 1

    asyncio.run(go())


def test_p_on_a_check_across_batches_selects_its_field(tmp_path):
    """`p` on a batch whose finding comes from the checks across batches (a sequence gap,
    an offset gap) selects the field the check read, not the whole batch."""
    from kdissect.tui.detail import Detail

    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        batch(2, 0, 0, [(b"a", b"1")], pid=7, epoch=0, seq=0)
        + batch(2, 0, 1, [(b"b", b"2")], pid=7, epoch=0, seq=5)  # sequence 1..4 gone
        + batch(2, 0, 9, [(b"c", b"3")])
    )  # offsets 2..8 gone

    async def go():
        app = LogApp([str(part)], Options())
        async with app.run_test(size=(160, 45)) as pilot:
            await loaded(app, pilot)
            seen = []
            for _ in range(2):
                await pilot.press("p")
                await pilot.pause(0.2)
                _, node = app.query_one(Detail).selected
                seen.append((app.current().cells[3], node.name))
            assert seen == [("1–1", "base_sequence"), ("9–9", "base_offset")], seen
            # the check's finding is an item of the detail, whole, however long the path
            found = app.query_one(Detail).items[-1]
            assert str(found.label) == "Findings (1)", found.label
            (node,) = found.root.children
            assert "offsets 2" in (node.note or ""), node.note

    asyncio.run(go())


def _operator_partition(tmp_path):
    """orders-0: two plain records below the log start offset (leader-epoch-checkpoint
    starts at 2, as Kafka leaves it after DeleteRecords), a transaction of producer 7
    its .txnindex lists as aborted and its ABORT marker, a gzip batch with a tombstone
    (the broker-written equivalent: tests/test_log_operator.py)."""
    import struct

    part = tmp_path / "orders-0"
    part.mkdir()
    tail = marker_and_damage(4, 7, 0, 2, [(b"x", b"y")], marker=0)
    marker = tail[: 12 + struct.unpack_from(">i", tail, 8)[0]]
    (part / "00000000000000000000.log").write_bytes(
        batch(2, 0, 0, [(b"a", b"1"), (b"b", b"2")])
        + batch(2, 0, 2, [(b"t", b"3"), (b"u", b"4")], pid=7, epoch=0, seq=0, transactional=True)
        + marker
        + batch(2, 1, 5, [(b"gone", None), (b"k", b"gzip shrinks this " * 20)])
    )
    (part / "00000000000000000000.txnindex").write_bytes(struct.pack(">hqqqq", 0, 7, 2, 4, 5))
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 2\n")
    return part


def test_marks_and_operator_filters_in_text_and_tui(tmp_path):
    from tests.test_log import run_log

    part = _operator_partition(tmp_path)
    code, out = run_log(str(part))
    lines = [line for line in out.splitlines() if ".log" in line.split("  ")[0] and "@" in line]
    assert code == 0 and len(lines) == 4, out
    assert "deleted: all of it below the log start offset 2" in lines[0]
    assert "ABORTED" in lines[1] and lines[2].rstrip().endswith("ABORT")
    for flt, n in (
        ("deleted", 1),
        ("aborted", 1),
        ("control", 1),
        ("transactional", 2),
        ("codec == gzip", 1),
        ("record.value == null", 1),
        ('record.value == "3"', 1),
        ("not record.value", 1),
    ):
        code, out = run_log(str(part), "-Y", flt)
        got = [line for line in out.splitlines() if "@" in line]
        assert code == 0 and len(got) == n, (flt, out)

    async def go():
        app = LogApp([str(part)], Options())
        async with app.run_test(size=(160, 40)) as pilot:
            await loaded(app, pilot)
            kinds = [it.cells[1] for it in app.shown if it.kind == "batch"]
            assert kinds == [
                "batch v2 deleted",
                "ABORTED v2",
                "ABORT v2",
                "batch v2",
            ], kinds
            for flt, n in (
                ("aborted", 1),
                ("deleted", 1),
                ("codec == gzip", 1),
                ("record.value == null", 1),
            ):
                assert app.apply_filter(flt) is None
                await pilot.pause(0.1)
                assert len(app.shown) == n, flt

    asyncio.run(go())


def test_the_log_start_offset_checkpoint_marks_deleted_batches(tmp_path):
    """A log dir's log-start-offset-checkpoint (what the broker flushes each minute) says
    where the partition's log starts: batches before it are deleted, still on disk."""
    from tests.test_log import run_log

    logs = tmp_path / "logs"
    part = logs / "orders-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(
        b"".join(batch(2, 0, i, [(b"k%d" % i, b"v")]) for i in range(4))
    )
    (logs / "meta.properties").write_text("version=1\nnode.id=1\n")
    (logs / "log-start-offset-checkpoint").write_text("0\n1\norders 0 3\n")
    code, out = run_log(str(logs), "-Y", "deleted")
    assert code == 0
    assert [
        line.split("offsets ")[1].split(",")[0] for line in out.splitlines() if "@" in line
    ] == ["0..0", "1..1", "2..2"], out
    assert out.count("below the log start offset 3") == 3


def test_a_finding_about_a_whole_file_shows_no_empty_value():
    """A finding with no place (a whole file or batch) read `= ''` in the detail."""
    from rich.text import Text

    from kdissect.protocol.findings import Finding
    from kdissect.tui.detail import describe, findings_item

    item = findings_item(
        [
            Finding("offset_gap", "offsets 2–8 missing", ""),
            Finding("crc_mismatch", "x", "batch @0"),
        ]
    )
    lines = [describe(Text(n.name), n, 0, False, 80).plain for n in item.root.children]
    assert "=" not in lines[0] and "offsets 2–8 missing" in lines[0], lines
    assert "= 'batch @0'" in lines[1], lines
