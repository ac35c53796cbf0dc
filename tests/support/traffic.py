"""Turn recorded connections into paired, decoded messages with kdissect's stream layer."""

from __future__ import annotations

from dataclasses import dataclass

from kdissect.protocol import Message, Options, decode_request, decode_response
from kdissect.stream.framing import Framer
from kdissect.protocol import peek_request_header
from kdissect.stream.pairing import Correlator, produce_acks


def expects_response(msg: Message) -> bool:
    """Produce with acks=0 gets no response (read as the capture layer reads it)."""
    head = peek_request_header(msg.data) if msg.api_key == 0 else None
    return head is None or produce_acks(msg.data, head.size, head.api_version) != 0


@dataclass
class Exchange:
    request: Message
    response: Message | None
    expected: bool = True          # False: the request asked for no response (acks=0)


def exchanges(conn, options: Options | None = None) -> tuple[list[Exchange], list[bytes]]:
    """All exchanges of one connection, and responses that matched no request."""
    corr: Correlator[int] = Correlator()
    requests = [decode_request(data, options) for _off, data in Framer().feed(bytes(conn.to_broker))]
    out = [Exchange(r, None, expects_response(r)) for r in requests]
    for i, r in enumerate(requests):
        if r.correlation_id is not None:
            corr.request(r.correlation_id, i, out[i].expected)
    orphans = []
    for _off, data in Framer().feed(bytes(conn.to_client)):
        match = corr.response(int.from_bytes(data[:4], "big", signed=True)) if len(data) >= 4 else None
        if match is None:
            orphans.append(data)
            continue
        req = requests[match.item]
        out[match.item].response = decode_response(data, req.api_key, req.api_version, options)
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
