"""Issue 24 in the real app (Textual's pilot on the repo's captures): the bytes pane
follows the selected field in every buffer, the layout adapts to 80×24, long work runs
in workers, and the smaller fixes (start filter, sort, exports, screenshots)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.text import Text

from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import HIGHLIGHT, Detail, HexView
from kdissect.tui.exchange_list import ExchangeList
from tests.test_tui import CODECS, GROUP, loaded, row_of, settle


def run(path: Path, body, size=(120, 40), start: str = "") -> None:
    async def go():
        app = KdissectApp(capture_loader([str(path)]), title=path.name)
        if start:
            app.apply_filter(start)
        async with app.run_test(size=size) as pilot:
            await loaded(app, pilot)
            await body(app, pilot)
    asyncio.run(go())


def shown_lines(hexview: HexView) -> list[str]:
    """The dump's lines on screen now (what the user sees in the pane)."""
    lines = hexview.content.plain.split("\n") if isinstance(hexview.content, Text) else []
    top = int(hexview.scroll_y)
    return lines[top:top + hexview.scrollable_content_region.height]


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
    data = detail.items[index].data if detail.holder is detail.items[index].root \
        else detail.holder.buffer
    assert hexview.data == data


def test_the_bytes_follow_deep_fields_both_ways():
    async def body(app, pilot):
        table = app.query_one(ExchangeList)
        biggest = max(range(len(app.shown)),
                      key=lambda i: app.load_bytes(app.view_at(i)).ex.request.size)
        table.move_cursor(biggest)
        await settle(app, pilot)
        detail = app.query_one(Detail)
        await pilot.press("tab", "asterisk")
        offsets = []
        for _ in range(10):                  # the End Tab * PgDn×6, and further
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
        assert detail.holder is not detail.items[detail.selected[0]].root   # decompressed
        assert detail.hexview.border_title.startswith("decompressed")
        assert_bytes_show(detail)
        first, end = detail.hexview.visible_range()
        assert first > 0, (first, end, len(detail.hexview.data))   # scrolled to the match
        tree = app.query_one("Tree")
        tree.focus()
        for _ in range(12):                                    # up through the records
            await pilot.press("up")
            await pilot.pause(0.05)
            assert_bytes_show(detail)

    run(CODECS, body, size=(120, 24))
