"""The work inside the pipeline's tasks, free of Spark so it can be tested and reused.

Stage 1 (``shard_segments``): one shard of a capture -> its TCP segments, keyed by flow,
plus one summary of the shard (where it began and ended, packets, warnings).
Stage 2 (``flow_rows``): all segments of one flow, in capture order -> exchange rows,
record rows, the topic ids the flow taught, and warnings (gaps).
``capture_rows`` does both stages for whole files in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from operator import itemgetter
from typing import Any, BinaryIO

from ..capture.packet import FIN, RST, SUPPORTED, SYN, Segment, tcp_segment
from ..capture.pcapfile import CaptureError, CaptureReader
from ..sources.pcap import CaptureDissector, CaptureFiles
from ..stream.budget import Budget
from ..stream.engine import Engine
from ..stream.model import Exchange, Gap
from ..stream.sink import BaseSink
from ..stream.rows import exchange_row, record_rows, resolve_record_topics, resolve_topics
from .ids import ConnectionIds

_KEEP_FLAGS = SYN | FIN | RST  # what a segment without payload may still tell


# a segment row: these values, in this order (tuples are much cheaper than dicts here)
SEGMENT_COLUMNS = (
    "capture",
    "flow",
    "shard",
    "frame",
    "order",
    "ts",
    "src",
    "sport",
    "dst",
    "dport",
    "seq",
    "ack",
    "flags",
    "payload",
    "missing",
)


def flow_key(seg: Segment) -> str:
    """The same key for both directions of a TCP connection."""
    a, b = f"{seg.src}|{seg.sport}", f"{seg.dst}|{seg.dport}"
    return f"{a}|{b}" if a <= b else f"{b}|{a}"


@dataclass(frozen=True)
class TaskSettings:
    """How a pipeline task decodes a flow or file: the Kafka ports, whether Kafka is
    also found on other ports by its bytes, whether record rows are made, the TLS key
    log (a capture.tls.KeyLog, copied by each task), the memory budget in bytes
    (--max-memory; stream.budget) and the schemas of the records' keys and values (a
    values_schema.SchemaSource). Sent to Spark's tasks as one value."""

    ports: Any
    detect: bool
    with_records: bool
    keys: Any = None
    max_memory: int | None = None
    values: Any = None


@dataclass
class ShardSummary:
    capture: str
    shard: int
    start: int
    end: int
    first: int | None = None
    next: int | None = None
    packets: int = 0
    unsupported: int = 0
    # (packet number within the shard after which it happened, or None; text)
    warnings: list[tuple[int | None, str]] = field(default_factory=list)

    def row(self) -> dict:
        return {
            "capture": self.capture,
            "flow": None,
            "shard": self.shard,
            "start": self.start,
            "end": self.end,
            "first": self.first,
            "next": self.next,
            "packets": self.packets,
            "unsupported": self.unsupported,
            "warnings": [{"frame": n, "text": t} for n, t in self.warnings],
        }


def shard_segments(
    capture: str,
    path: str,
    shard: int,
    start: int,
    end: int,
    plain: bool,
    opener: Callable[[str], BinaryIO] | None = None,
) -> tuple[ShardSummary, Iterator[tuple]]:
    """The segment rows of one shard (SEGMENT_COLUMNS tuples) and its summary, which is
    complete once they have been read. A segment that carries nothing the reassembler
    needs (a bare ACK) is left out. ``plain``: a plain pcap file, read from byte
    ``start`` to ``end`` (past damage too); otherwise (pcapng, compressed) the whole
    file is read. Frames count from 1 within the shard. ``opener(path)`` opens the file."""
    summary = ShardSummary(capture, shard, start, end)

    def rows() -> Iterator[tuple]:
        try:
            if plain:
                from ..capture.shards import read_shard  # (Spark's path only)

                found, records = read_shard(path, start, end, opener)
                try:
                    yield from _segments(capture, shard, records, summary)
                finally:
                    summary.first, summary.next = found.first, found.next
                    summary.warnings += found.warnings
            else:
                raw = opener(path) if opener is not None else None
                with CaptureReader(path, raw) as reader:
                    try:
                        yield from _segments(capture, shard, enumerate(reader.packets()), summary)
                    finally:
                        summary.warnings += [
                            (None, f"{w}; everything before it was decoded")
                            for w in reader.warnings
                        ]
                summary.first, summary.next = start, end
        except CaptureError as e:
            summary.warnings.append((None, str(e).removeprefix(f"{path}: ")))
        except OSError as e:
            summary.warnings.append((None, f"{e.strerror or e}"))

    return summary, rows()


def _segments(capture, shard, packets, summary: ShardSummary) -> Iterator[tuple]:
    for order, pkt in packets:
        summary.packets += 1
        if pkt.linktype not in SUPPORTED:
            summary.unsupported += 1
            continue
        seg = tcp_segment(pkt.linktype, pkt.data, pkt.orig_len)
        if seg is not None and (seg.payload or seg.missing or seg.flags & _KEEP_FLAGS):
            yield (
                capture,
                flow_key(seg),
                shard,
                pkt.index,
                order,
                pkt.ts,
                seg.src,
                seg.sport,
                seg.dst,
                seg.dport,
                seg.seq,
                seg.ack,
                seg.flags,
                seg.payload,
                seg.missing,
            )


@dataclass
class Rows:
    exchanges: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    topic_ids: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    connections: int = 0
    errors: int = 0  # notes of level "error": an input not read, or with no Kafka traffic
    # gaps with the connection they are in: (gap, client, broker)
    gaps: list[tuple[Gap, tuple[str, int], tuple[str, int]]] = field(default_factory=list)


class RowSink(BaseSink):
    """The sink that turns enriched exchanges into rows (and records, when asked)."""

    def __init__(
        self,
        capture: str,
        rows: Rows,
        with_records: bool,
        keep: Callable[[Exchange], bool] | None = None,
        on_gap: Callable[[Gap], None] | None = None,
        warn: Callable[[str], None] | None = None,
        values=None,
    ):
        self.capture, self.rows, self.with_records, self.keep = capture, rows, with_records, keep
        self.values = values  # schemas for the records' keys and values
        self.ids = ConnectionIds(capture)
        self.on_gap = on_gap or (lambda g: None)
        self.warn = warn or rows.warnings.append

    def exchange(self, ex: Exchange) -> None:
        self.ids.connection_id(ex)  # named in the order connections report, kept or not
        if self.keep is not None and not self.keep(ex):
            return
        row = exchange_row(ex, self.capture)
        row.update(self.ids.exchange_columns(ex))  # (not ``|``: no copy of the row)
        self.rows.exchanges.append(row)
        if self.with_records:
            joins = self.ids.record_columns(ex)
            records = self.rows.records
            shape = getattr(records, "shape", None)  # (a holder of tuple rows: spill.py)
            records.extend(record_rows(ex, self.capture, self.values, joins, shape=shape))

    def gap(self, g: Gap) -> None:
        self.on_gap(g)

    def note(self, text: str, level: str = "warn") -> None:
        if level == "error":  # counted: the command's exit status says it (as the printer's)
            self.rows.errors += 1
        self.warn(text)

    def progress(self, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        pass


class ShardSegments:
    """The engine's source for one flow of a Spark shard: its segment rows (given in
    capture order) through TCP reassembly and the connection core."""

    def __init__(
        self, segments: Iterable[tuple], frame_base: Callable[[int], int], settings: TaskSettings
    ):
        self.segments, self.frame_base, self.settings = segments, frame_base, settings
        self.dissector: CaptureDissector | None = None

    def feed(self, sink) -> None:
        for _ in self.steps(sink):
            pass

    def steps(self, sink) -> Iterator[None]:
        """``feed``, pausing after each segment (so rows can be taken out as they come)."""
        d = self.settings
        self.dissector = dissector = CaptureDissector(
            sink,
            d.ports,
            d.detect,
            keys=d.keys.copy() if d.keys is not None else None,
            budget=Budget(d.max_memory) if d.max_memory else None,
        )
        segment, frame_base = dissector.tcp.segment, self.frame_base
        for (
            _c,
            _f,
            shard,
            frame,
            _o,
            ts,
            src,
            sport,
            dst,
            dport,
            seq,
            ack,
            flags,
            payload,
            missing,
        ) in self.segments:
            segment(
                Segment(src, sport, dst, dport, seq, ack, flags, payload, missing),
                ts,
                frame_base(shard) + frame,
            )
            yield
        dissector.finish()


# rows a task holds before handing them on: memory stays flat in the size of the file
CHUNK_ROWS = 4096


def flow_row_chunks(
    capture: str,
    segments: Iterable[tuple],
    frame_base: Callable[[int], int],
    settings: TaskSettings,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[Rows]:
    """``flow_rows`` as it goes: Rows of about ``chunk_rows`` exchanges and records each,
    in the order they were made; the last one also carries the topic ids learned and the
    connection count. A task holds one chunk, however big the file."""
    rows = Rows()
    source = ShardSegments(segments, frame_base, settings)

    def gap(g: Gap) -> None:
        assert source.dissector is not None
        conn = source.dissector.streams[g.stream - 1]
        sink.rows.gaps.append((g, conn.client, conn.broker))

    sink = RowSink(
        capture,
        rows,
        settings.with_records,
        on_gap=gap,
        values=settings.values,
        warn=lambda text: sink.rows.warnings.append(text),
    )
    engine = Engine(source, sink)
    sink.rows.topic_ids = engine.topic_ids  # rows name topics as enrichment learns
    for _ in source.steps(engine.enricher):  # (what engine.run does, in steps)
        if len(sink.rows.exchanges) + len(sink.rows.records) >= chunk_rows:
            yield sink.rows
            sink.rows = Rows(topic_ids=engine.topic_ids)
    assert source.dissector is not None
    sink.rows.connections = len(source.dissector.streams)
    yield sink.rows


def flow_rows(
    capture: str,
    segments: Iterable[tuple],
    frame_base: Callable[[int], int],
    settings: TaskSettings,
) -> Rows:
    """Rows of one flow from its segment rows (SEGMENT_COLUMNS tuples), given in capture
    order. ``frame_base(shard)`` is the number of packets before that shard (so frames
    are numbered as in the file). ``settings.max_memory``: the memory budget (bytes held
    for partial messages and out-of-order segments) as --max-memory gives pcap; a worker
    decodes one flow at a time, so it bounds the worker process."""
    rows = Rows()
    for chunk in flow_row_chunks(capture, segments, frame_base, settings, chunk_rows=1 << 62):
        rows = chunk
    return rows


def capture_rows(
    paths: Iterable[tuple[str, str]],
    ports,
    detect: bool,
    with_records: bool,
    warn: Callable[[str], None],
    packets=None,
    keep=None,
    keys=None,
    values=None,
    collect: Callable[[str], Any] | None = None,
) -> Rows:
    """Rows of whole capture files, one process: ``paths`` are (capture name, path).
    ``keep(exchange)``, if given, decides which (enriched) exchanges make rows;
    ``values`` (a values_schema.SchemaSource) fills the records' value columns;
    ``collect(table)`` makes what holds the rows of ``exchanges`` and ``records`` for
    all captures (``append``, ``extend``, iteration; default: lists); their topics are
    then named as they are read (a capture's topic ids are known once it has been read)."""
    out = Rows()
    if collect is not None:
        out.exchanges, out.records = collect("exchanges"), collect("records")
    learnt: dict[str, dict[str, str]] = {}
    for capture, path in paths:
        rows = Rows() if collect is None else Rows(exchanges=out.exchanges, records=out.records)

        def gap(g: Gap, capture=capture, rows=rows) -> None:
            rows.warnings.append(f"{capture}: {g.describe()}")

        engine = Engine(
            CaptureFiles([path], ports=ports, detect=detect, packets=packets, keys=keys),
            RowSink(capture, rows, with_records, keep, gap, warn, values),
        )
        rows.topic_ids = engine.topic_ids
        engine.run()
        out.warnings += rows.warnings
        out.errors += rows.errors
        if collect is None:
            out.exchanges += resolve_topics(rows.exchanges, rows.topic_ids)
            out.records += resolve_record_topics(rows.records, rows.topic_ids)
        else:
            learnt[capture] = rows.topic_ids
    if collect is not None:
        out.exchanges = _Named(out.exchanges, learnt, resolve_topics)  # type: ignore
        shape = getattr(out.records, "shape", None)
        out.records = _Named(  # type: ignore
            out.records,
            learnt,
            partial(resolve_record_topics, shape=shape),
            "capture" if shape is None else shape.names.index("capture"),
        )
    return out


class _Named:
    """Rows whose topics are named, as they are read, by their capture's topic ids
    (``capture``: where a row holds its capture, a key or an index)."""

    def __init__(
        self, rows: Iterable[Any], learnt: dict[str, dict[str, str]], resolve, capture="capture"
    ):
        self.rows, self.learnt, self.resolve, self.capture = rows, learnt, resolve, capture

    def __iter__(self) -> Iterator[Any]:
        for capture, group in groupby(self.rows, key=itemgetter(self.capture)):
            yield from self.resolve(group, self.learnt.get(capture, {}))
