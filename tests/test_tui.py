"""The TUI preview, driven with Textual's pilot on a repo capture."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Input, Static, Tree

from kdissect.stream.dissector import load_captures
from kdissect.tui.app import HIGHLIGHT, PARENT, KdissectApp
from tests.test_captures import dissect

GROUP = Path(__file__).resolve().parents[1] / "captures" / "confluent-group.pcap"


def app_for(path: Path) -> KdissectApp:
    return KdissectApp(lambda emit, warn: load_captures([str(path)], emit, warn),
                       title=path.name)


async def loaded(app: KdissectApp, pilot, count: int) -> None:
    for _ in range(200):
        if len(app.views) >= count:
            break
        await pilot.pause(0.05)
    await pilot.pause()


def test_browse_select_and_highlight():
    expected = len(dissect(GROUP)[0])

    async def run():
        app = app_for(GROUP)
        async with app.run_test(size=(180, 50)) as pilot:
            await loaded(app, pilot, expected)
            table = app.query_one(DataTable)
            assert table.row_count == expected == len(app.shown)
            join = next(i for i, v in enumerate(app.shown) if v.ex.first.api_key == 11)
            table.move_cursor(row=join)
            await pilot.pause()
            tree = app.query_one(Tree)
            titles = [str(child.label) for child in tree.root.children]
            assert titles[0].startswith("JoinGroup v5 Request")
            assert titles[1].startswith("JoinGroup v5 Response")
            # select the request's group_id field: the hex pane marks exactly its bytes
            request = app.shown[join].ex.request
            body = request.decoded().body
            field = body.child("group_id")
            app.select_field(request, field)
            await pilot.pause()
            assert app.marks[-1] == (field.offset, field.end, HIGHLIGHT)
            assert (body.offset, body.end, PARENT) in app.marks
            dump = app.query_one("#bytes", Static).content
            marked = [dump.plain[s.start:s.end] for s in dump.spans if str(s.style) == HIGHLIGHT]
            hex_cells = [m for m in marked if len(m) == 2]          # ascii cells are 1 wide
            assert "".join(hex_cells) == request.data[field.offset:field.end].hex()
            # moving in the field tree selects too
            tree.focus()
            await pilot.press("down", "down")
            assert app.selected_message is not None and app.selected_field is not None

    asyncio.run(run())


def test_filter_bar():
    expected = len(dissect(GROUP)[0])

    async def run():
        app = app_for(GROUP)
        async with app.run_test(size=(180, 50)) as pilot:
            await loaded(app, pilot, expected)
            await pilot.press("slash")
            box = app.query_one("#filter", Input)
            assert box.has_focus
            box.value = "api == JoinGroup"
            await pilot.press("enter")
            await pilot.pause()
            assert app.query_one(DataTable).row_count == 2
            assert all(v.ex.first.api_key == 11 for v in app.shown)
            await pilot.press("slash")
            box.value = "api == JoinGroup and"                    # incomplete: refused
            await pilot.press("enter")
            await pilot.pause()
            assert app.query_one(DataTable).row_count == 2
            assert box.tooltip and "expected a field name" in box.tooltip

    asyncio.run(run())


def test_sort_stats_and_help_screens():
    expected = len(dissect(GROUP)[0])

    async def run():
        from kdissect.tui.app import HelpScreen, StatsScreen
        app = app_for(GROUP)
        async with app.run_test(size=(180, 50)) as pilot:
            await loaded(app, pilot, expected)
            assert app.focused is app.query_one(DataTable)     # keys go to the list
            app.sort_by("latency")
            app.sort_by("latency")                      # again: slowest first
            await pilot.pause()
            first = app.view_at(0)
            assert first.ex.first.api_key == 11 and first.ex.latency > 3.0   # the held join
            await pilot.pause()                         # the detail follows the cursor's row
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

    asyncio.run(run())
