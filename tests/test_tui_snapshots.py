"""Snapshots (SVG) of the TUI's screens on a repo capture at 80×24, 120×40 and 200×50: a change
in how they look fails here until reviewed and accepted with `pytest --snapshot-update`.
The main screen is shown as `p` leaves it: on the first problem, its field selected. The
TLS capture decrypted, a Produce request's values decoded (`d`) and a damaged partition
in `kdissect log`'s screen are shown at the same three sizes."""

from pathlib import Path

import pytest

from kdissect.capture.tls import KeyLog
from kdissect.protocol import Options
from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.blob_app import BlobApp
from kdissect.tui.detail import Detail
from kdissect.tui.log_app import LogApp
from textual.widgets import Input
from tests.support.tui import settle as settle_detail
from tests.test_tui import CODECS, GROUP, app_for

# Textual apps rendered to SVG snapshots; alone: in one process, where syrupy checks that
# no snapshot is left unused (it does not under pytest-xdist)
pytestmark = [pytest.mark.slow, pytest.mark.alone]

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
SIZES = [
    pytest.param((80, 24), id="80x24"),
    pytest.param((120, 40), id="120x40"),
    pytest.param((200, 50), id="200x50"),
]


async def on_the_first_problem(pilot) -> None:
    app = pilot.app
    for _ in range(400):
        if app.loaded:
            break
        await pilot.pause(0.05)
    await pilot.press("p")
    await settle_detail(app, pilot)
    await settle(pilot)


async def settle(pilot) -> None:
    """Let the widgets finish sizing and the tree its cursor move (on idle)."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.3)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare, size):
    assert snap_compare(app_for(GROUP), terminal_size=size, run_before=on_the_first_problem)


@pytest.mark.parametrize("size", SIZES)
def test_statistics_screen(snap_compare, size):
    async def stats(pilot):
        await on_the_first_problem(pilot)
        await pilot.press("s")
        await settle(pilot)

    assert snap_compare(app_for(GROUP), terminal_size=size, run_before=stats)


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare, size):
    async def helped(pilot):
        await on_the_first_problem(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(app_for(GROUP), terminal_size=size, run_before=helped)


@pytest.mark.parametrize("size", SIZES)
def test_blob_screen(snap_compare, size):
    erl = (CAPTURES / "blobs" / "metadata-v0-response.erl").read_text()

    async def settled(pilot):
        from textual.widgets import TextArea

        pilot.app.query_one(TextArea).cursor_blink = False  # no blinking in a picture
        await pilot.pause(0.8)  # past the typing debounce

    assert snap_compare(BlobApp(erl), terminal_size=size, run_before=settled)


@pytest.mark.parametrize("size", SIZES)
def test_tls_screen(snap_compare, size):
    tls = CAPTURES / "tls" / "kafka-tls.pcap"
    keys = KeyLog()
    keys.add_file(str(tls.with_suffix(".keys")))
    app = KdissectApp(capture_loader([str(tls)], keys=keys), title=tls.name, keys=keys)

    async def third(pilot):
        for _ in range(400):
            if pilot.app.loaded:
                break
            await pilot.pause(0.05)
        await pilot.press("down", "down")
        await settle_detail(pilot.app, pilot)
        detail = pilot.app.query_one(Detail)  # on the connection's TLS facts
        tls = detail.items[-1].root
        cipher = next(n for n in tls.children if n.name == "cipher")
        detail.select(len(detail.items) - 1, cipher)
        detail.field_tree.reveal(cipher, tls)
        pilot.app.clear_notifications()  # toasts last seconds: not in a picture
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=third)


@pytest.mark.parametrize("size", SIZES)
def test_values_screen(snap_compare, size):
    async def decoded(pilot):
        app = pilot.app
        for _ in range(400):
            if app.loaded:
                break
            await pilot.pause(0.05)
        row = next(i for i, v in enumerate(app.shown) if v.ex.first.api_name == "Produce")
        app.table.move_cursor(row)
        await settle_detail(app, pilot)
        await pilot.press("d")
        await settle(pilot)  # the tree filled again, values decoded
        detail = app.query_one(Detail)
        root = detail.items[0].root
        value = next(n.child("value") for n in root.walk() if n.ktype == "record")
        detail.select(0, value)
        detail.field_tree.reveal(value, root)
        app.clear_notifications()  # toasts last seconds: not in a picture
        await settle(pilot)
        await settle(pilot)  # the tree scrolled to the value

    assert snap_compare(app_for(CODECS), terminal_size=size, run_before=decoded)


@pytest.mark.parametrize("size", SIZES)
def test_log_screen(snap_compare, size, tmp_path, monkeypatch):
    from tests.test_tui_log import damaged_partition

    monkeypatch.chdir(tmp_path)
    damaged_partition(Path("."))

    async def on_the_damage(pilot):
        for _ in range(400):
            if pilot.app.loaded:
                break
            await pilot.pause(0.05)
        await pilot.press("p")
        await settle(pilot)

    assert snap_compare(LogApp(["pay-0"], Options()), terminal_size=size, run_before=on_the_damage)


async def _log_loaded(pilot) -> None:
    for _ in range(400):
        if pilot.app.loaded:
            break
        await pilot.pause(0.05)
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES)
def test_log_statistics_screen(snap_compare, size, tmp_path, monkeypatch):
    """`s` in kdissect log: per partition and segment file, then the findings."""
    from tests.test_tui_log import damaged_partition

    monkeypatch.chdir(tmp_path)
    damaged_partition(Path("."))

    async def stats(pilot):
        await _log_loaded(pilot)
        await pilot.press("s")
        await settle(pilot)

    assert snap_compare(LogApp(["pay-0"], Options()), terminal_size=size, run_before=stats)


@pytest.mark.parametrize("size", SIZES)
def test_log_filter_bar_with_a_caret(snap_compare, size, tmp_path, monkeypatch):
    """The filter bar of kdissect log, sorted by size: a misspelt field, the caret under
    it and the did-you-mean."""
    from tests.test_tui_log import damaged_partition

    monkeypatch.chdir(tmp_path)
    damaged_partition(Path("."))

    async def typed(pilot):
        await _log_loaded(pilot)
        await pilot.press("o")
        pilot.app.clear_notifications()
        for field in pilot.app.query(Input):
            field.cursor_blink = False  # no blinking in a picture
        await pilot.press("slash")
        for key in "producr_id":
            await pilot.press("underscore" if key == "_" else key)
        await settle(pilot)

    assert snap_compare(LogApp(["pay-0"], Options()), terminal_size=size, run_before=typed)
