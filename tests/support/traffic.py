"""Turn recorded connections into paired, decoded messages with kdissect's stream layer."""

from __future__ import annotations

from dataclasses import dataclass

from kdissect.protocol import Message, Options
from kdissect.stream.framing import Framer
from kdissect.stream.pairing import Correlator, expects_response


@dataclass
class Exchange:
    request: Message
    response: Message | None
    expected: bool = True          # False: the request asked for no response (acks=0)


def exchanges(conn, options: Options | None = None) -> tuple[list[Exchange], list[bytes]]:
    """All exchanges of one connection, and responses that matched no request."""
    corr = Correlator(options)
    requests = [corr.request(data, i) for i, (_off, data) in
                enumerate(Framer().feed(bytes(conn.to_broker)))]
    out = [Exchange(r, None, expects_response(r)) for r in requests]
    orphans = []
    for _off, data in Framer().feed(bytes(conn.to_client)):
        msg, pending = corr.response(data)
        if msg is None:
            orphans.append(data)
        else:
            out[pending.index].response = msg
            assert pending.expected == out[pending.index].expected
    return out, orphans


def all_exchanges(conns, options: Options | None = None) -> list[Exchange]:
    result = []
    from kdissect.protocol import guess
    for c in conns:
        ex, orphans = exchanges(c, options)
        assert not orphans, (
            f"{len(orphans)} responses without a request: "
            f"{[(o[:4].hex(), [g.label for g in guess(o)[:2]]) for o in orphans]}; requests "
            f"{[(e.request.title, e.request.correlation_id, e.response is not None) for e in ex]}")
        result += ex
    return result
