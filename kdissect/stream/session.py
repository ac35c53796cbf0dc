"""Kafka on reassembled TCP connections: which connections are Kafka, framing (with
resync after a gap), request/response pairing, and SASL tokens after SaslHandshake v0.

Feeds a callback with finished exchanges as soon as they are known, so memory holds only
what is still pending (partial messages, unanswered requests)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from ..protocol import peek_request_header, schemas
from .framing import MAX_MESSAGE
from .pairing import Correlator, produce_acks
from .model import Exchange, Gap, KafkaMessage

DEFAULT_PORTS = frozenset({9092})
MAX_EARLY = 256            # responses held while waiting for a request seen out of order
RESYNC_TAIL = 4096         # bytes kept while searching for a boundary (a header's worth)


def plausible_request(data: bytes, pos: int = 0) -> bool:
    """Does ``data[pos:]`` start like a size-prefixed Kafka request?"""
    if len(data) - pos < 14:
        return False
    size, key, version = struct.unpack_from(">ihh", data, pos)
    if not (8 <= size <= MAX_MESSAGE) or not schemas.is_known(key, version):
        return False
    head = peek_request_header(data[pos + 4:pos + 4 + min(size, 512)])
    if head is None:
        return key == 7 and version == 0 and size >= 8
    cid = head.client_id
    return head.correlation_id >= 0 and (cid is None or cid.isprintable())


@dataclass
class _Side:
    buf: bytearray = field(default_factory=bytearray)
    base: int = 0                  # stream offset of buf[0]
    resync: bool = False           # after a gap: look for the next message boundary
    skip_until: int = 0            # stream offset: the rest of a truncated message ends here


class KafkaConnection:
    """One TCP connection's Kafka traffic; ``side`` 0 is the client's direction."""

    def __init__(self, index: int, client, broker, emit_exchange: Callable[[Exchange], None],
                 emit_gap: Callable[[Gap], None], next_index: Callable[[], int]):
        self.index, self.client, self.broker = index, client, broker
        self.emit_exchange, self.emit_gap, self.next_index = emit_exchange, emit_gap, next_index
        self.sides = (_Side(), _Side())
        self.pending: Correlator[KafkaMessage] = Correlator()
        # responses seen before their request (packets reordered across directions),
        # held until the request shows up or the connection ends
        self.early: dict[int, list[KafkaMessage]] = {}
        self.sasl_mode = False     # after SaslHandshake v0: client tokens carry no header
        self.sasl_awaiting = 0     # client tokens whose broker token has not come yet

    # -- input ----------------------------------------------------------------------

    def data(self, side: int, offset: int, payload: bytes, ts: float, frame: int) -> None:
        s = self.sides[side]
        if offset < s.skip_until:                  # the tail of a message already reported
            cut = min(s.skip_until - offset, len(payload))
            payload, offset = payload[cut:], offset + cut
            if not payload:
                return
        if not s.buf:
            s.base = offset
        s.buf += payload
        self._frame(side, ts, frame)

    def gap(self, side: int, offset: int, length: int, ts: float, frame: int) -> None:
        s = self.sides[side]
        end = offset + length
        if end <= s.skip_until:
            return                                 # inside a message already reported truncated
        self.emit_gap(Gap(self.index, "request" if side == 0 else "response", offset,
                          length, frame, ts))
        size = struct.unpack_from(">i", s.buf)[0] if len(s.buf) >= 4 and not s.resync else -1
        message_end = s.base + 4 + size
        if 4 <= size <= MAX_MESSAGE and end <= message_end and len(s.buf) >= 12:
            # the hole is inside a message whose size we know: report what was captured
            # of it, skip exactly its remaining bytes, and frame on without resync
            data = bytes(s.buf[4:])
            self._message(side, s.base + 4, data, ts, frame,
                          truncated=f"truncated: {size - len(data)} of {size} bytes not captured")
            s.skip_until = message_end
            s.buf.clear()
            s.base = message_end
            return
        s.buf.clear()
        s.base = end
        s.resync = True

    def close(self) -> None:
        for side, s in enumerate(self.sides):
            if s.buf and not s.resync:
                self.emit_gap(Gap(self.index, "request" if side == 0 else "response",
                                  s.base, len(s.buf), 0, 0.0))
        for waiting in self.early.values():
            for resp in waiting:
                self._orphan(resp)
        self.early.clear()
        for req in self.pending.unanswered():
            if req.status == "ok":
                req.status = "unanswered"
            self.emit_exchange(Exchange(req, None, self.client, self.broker, self.index))
        self.pending.clear()

    # -- framing ------------------------------------------------------------------------

    def _frame(self, side: int, ts: float, frame: int) -> None:
        s = self.sides[side]
        buf = s.buf
        pos = 0
        while True:
            if s.resync:
                found = self._find_boundary(side, buf, pos)
                if found is None:
                    # keep only a tail that may hold the start of the next message, so
                    # the search neither grows memory nor rescans what it has seen
                    pos = max(pos, len(buf) - RESYNC_TAIL)
                    break
                pos, s.resync = found, False
            if len(buf) - pos < 4:
                break
            size = struct.unpack_from(">i", buf, pos)[0]
            if size < 0 or size > MAX_MESSAGE:
                s.resync = True          # not a message boundary: search from the next byte
                pos += 1
                continue
            if len(buf) - pos - 4 < size:
                break
            data = bytes(buf[pos + 4:pos + 4 + size])
            self._message(side, s.base + pos + 4, data, ts, frame)
            pos += 4 + size
        del buf[:pos]
        s.base += pos

    def _find_boundary(self, side: int, buf: bytearray, start: int) -> int | None:
        """After a gap: the first offset from ``start`` where a message plausibly starts
        (a request header, or a response carrying a correlation id a request waits for)."""
        for pos in range(start, len(buf) - 7):
            size = struct.unpack_from(">i", buf, pos)[0]
            if not 4 <= size <= MAX_MESSAGE:
                continue
            if side == 0:
                if plausible_request(buf, pos):
                    return pos
            elif self.pending.waiting_for(struct.unpack_from(">i", buf, pos + 4)[0]):
                return pos
        return None

    # -- messages -------------------------------------------------------------------------

    def _message(self, side: int, offset: int, data: bytes, ts: float, frame: int,
                 truncated: str | None = None) -> None:
        msg = KafkaMessage(self.next_index(), self.index, "request" if side == 0 else "response",
                           ts, frame, offset, data)
        if truncated:
            msg.status = truncated
        if self.sasl_mode and side == 0:
            if plausible_request(struct.pack(">i", len(data)) + data[:512]):
                self.sasl_mode = False          # authenticated: Kafka requests again
            else:
                self.sasl_awaiting += 1
                msg.direction = "sasl"
                self.emit_exchange(Exchange(msg, None, self.client, self.broker, self.index))
                return
        if side == 1 and self.sasl_awaiting:
            self.sasl_awaiting -= 1
            msg.direction = "sasl"
            self.emit_exchange(Exchange(None, msg, self.client, self.broker, self.index))
            return
        if side == 0:
            self._request(msg)
        else:
            self._response(msg)

    def _request(self, msg: KafkaMessage) -> None:
        head = peek_request_header(msg.data)
        if head is None:
            msg.status = "malformed header"
            self.emit_exchange(Exchange(msg, None, self.client, self.broker, self.index))
            return
        msg.api_key, msg.api_version = head.api_key, head.api_version
        msg.correlation_id, msg.client_id = head.correlation_id, head.client_id
        if not schemas.is_known(head.api_key, head.api_version) and msg.status == "ok":
            msg.status = "unknown API version"
        if head.api_key == 0 and produce_acks(msg.data, head.size, head.api_version) == 0:
            if msg.status == "ok":
                msg.status = "no response expected (acks=0)"
            self.emit_exchange(Exchange(msg, None, self.client, self.broker, self.index))
            self.pending.request(head.correlation_id, msg, expected=False)
        else:
            self.pending.request(head.correlation_id, msg)
        early = self.early.get(head.correlation_id)
        if early:
            resp = early.pop(0)
            if not early:
                del self.early[head.correlation_id]
            self._response(resp)

    def _orphan(self, msg: KafkaMessage) -> None:
        if msg.status == "ok":
            msg.status = "orphan (request not captured)"
        self.emit_exchange(Exchange(None, msg, self.client, self.broker, self.index))

    def _response(self, msg: KafkaMessage) -> None:
        corr = struct.unpack_from(">i", msg.data)[0] if len(msg.data) >= 4 else None
        msg.correlation_id = corr
        match = self.pending.response(corr) if corr is not None else None
        if match is None:
            if corr is None:
                self._orphan(msg)
                return
            self.early.setdefault(corr, []).append(msg)
            if sum(map(len, self.early.values())) > MAX_EARLY:
                oldest = min(self.early, key=lambda c: self.early[c][0].index)
                self._orphan(self.early[oldest].pop(0))
                if not self.early[oldest]:
                    del self.early[oldest]
            return
        req = match.item
        msg.api_key, msg.api_version = req.api_key, req.api_version
        msg.pair, req.pair = req.index, msg.index
        msg.how = "paired by correlation id"
        if not match.expected and msg.status == "ok":
            msg.status = "answer to acks=0 (brokers normally send none)"
        if req.api_key == 17 and req.api_version == 0 and _no_error(msg.data):
            # SaslHandshake v0: the tokens that follow carry no Kafka header
            self.sasl_mode = True
        self.emit_exchange(Exchange(req, msg, self.client, self.broker, self.index,
                                    repeat=not match.expected))


def _no_error(data: bytes) -> bool:
    return len(data) >= 6 and struct.unpack_from(">h", data, 4)[0] == 0
