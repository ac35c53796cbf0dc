"""The one interface every consumer of the engine implements: the printer, the TUI
loader, the Parquet/Spark row collector and the proxy display.

A source calls ``exchange`` for each finished exchange (after enrichment), ``gap`` for
each hole in a stream, ``note`` for what the user should know (``level`` "info",
"warn" or "error": an error means some input could not be read at all),
``progress(done, total)`` on long work, and ``done`` once at the end. Sources whose
items are not exchanges (``kdissect log``: files and record batches) call ``item``
instead, which the sinks that show such items have; enrichment passes items on as they
are (they carry their own findings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .model import Exchange, Gap


class Sink(Protocol):
    def exchange(self, ex: Exchange) -> None: ...
    def gap(self, g: Gap) -> None: ...
    def note(self, text: str, level: str = "warn") -> None: ...
    def progress(self, done: int, total: int) -> None: ...
    def done(self) -> None: ...


class CallbackSink:
    """A sink made of plain callbacks (what the TUI's loader and tests hand in)."""

    def __init__(self, exchange: Callable[[Exchange], None],
                 note: Callable[[str], None] = lambda text: None,
                 progress: Callable[[int, int], None] = lambda done, total: None,
                 gap: Callable[[Gap], None] | None = None):
        self.exchange = exchange
        self._note, self.progress = note, progress
        self.gap = gap or (lambda g: note(g.describe()))

    def note(self, text: str, level: str = "warn") -> None:
        self._note(text)

    def done(self) -> None:
        pass


class ItemSink:
    """A sink for sources whose events are items (a log directory, a paste): subclasses
    define ``item``; the other events are not theirs."""

    def exchange(self, ex: Exchange) -> None:
        pass

    def gap(self, g: Gap) -> None:
        pass

    def note(self, text: str, level: str = "warn") -> None:
        pass

    def progress(self, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        pass


class Collect(CallbackSink):
    """Keeps everything (tests, small tools)."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.gaps: list[Gap] = []
        self.notes: list[tuple[str, str]] = []
        self.tls_facts: list[Any] = []          # each TLS connection's TlsFacts, as it ends
        super().__init__(self.exchanges.append, gap=self.gaps.append)

    def tls(self, facts: Any) -> None:
        self.tls_facts.append(facts)

    def note(self, text: str, level: str = "warn") -> None:
        self.notes.append((level, text))
