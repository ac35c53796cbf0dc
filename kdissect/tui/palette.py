"""The TUI's colours, legible in dark and light themes (tests/test_tui_contrast.py checks
WCAG contrast: text 4.5:1, shading 3:1). The trees, the list and the bytes name ANSI
colours (red, yellow, cyan...) as the text output does; Textual maps them to RGB through
the app's ANSI themes, so these two themes decide how every one of them looks: a light
theme's yellow is a dark ochre, a dark theme's red a light one. Backgrounds that carry
text (the bytes pane's marks) are set here in RGB, one set per theme brightness."""

from __future__ import annotations

import functools

from rich.color import Color, ColorType
from rich.style import Style
from rich.terminal_theme import TerminalTheme
from rich.text import Span, Text


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    triplet = Color.parse(hex_colour).triplet
    assert triplet is not None
    return (triplet.red, triplet.green, triplet.blue)


def _theme(background: str, foreground: str, normal: list[str], bright: list[str]) -> TerminalTheme:
    return TerminalTheme(
        _rgb(background), _rgb(foreground), [_rgb(c) for c in normal], [_rgb(c) for c in bright]
    )


#                 black      red        green      yellow     blue       magenta    cyan       white
ANSI_DARK = _theme(
    "#121212",
    "#e0e0e0",
    ["#1a1a1a", "#ff7b8c", "#98e024", "#fd971f", "#8fb4ff", "#ff7ad9", "#58d1eb", "#c4c5b5"],
    ["#8a8a8a", "#ff9aa6", "#b5f05a", "#ffd75f", "#a9c6ff", "#ff9de3", "#8be9fd", "#f6f6ef"],
)
ANSI_LIGHT = _theme(
    "#f7f7f7",
    "#1f1f1f",
    ["#000000", "#a0182a", "#2d6a10", "#7a4a00", "#1d4eb0", "#7a2a9d", "#00657f", "#f7f7f7"],
    ["#5a5a5a", "#9c1a28", "#276a0e", "#6e4400", "#1a4aa8", "#7a2a8a", "#005f78", "#ffffff"],
)

# the bytes pane's marks over a selected field's parents, nearest first: distinct from
# the pane's background (3:1) with their own text colour (4.5:1 on them)
# parents of the selected field, nearest first: stronger to fainter
PARENT_TONES = {
    True: ["#000000 on #a8a8a8", "#000000 on #949494", "#000000 on #808080"],
    False: ["#ffffff on #4e4e4e", "#ffffff on #5f5f5f", "#ffffff on #6c6c6c"],
}

# the list's cursor: Textual's (light text on #0178d4) was 3.8:1 in the dark theme
CURSOR_CSS = """
    ExchangeList:dark:focus > .exchange-list--cursor { background: #0a5aa0; color: #ffffff; }
    ExchangeList:light:focus > .exchange-list--cursor { background: #004578; color: #ffffff; }
    ExchangeList:dark > .exchange-list--cursor { background: #2a4a66; color: #ffffff; }
    ExchangeList:light > .exchange-list--cursor { background: #9db8cc; color: #000000; }
"""


# the field tree's cursor: light, dark text, so the dim parts of a field's line (its
# offset and length, blended towards the background) stay legible on it too; no tint of
# a focused tree in a light theme (dim text on it fell to 4.4:1)
TREE_CURSOR_CSS = """
    Detail FieldTree:focus > .tree--cursor { background: #9ec9f0; color: #000000; }
    Detail FieldTree > .tree--cursor { background: #c5d3df; color: #000000; }
    Detail FieldTree:light:focus { background-tint: $foreground 0%; }
"""


@functools.lru_cache(maxsize=1024)
def _legible_style(style: str | Style, dark: bool) -> str | Style:
    """``style`` with its ANSI colours in RGB (itself when it has none)."""
    parsed = Style.parse(style) if isinstance(style, str) else style
    theme = ANSI_DARK if dark else ANSI_LIGHT

    def ansi(colour: Color | None) -> bool:
        return colour is not None and colour.type == ColorType.STANDARD

    def rgb(colour: Color | None) -> Color | None:
        if colour is not None and ansi(colour) and colour.number is not None:
            return Color.from_triplet(theme.ansi_colors[colour.number])
        return colour

    if not (ansi(parsed.color) or ansi(parsed.bgcolor)):
        return style
    return parsed + Style.from_color(rgb(parsed.color), rgb(parsed.bgcolor))


def legible(text: Text, dark: bool) -> Text:
    """``text`` with its ANSI colours (red, cyan...) in this module's RGB for the theme's
    brightness: Textual turns the ANSI colours of a widget's content into RGB by its
    own default themes (a light theme's yellow on a light background: 2:1)."""
    out = text.copy()
    if out.style:
        out.style = _legible_style(out.style, dark)
    out.spans = [Span(s.start, s.end, _legible_style(s.style, dark)) for s in out.spans]
    return out


def dark(widget) -> bool:
    """Whether ``widget``'s app shows a dark theme (dark before it runs)."""
    try:
        return widget.app.current_theme.dark
    except Exception:  # no app yet
        return True
