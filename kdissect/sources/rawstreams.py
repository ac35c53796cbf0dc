"""A source for one Kafka connection given as its two byte streams: what the client sent
and what the broker sent, each in order (Wireshark's "Follow TCP Stream" saved as raw
bytes for each direction, socat's -r/-R files, a test's own bytes).

The worked example of docs/internals/engine.md: a source is a class with ``feed(sink)`` that hands
its bytes to the connection core (framing and correlation); the engine puts enrichment
between it and the sinks:

    Engine(RawStreams(client_bytes, broker_bytes), sink, options).run()
"""

from __future__ import annotations

import itertools

from ..stream.connection import KafkaConnection
from ..stream.sink import Sink


class RawStreams:
    def __init__(
        self,
        client: bytes,
        broker: bytes,
        client_addr: tuple[str, int] = ("client", 0),
        broker_addr: tuple[str, int] = ("broker", 0),
        ts: float = 0.0,
    ):
        """``ts``: the time given to every message (raw streams carry none)."""
        self.client, self.broker, self.ts = client, broker, ts
        self.client_addr, self.broker_addr = client_addr, broker_addr

    def feed(self, sink: Sink) -> None:
        numbers = itertools.count()  # message numbers, 0-based
        conn = KafkaConnection(
            1, self.client_addr, self.broker_addr, sink.exchange, sink.gap, lambda: next(numbers)
        )
        # every request is pending when the responses come: pairing needs no timing.
        # (Without timing, raw SASL tokens after a SaslHandshake v0 read as malformed
        # requests: the handshake's answer comes after the client's whole stream.)
        conn.data(0, 0, self.client, self.ts, 0)
        conn.data(1, 0, self.broker, self.ts, 0)
        conn.close()
        sink.done()
