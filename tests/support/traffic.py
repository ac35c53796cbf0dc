"""Recorded connections -> paired, decoded messages, through kdissect's own engine (the
production framing, correlation and enrichment), so the real-client tests exercise it."""

from __future__ import annotations

from dataclasses import dataclass

from kdissect.protocol import Message, Options
from kdissect.sources.rawstreams import RawStreams
from kdissect.stream.engine import Engine
from kdissect.stream.sink import Collect


@dataclass
class Exchange:
    request: Message
    response: Message | None
    expected: bool = True  # False: the request asked for no response (acks=0)
    findings: tuple = ()


def exchanges(conn, options: Options | None = None) -> tuple[list[Exchange], list]:
    """All exchanges of one recorded connection (requests first: each direction's bytes
    are whole), and the engine's exchanges that have no request (orphans)."""
    sink = Collect()
    Engine(
        RawStreams(bytes(conn.to_broker), bytes(conn.to_client), ("client", 1), ("broker", 2)),
        sink,
        options,
        full=True,
    ).run()
    assert not sink.gaps, [g.describe() for g in sink.gaps]
    out, orphans = [], []
    for ex in sorted(sink.exchanges, key=lambda e: e.seq):
        req, resp = ex.decoded
        if req is None:
            orphans.append(ex)
        else:
            out.append(Exchange(req, resp, ex.expected, tuple(f.code for f in ex.findings)))
    return out, orphans


def all_exchanges(conns, options: Options | None = None) -> list[Exchange]:
    result = []
    for c in conns:
        ex, orphans = exchanges(c, options)
        assert not orphans, (
            f"{len(orphans)} responses without a request: "
            f"{[(o.response.data[:4].hex(), o.response.how) for o in orphans]}; requests "
            f"{[(e.request.title, e.request.correlation_id, e.response is not None) for e in ex]}"
        )
        result += ex
    return result
