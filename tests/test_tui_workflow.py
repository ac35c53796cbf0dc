"""The incident workflow in the TUI (issue 14), driven with Textual's pilot on the repo's
captures: Tab completes in the filter bar, the list fits 80-200 columns with the error
in view, frame numbers match tshark, rows are in request order, sorting and End work
from the keyboard, `p` lands on the offending field, records inside compressed batches
are searched, the statistics chart jumps to an exchange, bad input says why, and the
exported pcapng opens again."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from textual.widgets import Input, Static, Tree

from kdissect.sources.pcap import capture_loader, exchanges_in
from kdissect.stream import anomaly
from kdissect.tui.app import KdissectApp
from kdissect.tui.chart import LatencyChart
from kdissect.tui.detail import HIGHLIGHT, Detail, HexView
from kdissect.tui.exchange_list import COLUMNS, ExchangeList, fit
from kdissect.tui.screens import StatsScreen
from tests.support.tui import drive, settle
from tests.test_tui import CAPTURES, CODECS, GROUP

pytestmark = pytest.mark.slow  # Textual apps through whole workflows

KCAT = CAPTURES / "kcat.pcap"


def run(path: Path, body, size=(120, 40)) -> None:
    drive(KdissectApp(capture_loader([str(path)]), title=path.name), body, size)


def line_of(table: ExchangeList, row: int) -> str:
    """The text of a list row as drawn (line 0 is the header)."""
    table.move_cursor(row)
    return table.render_line(row - int(table.scroll_y) + 1).text


def test_tab_completes_in_the_filter_bar_and_keys_stay_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        for key in "api == Join":
            await pilot.press("space" if key == " " else key)
        await pilot.pause(0.3)
        await pilot.press("tab")
        assert box.value == "api == JoinGroup" and box.has_focus  # completed, still here
        for key in " and e":  # `e` is the export key in the list
            await pilot.press("space" if key == " " else key)
        assert box.value == "api == JoinGroup and e" and not list(tmp_path.iterdir())
        await pilot.press(
            "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "enter"
        )
        await pilot.pause()
        assert len(app.shown) == 2 and all(v.ex.first.api_key == 11 for v in app.shown)

    run(GROUP, body)


def test_columns_fit_the_width_and_keep_the_error_in_view():
    # what each width keeps: the frame, API, version, latency, summary and status always
    for width in (80, 100, 120, 200):
        names = [COLUMNS[i].name for i, _ in fit(width)]
        assert {"#", "API", "v", "latency", "summary", "status"} <= set(names), width
        assert sum(w for _, w in fit(width)) + len(names) - 1 <= width
    assert "client id" in [COLUMNS[i].name for i, _ in fit(200)]

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        failed = next(
            i
            for i, v in enumerate(app.shown)
            if v.ex.first.api_key == 36 and v.ex.facts is not None and 58 in v.ex.facts.errors
        )
        text = line_of(table, failed)
        assert "SaslAuthenticate" in text and "SASL_AUTHENTICATION_FAILED" in text and "ms" in text
        # one client host and one broker host: endpoints shrink to ports
        view = app.shown[failed]
        assert f":{view.ex.client[1]}→:{view.ex.broker[1]}" in text
        assert "127.0.0.1" not in text
        # the field tree keeps room beside an 8-byte-wide dump
        assert app.query_one(HexView).per_line == 8
        assert app.query_one(Tree).size.width >= 60

    run(CAPTURES / "kafka-sasl.pcap", body, size=(120, 40))


def test_frame_numbers_match_tshark_and_rows_come_in_request_order():
    tshark = subprocess.run(
        [
            "tshark",
            "-r",
            str(KCAT),
            "-Y",
            "kafka and tcp.dstport == 9092",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        frames = [v.row[0] for v in app.shown]
        assert frames == tshark  # Wireshark's frame numbers, in order
        assert line_of(table, 0).split()[0] == tshark[0]
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0

    run(KCAT, body)


def test_rows_are_in_request_order_whatever_order_answers_come_in():
    async def body(app, pilot):
        arrived = [v.ex.first.ts for v in app.views]
        assert arrived != sorted(arrived)  # the engine hands exchanges over as answered
        times = [v.ex.first.ts for v in app.shown]
        assert times == sorted(times)
        unanswered = [v for v in app.shown if v.ex.response is None]
        assert unanswered and all(
            app.shown.index(v) == sorted(arrived).index(v.ex.first.ts) for v in unanswered
        )

    run(GROUP, body)


def test_sorting_from_the_keyboard():
    async def body(app, pilot):
        await pilot.press("o")  # broker time, slowest first
        await pilot.pause()
        assert app.sorted_by == ("broker time", True)
        took = [anomaly.service_time(v) for v in app.shown]
        assert [t for t in took if t is not None] == sorted(
            [t for t in took if t is not None], reverse=True
        )
        assert app.shown[0].ex.first.api_key != 11  # the held JoinGroup waited: not first
        await pilot.press("o")  # latency, slowest first
        await pilot.pause()
        latencies = [v.ex.latency for v in app.shown]
        answered = [x for x in latencies if x is not None]
        assert app.sorted_by == ("latency", True) and answered == sorted(answered, reverse=True)
        assert latencies[-1] is None  # unanswered last
        assert app.shown[0].ex.first.api_key == 11  # the held JoinGroup
        assert "latency ▼" in app.query_one(ExchangeList).render_line(0).text
        await pilot.press("O")  # reverse: fastest first
        await pilot.pause()
        answered = [v.ex.latency for v in app.shown if v.ex.latency is not None]
        assert answered == sorted(answered) and app.shown[-1].ex.latency is None

    run(GROUP, body)


def test_next_problem_lands_on_the_offending_field():
    """`p` goes from problem to problem and lands on the field at fault, bytes highlighted;
    a normal protocol step (MEMBER_ID_REQUIRED on the first JoinGroup) is no problem."""

    async def body(app, pilot):
        failed = None
        for _ in range(12):  # plaintext logins come first: a finding each
            await pilot.press("p")
            await settle(app, pilot)
            view = app.current_view()
            selected = app.query_one(Detail).selected
            if (
                view.ex.first.api_key == 36
                and selected is not None
                and selected[1].name == "error_code"
                and selected[1].value == 58
            ):
                failed = view  # SASL_AUTHENTICATION_FAILED: a bad password
                break
        assert failed is not None
        detail = app.query_one(Detail)
        index, node = detail.selected
        assert index == 1 and node.name == "error_code" and node.value == 58  # the response
        hexview = app.query_one(HexView)
        assert hexview.marks[-1] == (node.offset, node.end, HIGHLIGHT)
        await pilot.pause()
        assert app.query_one(Tree).cursor_node.data[1] is node
        await pilot.press("P")  # and back
        await settle(app, pilot)
        assert app.current_view() is not failed

    run(CAPTURES / "kafka-sasl.pcap", body)


def test_the_normal_steps_of_a_group_are_no_problems():
    async def body(app, pilot):
        await pilot.press("p")
        await settle(app, pilot)
        view = app.current_view()
        # the one problem of the group capture: the request the capture never saw answered
        assert view.ex.response is None and view.ex.first.api_key == 3
        await pilot.press("p")
        await settle(app, pilot)
        assert app.current_view() is view  # around again: no other
        # the Fetch long poll (max_wait_ms 500, answered empty), the JoinGroup held 3 s for
        # the rebalance and its MEMBER_ID_REQUIRED are steps the client asked for
        fetch_wait = [v for v in app.views if v.ex.first.api_key == 1 and v.ex.latency > 0.4]
        assert fetch_wait and fetch_wait[0].row[7].style == "dim"  # the latency cell
        assert app.apply_filter("anomaly") is None
        assert len(app.shown) == 1 and fetch_wait[0] not in app.shown

    run(GROUP, body)


def test_search_and_record_filters_reach_compressed_records():
    async def body(app, pilot):
        gzip = [
            v
            for v in app.views
            if v.ex.first.api_key == 0 and b"kp-gzip" in app.load_bytes(v).ex.request.data
        ]
        assert gzip and b"kp-gzip-key-1" not in gzip[0].ex.request.data  # compressed
        assert app.apply_filter('record.key == "kp-gzip-key-1"') is None
        assert sorted(v.ex.first.api_key for v in app.shown) == [0, 1]  # Produce, Fetch
        assert app.apply_filter("record.header.codec == zstd") is None
        assert len(app.shown) == 2
        assert app.apply_filter("") is None
        await pilot.press("ctrl+f")
        for key in "kp-gzip value 1":
            await pilot.press("space" if key == " " else key)
        await pilot.press("enter")
        await pilot.pause()
        hexview = app.query_one(HexView)
        detail = app.query_one(Detail)
        assert detail.holder is not None and hexview.data == detail.holder.buffer
        at = hexview.data.find(b"kp-gzip value 1")
        assert at >= 0 and hexview.cursor == at
        _, node = detail.selected
        assert node.offset <= at < node.end

    run(CODECS, body, size=(200, 50))


def test_statistics_chart_goes_to_the_slowest_exchange():
    async def body(app, pilot):
        await pilot.press("s")
        await pilot.pause(0.5)
        screen = app.screen
        assert isinstance(screen, StatsScreen)
        chart = screen.query_one(LatencyChart)
        text = chart.render().plain
        assert "ms" in text and "20:38:01" in text  # both axes are labelled
        assert "slowest" in str(screen.query_one("#slice", Static).content)
        slowest = max(screen.points, key=lambda p: p[1])[2]
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, StatsScreen) and app.current_view() is slowest
        # the slowest by broker time is not the JoinGroup held for the rebalance
        assert slowest.ex.first.api_key != 11
        group = screen.stats.groups["kdissect-group"]
        assert [e.api for e in group.events][:3] == ["JoinGroup", "JoinGroup", "SyncGroup"]

    run(GROUP, body)


def test_time_with_date_and_zone_on_demand():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        assert "UTC" not in line_of(table, 0)
        await pilot.press("t")
        assert "2026-11-21 20:38:01." in line_of(table, 0) and "UTC" in line_of(table, 0)

    run(GROUP, body)


def test_a_file_that_is_not_a_capture_says_why(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture\n")

    async def body(app, pilot):
        empty = app.query_one("#empty", Static)
        assert empty.has_class("visible") and not app.query_one(ExchangeList).display
        text = str(empty.content)
        assert "No Kafka exchanges" in text and "not a pcap or pcapng file" in text
        assert "-p PORT" in text

    run(bad, body)


def packet_times(path: Path) -> list[int]:
    """The timestamps of a pcapng file's packets (enhanced packet blocks), in file order."""
    data, pos, times = path.read_bytes(), 0, []
    order = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    while pos + 12 <= len(data):
        kind, length = struct.unpack_from(order + "II", data, pos)
        if kind == 6:
            high, low = struct.unpack_from(order + "II", data, pos + 12)
            times.append(high << 32 | low)
        pos += length
    return times


def test_export_the_list_as_pcapng(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        assert app.apply_filter("api in {JoinGroup, SyncGroup}") is None
        await pilot.press("E")
        await pilot.pause()
        out = tmp_path / "kdissect-confluent-group-3-exchanges.pcapng"
        await pilot.press("E")  # again: a new file
        await pilot.pause()
        assert (tmp_path / "kdissect-confluent-group-3-exchanges-2.pcapng").exists()
        again = exchanges_in([str(out)]).exchanges
        assert sorted(e.first.api_key for e in again) == [11, 11, 14]
        assert [e.latency for e in again] == pytest.approx(
            [v.ex.latency for v in app.shown], abs=2e-6
        )  # µs timestamps
        tshark = subprocess.run(
            ["tshark", "-r", str(out), "-Y", "kafka", "-T", "fields", "-e", "kafka.api_key"],
            capture_output=True,
            text=True,
        )
        assert tshark.returncode == 0 and tshark.stdout.split().count("11") == 4
        app.apply_filter("")  # every connection: each closes in time order
        await pilot.press("E")
        await pilot.pause()
        times = packet_times(tmp_path / "kdissect-confluent-group-30-exchanges.pcapng")
        assert len(times) > 60 and times == sorted(times)

    run(GROUP, body)


def test_every_key_works_at_80x24(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        assert {"#", "API", "latency", "status"} <= {
            COLUMNS[i].name for i, _ in table.columns_shown()
        }
        await pilot.press("p")
        await settle(app, pilot)
        assert app.current_view().ex.response is None  # the unanswered Metadata
        await pilot.press("o", "O", "t", "end")
        assert app.sorted_by == ("broker time", False) and table.cursor_row == table.row_count - 1
        await pilot.press("home", "f")
        assert app.following is not None
        await pilot.press("f", "b", "B", "x", "c", "e", "E")
        await pilot.pause()
        assert (tmp_path / "kdissect-confluent-group-30-exchanges.pcapng").exists()
        assert any(p.name.startswith("kdissect-exchange-") for p in tmp_path.iterdir())
        await pilot.press("s")
        await pilot.pause(0.3)
        assert isinstance(app.screen, StatsScreen)
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        helped = app.screen.query_one("#help", Static)  # (its lines as drawn)
        assert "this help" in "\n".join(
            helped.render_line(y).text for y in range(helped.size.height)
        )
        await pilot.press("escape", "slash", "a", "n", "tab", "enter")
        await pilot.pause()
        assert app.filter_text == "anomaly" and len(app.shown) == 1
        await pilot.press("ctrl+f", *"ck-group", "enter")
        await pilot.pause()
        assert app.needle == b"ck-group" and app.query_one(Detail).selected is not None
        said = []
        app.notify = lambda message, **kw: said.append(message)
        await pilot.press("ctrl+f", *"nowhere", "enter")
        assert said and said[-1].startswith("'nowhere' is in no exchange") and "b'" not in said[-1]
        tree = app.query_one(Tree)
        tree.focus()
        tree.move_cursor(tree.root)
        closed = lambda: [n for n in _nodes(tree.root) if n.allow_expand and not n.is_expanded]
        assert closed()
        await pilot.press("asterisk")  # open every field
        assert closed() == []

    run(GROUP, body, size=(80, 24))


def _nodes(node):
    yield node
    for child in node.children:
        yield from _nodes(child)


def test_the_ui_holds_offsets_and_reads_bytes_back_when_needed():
    """The loader spills message bytes; the UI keeps only the last KEEP exchanges' bytes."""
    from kdissect.tui.spill import KEEP

    path = CAPTURES / "sasl-scram.pcap"
    original = {
        (e.stream, e.first.index): [m.data for m in e.messages]
        for e in exchanges_in([str(path)]).exchanges
    }
    assert len(original) > KEEP

    async def body(app, pilot):
        held = [v for v in app.views if any(m.data for m in v.ex.messages)]
        assert len(held) <= 2  # the one shown (and the one decoding)
        for v in app.views:
            key = (v.ex.stream, v.ex.first.index)
            assert [m.data for m in app.load_bytes(v).ex.messages] == original[key]
        held = [v for v in app.views if any(m.data for m in v.ex.messages)]
        assert len(held) == KEEP and held == app.views[-KEEP:]
        assert app.apply_filter('client_id ~ "."') is None and app.shown  # still works

    run(path, body)
