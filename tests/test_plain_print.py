"""The plain printer (render/plain_print.py) writes exactly what rich prints for the
same field tree and hex dumps, on a console without colours: at every width, with ASCII
or Unicode guides, with soft wrapping, and for labels rich must wrap, crop or clean
(wide characters, control characters, newlines, trees deeper than the width). The repo
captures' -V outputs are covered by tests/test_golden_outputs.py (digests made by rich)."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.text import Text

from kdissect.protocol.node import Node
from kdissect.render.plain_print import prints_plain
from kdissect.render.text import print_node, print_tree, render_node, tree_of

WORDS = [
    "a",
    "name",
    "topic-with-a-long-name",
    "x" * 90,
    "宽字符",
    "emoji😀",
    "tab\there",
    "new\nline",
    "ctrl\x01\x1b[31m",
    "  spaced  ",
    "",
    "✗ …",
    "\u200b",
    "é" * 5,
]


def _random_tree(rng: random.Random, depth: int = 0, budget: list[int] | None = None) -> Node:
    budget = [60] if budget is None else budget  # nodes left for this tree
    budget[0] -= 1
    name = rng.choice(WORDS) or "n"
    kind = rng.choice(["int32", "string", "struct", "array", "bytes", "records"])
    value = rng.choice(
        [
            None,
            7,
            rng.choice(WORDS),
            bytes(rng.randrange(60)),
            b"\xff\x00" * rng.randrange(40),
            "v" * rng.randrange(120),
        ]
    )
    node = Node(
        name,
        kind,
        rng.randrange(500),
        rng.randrange(80),
        value,
        problem=rng.choice([None, None, rng.choice(WORDS)]),
        note=rng.choice([None, None, rng.choice(WORDS)]),
    )
    node.secret = rng.random() < 0.1
    if depth < 30 and budget[0] > 0 and rng.random() < 0.8:
        node.children = [_random_tree(rng, depth + 1, budget) for _ in range(rng.randrange(1, 4))]
    return node


class AsciiFile(io.StringIO):
    """A file whose encoding is ASCII: rich draws ASCII guides for it."""

    encoding = "ascii"  # type: ignore[assignment]


def _consoles(width: int) -> list[tuple[Console, io.StringIO]]:
    out = []
    for cls, kw in ((io.StringIO, {}), (io.StringIO, {"soft_wrap": True}), (AsciiFile, {})):
        f = cls()
        out.append((Console(file=f, width=width, highlight=False, **kw), f))
    return out


def _rich(console: Console, fn, *args) -> str:
    f = type(console.file)()
    Console(file=f, width=console.width, highlight=False, soft_wrap=console.soft_wrap).print(
        fn(*args)
    )
    return f.getvalue()


@pytest.mark.parametrize("width,trees", [(1, 2), (9, 6), (40, 10), (80, 10), (133, 8)])
def test_random_trees_print_as_rich_prints_them(width, trees):
    rng = random.Random(width)
    for _ in range(trees):
        root = _random_tree(rng)
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        title = rng.choice([None, Text("title\nsecond line", style="bold"), Text("t" * 200)])
        for console, f in _consoles(width):
            assert prints_plain(console)
            f.seek(0)
            f.truncate()
            print_node(console, data, root, False, 3, title, True)
            assert f.getvalue() == _rich(console, render_node, data, root, False, 3, title, True)
            f.seek(0)
            f.truncate()
            print_tree(console, root)
            assert f.getvalue() == _rich(console, tree_of, root)


def test_a_colour_console_still_prints_through_rich():
    f = io.StringIO()
    console = Console(file=f, width=80, force_terminal=True, color_system="truecolor")
    assert not prints_plain(console)
    root = Node("msg", "struct", 0, 4, children=[Node("a", "int32", 0, 4, 1)])
    print_node(console, b"\x00\x00\x00\x01", root)
    assert "\x1b[" in f.getvalue()  # styles written: rich did it
