"""The TUI, driven with Textual's pilot on the repo's captures."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from textual.widgets import Input, Static, Tree

from kdissect.sources.pcap import capture_loader, exchanges_in
from kdissect.tui.app import KdissectApp
from kdissect.tui.jobs import parse_needle
from kdissect.tui.blob_app import BlobApp
from kdissect.tui.detail import HIGHLIGHT, PARENT_TONES, Detail, HexView, innermost
from kdissect.tui.exchange_list import BOOKMARK, ExchangeList
from kdissect.tui.screens import HelpScreen, StatsScreen
from tests.support.tui import drive, settle
from tests.test_captures import dissect

pytestmark = pytest.mark.slow  # Textual apps driven through their screens

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
GROUP = CAPTURES / "confluent-group.pcap"
CODECS = CAPTURES / "kafka-python-codecs.pcap"
SIZE = (180, 50)


def app_for(path: Path) -> KdissectApp:
    return KdissectApp(capture_loader([str(path)]), title=path.name)


def run(path: Path, body) -> None:
    drive(app_for(path), body, SIZE)


def row_of(app: KdissectApp, pred) -> int:
    """The first row whose view (its bytes loaded from the spill file) satisfies pred."""
    return next(i for i in range(len(app.shown)) if pred(app.load_bytes(app.view_at(i))))


def test_browse_select_and_highlight():
    expected = len(dissect(GROUP)[0])

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        assert table.row_count == expected == len(app.shown)
        join = row_of(app, lambda v: v.ex.first.api_key == 11)
        table.move_cursor(join)
        await settle(app, pilot)
        tree = app.query_one(Tree)
        titles = [str(child.label) for child in tree.root.children]
        assert titles[0].startswith("JoinGroup v5 Request")
        assert titles[1].startswith("JoinGroup v5 Response")
        request = app.view_at(join).ex.request
        body_node = app.tree_of(request).body
        field = body_node.child("group_id")
        detail = app.query_one(Detail)
        detail.select(0, field)
        await pilot.pause()
        hexview = app.query_one(HexView)
        assert hexview.marks[-1] == (field.offset, field.end, HIGHLIGHT)
        assert (body_node.offset, body_node.end) in [(s, e) for s, e, _ in hexview.marks[:-1]]
        assert all(style in PARENT_TONES[True] for _, _, style in hexview.marks[:-1])
        dump = hexview.content
        marked = [dump.plain[s.start : s.end] for s in dump.spans if str(s.style) == HIGHLIGHT]
        hex_cells = [m for m in marked if len(m) == 2]  # ascii cells are 1 wide
        assert "".join(hex_cells) == request.data[field.offset : field.end].hex()
        tree.focus()  # moving in the tree selects
        await pilot.press("down", "down")
        await pilot.pause()
        assert detail.selected is not None and detail.selected[1] is not field

    run(GROUP, body)


def test_hex_cursor_selects_the_innermost_field():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        table.move_cursor(row_of(app, lambda v: v.ex.first.api_key == 11))
        await settle(app, pilot)
        request = app.current_view().ex.request
        group_id = app.tree_of(request).body.child("group_id")
        hexview = app.query_one(HexView)
        hexview.focus()
        hexview.move_to(group_id.offset + 3)  # inside the string's text
        await pilot.pause()
        detail = app.query_one(Detail)
        node = detail.selected[1]
        assert node.offset <= group_id.offset + 3 < node.end and not node.children
        assert node in (group_id, *group_id.children)
        await pilot.pause()
        assert app.query_one(Tree).cursor_node.data[1] is node  # the tree follows
        last = node.end
        for _ in range(last - (group_id.offset + 3)):
            await pilot.press("right")  # the cursor leaves the field
        await pilot.pause()
        assert detail.selected[1] is not node and detail.selected[1].offset >= last
        # a click on a byte of the dump's second line lands on byte 16 + column
        assert hexview.offset_at(10 + 3 * 9 + 1, 1) == 16 + 9
        assert hexview.offset_at(10 + 3 * 16 + 3 + 5, 1) == 16 + 5  # the text column

    run(GROUP, body)


def test_decompressed_records_are_their_own_buffer():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        gzip_row = row_of(
            app,
            lambda v: (
                v.ex.first.api_key == 0
                and any(n.buffer is not None for n in app.tree_of(v.ex.request).tree.walk())
            ),
        )
        table.move_cursor(gzip_row)
        await settle(app, pilot)
        tree = app.tree_of(app.current_view().ex.request).tree
        holder = next(n for n in tree.walk() if n.buffer is not None)
        record = next(n for n in holder.walk() if n.ktype == "record")
        detail = app.query_one(Detail)
        detail.select(0, record)
        await pilot.pause()
        hexview = app.query_one(HexView)
        assert hexview.data == holder.buffer
        assert hexview.border_title.startswith("decompressed")
        assert hexview.marks[-1] == (record.offset, record.end, HIGHLIGHT)
        hexview.focus()
        hexview.move_to(record.offset + 1)  # the cursor stays in the buffer
        await pilot.pause()
        assert detail.holder is holder and detail.selected[1] is innermost(
            holder, record.offset + 1
        )

    run(CODECS, body)


def test_filter_bar_validates_completes_and_applies():
    async def body(app, pilot):
        total = len(app.views)
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        assert box.has_focus
        box.value = "api == JoinGroup and"  # incomplete
        await pilot.pause()
        problem = app.query_one("#filter-error", Static)
        assert problem.has_class("visible")
        assert "^" in str(problem.content) and "expected a field name" in str(problem.content)
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(ExchangeList).row_count == total  # refused, nothing changed
        box.value = "api == Join"  # completion of API names
        await pilot.pause(0.3)
        assert box._suggestion == "api == JoinGroup"
        await pilot.press("right")
        assert box.value == "api == JoinGroup"
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(ExchangeList).row_count == 2
        assert all(v.ex.first.api_key == 11 for v in app.shown)
        assert not problem.has_class("visible") and f"2 of {total}" in app.sub_title

    run(GROUP, body)


def test_follow_a_connection_and_back():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        await pilot.press("o")  # an order of one's own: following shows capture order
        await pilot.pause()
        order = app.sorted_by
        assert order[0] != "time"
        table.move_cursor(row_of(app, lambda v: v.ex.first.api_key == 11))
        await settle(app, pilot)
        stream = app.current_view().ex.stream
        total = len(app.views)
        await pilot.press("f")
        await pilot.pause()
        shown = [app.view_at(i) for i in range(table.row_count)]
        assert shown and all(v.ex.stream == stream for v in shown)
        assert len(shown) == sum(1 for v in app.views if v.ex.stream == stream) < total
        indexes = [v.ex.first.index for v in shown]
        assert indexes == sorted(indexes)
        assert app.current_view().ex.first.api_key == 11  # still on the same one
        assert f"following stream {stream}" in app.sub_title
        table.move_cursor(table.row_count - 1)  # another exchange of the connection
        await settle(app, pilot)
        picked = app.current_view()
        await pilot.press("f")
        await pilot.pause()
        await settle(app, pilot)
        assert table.row_count == total
        assert app.sorted_by == order  # and back to the order chosen before,
        assert app.current_view() is picked  # on the exchange selected

    run(GROUP, body)


def test_a_filter_typed_while_following_brings_the_order_back():
    """Typing a filter ended following but left the list in capture order."""

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        await pilot.press("o")
        await pilot.pause()
        order = app.sorted_by
        assert order[0] != "time"
        table.move_cursor(row_of(app, lambda v: v.ex.first.api_key == 11))
        await settle(app, pilot)
        await pilot.press("f")
        await pilot.pause()
        assert app.following is not None and app.sorted_by[0] == "time"
        await pilot.press("slash", *"api == 11", "enter")
        await settle(app, pilot)
        assert app.following is None and "following" not in app.sub_title
        assert app.sorted_by == order
        assert all(app.view_at(i).ex.first.api_key == 11 for i in range(table.row_count))

    run(GROUP, body)


@pytest.mark.parametrize("bar", ["slash", "ctrl+f"])
def test_ctrl_c_in_a_bar_quits(bar):
    """ctrl+c is an Input's copy; with nothing selected it is the app's: quit (the bars
    run their own keys in typed order, and must still leave that one to the app)."""

    async def body(app, pilot):
        await pilot.press(bar)
        await pilot.pause()
        assert isinstance(app.focused, Input), app.focused
        await pilot.press("a", "b", "ctrl+c")
        await pilot.pause()
        assert app._exit

    run(GROUP, body)


def test_search_bytes_bookmarks_and_jump():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        await pilot.press("ctrl+f")
        box = app.query_one("#search", Input)
        assert box.has_focus
        box.value = "ck-group"
        await pilot.press("enter")
        await pilot.pause()
        view = app.current_view()
        detail = app.query_one(Detail)
        index, node = detail.selected
        data = detail.items[index].data
        at = data.find(b"ck-group")
        assert at >= 0 and node.offset <= at < node.end  # the field holding the match
        first = table.cursor_row
        await pilot.press("n")  # the next exchange with it
        await pilot.pause()
        assert table.cursor_row != first
        assert any(
            b"ck-group" in m.data
            for m in (app.current_view().ex.request, app.current_view().ex.response)
            if m
        )
        assert parse_needle("0x00 0a") == b"\x00\x0a" and parse_needle("hex: 0a:0b") == b"\n\x0b"
        for typed, why in (
            ("0xabc", "hex takes two digits a byte: 'abc' has 3"),
            ("hex: 0g", "'g' is not a hex digit"),
            ("0x", "type text, or hex"),
            ("  ", "type text, or hex"),
        ):
            with pytest.raises(ValueError, match=why):
                parse_needle(typed)
        # bookmarks
        table.move_cursor(3)
        await pilot.press("b")
        table.move_cursor(0)
        await pilot.pause()
        await pilot.press("B")
        await pilot.pause()
        assert table.cursor_row == 3
        assert app.view_at(3).bookmarked and BOOKMARK in table.render_line(4).text
        # request <-> response
        await settle(app, pilot)
        detail.select(0, detail.items[0].root)
        await pilot.press("x")
        await pilot.pause()
        assert detail.selected[0] == 1 and len(detail.items) == 2
        del view

    run(GROUP, body)


def test_copy_and_export(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        table.move_cursor(row_of(app, lambda v: v.ex.first.api_key == 0))
        await settle(app, pilot)
        detail = app.query_one(Detail)
        request = app.current_view().ex.request
        topic = next(n for n in app.tree_of(request).tree.walk() if n.name == "name")
        detail.select(0, topic)
        await pilot.press("c")
        assert app.clipboard == "'ck-group'"
        await pilot.press("e")
        await pilot.pause()
        exported = json.loads((tmp_path / f"kdissect-exchange-{request.frame}.json").read_text())
        assert exported["request"]["api_name"] == "Produce"
        assert exported["response"]["correlation_id"] == request.correlation_id

    run(GROUP, body)


def test_sort_stats_and_help_screens():
    async def body(app, pilot):
        assert app.focused is app.query_one(ExchangeList)  # keys go to the list
        app.sort_by("latency")
        app.sort_by("latency")  # again: slowest first
        await pilot.pause()
        first = app.view_at(0)
        assert first.ex.first.api_key == 11 and first.ex.latency > 3.0  # the held join
        await pilot.pause()
        assert str(app.query_one(Tree).root.label).startswith("JoinGroup exchange")
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, StatsScreen)
        assert app.screen.stats.per_api["JoinGroup"] == 2
        assert max(app.screen.latencies) > 3000
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, (HelpScreen, StatsScreen))

    run(GROUP, body)


def test_a_live_source_keeps_the_list_growing():
    """Exchanges arrive over time (as from `kdissect live` or the proxy): rows appear as
    they come, the list stays usable, and the end of the source is noticed."""
    exchanges = exchanges_in([str(GROUP)]).exchanges
    release = threading.Event()

    def load(sink):
        for i, ex in enumerate(exchanges):
            if i == 10:
                release.wait(10)  # the source goes quiet for a while
            sink.exchange(ex)
            time.sleep(0.005)

    async def go():
        app = KdissectApp(load, title="live", isolate=False)  # `release` is ours
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(100):
                if len(app.views) >= 10:
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            table = app.query_one(ExchangeList)
            assert table.row_count == 10 and not app.loaded and "loading" in app.sub_title
            await pilot.press("down")  # usable while the source is open
            await pilot.pause()
            assert table.cursor_row == 1 and app.query_one(Detail).items
            release.set()
            for _ in range(100):
                if app.loaded:
                    break
                await pilot.pause(0.05)
            await pilot.pause()
            assert table.row_count == len(exchanges) and "loading" not in app.sub_title

    asyncio.run(go())


def test_blob_screen_updates_as_hints_change():
    erl = (CAPTURES / "blobs" / "metadata-v0-response.erl").read_text()

    async def go():
        app = BlobApp(erl)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.5)
            status = str(app.query_one("#status", Static).content)
            assert "read 319 bytes" in status and "Metadata v0 Response" in status
            detail = app.query_one(Detail)
            assert detail.items and detail.items[0].data[:4] == b"\x00\x00\x00\x00"
            app.query_one("#api", Input).value = "Produce"
            app.query_one("#version", Input).value = "3"
            app.query_one("#direction").value = "response"
            await pilot.pause(0.6)
            status = str(app.query_one("#status", Static).content)
            assert "Produce v3 Response" in status and "problem" in status
            app.query_one("#api", Input).value = "Nonsense"
            await pilot.pause(0.6)
            assert "unknown API 'Nonsense'" in str(app.query_one("#status", Static).content)

    asyncio.run(go())


def test_in_a_bar_slash_is_a_character_and_the_filter_in_effect_is_edited():
    """`/` typed in the filter or search bar was taken as the key that opens the filter bar
    again (`client_id ~ "kd/x"` lost its slash; `a/b` in search became a filter of `b`);
    `/` opened an empty bar, not the filter in effect."""

    async def body(app, pilot):
        await pilot.press("slash", *"api == JoinGroup", "enter")
        await pilot.pause()
        assert app.filter_text == "api == JoinGroup"
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        assert box.has_focus and box.value == "api == JoinGroup"
        await pilot.press("ctrl+u", *'client_id ~ "a/b"')
        await pilot.pause()
        assert box.value == 'client_id ~ "a/b"'
        await pilot.press("escape", "ctrl+f", *"x/y")
        await pilot.pause()
        search = app.query_one("#search", Input)
        assert search.has_focus and search.value == "x/y"

    run(GROUP, body)


def test_the_list_fits_the_new_size_on_a_resize():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        small = table.styles.height.value
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        large = table.styles.height.value
        assert small <= int(24 * 0.33) < large <= int(50 * 0.45)

    run(GROUP, body)


def test_ctrl_c_quits():
    """Textual's own ctrl+c only told how to quit."""

    async def body(app, pilot):
        assert not app._exit
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit and app.return_code == 0

    run(GROUP, body)


def test_exporting_an_empty_list_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def body(app, pilot):
        await pilot.press("slash", *"api == CreateAcls", "enter")
        await pilot.pause()
        assert not app.shown
        await pilot.press("E")
        await pilot.pause()
        assert list(tmp_path.iterdir()) == []
        assert any("nothing to export" in str(n.message) for n in app._notifications)

    run(GROUP, body)


def test_an_exchanges_findings_are_read_in_full_in_the_detail():
    """The list and the title showed finding codes only (and a red cross for warnings):
    the detail now holds each finding with its explanation, marked by severity."""

    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        table.move_cursor(row_of(app, lambda v: bool(v.ex.findings)))
        await settle(app, pilot)
        view = app.current_view()
        detail = app.query_one(Detail)
        last = detail.items[-1]
        assert str(last.label).startswith(f"Findings ({len(view.ex.findings)})")
        notes = [n.note for n in last.root.children]
        assert notes == [
            f"{'✗!·'[['error', 'warn', 'note'].index(f.severity)]} {f.severity}: {f.text()}"
            for f in view.ex.findings
        ]

    run(GROUP, body)


def test_the_trees_root_selects_the_first_message_whole():
    """On the exchange's title (the tree's root) the field line kept the last field."""

    async def body(app, pilot):
        await settle(app, pilot)
        await pilot.press("tab", "down", "down")
        await pilot.pause()
        detail = app.query_one(Detail)
        line = app.query_one("#field-line", Static)
        before = str(line.render())
        assert detail.selected[1] is not detail.items[0].root
        await pilot.press("home")
        await pilot.pause()
        assert detail.selected == (0, detail.items[0].root)
        assert str(line.render()) != before
        assert app.query_one(HexView).data == detail.items[0].data

    run(GROUP, body)


def test_tab_completes_the_name_typed_and_offers_no_longer_one_after_it():
    """With `api == Fetch` in effect: `/`, ctrl+u, `api == Fetc`, Tab. The ghost showed
    `Fetch`; Tab made it `Fetch`, and at once the ghost offered `FetchSnapshot` (drawn dim
    after it: it read as if Tab had inserted FetchSnapshot, and a second Tab did). A whole
    name is complete: no longer one is offered until a letter past it is typed."""

    async def body(app, pilot):
        await pilot.press("slash", *"api == Fetch", "enter")
        await pilot.pause()
        assert app.filter_text == "api == Fetch"
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        await pilot.press("ctrl+u", *"api == Fetc")
        await pilot.pause(0.2)
        assert box._suggestion == "api == Fetch"  # the ghost: `h`
        await pilot.press("tab")
        await pilot.pause(0.2)
        assert box.value == "api == Fetch"
        assert box._suggestion in ("", box.value)  # no ghost after it
        await pilot.press("tab")
        await pilot.pause(0.2)
        assert box.value == "api == Fetch"
        await pilot.press(*"S", "tab")
        await pilot.pause(0.2)
        assert box.value == "api == FetchSnapshot"

    run(CAPTURES / "kafka44-cluster.pcap", body)
