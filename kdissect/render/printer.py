"""The printing sink of `kdissect pcap`, `live` and `proxy`: the display filter first,
then the output format's writer (formats.py: lines, field trees, JSON lines...) or
statistics; gaps and notes to stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..stream.fields import ExchangeFields
from ..stream.model import CaptureStart
from ..stream.sink import BaseSink
from .console import console, output_console, print_line
from .formats import FORMATS, FormatWriter, WriterContext

if TYPE_CHECKING:
    from ..filters import Filter
    from ..protocol import Options
    from ..stream.model import Exchange, Gap

GAPS_LISTED = 20


class ExchangePrinter(BaseSink):
    def __init__(
        self,
        options: Options,
        fmt: str = "text",
        verbose: bool = False,
        display_filter: Filter | None = None,
        stats: bool = False,
        jobs: int = 1,
        topic_ids: dict[str, str] | None = None,
    ):
        """``topic_ids``: the run's topic names, as the engine fills them (``Engine``'s)."""
        self.options, self.fmt, self.verbose, self.filter = options, fmt, verbose, display_filter
        self.topic_ids = topic_ids
        # rich itself only when something is rendered with it (render/console.py)
        self.console = output_console()
        self.err = console(stderr=True, highlight=False, soft_wrap=True)
        self.stats = None
        if stats:
            from ..stream.stats import Stats

            self.stats = Stats()
        # the format's writer (none with --stats: the tables replace it)
        self.writer: FormatWriter | None = (
            None
            if stats
            else FORMATS[fmt].build(WriterContext(options, verbose, jobs, self.console, topic_ids))
        )
        self.exchanges = 0
        self.gaps = 0
        self.tls_connections: list = []  # capture.tls.TlsFacts, for --stats
        self.errors = 0  # inputs that could not be read

    @property
    def full(self) -> bool:
        """Whether this printer shows whole trees (the engine then decodes them once)."""
        return self.writer is not None and self.writer.full

    @property
    def values_conv(self):
        """How the writer shows bytes in the bodies it prints from the values decoder,
        if it does (enrichment then keeps the bodies it reads for it)."""
        return getattr(self.writer, "values_conv", None)

    def exchange(self, ex: Exchange) -> None:
        view = None  # (no filter, no --stats, the usual: no view made)
        if self.filter is not None or self.stats is not None:
            view = ExchangeFields(ex, self.options, self.topic_ids)
            if self.filter is not None and not self.filter(view):
                return
            if self.stats is not None:
                self.exchanges += 1
                self.stats.add(ex, view)
                return
        self.exchanges += 1
        assert self.writer is not None
        self.writer.exchange(ex, view)

    def gap(self, g: Gap) -> None:
        self.gaps += 1
        if self.stats is not None:
            self.stats.add_gap(g)
        if self.gaps <= GAPS_LISTED:
            self.warn(g.describe())

    def tls(self, facts) -> None:
        """A TLS connection ended: a --stats row, or whatever the format makes of it."""
        if self.stats is not None:
            self.tls_connections.append(facts)
        elif self.writer is not None:
            self.writer.tls(facts)

    def item(self, item: object) -> None:
        """A capture file of several begins (``CaptureStart``): the writer's to show."""
        if isinstance(item, CaptureStart) and self.writer is not None:
            self.writer.capture(item.path)

    def note(self, text: str, level: str = "warn") -> None:
        if level == "error":
            self.errors += 1
        style = {"error": "bold red", "info": "cyan"}.get(level, "yellow")
        print_line(self.err, text, style)

    def abort(self) -> None:
        """The output went away: stop the writer without writing."""
        if self.writer is not None:
            self.writer.abort()

    def warn(self, text: str) -> None:
        self.note(text)

    def progress(self, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.stats is not None:
            from .plain_table import print_pieces
            from .stats import stats_pieces

            print_pieces(self.console, stats_pieces(self.stats))
            if self.tls_connections:
                from .tls import tls_rows

                print_pieces(self.console, [tls_rows(self.tls_connections)])
        if self.gaps > GAPS_LISTED:
            self.warn(f"{self.gaps} gaps in all ({self.gaps - GAPS_LISTED} not listed)")
