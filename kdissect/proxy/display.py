"""The display's side of the proxy, outside the forwarding process: records from the
forwarder's channel go through the engine (framing, correlation, then the enrichment
and sink the caller built: the printer or the TUI's loader), as for any source.
Whatever this costs, forwarding never waits for it: the forwarder sheds what the
channel cannot hold, whole exchanges at a time, and says how many."""

from __future__ import annotations

import itertools
import json
import struct

from ..stream.connection import KafkaConnection
from ..stream.sink import Sink
from . import feed
from .backoff import CpuGate

_SIZE = struct.Struct(">i")


class FeedDisplay:
    """``sink`` gets exchanges, gaps and notes. ``run`` returns when the forwarder closes
    the channel; ``error`` then says why it could not start, if it could not."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.connections: dict[int, KafkaConnection] = {}
        self.messages = itertools.count()
        self.dropped = 0
        self.error: str | None = None
        self.failures: set[str] = set()
        self.gate = CpuGate()

    def run(self, fd: int) -> None:
        gate = self.gate
        try:
            gate.working()
            for record in feed.read_records(fd, gate.waiting, gate.working):
                gate.check()                # no free core: wait, the forwarder sheds
                self._record(*record)
        finally:
            gate.waiting()                  # no more offers of the core: nothing to decode
        for c in self.connections.values():
            try:
                c.close()
            except Exception as e:
                self._failed(e)
        self.connections.clear()

    def _record(self, kind: int, conn: int, side: int, ts: float, offset: int,
                payload: bytes) -> None:
        sink = self.sink
        if kind == feed.FRAME:              # a message without its size: the offset after it
            c = self.connections.get(conn)
            if c is not None:
                try:
                    c.data(side, offset - 4, _SIZE.pack(len(payload)) + payload, ts, 0)
                except Exception as e:      # a decoding bug: report it, go on
                    self._failed(e)
        elif kind == feed.OPEN:
            client, broker = json.loads(payload)
            self.connections[conn] = KafkaConnection(
                conn, tuple(client), tuple(broker), sink.exchange, sink.gap,
                lambda: next(self.messages))
        elif kind == feed.CLOSE:
            c = self.connections.pop(conn, None)
            if c is not None:
                try:
                    c.close()
                except Exception as e:
                    self._failed(e)
        elif kind == feed.DROPPED:
            self.dropped += offset
            sink.note(f"{offset} exchanges not shown: the display could not keep up "
                      f"(forwarding was not slowed; {self.dropped} in all)")
        elif kind == feed.ERROR:
            self.error = payload.decode()
        else:
            sink.note(payload.decode(), "info")

    def _failed(self, e: Exception) -> None:
        text = f"decoding failed and was skipped: {type(e).__name__}: {e}"
        if text not in self.failures:
            self.failures.add(text)
            self.sink.note(text)
