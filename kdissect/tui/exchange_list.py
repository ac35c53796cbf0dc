"""The exchange list: a virtual table that renders only the rows on screen (a capture of
millions of exchanges costs a list of references, not a widget per cell), keeps its
rows in a sort order as they arrive (request order by default), and fits its columns
to the terminal's width, dropping the least useful ones first."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..render.lines import endpoint
from .palette import CURSOR_CSS

BOOKMARK = "★"


@dataclass(frozen=True)
class Column:
    name: str
    want: int  # width when there is room
    least: int  # width it may shrink to before being dropped
    right: bool = False  # right-aligned (numbers)


COLUMNS = (
    Column("#", 7, 7, True),
    Column("time", 12, 12),
    Column("client → broker", 43, 22),
    Column("API", 18, 11),
    Column("v", 2, 2, True),
    Column("corr", 6, 4, True),
    Column("client id", 14, 8),
    Column("latency", 9, 8, True),
    Column("summary", 24, 12),
    Column("status", 28, 24),
)
FULL_TIME = 30  # "2026-11-23 20:38:07.661340 UTC"
LOCK = "🔒"  # before the frame number: a decrypted TLS connection
SHORT_ENDPOINTS = 13  # ":45642→:19092"
# when the terminal is narrow, these steps run in order until the columns fit: the list
# keeps the frame, API, version, latency, summary and status (24 columns down to 80:
# error names whole or abbreviated) to the last; endpoints shrink to the client's port
# and the broker in full
_STEPS = (
    ("shrink", "client → broker"),
    ("shrink", "client id"),
    ("drop", "client id"),
    ("drop", "corr"),
    ("shrink", "summary"),
    ("shrink", "API"),
    ("shrink", "status"),
    ("drop", "time"),
    ("drop", "client → broker"),
)
# long words of error names, shortened when a status does not fit its column
_ABBREVIATIONS = (
    ("COORDINATOR", "COORD"),
    ("AUTHORIZATION", "AUTHZ"),
    ("PROGRESS", "PROG"),
    ("PARTITION", "PART"),
    ("AVAILABLE", "AVAIL"),
    ("TRANSACTIONAL", "TXN"),
    ("TRANSACTION", "TXN"),
    ("UNKNOWN", "UNKN"),
    ("REQUIRED", "REQ"),
    ("REBALANCE", "REBAL"),
    ("PRODUCER", "PROD"),
    ("EXCEPTION", "EXC"),
    ("INVALID", "INVAL"),
)


def abbreviate(text: Text, width: int) -> Text:
    """``text`` (error names, each in its style) in ``width`` cells: long words of the
    names shortened (COORDINATOR_LOAD_IN_PROGRESS: COORD_LOAD_IN_PROG) before the end is
    cut."""
    if text.cell_len <= width:
        return text
    cuts = sorted({0, len(text.plain), *(x for sp in text.spans for x in (sp.start, sp.end))})
    out = Text(style=text.style)
    for piece in text.divide(cuts[1:-1]):
        plain = piece.plain
        for word, short in _ABBREVIATIONS:
            plain = plain.replace(word, short)
        out.append(plain, style=piece.spans[0].style if piece.spans else "")
    return out


def compact_endpoints(view) -> str:
    """The client's port and the broker in full (``:41234→127.1.0.2:9092``): which
    broker matters more than which client host."""
    return f":{view.ex.client[1]}→{endpoint((str(view.ex.broker[0]), view.ex.broker[1]))}"


@functools.lru_cache(maxsize=64)  # asked twice per line drawn
def fit(width: int, time_width: int = 12, endpoints_width: int = 43) -> list[tuple[int, int]]:
    """(column index, width) of the columns shown in ``width`` cells; the summary takes
    what is left."""
    return fit_columns(
        COLUMNS,
        _STEPS,
        width,
        {"time": time_width, "client → broker": endpoints_width},
        ("summary",),
    )


def fit_columns(
    columns: tuple[Column, ...], steps, width: int, wants: dict[str, int], fill: tuple[str, ...]
) -> list[tuple[int, int]]:
    """(column index, width) of ``columns`` in ``width`` cells: the ``steps`` (shrink or
    drop a column) run in order until they fit; the first of ``fill`` still shown takes
    what is left. ``wants``: widths other than the columns' own."""
    wants = {**{c.name: c.want for c in columns}, **wants}
    least = {c.name: c.least for c in columns}
    shown = [c.name for c in columns]

    def total() -> int:
        return sum(wants[n] for n in shown) + len(shown) - 1

    for step, name in steps:
        if total() <= width:
            break
        if step == "drop":
            shown.remove(name)
        else:
            wants[name] = min(wants[name], max(least[name], wants[name] - (total() - width)))
    wants[next(n for n in fill if n in shown)] += max(0, width - total())
    return [(i, wants[c.name]) for i, c in enumerate(columns) if c.name in shown]


class _Desc:
    """Reverses the order of a sort key's value (bisect needs ascending keys)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return other.v < self.v

    def __eq__(self, other) -> bool:
        return self.v == other.v


class ExchangeList(ScrollView, can_focus=True):
    """Rows of exchange views (each with ``row``: its cells, one per column). The
    ``order`` (a function of a view) and ``reverse`` say where each row goes. A list of
    other rows (kdissect log's files and batches) overrides ``COLUMNS``, ``tiebreak``,
    ``track``, ``cells`` and ``columns_shown``."""

    COLUMNS: tuple[Column, ...] = COLUMNS

    DEFAULT_CSS = (
        """
    ExchangeList { background: $surface; overflow-x: hidden; }
    ExchangeList > .exchange-list--header { text-style: bold; background: $panel; }
    ExchangeList > .exchange-list--even { background: $surface-lighten-1 50%; }
    ExchangeList > .exchange-list--cursor { background: $block-cursor-blurred-background; }
    ExchangeList:focus > .exchange-list--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
    }
    """
        + CURSOR_CSS
    )
    COMPONENT_CLASSES = {"exchange-list--header", "exchange-list--even", "exchange-list--cursor"}
    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
    ]

    class RowHighlighted(Message):
        def __init__(self, exchanges: ExchangeList, row: int):
            super().__init__()
            self.exchanges, self.cursor_row = exchanges, row

        @property
        def control(self) -> ExchangeList:
            return self.exchanges

    class HeaderSelected(Message):
        def __init__(self, exchanges: ExchangeList, column: str):
            super().__init__()
            self.exchanges, self.label = exchanges, column

        @property
        def control(self) -> ExchangeList:
            return self.exchanges

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows: list = []
        self._keys: list = []
        self.order: Callable[[Any], tuple[int, Any]] | None = None
        self.order_name = ""
        self.reverse = False
        self.cursor_row = 0
        # ts -> the time column's text (None: time of day)
        self.time_of: Callable[[float], str] | None = None
        self.hosts: set[tuple[str, str]] = set()

    # -- rows ---------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def _key(self, view):
        order = self.order
        assert order is not None, "set_order() comes before rows"
        empty, value = order(view)
        return (empty, _Desc(value) if self.reverse else value, self.tiebreak(view))

    def tiebreak(self, view) -> int:
        """Rows of equal sort values stay in this order."""
        return view.ex.first.index

    def track(self, views) -> None:
        """Note what the drawing needs to know of new rows (their hosts)."""
        self.hosts.update((v.ex.client[0], v.ex.broker[0]) for v in views)

    def set_order(self, name: str, order, reverse: bool, keep=None) -> None:
        """Sort by ``order(view) -> (group, value)`` (group 0 before 1: empty cells
        stay last both ways); the cursor goes to the top (the slowest, the first...)."""
        self.order, self.order_name, self.reverse = order, name, reverse
        self.set_rows(self.rows, keep)

    def set_rows(self, views, keep=None) -> None:
        keyed = sorted(((self._key(v), v) for v in views), key=lambda kv: kv[0])
        self._keys = [k for k, _ in keyed]
        self.rows = [v for _, v in keyed]
        self.hosts = set()
        self.track(self.rows)
        self.cursor_row = self.index(keep) if keep is not None and keep in self.rows else 0
        self._resized()
        if self.cursor_row:
            # the row kept (unfollowing, a new filter) in the middle of the view, once the
            # scroll range has grown to the rows (scrolling now stopped at the old range)
            self.center_cursor()
        else:
            self.scroll_to(y=0, animate=False, immediate=True)

    def add(self, view) -> None:
        """Insert a row in order; the cursor stays on the exchange it was on."""
        key = self._key(view)
        at = bisect.bisect(self._keys, key)
        self._keys.insert(at, key)
        self.rows.insert(at, view)
        self.track((view,))
        if at <= self.cursor_row and len(self.rows) > 1:
            self.cursor_row += 1

    def index(self, view) -> int:
        """The row of ``view`` (by its key: no scan)."""
        at = bisect.bisect_left(self._keys, self._key(view))
        while at < len(self.rows) and self.rows[at] is not view:
            at += 1
        return at if at < len(self.rows) else -1

    def current(self):
        return self.rows[self.cursor_row] if 0 <= self.cursor_row < len(self.rows) else None

    def grown(self) -> None:
        """After ``add``: the scroll range and the screen follow."""
        self._resized()

    def _resized(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)
        self.refresh()

    # -- the cursor ---------------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        if not self.rows:
            return
        row = max(0, min(row, len(self.rows) - 1))
        changed = row != self.cursor_row
        self.cursor_row = row
        self.scroll_to_cursor()
        self.refresh()
        if changed:
            self.post_message(self.RowHighlighted(self, row))

    def center_cursor(self) -> None:
        """Scroll so the cursor's row is in the middle (after a jump); again once the
        layout is up to date (the scroll range may lag rows just added)."""

        def center() -> None:
            visible = max(1, self.scrollable_content_region.height - 1)
            self.scroll_to(y=max(0, self.cursor_row - visible // 2), animate=False, immediate=True)

        center()
        self.call_after_refresh(center)

    def scroll_to_cursor(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False, immediate=True)

    def action_move(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        page = max(1, self.scrollable_content_region.height - 2)
        self.move_cursor(self.cursor_row + direction * page)

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self.rows) - 1)

    def on_click(self, event) -> None:
        if event.y == 0:
            x = 0
            for index, width in self.columns_shown():
                if x <= event.x < x + width + 1:
                    self.post_message(self.HeaderSelected(self, self.COLUMNS[index].name))
                    return
                x += width + 1
            return
        self.focus()
        self.move_cursor(int(self.scroll_y) + event.y - 1)

    def on_resize(self) -> None:
        self._resized()
        # a smaller list may have left the cursor's row below its end: in view again
        self.call_after_refresh(self.scroll_to_cursor)

    # -- drawing ------------------------------------------------------------------------

    def columns_shown(self) -> list[tuple[int, int]]:
        return fit(
            self.scrollable_content_region.width,
            FULL_TIME if self.time_of else 12,
            SHORT_ENDPOINTS if self.short_endpoints() else 43,
        )

    def short_endpoints(self) -> bool:
        """Ports only (``:45642→:9092``) when every row has the same two hosts."""
        return len(self.hosts) == 1

    def cells(self, view) -> list:
        cells = list(view.row)
        if self.short_endpoints():
            cells[2] = f":{view.ex.client[1]}→:{view.ex.broker[1]}"
        if self.time_of is not None:
            cells[1] = self.time_of(view.ex.first.ts)
        if view.ex.tls is not None:  # read from a decrypted TLS connection
            cells[0] = f"{LOCK}{cells[0]}"
        return cells

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("exchange-list--header")
            labels = [self.header_label(self.COLUMNS[i].name) for i, _ in self.columns_shown()]
            return self._strip(labels, style, width)
        row = int(self.scroll_y) + y - 1
        if not 0 <= row < len(self.rows):
            return Strip.blank(width, base)
        style = base
        if row == self.cursor_row:
            style = base + self.get_component_rich_style("exchange-list--cursor")
        elif row % 2:
            style = base + self.get_component_rich_style("exchange-list--even")
        view = self.rows[row]
        cells = self.cells(view)
        if getattr(view, "bookmarked", False):
            cells[0] = f"{BOOKMARK}{cells[0]}"
        shown = [
            self.squeeze(self.COLUMNS[i].name, cells[i], w, view) for i, w in self.columns_shown()
        ]
        if row == self.cursor_row:
            # the cursor's colours over the cells' own (red on the cursor's blue was
            # 1.08:1): the detail below says the same in its colours
            return self._strip(
                shown, style, width, over=Style(color=style.color, bgcolor=style.bgcolor, dim=False)
            )
        return self._strip(shown, style, width)

    def squeeze(self, column: str, cell, width: int, view):
        """A cell fitted to its column's ``width`` (before its end is cut)."""
        if column == "client → broker" and len(str(cell)) > width:
            return compact_endpoints(view)
        if column == "status" and isinstance(cell, Text):
            return abbreviate(cell, width)
        return cell

    def _arrow(self, name: str) -> str:
        if name != self.order_name and not (name == "latency" and self.order_name == "broker time"):
            return ""
        return " ▼" if self.reverse else " ▲"

    def header_label(self, name: str) -> str:
        """A column's header: its name and the sort arrow; the latency column sorted by
        broker time says so (both orders used to read `latency ▼`)."""
        arrow = self._arrow(name)
        if name == "latency" and self.order_name == "broker time":
            return "broker" + arrow
        return name + arrow

    def _strip(self, cells: list, style: Style, width: int, over: Style | None = None) -> Strip:
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        for (index, w), cell in zip(self.columns_shown(), cells):
            text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
            text.truncate(w, overflow="ellipsis")
            pad = w - text.cell_len
            if self.COLUMNS[index].right:
                line.append(" " * pad)
                line.append_text(text)
            else:
                line.append_text(text)
                line.append(" " * pad)
            line.append(" ")
        segments = list(line.render(self.app.console))
        strip = Strip(Segment.apply_style(segments, style, over), line.cell_len)
        return strip.crop_extend(0, width, style)
