"""The blob screen: a second paste replaces the first (it was appended and read as one),
ctrl+l clears the box and the tree, and a paste that cannot be read leaves no old tree
under its error."""

from __future__ import annotations

import asyncio
from pathlib import Path

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


def test_a_second_paste_replaces_the_first_and_ctrl_l_clears():
    async def go():
        app = BlobApp()
        async with app.run_test(size=(120, 40)) as pilot:
            area = app.query_one("#paste", TextArea)
            area.post_message(events.Paste(ERL))
            await pilot.pause(0.8)
            assert "Metadata v0 Response" in status(app)
            area.post_message(events.Paste(API_VERSIONS))
            await pilot.pause(0.8)
            assert area.text == API_VERSIONS
            assert "ApiVersions v0 Request" in status(app) and "Metadata" not in status(app)
            detail = app.query_one(Detail)
            assert len(detail.items) == 1
            # a paste that cannot be read: its error, and no tree of the one before
            area.post_message(events.Paste("this is not bytes at all"))
            await pilot.pause(0.8)
            assert not detail.items
            area.post_message(events.Paste(ERL))
            await pilot.pause(0.8)
            assert detail.items
            await pilot.press("ctrl+l")
            await pilot.pause(0.5)
            assert area.text == "" and not detail.items and "paste bytes" in status(app)
    asyncio.run(go())
