"""`kdissect log` answers an operator's questions about a log dir the real Apache Kafka
broker wrote (the session's node; tests/support/operator_logs.py): which batches are a
transaction's COMMIT/ABORT markers and which belong to an aborted transaction (from the
partition's .txnindex), which records DeleteRecords removed though they are still on
disk (the leader-epoch checkpoint's first start offset, where Kafka moves it), where the
tombstones are, what the internal topics hold (decoded, transaction states by name, the
topic id in Kafka's base64 beside ours: partition.metadata, written by the broker, is the
oracle) -- in text lines and in the TUI (Textual's pilot): marks, filter fields,
completion, the filter error, the statistics at 120 columns."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from kdissect.cli import main
from kdissect.protocol import Options
from kdissect.tui.detail import Detail, FieldTree
from kdissect.tui.log_app import LogApp
from tests.support import operator_logs as ops
from tests.support.tui import loaded

pytestmark = pytest.mark.slow  # a broker


@pytest.fixture(scope="module")
def log_dir(apache_kafka, tmp_path_factory) -> Path:
    return ops.write(
        apache_kafka.bootstrap("PLAINTEXT"),
        apache_kafka.log_dirs[0],
        tmp_path_factory.mktemp("operator") / "logs",
    )


def _log(*args: str) -> str:
    res = CliRunner().invoke(main, ["log", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output[-3000:]
    return res.output


def _batch_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if ".log" in line.split("  ")[0] and "@" in line]


def test_text_lines_mark_transactions_deletions_and_decode_internal_records(log_dir):
    txn = _batch_lines(_log(str(log_dir / f"{ops.TXN}-0")))
    assert len(txn) == 4
    # a transaction committed (lz4 records, then COMMIT), one aborted (ABORTED, then ABORT)
    assert "ABORTED" not in txn[0] and "lz4" in txn[0] and txn[1].endswith("COMMIT")
    assert "ABORTED" in txn[2] and txn[3].endswith("ABORT")
    deleted = _batch_lines(_log(str(log_dir)))
    below = [line for line in deleted if "below the log start offset" in line]
    assert len(below) == ops.DELETED_BELOW  # one record a batch: offsets 0..5
    assert all(f"log start offset {ops.DELETED_BELOW}" in line for line in below)
    out = _log(str(log_dir), "--records")
    # internal records decoded, not hex; the transaction's states by name, in Kafka's order
    assert f'"group": "{ops.GROUP}"' in out and f'"transactional_id": "{ops.TXN_ID}"' in out
    # (the session broker's __transaction_state partitions hold other tests' transactions)
    ours = "\n".join(line for line in out.splitlines() if ops.TXN_ID in line)
    states = re.findall(r'"transaction_status": "\d \((\w+)\)"', ours)
    assert states == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
        "Ongoing",
        "PrepareAbort",
        "CompleteAbort",
    ]
    # the offset commit's topic id: dashed, and in base64 as the broker writes it
    topic_id = re.search(
        r"topic_id: (\S+)", (log_dir / f"{ops.TXN}-0" / "partition.metadata").read_text()
    )[1]
    assert re.search(r'"topic_id": "[0-9a-f-]{36} \(' + re.escape(topic_id) + r'\)"', out)


def test_log_filters_find_control_aborted_deleted_codec_and_tombstones(log_dir):
    def count(flt: str) -> int:
        return len(_batch_lines(_log(str(log_dir), "-Y", flt)))

    # scoped to this scenario's topics: the session broker's internal partitions, copied
    # too, hold other tests' transactions and groups
    txn, gone = f'topic == "{ops.TXN}"', f'topic == "{ops.DELETED}"'
    assert count(f"control and {txn}") == 2
    assert count(f"transactional and not control and {txn}") == 2
    assert count(f"aborted and {txn}") == 1
    assert count(f"codec == lz4 and {txn}") == 2
    assert count(f"deleted and {gone}") == ops.DELETED_BELOW
    assert count(f"record.value == null and {gone}") == 1  # the tombstone
    assert count(f'record.key.group == "{ops.GROUP}"') == 1
    assert count(f'record.key.OffsetCommitKey.group == "{ops.GROUP}"') == 1
    res = CliRunner().invoke(main, ["log", str(log_dir), "-Y", "latency > 5"])
    assert res.exit_code != 0
    assert "deleted" in res.output and "client_id" not in res.output


def test_json_lines_and_parquet_carry_the_aborted_and_deleted_marks(log_dir, tmp_path):
    import json

    import pyarrow.parquet as pq

    def batches(*args: str) -> list[dict]:
        objs = [json.loads(line) for line in _log(*args, "--format", "jsonl").splitlines()]
        return [o for o in objs if o["type"] == "batch"]

    txn = batches(str(log_dir / f"{ops.TXN}-0"))
    # committed records, COMMIT, aborted records, ABORT: only the aborted data batch
    assert [b["aborted"] for b in txn] == [False, False, True, False]
    gone = [b for b in batches(str(log_dir)) if b["topic"] == ops.DELETED]
    below = [b for b in gone if b["deleted"] is not None]
    assert len(below) == ops.DELETED_BELOW and len(gone) > len(below)
    assert all(b["deleted"] == "all" and b["log_start_offset"] == ops.DELETED_BELOW for b in below)
    assert all(b["log_start_offset"] is None for b in gone if b["deleted"] is None)
    # the same columns in the batches table, for the same batches
    _log(str(log_dir), "--format", "parquet", "-o", str(tmp_path))
    rows = pq.read_table(tmp_path / "batches.parquet").to_pylist()
    assert [r["aborted"] for r in rows if r["topic"] == ops.TXN] == [False, False, True, False]
    marked = [r for r in rows if r["topic"] == ops.DELETED and r["deleted"] == "all"]
    assert len(marked) == ops.DELETED_BELOW
    assert {r["log_start_offset"] for r in marked} == {ops.DELETED_BELOW}


def run(path: Path, body, size=(200, 50)) -> None:
    async def go():
        app = LogApp([str(path)], Options())
        async with app.run_test(size=size) as pilot:
            await loaded(app, pilot)
            await body(app, pilot)

    asyncio.run(go())


def _rows(app) -> list[str]:
    return [app.table.render_line(y).text for y in range(1, app.table.row_count + 1)]


async def _filter(app, pilot, text: str) -> None:
    await pilot.press("slash")
    app.query_one("#filter").value = text
    await pilot.press("enter")
    for _ in range(200):
        await pilot.pause(0.02)
        if app._job is None and app.filter_text == text:
            break


def test_tui_marks_filters_completes_and_opens(log_dir):
    async def body(app, pilot):
        rows = _rows(app)
        kinds = [r for r in rows if f"{ops.TXN}-0" in r and " v2 " in r]
        assert [
            ("COMMIT" in r and "ABORT" not in r, "ABORTED" in r, bool(re.search(r"ABORT(?!ED)", r)))
            for r in kinds
        ] == [
            (False, False, False),
            (True, False, False),
            (False, True, False),
            (False, False, True),
        ]
        gone = [
            i
            for i, it in enumerate(app.shown)
            if getattr(it, "gone", None) and getattr(it, "topic", None) == ops.DELETED
        ]
        assert len(gone) == ops.DELETED_BELOW
        # a deleted row is struck through, a live one is not
        cells = app.table.cells(app.shown[gone[0]])
        assert "strike" in str(cells[3].style) and "deleted" in cells[2]
        txn, deleted = f'topic == "{ops.TXN}"', f'topic == "{ops.DELETED}"'
        for text, n in (
            (f"aborted and {txn}", 1),
            (f"control and {txn}", 2),
            (f"record.value == null and {deleted}", 1),
            (f'record.key.group == "{ops.GROUP}"', 1),
            (f"deleted and {deleted}", 6),
        ):
            await _filter(app, pilot, text)
            assert len(app.shown) == n, text
        await _filter(app, pilot, "")
        # completion of internal keys' fields; the error lists the log's fields
        await pilot.press("slash")
        box = app.query_one("#filter")
        box.value = "record.key.gr"
        await pilot.press("tab")
        assert box.value == "record.key.group"
        box.value = "latency > 5"
        await pilot.pause(0.1)
        problem = str(app.query_one("#filter-error").render())
        assert "a field of exchanges" in problem  # (pcap's, not the log's)
        await pilot.press("escape")
        # → opens the field under the cursor in the tree
        await _filter(app, pilot, f"control and {txn}")
        await pilot.pause(0.2)
        tree = app.query_one(FieldTree)
        tree.focus()
        await pilot.pause(0.05)
        stack, field = list(tree.root.children), None
        while stack and field is None:  # a field with fields under it
            node = stack.pop(0)
            if node.allow_expand and node.parent is not tree.root and node.children:
                field = node
            stack.extend(node.children)
        assert field is not None
        tree.move_cursor(field)
        await pilot.pause(0.05)
        if field.is_expanded:
            await pilot.press("left")  # ← closes it
            await pilot.pause(0.05)
        assert not field.is_expanded
        await pilot.press("right")  # → opens it
        await pilot.pause(0.05)
        assert field.is_expanded
        await pilot.press("right")  # → again: to its first field
        await pilot.pause(0.05)
        assert tree.cursor_node is field.children[0]
        assert app.query_one(Detail) is not None

    run(log_dir, body)


def test_tui_statistics_one_line_a_row_at_120_columns(log_dir):
    async def body(app, pilot):
        await pilot.press("s")
        await pilot.pause(0.5)
        width = app.screen.query_one("#stats-tables").size.width
        console = Console(width=width, record=True, color_system=None)
        console.print(app.screen.renderable)
        lines = console.export_text().splitlines()
        assert max(len(line) for line in lines) <= width
        for part, batches in ((f"{ops.TXN}-0", 4), (f"{ops.DELETED}-0", 10)):
            mine = [line for line in lines if line.lstrip().startswith(part + " ")]
            assert mine and re.search(rf"\s{batches}\s", mine[0]), "\n".join(lines)
        # no row spills onto a second line: every line of a table starts a row or rule
        # (this scenario's two partitions, a segment each; the internal ones vary with
        # what other tests wrote through the session broker)
        per_file = [
            line for line in lines if f"{ops.TXN}-0/0000" in line or f"{ops.DELETED}-0/0000" in line
        ]
        assert len(per_file) == 2, "\n".join(lines)

    run(log_dir, body, size=(120, 40))


def test_an_export_lists_aborted_transactions_as_the_broker_did(log_dir, tmp_path):
    """The log TUI's `E` export of the real broker's transactional partition: its
    .txnindex holds the bytes the broker's own .txnindex holds (each aborted
    transaction from its first batch to its ABORT marker), and read again the batches
    keep their marks with no finding."""
    from kdissect.tui.log_export import write_segments
    from kdissect.tui.log_items import item_bytes
    from tests.test_log_tui_parts import _items, whole_batch

    part = log_dir / f"{ops.TXN}-0"
    (theirs,) = part.glob("*.txnindex")
    items = [i for i in _items(part) if whole_batch(i)]
    ((segment, count),) = write_segments(tmp_path / "out", items, item_bytes).items()
    assert count == 4
    assert segment.with_suffix(".txnindex").read_bytes() == theirs.read_bytes()
    again = [i for i in _items(segment.parent) if whole_batch(i)]
    assert [(i.base, i.aborted) for i in again] == [(i.base, i.aborted) for i in items]
    assert not [f for i in again for f in i.findings]


def test_a_segment_given_alone_is_read_with_its_partitions_evidence(log_dir):
    """A segment given alone was read without its partition: the aborted transaction's
    batch lost its ABORTED mark (its .txnindex beside it) and the batches DeleteRecords
    removed their mark (the leader-epoch checkpoint's log start). Read with the files
    beside it, it says what the partition directory says, and which files it read."""
    for topic, says in ((ops.TXN, "ABORTED"), (ops.DELETED, "below the log start offset")):
        part = log_dir / f"{topic}-0"
        segment = min(part.glob("*.log"))
        res = CliRunner().invoke(main, ["log", str(segment)], catch_exceptions=False)
        assert res.exit_code == 0, res.output[-3000:]
        alone = _batch_lines(res.stdout)
        assert alone == [line for line in _batch_lines(_log(str(part))) if segment.name in line], (
            topic
        )
        assert any(says in line for line in alone), topic
        assert "leader-epoch-checkpoint" in res.stderr, res.stderr
        if topic == ops.TXN:
            assert segment.with_suffix(".txnindex").name in res.stderr, res.stderr
