"""rich's Console, imported only when something is rendered with it.

Importing rich is about a tenth of a small command's start-up, and output to a pipe or a
file is written plainly (format_text, format_jsonl...): there, ``console()`` hands out a
stand-in that answers ``is_terminal`` (False) and builds the real Console the first time
anything else is asked of it (a field tree, a warning, the --stats tables), so what is
printed is rich's own output, unchanged.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, cast

from .printable import printable

if TYPE_CHECKING:
    from rich.console import Console

# what rich.control.strip_control_codes removes (bell, backspace, vertical tab, form feed,
# carriage return): the plain line of an exchange is what its rich Text would print
_CONTROL_STRIP = dict.fromkeys((7, 8, 11, 12, 13))


def strip_control_codes(text: str) -> str:
    # a printable line holds none of them (translate with a table of deletions runs
    # character by character: ~20 us for one summary line)
    return text if text.isprintable() else text.translate(_CONTROL_STRIP)


def surely_plain(stderr: bool = False) -> bool:
    """Whether rich would find no terminal on stdout (stderr): the stream is not a tty and
    no variable that rich reads to force one (TTY_COMPATIBLE, FORCE_COLOR) is set. When in
    doubt, False: rich then decides, as it always did."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    isatty = getattr(sys.stderr if stderr else sys.stdout, "isatty", None)
    try:
        return isatty is None or not isatty()
    except ValueError:  # a closed stream: rich says "not a terminal" too
        return True


class _Deferred:
    """A Console on a stream that is surely not a terminal, made on first real use."""

    is_terminal = False

    def __init__(self, options: dict[str, Any]):
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:  # only for what the class lacks
        if self._console is None:
            self._console = _console_class()(**self._options)
        return getattr(self._console, name)


def print_line(console: Console, text: str, style: str | None = None) -> None:
    """``console.print(Text(text, style=style))``: see ``print_parts``."""
    print_parts(console, [(text, style)])


def print_parts(console: Console, parts: list[tuple[str, str | None]]) -> None:
    """Print one line made of (text, style) parts, as ``console.print`` prints the rich
    ``Text`` they make (a soft-wrapping console). On a stream that is surely not a
    terminal, a printable line is written as it is: that is exactly what rich prints there
    (no colours, no wrapping: tests/test_startup.py compares the two), and rich is not
    imported for a capture's closing note or a log's lines."""
    parts = [(printable(t), style) for t, style in parts]  # (input strings in them)
    if isinstance(console, _Deferred):
        text = "".join([t for t, _ in parts])
        if text.isprintable():
            (sys.stderr if console._options.get("stderr") else sys.stdout).write(text + "\n")
            return
    from rich.text import Text

    line = Text()
    for t, style in parts:
        line.append(t, style=style)
    console.print(line)


PIPE_WIDTH = 160  # trees and tables to a pipe or file: wide enough not to squeeze them


def pipe_width() -> int:
    """The width of what goes to a pipe or a file: ``COLUMNS`` when the user sets it
    (``COLUMNS=100 kdissect pcap -V f.pcap | less``), else ``PIPE_WIDTH``."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and 20 <= int(columns) <= 10_000 else PIPE_WIDTH


def output_console() -> Console:
    """The console of what a command prints (lines, -V trees, tables): a terminal's
    width, or ``pipe_width()`` to a pipe or a file (rich's 80 would cut the trees)."""
    out = console(highlight=False)
    return out if out.is_terminal else console(highlight=False, width=pipe_width())


def console(**options: Any) -> Console:
    """``rich.console.Console(**options)``, or on a stream that is surely not a terminal a
    stand-in that imports rich only when something is printed through it."""
    if surely_plain(bool(options.get("stderr"))):
        return cast("Console", _Deferred(options))
    return _console_class()(**options)


_CONSOLE: Any = None


def _console_class() -> Any:
    """rich's Console, but a reader that went away (`| head`) ends the command as every
    other writer of kdissect's does (quietly, status 0): rich's own ends it with 1."""
    global _CONSOLE
    if _CONSOLE is None:
        from rich.console import Console

        class QuietConsole(Console):
            def on_broken_pipe(self) -> None:
                self.quiet = True
                raise BrokenPipeError

        _CONSOLE = QuietConsole
    return _CONSOLE
