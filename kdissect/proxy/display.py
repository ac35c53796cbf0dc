"""The display's side of the proxy, outside the forwarding process: records from the
forwarder's channel go through the engine (framing, correlation, then the enrichment
and sink the caller built: the printer or the TUI's loader), as for any source.
Whatever this costs, forwarding never waits for it: the forwarder sheds what the
channel cannot hold, whole exchanges at a time, and says how many."""

from __future__ import annotations

import itertools
import json
import struct
import time

from ..stream.connection import KafkaConnection
from ..stream.sink import CallbackSink, Sink
from . import feed
from .backoff import CpuGate
from .metrics import DisplayShared
from .process import keep_freed_memory

_SIZE = struct.Struct(">i")
_COUNT = struct.Struct(">I")


LAG = 5.0  # seconds: records older than this mean the display is behind
SAMPLE_EVERY = 0.25  # while behind: one exchange shown per this many seconds
STOP_GRACE = 0.3  # seconds the display goes on after a stop is asked for
# seconds it then goes on reading what is queued, undecoded, for the notes in it (the CLI
# gives up on it 0.2 s after STOP_GRACE)
DRAIN = 0.1
_REMEMBERED = 4096  # left-out requests remembered per connection (acks=0 never answer)


class FeedDisplay:
    """``sink`` gets exchanges, gaps and notes. ``run`` returns when the forwarder closes
    the channel, or after ``stop()``: ``STOP_GRACE`` decoding, then up to ``DRAIN``
    passing over what is queued but its notes; ``error`` then says why it could not
    start, if it could not.

    It never waits long for a free core (``CpuGate``), and while the records it reads
    are more than ``lag`` seconds old (it runs at low priority: on a busy machine it
    gets little time) it shows a sample of the exchanges (one per ``SAMPLE_EVERY``) and leaves the
    others out, whole (a left-out request's response is left out too), counting them,
    until it has caught up."""

    def __init__(
        self,
        sink: Sink | None = None,
        lag: float = LAG,
        fd: int | None = None,
        shared: DisplayShared | None = None,
    ):
        """``sink``: given here or by ``feed`` (as the engine's source, reading ``fd``);
        ``shared``: where the forwarder's metrics read this display's counts."""
        self.fd = fd
        self.shared = shared
        self.sink: Sink = sink if sink is not None else CallbackSink(lambda ex: None)
        self.lag = lag  # 0: never sample
        self.connections: dict[int, KafkaConnection] = {}
        self.messages = itertools.count()
        self.dropped = 0  # exchanges the forwarder shed
        self.cut = 0  # answers it passed as their first bytes (no room for them)
        self._said_dropped = 0.0  # when shedding was last noted (once a second)
        self.left_out = 0  # exchanges this display left out (behind)
        self.shown = 0  # requests decoded
        self.max_lag = 0.0  # seconds between forwarding and decoding, at most
        self.error: str | None = None
        self.failures: set[str] = set()
        self.gate = CpuGate()
        self.stop_at: float | None = None
        self._skipped: dict[int, dict[bytes, None]] = {}
        self._next_sample = 0.0

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Show what can be shown in ``grace`` seconds, then end (from a signal handler)."""
        if self.stop_at is None:
            self.stop_at = time.monotonic() + grace

    def feed(self, sink: Sink) -> None:
        """As the engine's source: decode the channel ``fd`` into ``sink`` (the caller
        ends with ``done``, after the forwarder has ended)."""
        assert self.fd is not None
        self.sink = sink
        self.run(self.fd)

    def _stopped(self) -> bool:
        return self.stop_at is not None and time.monotonic() >= self.stop_at

    def run(self, fd: int) -> None:
        keep_freed_memory()  # each answer's copies: not page-faulted in anew (process.py)
        gate = self.gate
        unread = 0
        try:
            gate.working()
            for record in feed.read_records(fd, gate.waiting, gate.working, self._stopped):
                if self._stopped():
                    # what is queued is passed over undecoded, but its notes are said:
                    # they are few, and an operator's (a misconfigured client's hint)
                    if record[0] in (feed.NOTE, feed.DROPPED, feed.ERROR):
                        self._record(*record)
                    elif record[0] == feed.FRAME:  # a message (its size was taken off)
                        unread += 4 + len(record[5])
                    if time.monotonic() >= (self.stop_at or 0.0) + DRAIN:
                        break
                    continue
                gate.check()  # no free core: wait a little (not long)
                if record[0] == feed.FRAME and not self._shows(record):
                    continue
                self._record(*record)
        finally:
            gate.waiting()  # no more offers of the core: nothing to decode
        for c in self.connections.values():
            try:
                c.close()
            except Exception as e:
                self._failed(e)
        self.connections.clear()
        self.sink.note(self.summary(unread), "info")

    def summary(self, unread: int = 0) -> str:
        text = f"display: {self.shown} requests shown"
        if self.left_out:
            text += (
                f", {self.left_out} exchanges left out while it was over "
                f"{self.lag:g} s behind (a sample was shown)"
            )
        # the forwarder's own count: its last DROPPED record may come after a stop
        dropped = max(self.dropped, self.shared.shed() if self.shared is not None else 0)
        if dropped:
            text += f", {dropped} shed by the forwarder"
        if self.cut:
            text += f", {self.cut} answers not shown (no room for them; their requests were)"
        if unread:
            text += f", {unread} bytes of traffic passed over undecoded when it stopped"
        return text + f"; at most {self.max_lag:.2f} s behind the traffic"

    def _shows(self, record) -> bool:
        """Whether to decode this message (else it is left out with its exchange)."""
        _kind, conn, side, ts, _offset, payload = record
        if side == 1:  # a response: left out with its request
            skipped = self._skipped.get(conn)
            if skipped and bytes(payload[:4]) in skipped:
                del skipped[bytes(payload[:4])]
                return False
            return True
        now = time.monotonic()
        lag = max(0.0, time.time() - ts)
        if self.lag and lag > self.lag:  # behind: a sample, until it has caught up
            if now < self._next_sample:
                skipped = self._skipped.setdefault(conn, {})
                skipped[bytes(payload[4:8])] = None
                if len(skipped) > _REMEMBERED:
                    del skipped[next(iter(skipped))]
                self.left_out += 1
                self._share()
                return False
            self._next_sample = now + SAMPLE_EVERY
        self.shown += 1
        self._share()
        self.max_lag = max(self.max_lag, lag)
        return True

    def _share(self) -> None:
        if self.shared is not None:
            self.shared.write(self.left_out, self.shown)

    def _record(
        self, kind: int, conn: int, side: int, ts: float, offset: int, payload: bytes
    ) -> None:
        sink = self.sink
        if kind == feed.FRAME:  # a message without its size: the offset after it
            c = self.connections.get(conn)
            if c is not None:
                try:
                    if len(payload) >= feed.BIG:
                        # its size, then itself: the framer joins the two once (not a
                        # copy with the size and another without it)
                        c.data(side, offset - 4, _SIZE.pack(len(payload)), ts, 0)
                        c.data(side, offset, payload, ts, 0)
                    else:
                        c.data(side, offset - 4, _SIZE.pack(len(payload)) + payload, ts, 0)
                except Exception as e:  # a decoding bug: report it, go on
                    self._failed(e)
        elif kind == feed.CUT:  # an answer not passed: its first bytes and its size
            c = self.connections.get(conn)
            if c is not None:
                size = _COUNT.unpack_from(payload)[0]
                self.cut += 1
                try:
                    c.cut(
                        side,
                        offset,
                        bytes(payload[_COUNT.size :]),
                        size,
                        "not shown: the display could not keep up (forwarding was not "
                        f"slowed): {size - (len(payload) - _COUNT.size)} of {size} bytes "
                        "passed on without it",
                        ts,
                    )
                except Exception as e:
                    self._failed(e)
        elif kind == feed.OPEN:
            client, broker = json.loads(payload)
            c = self.connections[conn] = KafkaConnection(
                conn,
                tuple(client),
                tuple(broker),
                sink.exchange,
                sink.gap,
                lambda: next(self.messages),
            )
            c.opened = True  # the proxy sees every connection from its start
        elif kind == feed.CLOSE:
            self._skipped.pop(conn, None)
            c = self.connections.pop(conn, None)
            if c is not None:
                try:
                    c.close()
                except Exception as e:
                    self._failed(e)
        elif kind == feed.DROPPED:
            self.dropped += offset
            now = time.monotonic()
            if now - self._said_dropped >= 1.0:  # once a second at most: the total
                self._said_dropped = now
                sink.note(
                    f"exchanges not shown: the display could not keep up (forwarding "
                    f"was not slowed; {self.dropped} in all so far)"
                )
        elif kind == feed.ERROR:
            self.error = payload.decode()
        else:
            sink.note(payload.decode(), "info")

    def _failed(self, e: Exception) -> None:
        text = f"decoding failed and was skipped: {type(e).__name__}: {e}"
        if text not in self.failures:
            self.failures.add(text)
            self.sink.note(text)
