"""Tables (and the lines between them) as rich draws them, written without rich when the
console shows no colours: what ``--stats`` prints.

A ``Table`` here is described like ``rich.table.Table`` (columns, rows of cells, a
title, a box) and *is* a rich renderable (``__rich__`` makes the rich table: the TUI and
any console with colours use that). On a stream that is surely not a terminal (a pipe,
a file) rich is not even imported (about 0.05 CPU-s of a run, and laying out 160 lines
of tables took rich 0.1 s): ``plain_lines`` lays the table out as rich's Table does when
every cell fits on one line (column widths = the widest cell plus padding, cells
justified, the title wrapped at word boundaries to the table's width, rich's own box
characters), and says None for anything it cannot guarantee (a cell rich would wrap or
crop, wide or control characters, a title word longer than the table): that piece is then
printed by rich itself. All text is shown as it is: rich reads no markup or emoji codes
in it (a client id "a[/b]" made rich's markup parser raise).
tests/test_plain_table.py compares both on random tables at widths 40-200 and on every
repo capture's ``--stats``."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO, Union

from .printable import printable

# a cell: text, or (text, style)
Cell = Union[str, tuple[str, str]]


# (plain classes, not dataclasses: making a dataclass costs a millisecond at import)
class Column:
    def __init__(
        self,
        header: str,
        justify: str = "left",
        no_wrap: bool = False,
        keep: bool = False,
        optional: bool = False,
        label: str | None = None,
    ):
        self.header = header
        self.justify = justify  # left, right or center
        self.no_wrap = no_wrap
        # never cut (identifying: an address, a client id, an API); right-justified
        # columns (figures) are never cut either: a cut number is a wrong number
        self.keep = keep or justify == "right"
        self.optional = optional  # dropped on a narrow console when every cell is blank or 0
        self.label = label or header  # its name in the stacked layout


class Table:
    """A table described as for ``rich.table.Table`` (the subset kdissect draws)."""

    def __init__(
        self,
        title: str | None = None,
        title_justify: str = "center",
        box: str = "HEAVY_HEAD",
        padding: tuple[int, int] = (0, 1),
    ):
        self.title, self.title_justify = title, title_justify
        self.box = box  # a name in rich.box
        self.padding = padding  # (top and bottom, left and right)
        self.columns: list[Column] = []
        self.rows: list[tuple[Cell, ...]] = []
        self.sections: set[int] = set()  # rows followed by a line
        self.note: str | None = None  # a line under the table ("and 13 more")

    def add_column(
        self,
        header: str,
        justify: str = "left",
        no_wrap: bool = False,
        keep: bool = False,
        optional: bool = False,
        label: str | None = None,
    ) -> None:
        self.columns.append(Column(header, justify, no_wrap, keep, optional, label))

    def add_row(self, *cells: Cell, end_section: bool = False) -> None:
        """Cells left out are empty, as in rich."""
        cells = tuple(
            printable(c) if isinstance(c, str) else (printable(c[0]), c[1]) for c in cells
        )  # (client ids, topics...: from the input)
        cells = cells + ("",) * (len(self.columns) - len(cells))
        if end_section:
            self.sections.add(len(self.rows))
        self.rows.append(cells)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        """The table at the console's width: as rich lays it out when every cell fits;
        narrower, headers wrapped at their words and columns of blank or 0 cells left
        out, but never cutting an identifying cell or a figure; stacked (one row a
        paragraph) when even that does not fit."""
        from rich.text import Text

        fitted = _fit(self, options.max_width)
        if fitted is not None:
            yield self._rich(*fitted)
        else:
            parts = _parts(self, options.max_width)
            if parts is None:
                yield _stacked(self, options.max_width)
            else:
                for part in parts:
                    yield part._rich(*_fit(part, options.max_width))  # type: ignore[misc]
        if self.note:
            yield Text(self.note, style="dim")

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, self._rich(self.columns, None, self.padding[1]))

    def _rich(self, columns: list[Column], widths: list[int] | None, pad: int) -> Any:
        from rich import box
        from rich.table import Table as RichTable
        from rich.text import Text

        table = RichTable(
            title=Text(self.title, style="table.title") if self.title else None,
            title_justify=self.title_justify,  # type: ignore[arg-type]
            box=getattr(box, self.box),
            padding=(self.padding[0], pad),
        )
        for i, c in enumerate(columns):
            table.add_column(
                Text(c.header),
                justify=c.justify,  # type: ignore[arg-type]
                no_wrap=c.no_wrap,
                width=None if widths is None else widths[i],
            )
        shown = [next(j for j, d in enumerate(self.columns) if d is c) for c in columns]
        for i, row in enumerate(self.rows):
            table.add_row(
                *(
                    Text(c) if isinstance(c, str) else Text(c[0], style=c[1])
                    for c in (row[j] for j in shown)
                ),
                end_section=i in self.sections,
            )
        return table


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _blank(table: Table, index: int) -> bool:
    return all(_text(row[index]).strip() in ("", "0") for row in table.rows)


def _fit(table: Table, width: int) -> tuple[list[Column], list[int] | None, int] | None:
    """The columns shown, their widths (None: rich's own, every cell fits) and the
    padding either side of a cell for a console ``width`` wide: every cell whole if it
    fits; else columns of blank or 0 cells left out, headers and wrapping cells wrapped
    at their words, then no padding; None when none of that fits."""
    full = list(table.columns)
    pad = table.padding[1]
    fitted = _widths(table, full, pad, width, natural_only=True)
    if fitted is not None:
        return full, fitted, pad
    # columns of nothing but blanks or 0 go before any header is wrapped
    kept = [c for i, c in enumerate(full) if not (c.optional and _blank(table, i))]
    for each in (pad, 0):
        fitted = _widths(table, kept, each, width)
        if fitted is not None:
            return kept, fitted, each
    return None


def _widths(
    table: Table, columns: list[Column], pad: int, width: int, natural_only: bool = False
) -> list[int] | None:
    """Widths of ``columns`` that fit ``width`` cutting no kept cell (``natural_only``:
    wrapping no header or cell either), or None."""
    from rich.cells import cell_len

    index = [next(j for j, d in enumerate(table.columns) if d is c) for c in columns]
    extra = 2 + len(columns) - 1 + 2 * pad * len(columns)
    bodies = [[_text(row[i]) for row in table.rows] for i in index]
    natural = [
        max([cell_len(c.header), *(cell_len(t) for t in b)]) for c, b in zip(columns, bodies)
    ]
    least = [
        max([_longest_word(c.header)] + [cell_len(t) if c.keep else _longest_word(t) for t in b])
        or 1
        for c, b in zip(columns, bodies)
    ]
    if natural_only:
        return natural if sum(natural) + extra <= width else None
    spare = width - extra - sum(least)
    if spare < 0:
        return None
    widths = list(least)
    # the room left: to the columns that wrap their text first, then to the headers
    for wraps in (True, False):
        for i, c in enumerate(columns):
            if c.keep != wraps and spare > 0:
                more = min(spare, natural[i] - widths[i])
                widths[i] += more
                spare -= more
    return widths


def _parts(table: Table, width: int) -> list[Table] | None:
    """The table cut into tables of fewer columns, each repeating the leading ones (the
    first column and the kept ones after it), when each part fits ``width``."""
    lead = 1
    while (
        lead < len(table.columns)
        and table.columns[lead].keep
        and (table.columns[lead].justify == "left")
    ):
        lead += 1
    kept = [
        i
        for i, c in enumerate(table.columns)
        if i >= lead and not (c.optional and _blank(table, i))
    ]
    groups: list[list[int]] = []
    for i in kept:
        trial = [*groups[-1], i] if groups else [i]
        if groups and _fit(_part(table, [*range(lead), *trial]), width) is not None:
            groups[-1] = trial
        else:
            groups.append([i])
    parts = [_part(table, [*range(lead), *g]) for g in groups]
    if not parts or any(_fit(p, width) is None for p in parts):
        return None
    for p in parts[1:]:
        p.title = None
    return parts


def _part(table: Table, index: list[int]) -> Table:
    part = Table(table.title, table.title_justify, table.box, table.padding)
    part.columns = [table.columns[i] for i in index]
    part.rows = [tuple(row[i] for i in index) for row in table.rows]
    part.sections = table.sections
    return part


def _stacked(table: Table, width: int) -> Any:
    """Each row a paragraph: its first cell, then ``label value`` for the others (the
    layout of a console too narrow for the table's columns)."""
    from rich.text import Text

    out = Text()
    if table.title:
        out.append(table.title + "\n", style="table.title")
    blank = [c.optional and _blank(table, i) for i, c in enumerate(table.columns)]
    for row in table.rows:
        first = row[0]
        out.append(_text(first), style="bold" if isinstance(first, str) else first[1] or "bold")
        for i, (c, cell) in enumerate(zip(table.columns[1:], row[1:]), 1):
            if blank[i] or not _text(cell).strip():
                continue
            out.append(f"  {c.label} ", style="dim")
            out.append(_text(cell), style="" if isinstance(cell, str) else cell[1])
        out.append("\n")
    out.rstrip()
    return out


class Lines:
    """Text of (text, style) parts printed as one rich ``Text``."""

    def __init__(self, parts: list[tuple[str, str]] | None = None):
        self.parts = parts if parts is not None else []

    def append(self, text: str, style: str = "") -> None:
        self.parts.append((text, style))

    def __rich__(self) -> Any:
        from rich.text import Text

        out = Text()
        for text, style in self.parts:
            out.append(text, style=style)
        return out


Piece = Union[Table, Lines]


class Pieces(list):
    """Tables and texts shown one after another (a rich ``Group``)."""

    def __rich__(self) -> Any:
        from rich.console import Group

        return Group(*self)


def _one_line(text: str) -> bool:
    """Whether ``text`` is one line of printable characters of one cell each."""
    if not text.isprintable():
        return False
    if text.isascii():
        return True
    from rich.cells import cell_len

    return cell_len(text) == len(text)


def _plain(cell: Cell) -> str | None:
    """The text of a cell, when it is one plain line."""
    text = cell if isinstance(cell, str) else cell[0]
    return text if _one_line(text) else None


def _justify(text: str, width: int, how: str) -> str:
    """One line justified in ``width`` cells as rich's Lines.justify does."""
    if how == "left":
        return text.ljust(width)
    text = text.rstrip()
    if how == "right":
        return text.rjust(width)
    left = (width - len(text)) // 2
    return (" " * left + text).ljust(width)


_JUSTIFY = {"left", "right", "center"}
_WORD = re.compile(r"\s*\S+\s*")


def _wrap(text: str, width: int, how: str) -> list[str] | None:
    """``text`` wrapped at word boundaries to ``width`` (rich's divide_line, words that
    fit); None when a word must be folded."""
    breaks = []
    offset = 0
    for m in _WORD.finditer(text):
        word = m.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            return None
        elif offset and m.start():
            breaks.append(m.start())
            offset = len(word)
    out = []
    for start, end in zip([0, *breaks], [*breaks, len(text)]):
        line = text[start:end]
        if len(line) > width:  # only its trailing whitespace: cut (rstrip_end)
            line = line[:width]
        out.append(_justify(line, width, how))
    return out


def plain_lines(piece: Piece, width: int, ascii_only: bool) -> list[str] | None:
    """The lines rich prints for ``piece`` on a console of ``width`` cells without
    colours (not soft-wrapping), or None when that is not certain."""
    if isinstance(piece, Lines):
        lines = "".join(t for t, _ in piece.parts).split("\n")
        return lines if all(len(line) <= width and _one_line(line) for line in lines) else None
    return _table_lines(piece, width, ascii_only)


def _table_lines(table: Table, width: int, ascii_only: bool) -> list[str] | None:
    from rich import box as boxes

    columns = table.columns
    if (
        not columns
        or table.padding[0]
        or not {table.title_justify, *(c.justify for c in columns)} <= _JUSTIFY
    ):
        return None
    pad = table.padding[1]
    cells = [[_plain(c.header) for c in columns]]
    cells += [[_plain(c) for c in row] for row in table.rows]
    texts: list[list[str]] = [row for row in cells if None not in row]  # type: ignore[misc]
    if len(texts) < len(cells):
        return None
    widths = [max(len(row[i]) for row in texts) + 2 * pad or 1 for i in range(len(columns))]
    extra = 2 + len(columns) - 1  # the edges and the dividers
    if sum(widths) > width - extra:
        return None  # rich would wrap or crop cells
    table_width = sum(widths) + extra
    out: list[str] = []
    if table.title:
        title = _plain(table.title)
        lines = _wrap(title, table_width, table.title_justify) if title is not None else None
        if lines is None:
            return None
        out += lines
    box = getattr(boxes, table.box).substitute(_Options(ascii_only))
    edges = [
        (box.head_left, box.head_vertical, box.head_right),
        (box.mid_left, box.mid_vertical, box.mid_right),
        (box.foot_left, box.foot_vertical, box.foot_right),
    ]
    justify = [c.justify for c in columns]
    out.append(box.get_top(widths))
    space = " " * pad
    last = len(texts) - 1
    for index, row in enumerate(texts):
        left, divider, right = edges[0 if index == 0 else 2 if index == last else 1]
        out.append(
            left
            + divider.join(
                space + _justify(text, w - 2 * pad, how) + space
                for text, w, how in zip(row, widths, justify)
            )
            + right
        )
        if index == 0:
            out.append(box.get_row(widths, "head", edge=True))
        elif index - 1 in table.sections and index != last:
            out.append(box.get_row(widths, "row", edge=True))
    out.append(box.get_bottom(widths))
    if table.note:
        if not (_one_line(table.note) and len(table.note) <= width):
            return None
        out.append(table.note)
    return out


class _Options:
    """What Box.substitute reads of a console's options."""

    legacy_windows = False

    def __init__(self, ascii_only: bool):
        self.ascii_only = ascii_only


def print_pieces(console: Any, pieces: Iterable[Piece]) -> None:
    """Print ``pieces`` one after another as ``console.print(Pieces(pieces))`` would:
    plainly where that is certain to be the same, through rich otherwise."""
    target = _plain_target(console)
    if target is None:
        console.print(Pieces(pieces))
        return
    out, width, ascii_only = target
    for piece in pieces:
        lines = plain_lines(piece, width, ascii_only)
        if lines is None:
            out.flush()
            console.print(piece)
        else:
            out.write("\n".join(lines) + "\n")


def _plain_target(console: Any) -> tuple[TextIO, int, bool] | None:
    """(file, width, ASCII only) of a console that prints no styles and does not
    soft-wrap; None for any other (rich prints there)."""
    from .console import _Deferred

    if isinstance(console, _Deferred):  # surely not a terminal: rich not imported yet
        options = console._options
        width = options.get("width")
        if (
            not isinstance(width, int)
            or options.get("soft_wrap")
            or options.get("file")
            or sys.platform == "win32"
        ):  # (rich's legacy Windows console: its boxes)
            return None
        out = sys.stderr if options.get("stderr") else sys.stdout
        encoding = (getattr(out, "encoding", "utf-8") or "utf-8").lower()
        return out, width, not encoding.startswith("utf")  # as rich's Console decides
    from .plain_print import prints_plain

    if not prints_plain(console) or console.soft_wrap:
        return None
    return console.file, console.width, console.options.ascii_only
