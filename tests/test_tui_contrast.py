"""Readable colours: WCAG contrast of every cell drawn in the exchange list, the field
tree, the bytes and the log list, in the dark and the light theme, with the cursor on
an error row (focused and not), a field selected three levels deep (its parents shaded)
and the colours of every field of the bytes: text at least 4.5:1 on its background, the
bytes pane's shading of parents at least 3:1 against the pane. The colours are read
from what Textual draws (after its ANSI theme and dim filters), not from the code."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Tree

from kdissect.protocol import Options
from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import Detail, HexView
from kdissect.tui.log_app import LogApp
from kdissect.tui.palette import ANSI_DARK, ANSI_LIGHT, PARENT_TONES
from tests.support.tui import loaded, settle
from rich.color import Color

CLIENTS = Path(__file__).resolve().parents[1] / "captures" / "kafka-clients.pcap"
THEMES = ("textual-dark", "textual-light")
TEXT, SHADE = 4.5, 3.0
DECORATION = set("│┃├└┌┐┘┤┬┴┼─━╭╮╯╰▏▕▔▁▂▃▄▅▆▇█▲▼▶▷◀◁…⇢ ")


def luminance(rgb) -> float:
    def channel(v: int) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a, b) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def drawn(widget) -> list[tuple[str, tuple, tuple]]:
    """(text, foreground, background) of every segment of ``widget`` as drawn."""
    width, height = widget.size
    out = []
    for strip in widget.render_lines(Region(0, 0, width, height)):
        for seg in strip:
            text = "".join(ch for ch in seg.text if ch not in DECORATION)
            style = seg.style
            if not text or style is None or style.color is None or style.bgcolor is None:
                continue
            fg, bg = style.color.triplet, style.bgcolor.triplet
            if fg is not None and bg is not None:
                out.append((text, tuple(fg), tuple(bg)))
    return out


def failures(widgets) -> list[str]:
    bad = []
    for widget in widgets:
        for text, fg, bg in drawn(widget):
            if contrast(fg, bg) < TEXT:
                bad.append(
                    f"{type(widget).__name__}: {text[:24]!r} {fg} on {bg} {contrast(fg, bg):.2f}:1"
                )
    return bad


def deep_field(root):
    """A field with at least three parents (a partition's field in a topic)."""

    def walk(node, depth):
        if depth >= 4 and node.length:
            return node
        for child in node.children:
            found = walk(child, depth + 1)
            if found is not None:
                return found
        return None

    return walk(root, 0)


@pytest.mark.slow  # every error row, both cursors, deep fields: 20 s
@pytest.mark.parametrize("theme", THEMES)
def test_the_exchange_screen_is_readable(theme):
    async def go():
        app = KdissectApp(capture_loader([str(CLIENTS)]), title="clients")
        async with app.run_test(size=(160, 45)) as pilot:
            app.theme = theme
            await loaded(app, pilot)
            bad: list[str] = []
            # an error row (red status), a row with an expected error, a warning row
            rows = [i for i, v in enumerate(app.shown) if v.row[-1].plain]
            assert len(rows) >= 3
            detail = app.query_one(Detail)
            for row in rows:
                app.table.move_cursor(row)
                await settle(app, pilot)
                app.table.focus()
                await pilot.pause()
                bad += failures([app.table])
                app.query_one(Tree).focus()  # the cursor blurred
                await pilot.pause()
                bad += failures([app.table])
                for index, item in enumerate(detail.items):
                    node = deep_field(item.root)
                    if node is None:
                        continue
                    detail.select(index, node)
                    detail.field_tree.reveal(node, item.root)
                    await pilot.pause()
                    bad += failures([app.query_one(Tree), app.query_one(HexView)])
            assert not bad, "\n".join(sorted(set(bad))[:40])

    asyncio.run(go())


@pytest.mark.parametrize("dark", [True, False])
def test_parent_shading_stands_out_from_the_bytes_pane_and_carries_text(dark):
    async def go():
        app = KdissectApp(capture_loader([str(CLIENTS)]), title="clients")
        async with app.run_test(size=(160, 45)) as pilot:
            app.theme = THEMES[0 if dark else 1]
            await loaded(app, pilot)
            await settle(app, pilot)
            pane = app.query_one(HexView)
            background = pane.rich_style.bgcolor.get_truecolor()
            for tone in PARENT_TONES[dark]:
                style = app.console.get_style(tone)
                shade = style.bgcolor.get_truecolor()
                assert contrast(shade, background) >= SHADE, (tone, background)
                assert contrast(style.color.get_truecolor(), shade) >= TEXT, tone

    asyncio.run(go())


@pytest.mark.parametrize("theme", [ANSI_DARK, ANSI_LIGHT])
def test_every_ansi_colour_reads_on_the_backgrounds(theme):
    """The fields' colours in the bytes and the tree's notes are ANSI colours: each
    (but black and white, backgrounds of marks) reads on the list's and panes'
    backgrounds of its theme (the surfaces, and an even row)."""
    dark = theme is ANSI_DARK
    backgrounds = ["#121212", "#1e1e1e", "#252525"] if dark else ["#e0e0e0", "#d8d8d8", "#e2e2e2"]
    for index in [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14]:
        fg = theme.ansi_colors[index]
        for bg in backgrounds:
            ratio = contrast(tuple(fg), Color.parse(bg).get_truecolor())
            assert ratio >= TEXT, (index, fg, bg, ratio)


@pytest.mark.parametrize("theme", THEMES)
def test_the_log_screen_is_readable(theme, tmp_path):
    from tests.test_tui_log import damaged_partition

    part, _ = damaged_partition(tmp_path)

    async def go():
        app = LogApp([str(part)], Options())
        async with app.run_test(size=(160, 45)) as pilot:
            app.theme = theme
            await loaded(app, pilot)
            bad: list[str] = []
            for step in (1, 1):
                app.action_next_problem(step)  # a damaged batch, in red
                await pilot.pause(0.3)
                app.table.focus()
                await pilot.pause()
                bad += failures([app.table, app.query_one(Tree), app.query_one(HexView)])
            assert not bad, "\n".join(sorted(set(bad))[:40])

    asyncio.run(go())
