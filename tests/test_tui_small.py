"""At 80×24: the footer keeps `s ? q`, the help scrolls at once with ↓ PgDn End Space
(no Tab first) and says so, unfollowing keeps the exchange in view, the latency column
says which latency it is sorted by, and the next exchange shows the same field."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import Detail
from kdissect.tui.screens import HelpScreen
from tests.support.tui import drive, settle

CLIENTS = Path(__file__).resolve().parents[1] / "captures" / "kafka-clients.pcap"


def run(body, size=(80, 24)) -> None:
    drive(KdissectApp(capture_loader([str(CLIENTS)]), title="clients"), body, size, settled=True)


@pytest.mark.slow  # (5-6 s of a real app at 80x24)
def test_footer_keeps_stats_help_and_quit_at_80_columns():
    async def body(app, pilot):
        await pilot.pause(0.2)
        keys = {k.key: k for k in app.screen.query_one(Footer).query(FooterKey)}
        for key in ("s", "question_mark", "q"):
            assert key in keys, sorted(keys)
            region = keys[key].region
            assert region.width > 0 and region.right <= 80, (key, region)

    run(body)


@pytest.mark.slow  # (5-6 s of a real app at 80x24)
def test_help_scrolls_with_the_usual_keys_at_once():
    async def body(app, pilot):
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box", VerticalScroll)
        assert box.max_scroll_y > 0 and "more below" in str(box.border_subtitle)
        for key in ("down", "pagedown", "space", "end"):
            before = box.scroll_y
            await pilot.press(key)
            await pilot.pause(0.2)
            assert box.scroll_y > before or box.scroll_y == box.max_scroll_y, key
        assert box.scroll_y == box.max_scroll_y
        assert "the end" in str(box.border_subtitle)  # not "more below" any longer
        await pilot.press("home")
        await pilot.pause(0.2)
        assert "more below" in str(box.border_subtitle)
        await pilot.resize_terminal(100, 200)  # all of it fits: nothing to say
        await pilot.pause(0.3)
        assert box.max_scroll_y == 0 and not box.border_subtitle, box.border_subtitle
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.3)
        assert "more below" in str(box.border_subtitle)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)

    run(body)


@pytest.mark.slow  # (5-6 s of a real app at 80x24)
def test_unfollowing_keeps_the_selected_exchange_in_view():
    async def body(app, pilot):
        table = app.table
        target = len(app.shown) * 2 // 3
        table.move_cursor(target)
        await settle(app, pilot)
        view = app.current_view()
        await pilot.press("f")
        await pilot.pause(0.2)
        await pilot.press("f")
        await pilot.pause(0.3)
        assert app.current_view() is view
        visible = table.scrollable_content_region.height - 1
        assert table.scroll_y <= table.cursor_row < table.scroll_y + visible

    run(body, size=(120, 40))


def test_the_selected_row_stays_in_view_when_the_terminal_shrinks():
    async def body(app, pilot):
        table = app.table
        table.move_cursor(30)
        await settle(app, pilot)
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.3)
        visible = table.scrollable_content_region.height - 1
        assert table.cursor_row == 30
        assert table.scroll_y <= table.cursor_row < table.scroll_y + visible, table.scroll_y

    run(body, size=(120, 40))


def test_sorts_by_broker_time_and_raw_latency_are_labelled_apart():
    async def body(app, pilot):
        app.sort_by("broker time", True)
        header = app.table.render_line(0).text
        assert "broker ▼" in header and "latency" not in header
        # and the column shows the broker time it is sorted by (it showed raw latency)
        column = header.index("broker ▼") + len("broker ▼")
        shown = [app.table.render_line(y).text[:column].split()[-1] for y in range(1, 20)]
        times = [float(t.removesuffix("ms")) for t in shown if t.endswith("ms")]
        assert len(times) >= 15 and times == sorted(times, reverse=True), shown
        raw = [v.ex.latency * 1000 for v in app.shown[:19] if v.ex.latency is not None]
        assert raw != sorted(raw, reverse=True), "the capture must have waits asked for"
        app.sort_by("latency", True)
        header = app.table.render_line(0).text
        assert "latency ▼" in header and "broker" not in header

    run(body, size=(120, 40))


def test_the_next_exchange_shows_the_same_field():
    async def body(app, pilot):
        detail = app.query_one(Detail)
        table = app.table
        produce = [i for i, v in enumerate(app.shown) if v.ex.first.api_key == 0]
        table.move_cursor(produce[0])
        await settle(app, pilot)
        request = detail.items[0].root
        client_id = next(n for n in request.walk() if n.name == "client_id")
        detail.select(0, client_id)
        table.move_cursor(produce[1])
        await settle(app, pilot)
        assert detail.selected is not None and detail.selected[1].name == "client_id"
        assert detail.selected[1] is not client_id

    run(body, size=(120, 40))


def test_a_live_list_is_titled_live_numbers_its_rows_and_follows_them():
    """As the proxy's TUI: rows without a frame number are numbered as they come, the
    title says live (not "loading…" forever) and the cursor on the last row follows new
    ones."""
    import threading
    import time

    from kdissect.sources.pcap import exchanges_in

    exchanges = exchanges_in([str(CLIENTS)]).exchanges[:30]
    for ex in exchanges:
        for m in ex.messages:
            m.frame = 0  # the proxy has no frames
    release = threading.Event()

    def load(sink):
        for i, ex in enumerate(exchanges):
            if i == 10:
                release.wait(10)
            sink.exchange(ex)
            time.sleep(0.005)

    async def go():
        app = KdissectApp(load, title="proxy", isolate=False, live=True)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                if len(app.views) >= 10:
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.4)
            assert "live" in app.sub_title and "loading" not in app.sub_title
            assert [v.row[0] for v in app.shown] == [str(n) for n in range(1, 11)]
            app.table.move_cursor(9)  # on the last row
            release.set()
            for _ in range(100):
                if len(app.views) == len(exchanges):
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.4)
            assert app.table.cursor_row == len(exchanges) - 1

    asyncio.run(go())


async def exported_lines(app, pilot, folder: Path) -> list:
    """``J`` pressed: the JSON lines it wrote to ``folder``, once its job is done."""
    import json

    await pilot.press("J")
    for _ in range(100):
        files = list(folder.glob("kdissect-*-exchanges.jsonl"))
        if files and app._job is None:
            break
        await pilot.pause(0.05)
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_the_filtered_list_exports_as_json_lines(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        app.apply_filter("api == Produce")
        await pilot.pause()
        shown = list(app.shown)
        lines = await exported_lines(app, pilot, tmp_path)
        assert lines and all(line["api_name"] == "Produce" for line in lines)
        answered = sum(1 for v in shown if v.ex.response is not None)
        assert len(lines) == len(shown) + answered

    run(body, size=(120, 40))


def test_internal_topics_records_are_decoded_in_the_tree_and_the_export(tmp_path, monkeypatch):
    """A replica's Fetch of __consumer_offsets names the topic by id (v13+): the TUI's
    trees and its J export decoded them without the names the engine learned, so the
    records stayed hex where -V and --format jsonl decode them by their schemas."""
    import json

    from click.testing import CliRunner

    from kdissect.cli import main as cli

    capture = CLIENTS.parent / "kafka44-cluster.pcap"
    args = ["pcap", str(capture), "--no-tui", "--format", "jsonl", "-Y", "response_frame == 498"]
    expected = CliRunner().invoke(cli, args).output.splitlines()
    assert any("key_decoded" in line for line in expected)
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        assert app.apply_filter("response_frame == 498") is None
        await pilot.pause()
        (view,) = app.shown
        tree = app.tree_of(app.load_bytes(view).ex.response).tree
        assert any("OffsetCommitKey" in (n.note or "") for n in tree.walk())
        got = await exported_lines(app, pilot, tmp_path)
        assert got == [json.loads(line) for line in expected]

    drive(KdissectApp(capture_loader([str(capture)]), title="k44"), body, (120, 40), settled=True)


def test_the_helps_wrap_within_their_columns_at_80_columns():
    """The helps were laid out for 100 columns: at 80 each entry's description went on
    at column 0 (`time over 500 ms…` under the keys)."""
    from rich.console import Console
    from rich.text import Text

    from kdissect.tui.blob_app import BLOB_HELP
    from kdissect.tui.screens import HELP, help_layout

    for text in (HELP, BLOB_HELP):
        console = Console(width=76, record=True)
        console.print(help_layout(text))
        lines = console.export_text().splitlines()
        flush = " ".join(Text.from_markup(x).plain for x in text.splitlines() if x[:1] != " ")
        assert lines and all(len(line) <= 76 for line in lines)
        for line in lines:  # at column 0: only the headings (and their own wrapping)
            assert line[:1] == " " or line.strip() in flush, line
        # descriptions go on under their column
        assert any(line.startswith(" " * 16) and line[16] != " " for line in lines)


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_the_statistics_tables_fit_80_columns_cutting_no_name_figure_or_title():
    """At 80x24 the per-API table was squeezed into the box: OffsetFetch and OffsetCommit
    both read `Offse…`, figures `4644.…`; then the tables kept their own width and
    scrolled sideways, and their titles were cut mid-word ("…clients aske"). The tables
    now fit the box (headers wrapped, blank columns left out, parts), whole."""
    from kdissect.tui.screens import StatsScreen

    capture = CLIENTS.parent / "kafka44-cluster.pcap"

    async def body(app, pilot):
        await pilot.press("s")
        for _ in range(100):
            if isinstance(app.screen, StatsScreen):
                break
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        screen = app.screen
        box = screen.query_one("#stats-box")
        tables = screen.query_one("#stats-tables")
        assert tables.size.width <= box.size.width and box.max_scroll_x == 0
        text = "\n".join(tables.render_line(y).text for y in range(tables.size.height))
        assert "ConsumerGroupHeartbeat" in text and "OffsetCommit" in text and "4644.16" in text
        assert "127.0.0.1:45225" in text and "kd-streams-StreamThread-1-consumer" in text
        # the per-API table's title, wrapped whole within the box
        title = " ".join(text.split("┏")[0].split())
        assert "less the waits clients asked for" in title, title
        assert "max_wait_ms, JoinGroup/SyncGroup rebalances)" in title, title
        assert all(len(line.rstrip()) <= box.size.width for line in text.splitlines())
        await pilot.press("tab")  # as the box's border says
        assert app.focused is box
        await pilot.press("down", "down")
        await pilot.pause(0.2)
        assert box.scroll_y > 0

    drive(KdissectApp(capture_loader([str(capture)]), title="k44"), body, (80, 24), settled=True)


def test_topic_names_learned_reach_the_screen_with_the_exchange_that_taught_them():
    """Names were sent at most every 0.5 s: one learned just after a send waited for
    the next exchange (on an idle live connection, for ever). Each exchange now sends
    what is new since the last, and only that."""
    from kdissect.stream.model import Exchange
    from kdissect.tui.loader import Row, TopicNames, _ToScreen

    sent: list = []
    sink = _ToScreen(None, lambda view: (), sent.append)
    ex = Exchange(None, None, ("c", 1), ("b", 2), 0, 0)
    for i in range(3):
        sink.topic_ids[f"id{i}"] = f"t{i}"
        sink.exchange(ex)
    sink.exchange(ex)  # nothing new: nothing sent
    assert [type(m).__name__ for m in sent] == ["Row", "TopicNames"] * 3 + ["Row"]
    assert [m.names for m in sent if isinstance(m, TopicNames)] == [
        {"id0": "t0"},
        {"id1": "t1"},
        {"id2": "t2"},
    ]
    assert all(isinstance(m, (Row, TopicNames)) for m in sent)
