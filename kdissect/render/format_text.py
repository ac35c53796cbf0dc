"""--format text: one line per exchange; with -V the field trees and findings."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .formats import WriterContext
from .lines import compiled_plain, exchange_line, exchange_plain, python_plain
from .printable import printable

if TYPE_CHECKING:
    from ..stream.fields import ExchangeFields
    from ..stream.model import Exchange

SEVERITY_STYLE = {"error": "bold red", "warn": "yellow", "note": "cyan"}


class TextWriter:
    def __init__(self, ctx: WriterContext):
        self.options, self.verbose, self.console = ctx.options, ctx.verbose, ctx.console
        self.topic_ids = ctx.topic_ids
        self.full = ctx.verbose
        self.terminal = self.console.is_terminal  # asked once: rich asks the OS each time

    def exchange(self, ex: Exchange, view: ExchangeFields | None) -> None:
        if not self.verbose and not self.terminal:  # (the usual: a summary piped)
            line = compiled_plain(ex, view)  # (exchange_plain inline: a call per line)
            if line is None:
                line = python_plain(ex, self.options, view)
            sys.stdout.write(line + "\n")
            return
        trees = self._trees(ex) if self.full else []
        if self.terminal:
            self.console.print(exchange_line(ex, self.options, view), soft_wrap=True)
        else:  # no colours to render: skip rich's Text and layout
            sys.stdout.write(exchange_plain(ex, self.options, view) + "\n")
        if self.verbose:
            from rich.text import Text  # trees and findings: rich's rendering
            from .text import print_node

            for d in trees:
                print_node(self.console, d.data, d.tree, self.options.show_secrets, 0, None, False)
            for f in ex.findings:
                self.console.print(
                    Text(f"  {f.severity}: {printable(f.text())}", style=SEVERITY_STYLE[f.severity])
                )

    def capture(self, path: str) -> None:
        """Reading several files: a heading before each file's lines, as head(1) and
        tail(1) name theirs (the lines carry no file, and connections may repeat)."""
        heading = f"==> {printable(path)} <=="
        if self.terminal:
            from rich.text import Text

            self.console.print(Text(heading, style="bold"), soft_wrap=True)
        else:
            sys.stdout.write(heading + "\n")

    def _trees(self, ex: Exchange) -> list:
        """The full trees of the exchange's messages: decoded by the engine when it
        knew this printer wants them, else here."""
        kept = [d for d in (ex.decoded or ()) if d is not None]
        return kept or [m.decoded(self.options, self.topic_ids) for m in ex.messages]

    def tls(self, facts) -> None:
        if self.verbose:
            from rich.text import Text

            for f in facts.findings:
                self.console.print(
                    Text(
                        f"  TLS {facts.client[0]}:{facts.client[1]} → "
                        f"{facts.server[0]}:{facts.server[1]}: "
                        f"{f.severity}: {f.text()}",
                        style=SEVERITY_STYLE[f.severity],
                    )
                )

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass
