"""The printing sink of `kdissect pcap`, `live` and `proxy`: the display filter first,
then lines, field trees, JSON lines or statistics; gaps and notes to stderr."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from ..filters import Filter
from ..protocol import Options
from ..stream.facts import ExchangeFields
from ..stream.model import Exchange, Gap
from ..stream.stats import Stats
from .lines import exchange_line, message_line
from .stats import stats_tables
from .text import render_node

GAPS_LISTED = 20
SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "note": "cyan"}


class ExchangePrinter:
    def __init__(self, options: Options, fmt: str = "text", verbose: bool = False,
                 display_filter: Filter | None = None, stats: bool = False, jobs: int = 1):
        self.options, self.fmt, self.verbose, self.filter = options, fmt, verbose, display_filter
        # JSON lines decoded on worker processes (the engine stays in this one)
        self.workers = None
        if fmt == "jsonl" and not stats:
            from .heap import steady_heap
            steady_heap()
        if fmt == "jsonl" and jobs > 1 and not stats:
            from .jsonl_workers import JsonlWorkers      # only then: processes cost start-up
            self.workers = JsonlWorkers(options, jobs, sys.stdout.write)
        self.console = Console(highlight=False)
        if not self.console.is_terminal:
            self.console = Console(highlight=False, width=160)   # don't squeeze tables
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self.stats = Stats() if stats else None
        self.exchanges = 0
        self.gaps = 0
        self.tls_connections: list = []      # capture.tls.TlsFacts, for --stats
        self.errors = 0                # inputs that could not be read

    @property
    def full(self) -> bool:
        """Whether this printer shows whole trees (the engine then decodes them once).
        JSON lines do not: their bodies come from the values-only decoder, and
        enrichment reads summaries (message_json adds what a full tree would find)."""
        return self.stats is None and self.verbose and self.fmt != "jsonl"

    def exchange(self, ex: Exchange) -> None:
        view = ExchangeFields(ex, self.options)
        if self.filter is not None and not self.filter(view):
            return
        self.exchanges += 1
        if self.stats is not None:
            self.stats.add(ex, view)
            return
        messages = ex.messages
        if self.fmt == "jsonl":
            if self.workers is not None:
                self.workers.add(ex)
            else:
                for m in messages:
                    sys.stdout.write(message_line(m, self.options, ex, enriched_full=False))
            return
        trees = self._trees(ex) if self.full else []
        line = exchange_line(ex, self.options, view)
        if self.console.is_terminal:
            self.console.print(line, soft_wrap=True)
        else:
            sys.stdout.write(line.plain + "\n")     # no colours to render: skip rich's layout
        if self.verbose:
            for d in trees:
                self.console.print(render_node(d.data, d.tree, self.options.show_secrets, 0,
                                               None, False))
            for f in ex.findings:
                self.console.print(Text(f"  {f.severity}: {f.text()}",
                                        style=SEVERITY_STYLE[f.severity]))

    def _trees(self, ex: Exchange) -> list:
        """The full trees of the exchange's messages: decoded by the engine when it
        knew this printer wants them, else here."""
        kept = [d for d in (ex.decoded or ()) if d is not None]
        return kept or [m.decoded(self.options) for m in ex.messages]

    def gap(self, g: Gap) -> None:
        self.gaps += 1
        if self.stats is not None:
            self.stats.add_gap(g)
        if self.gaps <= GAPS_LISTED:
            self.warn(g.describe())

    def tls(self, facts) -> None:
        """A TLS connection ended: a JSON line, a --stats row, or (-V) its findings."""
        if self.stats is not None:
            self.tls_connections.append(facts)
        elif self.fmt == "jsonl":
            from .tls import tls_json_line
            if self.workers is not None:
                self.workers.line(tls_json_line(facts))
            else:
                sys.stdout.write(tls_json_line(facts))
        elif self.verbose:
            for f in facts.findings:
                self.console.print(Text(f"  TLS {facts.client[0]}:{facts.client[1]} → "
                                        f"{facts.server[0]}:{facts.server[1]}: "
                                        f"{f.severity}: {f.text()}",
                                        style=SEVERITY_STYLE[f.severity]))

    def note(self, text: str, level: str = "warn") -> None:
        if level == "error":
            self.errors += 1
        style = {"error": "bold red", "info": "cyan"}.get(level, "yellow")
        self.err.print(Text(text, style=style))

    def abort(self) -> None:
        """The output went away: stop the workers without writing."""
        if self.workers is not None:
            self.workers.abort()

    def warn(self, text: str) -> None:
        self.note(text)

    def progress(self, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        if self.workers is not None:
            self.workers.close()
        if self.stats is not None:
            self.console.print(stats_tables(self.stats))
            if self.tls_connections:
                from .tls import tls_table
                self.console.print(tls_table(self.tls_connections))
        if self.gaps > GAPS_LISTED:
            self.warn(f"{self.gaps} gaps in all ({self.gaps - GAPS_LISTED} not listed)")
