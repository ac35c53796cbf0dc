"""The plain table writer (render/plain_table.py) prints exactly what rich prints for the
same tables on a console without colours: random tables (cells to justify, to wrap or
crop, wide and control characters, markup-like text, every box, padding, titles to
wrap) at widths 40-200, on UTF-8 and ASCII consoles, and every repo capture's --stats
tables. The CLI's --stats outputs are also held to the digests rich made
(tests/test_golden_outputs.py)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from rich.console import Console

from kdissect.capture.tls.keylog import KeyLog
from kdissect.protocol import Options
from kdissect.render import plain_table
from kdissect.render.plain_table import Lines, Pieces, Table, plain_lines, print_pieces
from kdissect.render.printer import ExchangePrinter
from kdissect.render.stats import stats_pieces
from kdissect.render.tls import tls_rows
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap")) + sorted((ROOT / "captures").glob("*.pcapng"))

WORDS = [
    "",
    "a",
    "0",
    "12345",
    "Produce",
    "127.0.0.1:9092",
    "::1:9092",
    "12:34:56.789",
    "  spaced  ",
    "trailing ",
    " leading",
    "x" * 30,
    "a-long-topic-name-without-spaces",
    "two words",
    "é",
    "宽字符",
    "emoji😀",
    "tab\there",
    "new\nline",
    "ctrl\x01",
    "[red]markup[/red]",
    "a[/b]",
    ":smile:",
    "…",
    "\u200b",
    "-",
]
BOXES = [
    "HEAVY_HEAD",
    "SIMPLE_HEAD",
    "ROUNDED",
    "ASCII",
    "MINIMAL",
    "SIMPLE",
    "SQUARE",
    "DOUBLE_EDGE",
    "MINIMAL_HEAVY_HEAD",
    "HORIZONTALS",
    "MARKDOWN",
]
TITLES = [
    None,
    "",
    "Errors",
    "Diagnoses (docs/findings.md)",
    "Exchanges per API: broker time, i.e. latency less the waits clients asked for "
    "(Fetch/ShareFetch max_wait_ms, JoinGroup/SyncGroup rebalances)",
    "a " + "x" * 90 + " b",
    "  leading spaces and   several   gaps  ",
    "宽 title",
]


def _cell(rng: random.Random, clean: bool = False):
    word = (
        rng.choice(WORDS)
        if rng.random() < 0.3 and not clean
        else " ".join(rng.choice(WORDS[:11]) for _ in range(rng.randrange(1, 3)))
    )
    return (word, rng.choice(["", "red", "bold"])) if rng.random() < 0.3 else word


def _random_table(rng: random.Random) -> Table:
    table = Table(
        title=rng.choice(TITLES),
        title_justify=rng.choice(["left", "center", "right"]),
        box=rng.choice(BOXES),
        padding=rng.choice([(0, 1), (0, 1), (0, 0), (0, 2), (1, 1)]),
    )
    for _ in range(rng.randrange(1, 9)):
        table.add_column(
            rng.choice(WORDS) if rng.random() < 0.2 else rng.choice(WORDS[:15]),
            justify=rng.choice(["left", "right", "center"]),
            no_wrap=rng.random() < 0.3,
        )
    clean = rng.random() < 0.5  # cells the plain writer takes
    for _ in range(rng.randrange(0, 12)):
        cells = [_cell(rng, clean) for _ in range(rng.randrange(len(table.columns) + 1))]
        table.add_row(*cells, end_section=rng.random() < 0.2)
    return table


def _random_lines(rng: random.Random) -> Lines:
    lines = Lines()
    for _ in range(rng.randrange(0, 5)):
        lines.append(
            rng.choice(WORDS) + rng.choice(["\n", " ", "x" * rng.randrange(200)]),
            rng.choice(["", "yellow"]),
        )
    return lines


class AsciiFile(io.StringIO):
    """A file whose encoding is ASCII: rich draws ASCII boxes for it."""

    encoding = "ascii"  # type: ignore[assignment]


def _console(width: int, ascii_only: bool) -> Console:
    return Console(file=AsciiFile() if ascii_only else io.StringIO(), width=width, highlight=False)


def _rich(pieces: list, width: int, ascii_only: bool = False) -> str:
    console = _console(width, ascii_only)
    console.print(Pieces(pieces))
    return console.file.getvalue()  # type: ignore[attr-defined]


def table_text(pieces: list, width: int, ascii_only: bool = False) -> str:
    """What the plain writer prints (rich where it says it cannot)."""
    console = _console(width, ascii_only)
    print_pieces(console, pieces)
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [40, 57, 80, 120, 160, 200])
def test_random_tables_print_as_rich_prints_them(width):
    rng = random.Random(width)
    plain = 0
    for _ in range(12):
        pieces = [
            _random_table(rng) if rng.random() < 0.8 else _random_lines(rng)
            for _ in range(rng.randrange(1, 4))
        ]
        for ascii_only in (False, True):
            assert table_text(pieces, width, ascii_only) == _rich(pieces, width, ascii_only)
            plain += sum(plain_lines(p, width, ascii_only) is not None for p in pieces)
    assert plain >= 5  # the plain writer did some of them, not rich


def test_tables_that_fit_are_laid_out_without_rich(monkeypatch):
    table = Table(title="Connections", title_justify="left", box="SIMPLE_HEAD")
    for col in ("#", "client"):
        table.add_column(col, justify="right" if col == "#" else "left")
    table.add_row("1", "127.0.0.1:9092", end_section=True)
    table.add_row(("and 3 more", "dim"))
    want = _rich([table], 80, False)
    monkeypatch.setattr(Table, "_rich", lambda self, *a: pytest.fail("rich was asked"))
    assert table_text([table], 80) == want
    # columns as wide as their widest cell plus padding; the title padded to the table
    assert want.splitlines()[:3] == [
        "Connections".ljust(31),
        " " * 31,
        "  " + "#".rjust(10) + "   " + "client".ljust(14) + "  ",
    ]


def test_text_is_shown_as_it_is_not_as_markup():
    """A client id like "a[/b]" made rich's markup parser raise inside --stats."""
    table = Table(title="Clients [bold]x[/bold] :smile:")
    table.add_column("client")
    for name in ("a[/b]", "[red]x[/red]", ":smile:"):
        table.add_row(name)
    for width in (30, 80):
        out = _rich([table], width, False)
        assert "a[/b]" in out and "[red]x[/red]" in out and ":smile:" in out
        assert table_text([table], width) == out


def _stats_of(capture: Path) -> ExchangePrinter:
    printer = ExchangePrinter(Options(), stats=True)
    keys = None
    if capture.with_suffix(".keys").exists():
        keys = KeyLog()
        keys.add_file(str(capture.with_suffix(".keys")))
    Engine(CaptureFiles([str(capture)], keys=keys), printer, Options()).run()
    return printer


@pytest.mark.slow  # every repo capture read: about 10 s
@pytest.mark.parametrize(
    "capture", CAPTURES + [ROOT / "captures" / "tls" / "kafka-tls.pcap"], ids=lambda p: p.name
)
def test_every_capture_stats_print_as_rich_prints_them(capture):
    printer = _stats_of(capture)
    assert printer.stats is not None
    pieces = list(stats_pieces(printer.stats))
    if printer.tls_connections:
        pieces.append(tls_rows(printer.tls_connections))
    for width in (80, 160):
        assert table_text(pieces, width) == _rich(pieces, width, False)
    assert all(plain_lines(p, 160, False) is not None for p in pieces[:1])


def test_a_colour_console_prints_through_rich():
    f = io.StringIO()
    console = Console(file=f, width=80, force_terminal=True, color_system="truecolor")
    table = Table(title="t")
    table.add_column("a")
    table.add_row(("x", "red"))
    plain_table.print_pieces(console, [table])
    assert "\x1b[" in f.getvalue()


def _wide_table() -> Table:
    table = Table(title="Clients (by client id)", title_justify="left", box="SIMPLE_HEAD")
    table.add_column("client", keep=True)
    for col in ("exchanges", "errors", "p50 ms", "p99 ms", "throttled", "throttle ms"):
        table.add_column(col, justify="right", optional=col.startswith("throttle"))
    table.add_row("kd-streams-StreamThread-1-consumer", "21", "0", "3.96", "583.10", "0", "0")
    table.add_row("kd-streams-StreamThread-1-producer", "7", "0", "1.95", "11.33", "0", "0")
    return table


def test_a_narrow_console_drops_blank_columns_and_cuts_no_name_or_figure():
    wide = _rich([_wide_table()], 160)
    assert "throttle ms" in wide
    for width in (80, 60):
        text = _rich([_wide_table()], width)
        assert all(len(line) <= width for line in text.splitlines()), text
        assert "kd-streams-StreamThread-1-consumer" in text
        assert "kd-streams-StreamThread-1-producer" in text
        assert "583.10" in text and "11.33" in text and "…" not in text, text
        assert "throttle" not in text  # all 0: left out before anything is cut


def test_a_table_too_wide_even_so_comes_in_parts_then_as_paragraphs():
    table = _wide_table()
    table.add_column("more ms", justify="right")
    table.rows = [row + ("12345.67",) for row in table.rows]
    table.note = "and 3 more"
    text = _rich([table], 50)
    assert all(len(line) <= 50 for line in text.splitlines()), text
    # each part repeats the client column
    assert text.count("kd-streams-StreamThread-1-consumer") >= 2, text
    assert "583.10" in text and "12345.67" in text and "…" not in text
    assert "\nand 3 more\n" in text
    text = _rich([table], 36)  # the client id and one column do not fit: paragraphs
    assert "kd-streams-StreamThread-1-consumer" in text and "p99 ms 583.10" in text, text
    assert all(len(line) <= 36 for line in text.splitlines()), text
