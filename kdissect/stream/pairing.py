"""Pair responses with requests on one connection, by correlation id."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import Message, Options, decode_request, decode_response, peek_request_header


@dataclass
class Pending:
    api_key: int
    api_version: int
    index: int                     # caller's handle for the request (e.g. message number)
    expected: bool = True          # False for Produce with acks=0


def expects_response(msg: Message) -> bool:
    """Produce with acks=0 gets no response."""
    if msg.api_key != 0 or msg.body is None:
        return True
    acks = msg.body.child("acks")
    return not (acks is not None and acks.value == 0)


class Correlator:
    """Requests awaiting their response on one connection. A reused correlation id pairs
    with the latest earlier unanswered request that used it."""

    def __init__(self, options: Options | None = None):
        self.options = options or Options()
        self._pending: dict[int, list[Pending]] = {}

    def request(self, data: bytes, index: int) -> Message:
        msg = decode_request(data, self.options)
        if msg.api_key is not None and msg.correlation_id is not None:
            self._pending.setdefault(msg.correlation_id, []).append(
                Pending(msg.api_key, msg.api_version, index, expects_response(msg)))
        return msg

    def response(self, data: bytes) -> tuple[Message | None, Pending | None]:
        """Decode a response with its request's API; (None, None) if no request is known.
        A request that expects an answer wins over an acks=0 Produce with the same id;
        a broker answering acks=0 anyway is paired, and ``Pending.expected`` says so."""
        if len(data) < 4:
            return None, None
        corr = int.from_bytes(data[:4], "big", signed=True)
        waiting = self._pending.get(corr)
        if not waiting:
            return None, None
        answered = [p for p in waiting if p.expected]
        req = (answered or waiting)[-1]
        waiting.remove(req)
        if not waiting:
            del self._pending[corr]
        return decode_response(data, req.api_key, req.api_version, self.options), req

    def unanswered(self) -> list[Pending]:
        """Requests still waiting for the response they expect."""
        return [p for ps in self._pending.values() for p in ps if p.expected]


__all__ = ["Correlator", "Pending", "expects_response", "peek_request_header"]
