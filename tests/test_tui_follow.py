"""Issue 24 in the real app (Textual's pilot on the repo's captures): the bytes pane
follows the selected field in every buffer, the layout adapts to 80×24, long work runs
in workers, and the smaller fixes (start filter, sort, exports, screenshots)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.text import Text

from kdissect.protocol.apis import CARRY_RECORDS
from kdissect.filters import parse_filter
from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import HIGHLIGHT, Detail, HexView
from kdissect.tui.exchange_list import ExchangeList
from tests.support.tui import drive, settle
from tests.test_tui import CAPTURES, CODECS, GROUP

pytestmark = pytest.mark.slow  # each test runs the app on a capture: seconds


def run(path: Path, body, size=(120, 40), start: str = "") -> None:
    app = KdissectApp(capture_loader([str(path)]), title=path.name)
    if start:  # as the command line's -Y sets it
        app.filter_text, app.filter = start, parse_filter(start)
    drive(app, body, size)


def shown_lines(hexview: HexView) -> list[str]:
    """The dump's lines on screen now (what the user sees in the pane)."""
    lines = hexview.content.plain.split("\n") if isinstance(hexview.content, Text) else []
    top = int(hexview.scroll_y)
    return lines[top : top + hexview.scrollable_content_region.height]


def assert_bytes_show(detail: Detail) -> None:
    """The selected field's first byte is on screen, highlighted, in its own buffer."""
    hexview = detail.hexview
    index, node = detail.selected
    if node is detail.items[index].root or node is detail.holder:
        return
    first, end = hexview.visible_range()
    assert first <= node.offset < max(end, first + 1), (node.name, node.offset, first, end)
    address = f"{node.offset - node.offset % hexview.per_line + hexview.base:08x}"
    assert any(line.startswith(address) for line in shown_lines(hexview)), address
    assert (node.offset, node.end, HIGHLIGHT) in hexview.marks
    data = (
        detail.items[index].data
        if detail.holder is detail.items[index].root
        else detail.holder.buffer
    )
    assert hexview.data == data


def test_the_bytes_follow_deep_fields_both_ways():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        biggest = max(
            range(len(app.shown)), key=lambda i: app.load_bytes(app.view_at(i)).ex.request.size
        )
        table.move_cursor(biggest)
        await settle(app, pilot)
        detail = app.query_one(Detail)
        await pilot.press("tab", "asterisk")
        offsets = []
        for _ in range(10):  # the End Tab * PgDn×6, and further
            await pilot.press("pagedown")
            await pilot.pause(0.05)
            assert_bytes_show(detail)
            offsets.append(detail.selected[1].offset)
        assert max(offsets) > 8 * detail.hexview.scrollable_content_region.height
        # back up: the pane scrolls back with the tree
        for _ in range(10):
            await pilot.press("pageup")
            await pilot.pause(0.05)
            assert_bytes_show(detail)
        # the other way: the byte cursor deep in the message selects the field there
        hexview = detail.hexview
        hexview.focus()
        hexview.move_to(len(hexview.data) - 3)
        await pilot.pause(0.1)
        index, node = detail.selected
        assert node.offset <= len(hexview.data) - 3 < node.end
        await pilot.pause(0.1)
        cursor = app.query_one("Tree").cursor_node
        assert cursor is not None and cursor.data, (node.name, cursor)
        assert cursor.data[1] is node
        assert_bytes_show(detail)

    run(CODECS, body)


def test_the_bytes_follow_inside_decompressed_records():
    async def body(app, pilot):
        await pilot.press("ctrl+f")
        await pilot.press(*"kp-zstd value 3")
        await pilot.press("enter")
        await pilot.pause(0.2)
        detail = app.query_one(Detail)
        assert detail.holder is not detail.items[detail.selected[0]].root  # decompressed
        assert detail.hexview.border_title.startswith("decompressed")
        assert_bytes_show(detail)
        first, end = detail.hexview.visible_range()
        assert first > 0, (first, end, len(detail.hexview.data))  # scrolled to the match
        tree = app.query_one("Tree")
        tree.focus()
        for _ in range(12):  # up through the records
            await pilot.press("up")
            await pilot.pause(0.05)
            assert_bytes_show(detail)

    run(CODECS, body, size=(120, 24))


def test_a_narrow_terminal_takes_turns_and_shows_the_field_in_full():
    async def body(app, pilot):
        detail = app.query_one(Detail)
        assert detail.has_class("narrow")
        tree, hexview = detail.field_tree, detail.hexview
        assert tree.display and not hexview.display  # the tree has the width
        for _ in range(12):  # to the failed login
            await pilot.press("p")
            await settle(app, pilot)
            if detail.selected is not None and detail.selected[1].name == "error_code":
                break
        await pilot.pause(0.2)
        line = str(app.query_one("#field-line").content)
        _, node = detail.selected
        assert node.name == "error_code" and node.note in line  # the explanation, whole
        assert f"@{node.offset}+{node.length}" in line and "body.error_code" in line
        await pilot.press("v")  # one key: the bytes
        await pilot.pause(0.1)
        assert hexview.display and not tree.display and hexview.has_focus
        assert hexview.size.width > 60 and hexview.per_line == 8
        assert_bytes_show(detail)
        await pilot.press("v")
        await pilot.pause(0.1)
        assert tree.display and tree.has_focus

    run(CAPTURES / "kafka-sasl.pcap", body, size=(80, 24))


def test_a_short_list_keeps_to_its_rows():
    async def body(app, pilot):
        assert app.apply_filter("api == JoinGroup") is None
        await pilot.pause(0.1)
        table = app.query_one(ExchangeList)
        assert table.row_count == 2 and table.size.height == 3  # header and two rows
        active = str(app.query_one("#active-filter").content)
        assert "api == JoinGroup" in active and "2 of 30" in active  # the filter stays in sight

    run(GROUP, body, size=(80, 24))


def test_a_start_filter_with_one_match_shows_it():
    async def body(app, pilot):
        await settle(app, pilot)
        assert [v.ex.first.frame for v in app.shown] == [46]
        assert app.detail_view is app.shown[0]  # the detail is not empty
        assert str(app.query_one("Tree").root.label).startswith("GetTelemetry")
        assert app.query_one("#active-filter").has_class("visible")

    run(GROUP, body, start="frame == 46")


def test_long_work_runs_in_workers_and_esc_cancels(monkeypatch):
    import kdissect.tui.browser as browser

    monkeypatch.setattr(browser, "IN_WORKERS", 0)  # every filter in workers
    real_scan = browser.scan
    held = []

    def slow_scan(items, test, progress, cancel, **kw):  # held until Esc
        if not held:
            held.append(True)
            cancel.wait(60)
            return None
        return real_scan(items, test, progress, cancel, **kw)

    monkeypatch.setattr(browser, "scan", slow_scan)

    async def body(app, pilot):
        everything = len(app.shown)
        assert app.apply_filter('record.key == "kp-zstd-key-1"') is None
        await pilot.pause(0.1)
        work = app.query_one("#work")
        assert not work.has_class("done") and "Esc cancels" in str(
            app.query_one("#work-label").content
        )
        header = app.query_one("Header")
        assert work.region.y >= header.region.bottom  # the title stays in sight
        await pilot.press("down")  # keys still answered
        await pilot.pause(0.05)
        assert app.table.cursor_row == 1
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app._job is None and work.has_class("done")
        assert len(app.shown) == everything and app.filter is None  # as it was
        # again, to the end: the same rows as the filter gives in this process
        assert app.apply_filter('record.key == "kp-zstd-key-1"') is None
        for _ in range(200):
            if app._job is None:
                break
            await pilot.pause(0.05)
        expected = [v for v in app.views if app.load_bytes(v) and app.filter(v)]
        assert app.shown == expected and len(expected) == 2
        # a byte search in workers lands on the field holding the match
        assert app.apply_filter("") is None
        app.table.move_cursor(0)
        await pilot.press("ctrl+f", *"kp-lz4 value 2", "enter")
        for _ in range(200):
            if app._job is None:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        detail = app.query_one(Detail)
        assert b"kp-lz4 value 2" in detail.hexview.data
        assert_bytes_show(detail)

    run(CODECS, body)


def test_quick_paths_agree_with_the_located_decoder():
    """Record filters and the byte search read clean messages with the values decoder
    (keys alone: without reading values and headers): the same records, the same
    answers, on every repo capture."""
    from kdissect.sources.pcap import exchanges_in
    from kdissect.stream import content
    from kdissect.stream.fields import ExchangeFields

    quick = keys = 0
    for path in sorted(CODECS.parent.glob("*.pcap")):
        for ex in exchanges_in([str(path)]).exchanges:
            view = ExchangeFields(ex, None)
            located = []
            for m in (ex.request, ex.response):
                tree = content.full_tree(m) if ex.first.api_key in CARRY_RECORDS else None
                for n in tree.walk() if tree is not None else ():
                    if n.ktype == "record" or n.ktype.startswith("message_v"):
                        if n.child("key") or n.child("value"):
                            located.append(
                                (content._text(n.child("key").value) if n.child("key") else None)
                            )
                quick += content._clean_records(m, None, None) is not None
            assert [r.key for r in content.records(view)] == located, (path, ex.first.frame)
            assert content.record_keys(view) == [k for k in located if k is not None]
            for key in {k for k in located if k is not None} | {"no such key", ""}:
                assert content.has_key(view, key) == (key in located), (path, key)
            keys += sum(content._clean_keys(m, None) is not None for m in ex.messages)
            for buffer in (
                b
                for m in ex.messages
                if m.direction != "sasl"
                for b in content.buffer_nodes(content.full_tree(m))
            ):
                needle = bytes(buffer.buffer[-12:])
                assert content.holds_bytes(ex.messages, needle) == (
                    content.find_bytes(ex.messages, needle) is not None
                )
            absent = b"\xfe\xed no such bytes"
            assert not content.holds_bytes(ex.messages, absent)
    assert quick > 100 and keys > 50  # the quick paths did the work


def test_gaps_and_warnings_are_counted_and_listed(tmp_path):
    """A capture with a hole: the statistics count the gaps as --stats does and list
    every warning."""
    from kdissect.sources.pcap import exchanges_in

    damaged = tmp_path / "damaged.pcap"
    cut_a_segment(GROUP, damaged)
    found = exchanges_in([str(damaged)]).gaps
    expected = sum(1 for g in found if not g.unread)  # holes (the rest: read past)
    assert expected > 0

    async def body(app, pilot):
        assert len(app.gaps) == len(found)
        await pilot.press("s")
        await pilot.pause(0.3)
        screen = app.screen
        assert screen.stats.gaps == expected
        assert screen.stats.unread == len(found) - expected
        listed = str(screen.query_one("#warnings").content)
        assert listed.count("gap:") == expected
        assert "more below" in screen.query_one("#stats-box").border_subtitle

    run(damaged, body)


def cut_a_segment(source: Path, out: Path) -> None:
    """``source`` without one TCP segment carrying data in the middle (a classic pcap)."""
    import struct

    data = source.read_bytes()
    head, pos, packets = data[:24], 24, []
    order = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    while pos + 16 <= len(data):
        incl = struct.unpack_from(order + "I", data, pos + 8)[0]
        packets.append(data[pos : pos + 16 + incl])
        pos += 16 + incl
    big = [i for i, p in enumerate(packets) if len(p) > 200]
    victim = big[len(big) // 2]
    out.write_bytes(head + b"".join(p for i, p in enumerate(packets) if i != victim))


def test_group_waits_are_not_a_broker_time_of_zero():
    """A JoinGroup answered MEMBER_ID_REQUIRED did not wait: its broker time is its
    latency; a wait that took the whole latency leaves the time unknown, not 0.00."""
    from kdissect.render.stats import stats_tables
    from kdissect.sources.pcap import exchanges_in
    from kdissect.stream.fields import ExchangeFields
    from kdissect.stream.stats import Stats
    from rich.console import Console

    stats = Stats()
    for ex in exchanges_in([str(GROUP)]).exchanges:
        stats.add(ex, ExchangeFields(ex, None))
    assert stats.service["JoinGroup"] and min(stats.service["JoinGroup"]) > 0.001
    assert 0.0 not in stats.service.get("SyncGroup", [])
    console = Console(width=140, record=True)
    console.print(stats_tables(stats))
    rows = [
        line
        for line in console.export_text().splitlines()
        if line.startswith(("│ JoinGroup ", "│ SyncGroup "))
    ]
    assert len(rows) == 2 and not any("0.00" in row for row in rows), rows


def test_screenshots_go_here_when_there_is_no_downloads_folder(tmp_path, monkeypatch):
    home, here = tmp_path / "home", tmp_path / "here"
    home.mkdir()
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.chdir(here)

    async def body(app, pilot):
        app.deliver_screenshot()  # what the command palette's entry calls
        for _ in range(50):
            if list(here.glob("*.svg")):
                break
            await pilot.pause(0.05)
        assert len(list(here.glob("*.svg"))) == 1 and not (home / "Downloads").exists()

    run(GROUP, body)


def test_the_filter_bar_completes_topics_and_clients_seen():
    from kdissect.tui.filterbar import FilterSuggester

    seen = {"topic": {"ck-group", "orders"}, "client_id": {"rdkafka"}}
    bar = FilterSuggester(lambda field: seen[field])

    async def ask(text: str):
        return await bar.get_suggestion(text)

    assert asyncio.run(ask('topic == "or')) == 'topic == "orders"'
    assert asyncio.run(ask("topic == ck")) == 'topic == "ck-group"'
    assert (
        asyncio.run(ask("api == Produce and client_id == rd"))
        == 'api == Produce and client_id == "rdkafka"'
    )
    assert asyncio.run(ask("api == Pro")) == "api == Produce"  # the other completions stay
