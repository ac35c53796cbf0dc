"""The display's side of the proxy, in its own process: records from the forwarder's
channel become exchanges (the stream layer's framing and pairing, as for any source)
and go to the callbacks of the printer or the TUI. Whatever this costs, forwarding
never waits for it: the forwarder sheds what the channel cannot hold."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

from ..stream.model import Exchange, Gap
from ..stream.session import KafkaConnection
from . import feed


class FeedDisplay:
    def __init__(self, on_exchange: Callable[[Exchange], None], on_gap: Callable[[Gap], None],
                 on_note: Callable[[str], None],
                 on_ready: Callable[[str], None] | None = None):
        self.on_exchange, self.on_gap, self.on_note = on_exchange, on_gap, on_note
        self.on_ready = on_ready or on_note
        self.connections: dict[int, KafkaConnection] = {}
        self.messages = itertools.count()
        self.dropped = 0
        self.error: str | None = None        # the forwarder could not start

    def run(self, fd: int) -> None:
        """Until the forwarder closes the channel."""
        for kind, conn, side, ts, offset, payload in feed.read_records(fd):
            if kind == feed.FRAME:
                c = self.connections.get(conn)
                if c is not None:
                    c.data(side, offset, payload, ts, 0)
            elif kind == feed.OPEN:
                client, broker = json.loads(payload)
                self.connections[conn] = KafkaConnection(
                    conn, tuple(client), tuple(broker), self.on_exchange, self.on_gap,
                    lambda: next(self.messages))
            elif kind == feed.CLOSE:
                c = self.connections.pop(conn, None)
                if c is not None:
                    c.close()
            elif kind == feed.DROPPED:
                self.dropped += offset
                self.on_note(f"{offset} exchanges not shown: the display could not keep up "
                             f"(forwarding was not slowed; {self.dropped} so far)")
            elif kind == feed.READY:
                self.on_ready(payload.decode())
            elif kind == feed.ERROR:
                self.error = payload.decode()
            else:
                self.on_note(payload.decode())
        for c in self.connections.values():
            c.close()
        self.connections.clear()
