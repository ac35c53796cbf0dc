"""The thread forwarder (``kdissect proxy --forwarder threads``): each client connection's
bytes move in two threads of the compiled extension (``_native.Relay``, native/src/relay.rs),
one per direction, with blocking reads and writes outside the interpreter. The event loop
still accepts clients, connects to brokers, makes broker listeners and rewrites answers
that name brokers; everything else it learns afterwards, from the relay's queue of whole
messages (``Proxy.request_seen``/``response_seen``: pairing, metrics, display, recording).

Why: in one event loop a small request waits behind every other connection's chunks and
the per-message Python of all of them; measured (docs/guide/proxy.md), threads that
frame and pair in Python still spent the per-message time on the forwarding path. Here
the forwarding path holds no Python at all, but for the rare answers that may name brokers.

Plaintext only: TLS on either leg uses the event-loop forwarder.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import traceback
from typing import Any, TypeAlias

from ..protocol.apis import FETCH, NAMES_BROKERS
from ..protocol.native_ext import compiled
from ..protocol.reader import DecodeError
from ..stream.framing import MAX_MESSAGE
from .skipscan import endpoint_spans, quick_check, response_layout

# (server.py's Proxy, Listener and _Connection: server.py imports this module)
Proxy: TypeAlias = Any
Listener: TypeAlias = Any
Connection: TypeAlias = Any

# answer modes (relay.rs): streamed (0, not listed), held whole to be rewritten, or
# streamed but their last bytes, rewritten keeping their size (a Fetch answer)
HOLD, TAIL = 1, 2
# event kinds (relay.rs)
MESSAGE, PARTIAL, REFUSED, ENDED, REWRITE_FAILED, DIRECTION_ENDED = range(6)
# a REFUSED event's size when no size prefix is to blame (outside an int32's range: a
# peer's size prefix may be -1 or -2): a TLS handshake on a plaintext listener; no thread
NOT_KAFKA_TLS, NO_THREAD = -(1 << 40), -(1 << 40) - 1
REWRITE_WAIT = 30.0  # seconds a forwarding thread waits for the event loop's rewrite
# the event loop takes the relay's events at most this often: forwarding never waits for
# them, and a wake-up per message (two per exchange) cost more CPU than the forwarding
DRAIN_EVERY = 0.002
# ... and at most this often while the traffic moves at least BUSY_RATE bytes a second:
# on three nodes the loop's wake-ups cost a Java consumer 11 points of direct's rate at
# 2 ms (docs/guide/proxy.md); small exchanges keep the short wait, where the longer one
# made the loop's batches long enough to hold up a quiet round trip (+0.3 ms at p99);
# 20 ms measured no better than 10
DRAIN_BUSY = 0.010
BUSY_RATE = 5_000_000
# a forwarding thread that needs Python (an answer that may name brokers) waits for the
# event loop's thread to let go of the interpreter at most about this long (Python's
# default, 5 ms, was a Fetch answer's delay whenever the loop was busy)
SWITCH_INTERVAL = 0.0005
STOP_WAIT = 10.0  # seconds the proxy's close waits for the threads to end
HOLDS_EVERY = 0.02  # seconds between the relay's news of a display channel not empty
# the relay wakes the loop after the write that carried a message's end: a write blocked
# by a client that stopped reading would hold up every connection's events, so they are
# also taken at least this often
POLL_EVERY = 0.1
HIGHEST_VERSION = 127  # answer versions looked up (newer than the tables: read as the newest)


def _may_name_brokers() -> list[tuple[int, int]]:
    return [
        (key, version)
        for key in sorted(NAMES_BROKERS)
        for version in range(HIGHEST_VERSION + 1)
        if response_layout(key, version) is not None
    ]


def modes(answers: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(api key, version, mode) of ``answers`` (those that may name brokers: the same
    choice as the event-loop forwarder's, ``response_layout``)."""
    return [(key, version, TAIL if key == FETCH else HOLD) for key, version in answers]


def checks(answers: list[tuple[int, int]]) -> list[tuple[int, int, bool, list[int], list[int]]]:
    """(api key, version, header tagged, tags, program) of those of ``answers`` whose
    brokers the relay can see to be absent itself (``skipscan.quick_check``)."""
    out = []
    for key, version in answers:
        check = quick_check(key, version)
        if check is not None:
            out.append((key, version, *check))
    return out


async def dial(host: str, port: int) -> socket.socket:
    """A plaintext connection to ``host:port`` (each of its addresses in turn)."""
    loop = asyncio.get_running_loop()
    failed: OSError | None = None
    for family, kind, proto, _, addr in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, addr)
        except OSError as e:
            sock.close()
            failed = e
            continue
        except BaseException:  # cancelled (the connect timed out)
            sock.close()
            raise
        return sock
    raise failed or OSError(f"{host} has no address")


class ThreadForwarder:
    """The relay's threads for every client connection of ``proxy``, and the event loop's
    side of them."""

    def __init__(self, proxy: Proxy, budget: int, stream_tail: int, late: float):
        Relay = compiled("Relay")
        if Relay is None:
            raise ValueError("--forwarder threads needs the compiled extension (README.md)")
        self.proxy = proxy
        self.loop = asyncio.get_running_loop()
        self._wake_r, self._wake_w = os.pipe()
        answers = _may_name_brokers()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.relay = Relay(
            self._wake_w,
            # with a recording, whole messages up to --max-memory (as the event-loop
            # forwarder holds partial ones); without, up to the display's budget
            proxy.held.limit if proxy.recorder is not None else min(budget, proxy.held.limit),
            proxy.recorder is not None,  # a recording loses nothing: never cut
            modes(answers),
            checks(answers),
            self._rewrite,
            stream_tail,
            late,
            MAX_MESSAGE,
        )
        self._holds_timer: asyncio.TimerHandle | None = None
        self._drain_timer: asyncio.TimerHandle | None = None
        self._drained_at = 0.0
        self._busy = False  # the bytes the last take moved came at BUSY_RATE or more
        self._poll_timer: asyncio.TimerHandle | None = self.loop.call_later(POLL_EVERY, self._poll)
        self.loop.add_reader(self._wake_r, self._woken)
        sys.setswitchinterval(SWITCH_INTERVAL)

    def _woken(self) -> None:
        """Events wait: taken now, or DRAIN_EVERY (DRAIN_BUSY while busy) after they were
        last taken. The relay writes its pipe only when its queue was empty, so no byte
        comes while events wait to be taken (the pipe stays watched: unwatching it and
        watching it again around each wait cost more than the wait saved)."""
        self._clear_pipe()
        if self._drain_timer is not None:
            return
        every = DRAIN_BUSY if self._busy else DRAIN_EVERY
        wait = self._drained_at + every - self.loop.time()
        if wait <= 0:
            self.drain()
        else:
            self._drain_timer = self.loop.call_later(wait, self._drain_due)

    def _poll(self) -> None:
        if self.loop.time() - self._drained_at >= POLL_EVERY and self._drain_timer is None:
            self.drain()
        self._poll_timer = self.loop.call_later(POLL_EVERY, self._poll)

    def _drain_due(self) -> None:
        self._drain_timer = None
        self.drain()

    def _clear_pipe(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    async def client(self, sock: socket.socket, listener: Listener) -> None:
        """An admitted client: its broker connected, then both sockets go to the relay."""
        proxy = self.proxy
        try:
            client = sock.getpeername()[:2]
            local = sock.getsockname()[0]
        except OSError:  # reset as soon as it connected (ENOTCONN)
            proxy._ended(None)
            sock.close()
            return
        who = f"{client[0]}:{client[1]}"
        try:
            broker_sock = await proxy._connect(listener, who, dial)
        except asyncio.CancelledError:
            broker_sock = None
        if broker_sock is None:
            proxy._ended(None)
            sock.close()
            return
        c = None
        try:
            c = proxy._opened(client, broker_sock.getpeername()[:2], local)
            c.shut = lambda: self.relay.shutdown(c.index)
            self.relay.start(c.index, sock.detach(), broker_sock.detach())
        except OSError as e:  # the broker reset at once, or no thread to be had
            proxy.repeated(
                "connections closed before forwarding began",
                f"{who}: {e.strerror or e}; closing the connection",
            )
            proxy._ended(c)
            sock.close()
            broker_sock.close()

    def _rewrite(self, conn: int, key: int, version: int, body: bytes, sent: int):
        """Called by a forwarding thread: the event loop's rewrite of an answer, or None
        when the connection must close (see ``Proxy.rewrite_for``). Most such answers
        (every Fetch answer without leader hints) name no broker: found here, in this
        thread, without waiting for the event loop."""
        try:
            if not any(sp.node_id >= 0 and sp.host for sp in endpoint_spans(body, key, version)):
                return body
        except DecodeError:
            pass  # (the event loop says it)
        try:
            future = asyncio.run_coroutine_threadsafe(
                self.proxy.rewrite_for(conn, key, version, body, sent), self.loop
            )
            return future.result(REWRITE_WAIT)
        except Exception:  # the loop is gone or stuck: the client reconnects
            return None

    def drain(self) -> None:
        """The relay's events, in the order its threads queued them."""
        self._clear_pipe()
        now = self.loop.time()
        since, self._drained_at = now - self._drained_at, now
        proxy = self.proxy
        moved = 0
        for event in self.relay.take():
            moved += event[7]
            c = proxy.live.get(event[0])
            if c is None:
                continue
            try:
                self._event(c, *event[1:])
                if event[1] == ENDED:
                    proxy._ended(c)
            except Exception as e:  # a bug: said; the other events go on
                proxy.repeated(
                    f"events handled with an internal error ({type(e).__name__})",
                    f"{c.client[0]}:{c.client[1]}: an internal error ({type(e).__name__}: "
                    f"{e}); please report it\n" + "".join(traceback.format_exception(e)).rstrip(),
                )
                if event[1] == ENDED and proxy.live.pop(c.index, None) is not None:
                    proxy.active -= 1  # (ended all the same)
        self._busy = since > 0 and moved >= BUSY_RATE * since  # (two takes at once: no rate)
        self._holds()

    def _holds(self) -> None:
        """What the display's channel holds counts in the relay's budget (when it is full,
        messages the display would shed are not collected whole for it): told after each
        drain, and every HOLDS_EVERY while it is not empty (it empties as the display
        reads, events or not)."""
        feed = self.proxy.feed
        held = feed.buffered if feed is not None else 0
        self.relay.display_holds(held)
        if held and self._holds_timer is None:
            self._holds_timer = self.loop.call_later(HOLDS_EVERY, self._holds_again)

    def _holds_again(self) -> None:
        self._holds_timer = None
        self._holds()

    def _event(
        self,
        c: Connection,
        kind: int,
        side: int,
        wall: float,
        mono: float,
        offset: int,
        data: bytes | memoryview,  # (a view of the relay's own buffer when large)
        moved: int,
        size: int,
    ) -> None:
        proxy = self.proxy
        if side == 0:
            c.counters.bytes_to_broker += moved
        else:
            c.counters.bytes_to_client += moved
        if kind == MESSAGE:
            c.last = self.loop.time()
            if side == 0:
                proxy.request_seen(c, data, offset, wall, mono, size)
            else:
                proxy.response_seen(c, data, offset, wall, mono, size)
        elif kind == PARTIAL:
            proxy.partial_seen(c, side, data, wall)
        elif kind == REFUSED:
            self._refused(c, side, size, offset)

    def _refused(self, c: Connection, side: int, size: int, offset: int) -> None:
        who = f"{c.client[0]}:{c.client[1]}"
        if size == NO_THREAD:
            self.proxy.repeated(
                "connections closed: no forwarding thread",
                f"{who}: cannot start a forwarding thread (too many threads: see "
                f"ulimit -u, or --max-connections); closing the connection",
            )
            return
        if size == NOT_KAFKA_TLS:
            text = (
                f"{who}: a TLS handshake on a plaintext listener: the client speaks TLS "
                f"(point it at a plaintext listener, or give the proxy --tls-cert/--tls-key "
                f"and --forwarder event-loop); closing the connection"
            )
        elif side == 0:
            text = (
                f"{who}: the client sent an implausible message size {size} at stream "
                f"offset {offset}, which is not Kafka; closing the connection"
            )
        else:
            text = (
                f"broker {c.broker[0]}:{c.broker[1]} sent an implausible message size "
                f"{size} at stream offset {offset}, which is not Kafka; closing the connection"
            )
        self.proxy.on_note(text)

    def idle(self, c: Connection) -> float | None:
        """Seconds since either of ``c``'s sockets last gave bytes (None: ended)."""
        return self.relay.idle(c.index)

    async def close(self) -> None:
        """Every connection closed, its threads ended and its last events taken."""
        self.relay.stop()
        await self.loop.run_in_executor(None, self.relay.wait, STOP_WAIT)
        self.drain()
        for timer in (self._holds_timer, self._drain_timer, self._poll_timer):
            if timer is not None:
                timer.cancel()
        self._holds_timer = self._drain_timer = self._poll_timer = None
        self.loop.remove_reader(self._wake_r)
        os.close(self._wake_r)
        self._wake_r = -1
        # (the write end stays open: a thread that outlived the wait may still write it)
