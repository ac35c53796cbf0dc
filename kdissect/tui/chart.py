"""Broker time over real time: one bar per time slice (the slowest exchange in it), with
a time axis, a millisecond axis, and a cursor that ← → move; Enter (or a click) picks
the slice's slowest exchange."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

_BLOCKS = " ▁▂▃▄▅▆▇█"
_LABEL = 9  # width of the ms axis labels


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%H:%M:%S.%f")[:12]


class LatencyChart(Widget, can_focus=True):
    """``points``: (time, milliseconds, item) in any order."""

    DEFAULT_CSS = "LatencyChart { height: 10; }"
    BINDINGS = [
        Binding("left", "move(-1)", "Earlier", show=False),
        Binding("right", "move(1)", "Later", show=False),
        Binding("home", "move(-100000)", show=False),
        Binding("end", "move(100000)", show=False),
        Binding("enter", "pick", "Go to the slowest here"),
    ]

    class Picked(Message):
        def __init__(self, item):
            super().__init__()
            self.item = item

    def __init__(self, points: list[tuple[float, float, object]], **kwargs):
        super().__init__(**kwargs)
        self.points = sorted(points, key=lambda p: p[0])
        self.cursor = 0

    def slices(self) -> list[list[tuple[float, float, object]]]:
        """The points cut into as many equal time slices as there are columns."""
        columns = max(1, self.size.width - _LABEL)
        if not self.points:
            return [[] for _ in range(columns)]
        start, end = self.points[0][0], self.points[-1][0]
        span = max(end - start, 1e-9)
        out: list[list] = [[] for _ in range(columns)]
        for p in self.points:
            out[min(columns - 1, int((p[0] - start) / span * columns))].append(p)
        return out

    def slowest(self, column: int):
        cell = self.slices()[column] if 0 <= column < len(self.slices()) else []
        return max(cell, key=lambda p: p[1]) if cell else None

    def render(self) -> Text:
        slices = self.slices()
        rows = max(1, self.size.height - 2)  # bars, then the axis and its labels
        top = max((p[1] for p in self.points), default=0.0) or 1.0
        self.cursor = min(self.cursor, len(slices) - 1)
        heights = [max((p[1] for p in s), default=0.0) / top * rows * 8 for s in slices]
        out = Text(no_wrap=True, overflow="crop")
        for r in range(rows):
            label = f"{top:.0f}ms" if r == 0 else f"{top / 2:.0f}ms" if r == rows // 2 else ""
            out.append(f"{label:>{_LABEL - 1}} ", "dim")
            floor = (rows - 1 - r) * 8
            for c, h in enumerate(heights):
                fill = max(0, min(8, int(h - floor + 0.999))) if h > 0 else 0
                style = "reverse" if c == self.cursor else "yellow" if h > rows * 4 else "cyan"
                out.append(_BLOCKS[fill] if fill or c != self.cursor else "▏", style)
            out.append("\n")
        width = len(slices)
        out.append(" " * _LABEL + "└" + "─" * (width - 1) + "\n", "dim")
        if self.points:
            first, last = _clock(self.points[0][0]), _clock(self.points[-1][0])
            gap = max(1, width - len(first) - len(last))
            out.append(" " * _LABEL + first + " " * gap + last, "dim")
        return out

    def describe(self) -> str:
        slices = self.slices()
        cell = slices[self.cursor] if slices else []
        if not cell:
            return "no exchange in this slice (← → move)"
        slow = max(cell, key=lambda p: p[1])
        view = slow[2]
        name = view.ex.first.api_name if hasattr(view, "ex") else ""
        return (
            f"{_clock(cell[0][0])}–{_clock(cell[-1][0])}: {len(cell)} exchange"
            f"{'s' if len(cell) != 1 else ''}; slowest {name} {slow[1]:.1f} ms "
            f"(Enter goes to it)"
        )

    def action_move(self, step: int) -> None:
        self.cursor = max(0, min(self.cursor + step, len(self.slices()) - 1))
        self.refresh()
        self.post_message(self.Moved())

    class Moved(Message):
        pass

    def action_pick(self) -> None:
        slow = self.slowest(self.cursor)
        if slow is not None:
            self.post_message(self.Picked(slow[2]))

    def on_click(self, event) -> None:
        column = event.x - _LABEL
        if 0 <= column < len(self.slices()):
            self.cursor = column
            self.refresh()
            self.action_pick()

    def jump_to_slowest(self) -> None:
        """Put the cursor on the slice with the slowest exchange."""
        slices = self.slices()
        best = max(range(len(slices)), key=lambda c: max((p[1] for p in slices[c]), default=-1.0))
        self.cursor = best
        self.refresh()
