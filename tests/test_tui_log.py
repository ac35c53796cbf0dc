"""`kdissect log` in the TUI, driven with Textual's pilot: a partition's files and batches
(segments built with kafka-python's record encoder, as tests/test_log.py builds them) in
the list, the selected batch's byte tree beside its bytes at file positions, `p` on the
damaged batch's offending field, the display filter, and the hex cursor selecting fields
inside a compressed batch's decompressed records."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kdissect.cli import main
from kdissect.protocol import Options
from kdissect.sources.logunits import walk
from kdissect.tui.detail import HIGHLIGHT, Detail, HexView
from kdissect.tui.log_app import LogApp
from tests.support.tui import drive, loaded
from tests.test_log import _partition, batch

pytestmark = pytest.mark.slow  # Textual's pilot: seconds per test


def run(paths: list[str], body, size=(160, 45), start: str = "") -> None:
    drive(LogApp(paths, Options(), start), body, size)


async def shown(app, pilot) -> None:
    """Until the detail follows the cursor (it waits for the cursor to rest)."""
    for _ in range(100):
        await pilot.pause(0.05)
        if app.detail_item is app.current():
            break
    await pilot.pause()


def damaged_partition(tmp_path: Path) -> tuple[Path, int]:
    """The consistent partition of test_log, plus a batch whose CRC no longer holds (at
    the returned file position)."""
    part, _positions = _partition(tmp_path)
    log = part / "00000000000000000000.log"
    good = log.read_bytes()
    bad = bytearray(batch(2, 0, 5, [(b"f", b"6" * 40)]))
    bad[-3] ^= 0xFF  # a value byte: the CRC no longer holds
    log.write_bytes(good + bytes(bad))
    return part, len(good)


def test_a_partition_in_the_list_and_its_batches_at_file_positions(tmp_path):
    part, bad_at = damaged_partition(tmp_path)
    items = list(walk([str(part)], Options()))
    data = (part / "00000000000000000000.log").read_bytes()

    async def body(app, pilot):
        assert app.table.row_count == len(items) == app.read
        # the list keeps no batch's tree: the one viewed is decoded again from the file
        assert all(it.tree is None for it in app.shown if it.kind == "batch")
        names = [app.shown[i].cells[-1] for i in range(app.table.row_count)]
        assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
        # the first batch of the segment: its tree at file positions, its bytes beside it
        row = next(i for i, item in enumerate(app.shown) if item.kind == "batch")
        app.table.move_cursor(row=row)
        await shown(app, pilot)
        detail = app.query_one(Detail)
        item = detail.items[0]
        assert item.base == 0 and item.data == data[: len(item.data)]
        base = next(n for n in item.root.children if n.name == "base_offset")
        detail.select(0, base)
        await pilot.pause()
        hexview = app.query_one(HexView)
        assert (base.offset, base.end, HIGHLIGHT) in hexview.marks
        # a batch further on: the tree says the file position, the pane its own bytes
        second = [i for i, it in enumerate(app.shown) if it.kind == "batch"][1]
        app.table.move_cursor(row=second)
        await shown(app, pilot)
        item = detail.items[0]
        assert item.base > 0 and item.data == data[item.base : item.base + len(item.data)]
        assert item.root.offset == 0 and item.root.length == len(item.data)
        line = str(app.query_one("#field-line").render())
        # the field selected before (base_offset), in this batch: at its file position
        assert f"base_offset @{item.base}+8" in line
        # p: the damaged batch, on its offending field (the CRC), highlighted
        await pilot.press("p")
        await pilot.pause(0.1)
        assert detail.items[0].base == bad_at
        assert detail.selected is not None and detail.selected[1].problem
        assert "crc" in detail.selected[1].name
        node = detail.selected[1]
        assert (node.offset, node.end, HIGHLIGHT) in hexview.marks
        # the display filter of `kdissect log -Y`
        await pilot.press("slash")
        for key in "finding == crc_mismatch":
            await pilot.press("space" if key == " " else key)
        await pilot.press("enter")
        await loaded(app, pilot)
        assert app.table.row_count == 1 and app.shown[0].start == bad_at
        assert "crc_mismatch" in str(app.query_one("#active-filter").render())

    run([str(part)], body)


def test_the_hex_cursor_selects_fields_inside_a_compressed_batch(tmp_path):
    part = tmp_path / "z-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        batch(2, 1, 0, [(b"key-%d" % i, b"value %d" % i) for i in range(5)])
    )

    async def body(app, pilot):
        app.table.move_cursor(row=0)
        await shown(app, pilot)
        detail = app.query_one(Detail)
        root = detail.items[0].root
        holder = next(n for n in root.walk() if n.buffer is not None)
        record = next(n for n in holder.children if n.ktype == "record")
        key = record.child("key")
        detail.select(0, key)
        await pilot.pause()
        hexview = app.query_one(HexView)
        assert hexview.data == holder.buffer  # the decompressed buffer is shown
        hexview.focus()
        hexview.move_to(key.offset)
        await pilot.pause(0.1)
        assert detail.selected[1] is key and key.value == b"key-0"

    run([str(part)], body)


def test_on_a_terminal_log_opens_the_tui_and_a_missing_path_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr("kdissect.cli.common.tui_refused", lambda: None)  # (a terminal)
    res = CliRunner().invoke(main, ["log", str(tmp_path / "nope"), "--tui"])
    assert res.exit_code == 1 and "no such file or directory" in res.output
    opened = []
    monkeypatch.setattr(LogApp, "run", lambda self: opened.append(self.paths))
    part, _ = _partition(tmp_path)
    res = CliRunner().invoke(main, ["log", str(part), "--tui"])
    assert res.exit_code == 0 and opened == [[str(part)]]
    res = CliRunner().invoke(main, ["log", str(part)])  # not a terminal: lines
    assert res.exit_code == 0 and "00000000000000000000.log" in res.output
    assert len(opened) == 1


def test_a_file_that_is_no_kafka_file_says_so(tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("not a segment")

    async def body(app, pilot):
        assert app.loaded and not app.shown and app.error
        assert app.error in str(app.query_one("#empty").render())

    run([str(odd)], body)


def test_a_torn_batch_at_the_end_shows_its_bytes(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    good = batch(2, 1, 0, [(b"k", b"v" * 50)])
    torn = batch(2, 0, 1, [(b"k2", b"v2")])[:-10]
    (part / "00000000000000000000.log").write_bytes(good + torn)

    async def body(app, pilot):
        assert [it.kind for it in app.shown] == ["batch", "batch"]
        await pilot.press("p")
        await pilot.pause(0.1)
        detail = app.query_one(Detail)
        item = detail.items[0]
        assert item.base == len(good) and item.data == torn
        assert detail.selected[1].code == "log_size_past_end"
        assert app.query_one(HexView).data == torn
        assert "past the end of the file" in str(app.query_one("#field-line").render())

    run([str(part)], body)
