"""Where `kdissect pcap` sends what the stream layer finds: the display filter first,
then lines, field trees, JSON lines or statistics; gaps and warnings to stderr."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from ..filters import Filter
from ..protocol import Options
from ..stream.facts import ExchangeView
from ..stream.model import Exchange, Gap
from ..stream.stats import Stats
from .lines import exchange_line, message_line
from .stats import stats_tables
from .text import render_node

GAPS_LISTED = 20


class ExchangePrinter:
    def __init__(self, options: Options, fmt: str = "text", verbose: bool = False,
                 display_filter: Filter | None = None, stats: bool = False, jobs: int = 1):
        self.options, self.fmt, self.verbose, self.filter = options, fmt, verbose, display_filter
        # JSON lines decoded on worker processes (the engine stays in this one)
        self.workers = None
        if fmt == "jsonl" and jobs > 1 and not stats:
            from .jsonl_workers import JsonlWorkers      # only then: processes cost start-up
            self.workers = JsonlWorkers(options, jobs, sys.stdout.write)
        self.console = Console(highlight=False)
        if not self.console.is_terminal:
            self.console = Console(highlight=False, width=160)   # don't squeeze tables
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self.stats = Stats() if stats else None
        self.topic_ids: dict[str, str] = {}   # learned from the capture (Fetch v13+ topics)
        self.exchanges = 0
        self.gaps = 0

    def exchange(self, ex: Exchange) -> None:
        view = ExchangeView(ex, self.options, self.topic_ids)
        view.learn()
        if self.filter is not None and not self.filter(view):
            return
        self.exchanges += 1
        if self.stats is not None:
            self.stats.add(ex, view)
            return
        # a request reported earlier (acks=0, answered late) is not repeated
        messages = [m for m in (ex.request, ex.response)
                    if m is not None and not (m is ex.request and ex.repeat)]
        if self.fmt == "jsonl":
            if self.workers is not None:
                self.workers.add(messages)
            else:
                for m in messages:
                    sys.stdout.write(message_line(m, self.options))
            return
        line = exchange_line(ex, self.options, view)
        if self.console.is_terminal:
            self.console.print(line, soft_wrap=True)
        else:
            sys.stdout.write(line.plain + "\n")     # no colours to render: skip rich's layout
        if self.verbose:
            for m in messages:
                d = m.decoded(self.options)
                self.console.print(render_node(d.data, d.tree, self.options.show_secrets, 0,
                                               None, False))

    def gap(self, g: Gap) -> None:
        self.gaps += 1
        if self.stats is not None:
            self.stats.add_gap(g)
        if self.gaps <= GAPS_LISTED:
            self.warn(g.describe())

    def abort(self) -> None:
        """The output went away: stop the workers without writing."""
        if self.workers is not None:
            self.workers.abort()

    def warn(self, text: str) -> None:
        self.err.print(Text(text, style="yellow"))

    def error(self, text: str) -> None:
        self.err.print(Text(text, style="bold red"))

    def finish(self) -> None:
        if self.workers is not None:
            self.workers.close()
        if self.stats is not None:
            self.console.print(stats_tables(self.stats))
        if self.gaps > GAPS_LISTED:
            self.warn(f"{self.gaps} gaps in all ({self.gaps - GAPS_LISTED} not listed)")
