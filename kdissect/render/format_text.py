"""--format text: one line per exchange; with -V the field trees and findings."""

from __future__ import annotations

import codecs
import io
import os
import sys
from typing import TYPE_CHECKING, Any

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
        # the sys.stdout _binary was asked of, and what it said
        self._stdout: object = None
        self._raw: Any = None

    def exchange(self, ex: Exchange, view: ExchangeFields | None) -> None:
        if not self.verbose and not self.terminal:  # (the usual: a summary piped)
            out = sys.stdout
            raw = self._raw if out is self._stdout else self._binary(out)
            if raw is not None:
                data = compiled_plain(ex, view, True)
                if data is None:  # (marked by findings, or Python's line: encoded here)
                    text = compiled_plain(ex, view)
                    if text is None:
                        text = python_plain(ex, self.options, view)
                    data = (text + "\n").encode("utf-8", out.errors or "strict")
                raw.write(data)
                return
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

    def _binary(self, out: Any) -> Any:
        """``out``'s binary layer, where the summary lines go as the extension's UTF-8
        (encoding the line back from a str was a tenth of its cost), or None: the text
        layer writes them. Only where that layer would write the same bytes (UTF-8, no
        newline translation) and hold them as the binary layer does (neither
        line-buffered nor writing through: a terminal, ``live``); what it holds is
        flushed first. Nothing else writes to stdout while the lines come (notes and
        progress go to stderr, this writer's headings the same way as its lines), so
        text written later lands after them, as before."""
        self._stdout, self._raw = out, None
        if (
            isinstance(out, io.TextIOWrapper)
            and not out.line_buffering
            and not out.write_through
            and os.linesep == "\n"
            and codecs.lookup(out.encoding).name == "utf-8"
        ):
            out.flush()
            self._raw = out.buffer
        return self._raw

    def capture(self, path: str) -> None:
        """Reading several files: a heading before each file's lines, as head(1) and
        tail(1) name theirs (the lines carry no file, and connections may repeat)."""
        heading = f"==> {printable(path)} <=="
        if self.terminal:
            from rich.text import Text

            self.console.print(Text(heading, style="bold"), soft_wrap=True)
        elif not self.verbose:  # (where the lines go: _binary's layer, or the text's)
            out = sys.stdout
            raw = self._raw if out is self._stdout else self._binary(out)
            if raw is not None:
                raw.write((heading + "\n").encode("utf-8", out.errors or "strict"))
            else:
                out.write(heading + "\n")
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
