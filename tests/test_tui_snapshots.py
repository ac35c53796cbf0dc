"""Snapshots (SVG) of the TUI's main screens on a repo capture: a change in how they
look fails here until reviewed and accepted with `pytest --snapshot-update`."""

from pathlib import Path


from kdissect.tui.blob_app import BlobApp
from kdissect.tui.detail import Detail
from tests.test_tui import GROUP, app_for
from tests.test_tui import settle as settle_detail

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
SIZE = (160, 45)


async def on_join_group(pilot) -> None:
    app = pilot.app
    for _ in range(400):
        if app.loaded:
            break
        await pilot.pause(0.05)
    table = app.table
    row = next(i for i in range(table.row_count) if app.view_at(i).ex.first.api_key == 11)
    table.move_cursor(row)
    await settle_detail(app, pilot)
    request = app.view_at(row).ex.request
    app.query_one(Detail).select(0, app.tree_of(request).body.child("group_id"))
    await settle(pilot)


async def settle(pilot) -> None:
    """Let the table finish sizing its columns (it does so on idle, after rows change)."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.3)
    await pilot.pause()


def test_main_screen(snap_compare):
    assert snap_compare(app_for(GROUP), terminal_size=SIZE, run_before=on_join_group)


def test_statistics_screen(snap_compare):
    async def stats(pilot):
        await on_join_group(pilot)
        await pilot.press("s")
        await settle(pilot)
    assert snap_compare(app_for(GROUP), terminal_size=SIZE, run_before=stats)


def test_help_screen(snap_compare):
    async def helped(pilot):
        await on_join_group(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
    assert snap_compare(app_for(GROUP), terminal_size=SIZE, run_before=helped)


def test_blob_screen(snap_compare):
    erl = (CAPTURES / "blobs" / "metadata-v0-response.erl").read_text()

    async def settled(pilot):
        from textual.widgets import TextArea
        pilot.app.query_one(TextArea).cursor_blink = False     # no blinking in a picture
        await pilot.pause(0.8)                                  # past the typing debounce
    assert snap_compare(BlobApp(erl), terminal_size=SIZE, run_before=settled)
