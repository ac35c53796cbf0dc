"""The one interface every consumer of the engine implements: the printer, the TUI
loader, the Parquet/Spark row collector, the proxy display and ``kdissect log``'s printer.

The engine tells sinks these things, one hook each (``HOOKS``): ``exchange`` for each
finished exchange (after enrichment), ``gap`` for each hole in a stream (and each
stretch read past, ``Gap.unread``), ``item`` for sources whose events are not exchanges
(``kdissect log``'s files and record batches, a paste's messages; reading several
capture files, ``stream.model.CaptureStart`` before each file's exchanges), ``tls`` when a TLS
connection ends (its ``capture.tls.TlsFacts``), ``note`` for what the user should know
(``level`` "info", "warn" or "error": an error means some input could not be read at
all), ``progress(done, total)`` on long work, and ``done`` once at the end.

A sink also says what it needs: ``full`` (whole field trees, decoded once for every
sink) and ``values_conv`` (how it shows bytes in bodies read by the values decoder:
enrichment then keeps the bodies it reads for it); a sink that decodes messages again
later (the TUI's trees) may give, as ``topic_ids``, the dict of topic names (id -> name)
enrichment fills as it learns them. ``BaseSink`` has every hook as a
no-op; the engine checks each sink when it is handed one (``check``), so a missing hook
is an error at start, not a silent ``getattr`` miss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .model import Exchange, Gap

HOOKS = ("exchange", "gap", "item", "tls", "note", "progress", "done")
BytesConv = Callable[[bytes], object]


class Sink(Protocol):
    @property
    def full(self) -> bool: ...
    @property
    def values_conv(self) -> BytesConv | None: ...
    def exchange(self, ex: Exchange) -> None: ...
    def gap(self, g: Gap) -> None: ...
    def item(self, item: Any) -> None: ...
    def tls(self, facts: Any) -> None: ...
    def note(self, text: str, level: str = "warn") -> None: ...
    def progress(self, done: int, total: int) -> None: ...
    def done(self) -> None: ...


class BaseSink:
    """Every hook, doing nothing: a sink overrides the ones it shows."""

    @property
    def full(self) -> bool:
        return False

    @property
    def values_conv(self) -> BytesConv | None:
        return None

    topic_ids: dict[str, str] | None = None

    def exchange(self, ex: Exchange) -> None:
        pass

    def gap(self, g: Gap) -> None:
        pass

    def item(self, item: Any) -> None:
        pass

    def tls(self, facts: Any) -> None:
        pass

    def note(self, text: str, level: str = "warn") -> None:
        pass

    def progress(self, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        pass


def check(sinks: Sequence[object]) -> BytesConv | None:
    """Each sink has every hook (else TypeError naming the missing ones); returns the one
    ``values_conv`` the sinks ask for (TypeError when two ask for different ones: the
    bodies enrichment reads are shared)."""
    convs: list[BytesConv] = []
    for sink in sinks:
        missing = [h for h in HOOKS if not callable(getattr(sink, h, None))]
        if missing or not hasattr(sink, "full") or not hasattr(sink, "values_conv"):
            raise TypeError(
                f"{type(sink).__name__} is not a sink: it lacks "
                f"{', '.join(missing) or 'full/values_conv'} "
                f"(subclass kdissect.stream.sink.BaseSink)"
            )
        conv = sink.values_conv
        if conv is not None and all(conv is not c for c in convs):
            convs.append(conv)
    if len(convs) > 1:
        raise TypeError(
            "two sinks show bytes in decoded bodies differently "
            f"({', '.join(type(s).__name__ for s in sinks)}): give them one"
        )
    return convs[0] if convs else None


class CallbackSink(BaseSink):
    """A sink made of plain callbacks (what the TUI's loader and tests hand in). ``note``
    gets each note's text and level ("info", "warn", "error"), as ``Sink.note``."""

    def __init__(
        self,
        exchange: Callable[[Exchange], None],
        note: Callable[[str, str], None] = lambda text, level: None,
        progress: Callable[[int, int], None] = lambda done, total: None,
        gap: Callable[[Gap], None] | None = None,
        tls: Callable[[Any], None] = lambda facts: None,
    ):
        self._exchange, self._note, self._progress, self._tls = exchange, note, progress, tls
        self._gap = gap or (lambda g: note(g.describe(), "warn"))

    def exchange(self, ex: Exchange) -> None:
        self._exchange(ex)

    def gap(self, g: Gap) -> None:
        self._gap(g)

    def tls(self, facts: Any) -> None:
        self._tls(facts)

    def note(self, text: str, level: str = "warn") -> None:
        self._note(text, level)

    def progress(self, done: int, total: int) -> None:
        self._progress(done, total)


class ItemSink(BaseSink):
    """A sink for sources whose events are items (a log directory, a paste): subclasses
    define ``item``; the other events are not theirs."""


class Collect(CallbackSink):
    """Keeps everything (tests, small tools)."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.gaps: list[Gap] = []
        self.notes: list[tuple[str, str]] = []
        self.tls_facts: list[Any] = []  # each TLS connection's TlsFacts, as it ends
        super().__init__(self.exchanges.append, gap=self.gaps.append, tls=self.tls_facts.append)

    def note(self, text: str, level: str = "warn") -> None:
        self.notes.append((level, text))
