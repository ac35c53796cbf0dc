"""--format tsv: one tab-separated line per exchange under a header line, for cut, awk,
sort and spreadsheets. The columns are display-filter fields (stream/fields.py), so a
column reads exactly what ``-Y`` compares; a field with several values joins them with
commas. (The worked example of docs/internals/engine.md: a format is this module and one line in
formats.py.)"""

from __future__ import annotations

import sys
from typing import cast

from ..stream.fields import ExchangeFields
from ..stream.model import Exchange
from .formats import WriterContext
from .lines import iso
from .printable import printable

COLUMNS = (
    "stream",
    "client",
    "broker",
    "api",
    "version",
    "correlation_id",
    "client_id",
    "latency",
    "status",
    "topic",
    "records",
    "error",
    "finding",
)


def _cell(values: list) -> str:
    """Values joined by commas, control characters (tabs, newlines) escaped: one line
    of one cell."""
    return printable(",".join("" if v is None else str(v) for v in values))


class TsvWriter:
    full = False

    def __init__(self, ctx: WriterContext):
        self.headed = False  # the header line is written
        self.file: str | None = None  # the capture file, when the run reads several
        # what the printer's views are made with (the run's dict of topic names, which
        # WriterContext hands on read-only)
        self.options = ctx.options
        self.topic_ids = cast("dict[str, str] | None", ctx.topic_ids)

    def _head(self) -> None:
        extra = ("capture",) if self.file is not None else ()
        sys.stdout.write("\t".join(("time", *COLUMNS, *extra)) + "\n")
        self.headed = True

    def exchange(self, ex: Exchange, view: ExchangeFields | None) -> None:
        if not self.headed:
            self._head()
        if view is None:
            view = ExchangeFields(ex, self.options, self.topic_ids)
        cells = [iso(ex.first.ts)]
        for name in COLUMNS:
            values = view.field(name)
            if name == "api":
                values = [ex.first.api_name]
            elif name == "latency":
                values = [f"{v * 1000:.3f}" for v in values]  # milliseconds
            cells.append(_cell(values))
        if self.file is not None:
            cells.append(_cell([self.file]))
        sys.stdout.write("\t".join(cells) + "\n")

    def tls(self, facts) -> None:
        pass

    def capture(self, path: str) -> None:
        """Reading several files (told before the first exchange): a last column names
        each line's."""
        self.file = path
        if not self.headed:
            self._head()

    def close(self) -> None:
        if not self.headed:
            self._head()

    def abort(self) -> None:
        pass
