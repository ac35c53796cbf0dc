"""kdissect log's list: the exchange list's virtual table (only the rows on screen are
drawn, rows kept in a sort order as they arrive) over files and record batches, with
their own columns fitted to the terminal's width."""

from __future__ import annotations

import functools

from rich.text import Text

from .exchange_list import Column, ExchangeList, fit_columns

COLUMNS = (
    Column("#", 7, 5, True),
    Column("partition", 22, 12),
    Column("kind", 17, 10),  # "ABORTED v2" whole
    Column("position", 18, 10),
    Column("offsets", 15, 8),
    Column("records", 7, 5, True),
    Column("status", 24, 12),
    Column("codec", 6, 4),
    Column("producer", 9, 6),
    Column("time", 23, 23),
    Column("file", 26, 10),
)
# when the terminal is narrow, these steps run in order until the columns fit: the list
# keeps the number, topic-partition, kind (COMMIT, ABORT), position, offsets, records and
# status (the findings) to the last
_STEPS = (
    ("shrink", "file"),
    ("drop", "time"),
    ("shrink", "status"),
    ("drop", "producer"),
    ("drop", "codec"),
    ("shrink", "kind"),
    ("shrink", "partition"),
    ("shrink", "position"),
    ("shrink", "offsets"),
    ("drop", "file"),
    ("drop", "kind"),
    ("drop", "partition"),
)


@functools.lru_cache(maxsize=64)  # asked twice per line drawn
def fit(width: int) -> list[tuple[int, int]]:
    """(column index, width) of the columns shown in ``width`` cells; the file name (or
    else the status) takes what is left."""
    return fit_columns(COLUMNS, _STEPS, width, {}, ("file", "status"))


class LogList(ExchangeList):
    """Rows of ``kdissect log`` items (sources.logdir.LogItem with ``cells``, ``number``
    and ``severe`` set by the log app's loader)."""

    COLUMNS = COLUMNS

    def tiebreak(self, view) -> int:
        return view.number

    def track(self, views) -> None:
        pass

    def columns_shown(self) -> list[tuple[int, int]]:
        return fit(self.scrollable_content_region.width)

    def cells(self, view) -> list:
        cells: list = list(view.cells)
        status = cells[5]
        if status:
            cells[5] = Text(status, style="red" if view.severe else "yellow")
        where = f"{view.topic}-{view.partition}" if view.topic is not None else ""
        row = [cells[0], where, *cells[1:]]
        if getattr(view, "gone", None):  # below the log start offset: struck through
            row[3:] = [Text(c, style="strike") if isinstance(c, str) else c for c in row[3:]]
        return row
