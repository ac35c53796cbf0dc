"""The engine: a source, the enrichment stage, and the sinks, put together once.

    Engine(source, sinks, options).run()

A **source** turns the bytes it reads (capture files, an interface, the proxy's feed, a
Spark shard's segments) into exchanges with the framing and correlation cores
(``connection.KafkaConnection``, driven by ``sources.pcap.CaptureDissector`` for
packets) and hands them to the sink it is given: ``feed(sink)``. The engine gives it its
enrichment stage (``enrich.Enricher``: orphans guessed, topic ids named, versions
checked, findings and status set, once and in order), which passes every event on to
the sinks. Sinks (the printer, the TUI's loader, the Parquet/Spark row collector, the
proxy display) implement ``sink.Sink`` and only read what comes out.

Adding a source is one new module with a class that has ``feed(sink)``; see
docs/internals/engine.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..protocol import Options
from ..protocol.native_ext import refresh as refresh_compiled
from .enrich import Enricher
from .model import Exchange, Gap
from .sink import BaseSink, BytesConv, Sink, check


class Source(Protocol):
    def feed(self, sink: Sink) -> Any:
        """Run to the end (or until stopped), calling ``sink``'s methods; call
        ``sink.done()`` last. Returns what the source counts (packets...), or None."""
        ...


class Fanout(BaseSink):
    """Several sinks as one: every event to each, in order."""

    def __init__(self, sinks: Sequence[Sink]):
        self.sinks = list(sinks)
        self._full = any(s.full for s in self.sinks)
        self._conv = check(self.sinks)

    @property
    def full(self) -> bool:
        return self._full

    @property
    def values_conv(self) -> BytesConv | None:
        return self._conv

    def exchange(self, ex: Exchange) -> None:
        for s in self.sinks:
            s.exchange(ex)

    def gap(self, g: Gap) -> None:
        for s in self.sinks:
            s.gap(g)

    def item(self, item: Any) -> None:
        for s in self.sinks:
            s.item(item)

    def tls(self, facts: Any) -> None:
        for s in self.sinks:
            s.tls(facts)

    def note(self, text: str, level: str = "warn") -> None:
        for s in self.sinks:
            s.note(text, level)

    def progress(self, done: int, total: int) -> None:
        for s in self.sinks:
            s.progress(done, total)

    def done(self) -> None:
        for s in self.sinks:
            s.done()


class Engine:
    """``source`` → enrichment → ``sinks``. ``full``: decode whole field trees once (for
    sinks that print them; by default when any sink says ``full``), else summaries.
    ``topic_ids``: the run's dict of topic names (id -> name) that enrichment fills as it
    learns them; a caller whose sinks decode messages themselves gives them the same dict
    (by default the engine makes its own: ``topic_ids`` below)."""

    def __init__(
        self,
        source: Source,
        sinks: Sink | Sequence[Sink],
        options: Options | None = None,
        full: bool | None = None,
        topic_ids: dict[str, str] | None = None,
    ):
        many: list[Sink] = list(sinks) if isinstance(sinks, (list, tuple)) else [sinks]  # type: ignore[list-item]
        refresh_compiled()  # KDISSECT_PURE as it is now, for this run
        self.source = source
        # a sink that prints bodies read by the values decoder (JSON lines) takes the ones
        # enrichment reads (bytes shown its way) instead of decoding them again
        conv = check(many)
        self.sink: Sink = many[0] if len(many) == 1 else Fanout(many)
        if full is None:
            full = self.sink.full
        if topic_ids is None:  # (a sink's own, if it gives one: BaseSink.topic_ids)
            topic_ids = next(
                (t for t in (getattr(s, "topic_ids", None) for s in many) if t is not None), None
            )
        self.enricher = Enricher(
            self.sink, options, full=full, values_conv=conv, topic_ids=topic_ids
        )

    @property
    def topic_ids(self) -> dict[str, str]:
        """Topic id -> name, as learned so far (shared with sinks that name topics)."""
        return self.enricher.topic_ids

    def run(self) -> Any:
        return self.source.feed(self.enricher)
