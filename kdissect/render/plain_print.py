"""Field trees and texts written as rich would print them, without rich's layout, when
the console shows no colours (a pipe or a file).

rich lays out every tree label and text line through its generic segment machinery:
about 0.25 ms a line, so ``pcap -V`` of a 670 KB capture (113,000 lines) took 27 s.
Without colours the output is plain text, and a line that fits its width and holds only
printable single-cell characters comes out of rich unchanged; only those are written
here. Anything else (a line to wrap or crop, a control character, a wide character)
is handed to rich itself, one line at a time, with the options rich's own print and Tree
would give it, so the output stays byte-identical (tests/test_plain_print.py checks it
against rich on every repo capture and on random trees at several widths)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Union

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.text import Text
from rich.tree import Tree

# one piece of a label: plain text, (text, style) or a rich Text (Text.assemble's parts)
Part = Union[str, tuple[str, str], Text]
# a tree in preorder: (depth, label parts); depth 0 is the root
Entries = Sequence[tuple[int, Sequence[Part]]]
# what one print shows, in order: ("tree", Entries) or ("text", parts of one Text)
Piece = tuple[str, Sequence]


def plain_of(parts: Iterable[Part]) -> str:
    return "".join(
        p if isinstance(p, str) else p.plain if isinstance(p, Text) else p[0] for p in parts
    )


def prints_plain(console: Console) -> bool:
    """Whether ``console`` writes no styles at all (so plain text is what it prints)."""
    return (
        console.color_system is None
        and not console.record
        and not console.is_terminal
        and not console.legacy_windows
    )


class PlainPrinter:
    """Writes trees and texts to ``console``'s file as ``console.print`` would."""

    def __init__(self, console: Console):
        self.console = console
        self.width = console.width
        soft = console.soft_wrap
        # what console.print hands a renderable (see Console.print)
        self.options: ConsoleOptions = console.options.update(
            justify=None,
            overflow="ignore" if soft else None,
            no_wrap=True if soft else None,
            markup=None,
            highlight=None,
            height=None,
        )
        self.crop = not soft
        guide = (
            0
            if console.legacy_windows
            else (
                1
                if console.get_style("tree.line").bold
                else 2
                if console.get_style("tree.line").underline2
                else 0
            )
        )
        self.guides = Tree.ASCII_GUIDES if self.options.ascii_only else Tree.TREE_GUIDES[guide]

    # -- pieces -------------------------------------------------------------------
    def _fits(self, line: str, width: int) -> bool:
        """Whether rich prints ``line`` unchanged in ``width`` cells."""
        return (
            len(line) <= width
            and line.isprintable()
            and (line.isascii() or cell_len(line) == len(line))
        )

    def _rich_lines(self, text: Text, options: ConsoleOptions) -> list[str]:
        return [_text_of(line) for line in self.console.render_lines(text, options, pad=False)]

    def _text_lines(self, parts: Sequence[Part]) -> list[str]:
        """The lines rich prints for Text.assemble(*parts) at the console's width."""
        lines = plain_of(parts).split("\n")
        if all(self._fits(line, self.width) for line in lines):
            return lines
        # as console.print renders it: not cropped here (_write crops unless soft-wrapping)
        return [
            _text_of(line)
            for line in Segment.split_lines(
                self.console.render(Text.assemble(*parts), self.options)
            )
        ]

    def _label_lines(self, parts: Sequence[Part], width: int) -> list[str]:
        """The lines of one tree label in ``width`` cells (as rich's Tree renders it)."""
        plain = plain_of(parts)
        if self._fits(plain, width):
            return [plain]
        return self._rich_lines(
            Text.assemble(*parts), self.options.update(width=width, highlight=False, height=None)
        )

    def _write(self, lines: list[str]) -> None:
        width = self.width
        if self.crop:
            lines = [
                line
                if len(line) <= width and (line.isascii() or cell_len(line) <= width)
                else _text_of(
                    next(iter(Segment.split_and_crop_lines([Segment(line)], width, pad=False)))
                )
                for line in lines
            ]
        self.console.file.write("\n".join(lines) + "\n" if lines else "")

    # -- what callers print ----------------------------------------------------------
    def tree_lines(self, entries: Entries) -> list[str]:
        """A tree's lines with rich's guides: entries in preorder, depth 0 the root."""
        space, cont, fork, end = self.guides
        last = _last_flags(entries)
        out: list[str] = []
        stack: list[str] = []  # the guide of each open ancestor below the root
        width = self.options.max_width
        for i, (depth, parts) in enumerate(entries):
            del stack[max(depth - 1, 0) :]
            if depth == 0:
                out += self._label_lines(parts, width)
                continue
            head = "".join(stack)
            lines = self._label_lines(parts, width - len(head) - len(fork))  # guides: 1 cell each
            rest = space if last[i] else cont
            if lines:  # none when the guides leave no room
                out.append(head + (end if last[i] else fork) + lines[0])
                out += [head + rest + line for line in lines[1:]]
            stack.append(rest)
        return out

    def print_pieces(self, pieces: Iterable[Piece]) -> None:
        """Pieces printed as one rich Group of a Tree or Text each."""
        lines: list[str] = []
        for kind, body in pieces:
            lines += self.tree_lines(body) if kind == "tree" else self._text_lines(body)
        self._write(lines)


def _text_of(line: Iterable[Segment]) -> str:
    return "".join(s.text for s in line)


def _last_flags(entries: Entries) -> list[bool]:
    """For each entry: whether it is the last child of its parent."""
    flags = [True] * len(entries)
    later: set[int] = set()  # depths where a later sibling of this entry exists
    for i in range(len(entries) - 1, -1, -1):
        depth = entries[i][0]
        flags[i] = depth not in later
        later = {d for d in later if d < depth}
        later.add(depth)
    return flags
