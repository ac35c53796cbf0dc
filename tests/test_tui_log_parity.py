"""kdissect log's TUI at parity with the exchange screens, driven with Textual's pilot on
segments the real Apache Kafka broker wrote (the session's `apache_kafka` node): the
filter bar (completion of the log's fields, the caret under what is wrong, a record-key
filter run in forked workers), sort, byte search inside lz4-compressed batches (in
workers), statistics, export (JSON lines equal to `kdissect log --format jsonl --records`
and a segment Kafka's own kafka-dump-log reads, record for record), help, and Esc
cancelling a job."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kdissect.cli import main
from kdissect.protocol import Options
from kdissect.tui.detail import Detail, HexView
from kdissect.tui.log_app import LogApp
from kdissect.tui.log_stats import LogStatsScreen
from kdissect.tui.screens import HelpScreen
from tests.support.tui import drive

pytestmark = pytest.mark.slow  # a broker, Textual's pilot

TOPIC = "tui-log-parity"
SINGLES = 240  # one batch each: over the workers' threshold


@pytest.fixture(scope="module")
def partition(apache_kafka, tmp_path_factory) -> Path:
    """A partition the broker wrote: SINGLES batches of one record (an idempotent
    producer asked for gzip: librdkafka sends them uncompressed, gzip would not shrink
    them), then one lz4 batch holding the needle, copied out of the running broker's
    log dir."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = apache_kafka.bootstrap("PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        f.result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "gzip",
            "linger.ms": 0,
            "enable.idempotence": True,
        }
    )
    for i in range(SINGLES):
        p.produce(TOPIC, key=b"k%d" % i, value=b"plain value %d" % i)
        p.flush(30)  # a batch per record
    # the 20 wait for flush(), which sends them at once (librdkafka ignores linger.ms while
    # flushing): one batch however slow the machine (200 ms of linger was a guess)
    z = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 60000})
    for i in range(20):
        z.produce(
            TOPIC,
            key=b"needle-key" if i == 7 else b"z%d" % i,
            value=(b"find-me-in-lz4 " if i == 7 else b"") + b"lz4 value %d " % i * 8,
        )
    z.flush(30)
    source = apache_kafka.log_dirs[0] / f"{TOPIC}-0"
    target = tmp_path_factory.mktemp("tui-log") / f"{TOPIC}-0"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # the broker has written all of it
        shutil.copytree(source, target, dirs_exist_ok=True)
        if _records(target) == SINGLES + 20:
            return target
        time.sleep(0.2)
    raise AssertionError(f"{_records(target)} records in {target}")


def _jsonl(*args: str) -> list[dict]:
    res = CliRunner().invoke(
        main, ["log", *args, "--format", "jsonl", "--records"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output[-2000:]
    return [json.loads(x) for x in res.output.splitlines()]


def _records(part: Path) -> int:
    return sum(1 for o in _jsonl(str(part)) if o["type"] == "record")


def run(part: Path, body, size=(160, 45)) -> None:
    drive(LogApp([str(part)], Options()), body, size)


async def _type(pilot, text: str) -> None:
    for key in text:
        await pilot.press(
            {
                " ": "space",
                '"': "quotation_mark",
                "=": "equals_sign",
                "-": "minus",
                "_": "underscore",
            }.get(key, key)
        )


async def _job_done(app, pilot, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    await pilot.pause(0.05)
    while app._job is not None and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert app._job is None, "the job did not finish"
    await pilot.pause(0.1)


def test_filter_bar_completes_shows_the_caret_and_filters_in_workers(partition):
    async def body(app, pilot):
        batches = [it for it in app.shown if it.kind == "batch"]
        assert len(batches) == SINGLES + 1 and len(app.shown) > 200
        # Tab completes the log's fields (not the exchanges' api, latency...)
        await pilot.press("slash")
        await _type(pilot, "produc")
        await pilot.pause(0.2)
        await pilot.press("tab")
        box = app.query_one("#filter")
        assert box.value == "producer_id"
        # a caret under what is wrong, as typed
        await _type(pilot, " == ")
        await pilot.pause(0.1)
        problem = app.query_one("#filter-error")
        assert problem.has_class("visible")
        assert "^" in str(problem.render())
        # a record filter over 240+ items: forked workers, the list as it was meanwhile
        box.value = 'record.key == "needle-key"'
        await pilot.press("enter")
        await _job_done(app, pilot)
        assert len(app.shown) == 1 and app.shown[0].cells[6] == "lz4"
        assert "1 of" in str(app.query_one("#active-filter").render())
        # a filter on what the list keeps (findings, topic): no worker, no decoding
        await pilot.press("slash")
        box.value = f'topic == "{TOPIC}" and not finding'
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert app._job is None and len(app.shown) == len(app.items)

    run(partition, body)


def test_sort_search_statistics_and_help(partition):
    async def body(app, pilot):
        # o: size, biggest first (files too: the preallocated indexes; then the lz4 batch
        # of 20 records)
        await pilot.press("o")
        await pilot.pause(0.1)
        sizes = [it.length for it in app.shown]
        assert sizes == sorted(sizes, reverse=True)
        assert [it for it in app.shown if it.kind == "batch"][0].cells[6] == "lz4"
        await pilot.press("O")  # reversed
        await pilot.pause(0.1)
        assert [it.length for it in app.shown] == sorted(sizes)
        await pilot.press("o")  # records, most first
        await pilot.pause(0.1)
        assert app.shown[0].stat[0] == 20
        app.sort_by("#")  # back to file order
        app.table.move_cursor(0)
        # ctrl+f: bytes inside the lz4 batch (decompressed in a worker), the match selected
        await pilot.press("ctrl+f")
        await _type(pilot, "find-me-in-lz4")
        await pilot.press("enter")
        await _job_done(app, pilot)
        await pilot.pause(0.2)
        item = app.current()
        assert item is not None and item.cells[6] == "lz4"
        detail = app.query_one(Detail)
        holder = next(n for n in detail.items[0].root.walk() if n.buffer is not None)
        assert app.query_one(HexView).data == holder.buffer
        assert b"find-me-in-lz4" in holder.buffer
        # bytes that are nowhere: said so, the cursor stays
        await pilot.press("ctrl+f")
        await _type(pilot, "nowhere-at-all")
        await pilot.press("enter")
        await _job_done(app, pilot)
        assert app.current() is item  # not found: the cursor stays
        # s: statistics per partition and file
        await pilot.press("s")
        await pilot.pause(0.3)
        assert isinstance(app.screen, LogStatsScreen)
        text = _plain(app.screen.renderable)
        # librdkafka sends a batch uncompressed when gzip would not shrink it: one record
        assert f"{TOPIC}-0" in text and "none 240, lz4 1" in text
        assert f"{SINGLES + 20} records" in text
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        assert "ctrl+f" in app.screen.text and "E " in app.screen.text

    run(partition, body)


def _plain(renderable) -> str:
    import io

    from rich.console import Console

    console = Console(width=250, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_export_is_json_lines_and_a_segment_kafka_reads(partition, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = _jsonl(str(partition))
    out: dict = {}

    async def body(app, pilot):
        await pilot.press("slash")
        app.query_one("#filter").value = "offset >= 100"
        await pilot.press("enter")
        await _job_done(app, pilot)
        out["shown"] = len(app.shown)
        await pilot.press("E")
        await _job_done(app, pilot)
        app.table.move_cursor(0)
        await pilot.press("e")
        await pilot.pause(0.2)

    run(partition, body)
    directory = tmp_path / f"kdissect-log-{out['shown']}-items"
    lines = [json.loads(x) for x in (directory / "items.jsonl").read_text().splitlines()]
    # the JSON lines are kdissect log's, for the items shown
    kept = [o for o in original if o["type"] == "batch" and o["base_offset"] >= 100]
    assert [o for o in lines if o["type"] == "batch"] == kept
    ours = {
        (o["batch_position"], o["offset"])
        for o in original
        if o["type"] == "record" and o["offset"] >= 100
    }
    assert {(o["batch_position"], o["offset"]) for o in lines if o["type"] == "record"} == ours
    # the segment: named by its first offset, read back with the same records
    segment = directory / f"{TOPIC}-0" / f"{100:020d}.log"
    assert segment.is_file()
    again = [o for o in _jsonl(str(segment)) if o["type"] == "record"]
    assert [(o["offset"], o["key"], o["value"]) for o in again] == [
        (o["offset"], o["key"], o["value"])
        for o in original
        if o["type"] == "record" and o["offset"] >= 100
    ]
    assert not any(
        f for o in _jsonl(str(segment)) for f in o.get("findings", []) if f["severity"] == "error"
    )
    # and Kafka's own tool reads it, batch for batch, record for record
    from tests.support.apache_kafka import DUMP_LOG, run_tool
    from tests.support.dump_log import compare, parse

    dumped = parse(
        run_tool(DUMP_LOG, "--deep-iteration", "--print-data-log", "--files", str(segment)).stdout
    )
    assert compare(dumped[str(segment)], _jsonl(str(segment))) == []
    # e: the item under the cursor (the first shown) as JSON lines
    single = list(tmp_path.glob("kdissect-log-*.jsonl"))
    assert len(single) == 1
    assert json.loads(single[0].read_text().splitlines()[0]) == kept[0]


def test_esc_cancels_a_filter_in_workers(partition):
    async def body(app, pilot):
        before = list(app.shown)
        app.apply_filter('record.value contains "never"')
        assert app._job is not None  # started: the list as it was meanwhile
        assert app.shown == before
        app.action_close_bars()  # Esc, before the job can finish
        await pilot.pause(0.5)
        assert app._job is None and app.shown == before and app.filter is None

    run(partition, body)
