"""The blob screen: a second paste replaces the first (it was appended and read as one),
ctrl+l clears the box and the tree, and a paste that cannot be read leaves no old tree
under its error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from textual import events
from textual.widgets import Static, TextArea

from kdissect.tui.blob_app import BlobApp
from kdissect.tui.detail import Detail

BLOBS = Path(__file__).resolve().parents[1] / "captures" / "blobs"
ERL = (BLOBS / "metadata-v0-response.erl").read_text()
# an ApiVersions v0 request (size, key 18, version 0, correlation 7, client id "kd")
API_VERSIONS = "00 00 00 0c 00 12 00 00 00 00 00 07 00 02 6b 64"


def status(app) -> str:
    return str(app.query_one("#status", Static).content)


async def until(pilot, done) -> None:
    """Until ``done()`` (the screen dissects 0.3 s after the last change), 20 s at most."""
    for _ in range(400):
        if done():
            return
        await pilot.pause(0.05)


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_a_second_paste_replaces_the_first_and_ctrl_l_clears():
    async def go():
        app = BlobApp()
        async with app.run_test(size=(120, 40)) as pilot:
            area = app.query_one("#paste", TextArea)
            area.post_message(events.Paste(ERL))
            await until(pilot, lambda: "Metadata v0 Response" in status(app))
            assert "Metadata v0 Response" in status(app)
            area.post_message(events.Paste(API_VERSIONS))
            await until(pilot, lambda: "ApiVersions" in status(app))
            assert area.text == API_VERSIONS
            assert "ApiVersions v0 Request" in status(app) and "Metadata" not in status(app)
            detail = app.query_one(Detail)
            assert len(detail.items) == 1
            # a paste that cannot be read: its error, and no tree of the one before
            area.post_message(events.Paste("this is not bytes at all"))
            await until(pilot, lambda: "ApiVersions" not in status(app))
            assert not detail.items
            area.post_message(events.Paste(ERL))
            await until(pilot, lambda: bool(detail.items))
            assert detail.items
            await pilot.press("ctrl+l")
            await until(pilot, lambda: "paste bytes" in status(app))
            assert area.text == "" and not detail.items and "paste bytes" in status(app)

    asyncio.run(go())


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_the_tree_gets_rows_at_80x24():
    from kdissect.tui.detail import FieldTree

    async def go():
        app = BlobApp(ERL)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: bool(app.query_one(Detail).items))
            assert app.query_one(FieldTree).size.height >= 8  # was 5
            hints = app.query_one("#at")  # the last hint, whole
            assert hints.region.bottom <= app.query_one("#input").region.bottom
            # the box takes the width (beside the hints it had 22 columns of 80)
            assert app.query_one("#paste").size.width >= 76
            await pilot.resize_terminal(140, 40)
            await pilot.pause(0.2)
            assert app.query_one("#at").region.x > app.query_one("#paste").region.right - 1

    asyncio.run(go())
