"""The proxy's sockets (asyncio): a bootstrap listener, one listener per broker created
when a response first names that broker, and for each client connection one upstream
connection. Bytes are forwarded frame by frame (Kafka's 4-byte size prefix), in order,
unchanged except responses whose broker addresses are rewritten. Each write waits for
the other side to drain, so a slow reader slows its sender instead of filling memory.
Decoding happens beside forwarding and can never stop it.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..protocol import decode_response
from ..stream.model import Exchange, Gap
from ..stream.connection import KafkaConnection
from .rewrite import REWRITES, Endpoint, endpoints, rewrite

MAX_FRAME = 256 * 1024 * 1024        # bigger "sizes" are not Kafka
MAX_PENDING = 65536                  # requests remembered per connection awaiting answers


@dataclass
class Listener:
    node_id: int | None              # None: the bootstrap listener
    upstream: tuple[str, int]
    port: int
    server: asyncio.base_events.Server | None = None


@dataclass
class Stats:
    connections: int = 0
    open: int = 0
    frames: int = 0
    rewritten: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    notes: list[str] = field(default_factory=list)


def _looks_like_tls(head: bytes) -> bool:
    return len(head) >= 3 and head[0] == 0x16 and head[1] == 0x03 and head[2] <= 0x04


class Proxy:
    """``upstreams``: bootstrap brokers (tried in order). Listeners bind ``host``; the
    addresses handed to clients use ``advertise`` (default ``host``). Broker listeners
    take ``broker_port(node_id)`` when given, else a free port."""

    def __init__(self, upstreams: list[tuple[str, int]], host: str = "127.0.0.1",
                 port: int = 9092, advertise: str | None = None,
                 broker_port: Callable[[int], int] | None = None,
                 on_exchange: Callable[[Exchange], None] = lambda ex: None,
                 on_gap: Callable[[Gap], None] = lambda g: None,
                 on_note: Callable[[str], None] = lambda text: None,
                 server_ssl=None, upstream_ssl=None, recorder=None,
                 upstream_map: dict[tuple[str, int], tuple[str, int]] | None = None):
        self.upstreams, self.host, self.port = upstreams, host, port
        self.advertise = advertise or host
        self.broker_port = broker_port
        self.on_exchange, self.on_gap, self.on_note = on_exchange, on_gap, on_note
        self.server_ssl, self.upstream_ssl = server_ssl, upstream_ssl   # ssl.SSLContext
        self.recorder = recorder                   # a recording.Recorder, or None
        # advertised broker address -> the address the proxy really connects to
        self.upstream_map = upstream_map or {}
        self.listeners: dict[int | None, Listener] = {}
        self.stats = Stats()
        self._index = itertools.count(1)
        self._messages = itertools.count()
        self._tasks: set[asyncio.Task] = set()

    # -- listeners ----------------------------------------------------------------------

    async def start(self) -> None:
        bootstrap = Listener(None, self.upstreams[0], self.port)
        bootstrap.server = await asyncio.start_server(
            lambda r, w: self._client(r, w, bootstrap), self.host, self.port)
        bootstrap.port = bootstrap.server.sockets[0].getsockname()[1]
        self.listeners[None] = bootstrap

    @property
    def bootstrap_port(self) -> int:
        return self.listeners[None].port

    async def _listener_for(self, ep: Endpoint) -> Listener:
        """The listener standing for broker ``ep.node_id`` (made on first mention; its
        upstream follows the broker's latest advertised address)."""
        upstream = self.upstream_map.get((ep.host, ep.port), (ep.host, ep.port))
        current = self.listeners.get(ep.node_id)
        if current is not None:
            current.upstream = upstream
            return current
        wanted = self.broker_port(ep.node_id) if self.broker_port else 0
        listener = Listener(ep.node_id, upstream, wanted)
        listener.server = await asyncio.start_server(
            lambda r, w: self._client(r, w, listener), self.host, wanted)
        listener.port = listener.server.sockets[0].getsockname()[1]
        self.listeners[ep.node_id] = listener
        via = f" at {upstream[0]}:{upstream[1]}" if upstream != (ep.host, ep.port) else ""
        self.on_note(f"broker {ep.node_id} ({ep.host}:{ep.port}{via}) is reached through "
                     f"{self.advertise}:{listener.port}")
        return listener

    async def close(self) -> None:
        for listener in self.listeners.values():
            if listener.server is not None:
                listener.server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one client connection ------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      listener: Listener) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        client = writer.get_extra_info("peername")[:2]
        self.stats.connections += 1
        self.stats.open += 1
        upstream_w = None
        try:
            if self.server_ssl is not None and not await self._tls_accept(writer, client):
                return
            try:
                host, port = listener.upstream
                up_reader, upstream_w = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=self.upstream_ssl,
                                            server_hostname=host if self.upstream_ssl and
                                            self.upstream_ssl.check_hostname else None),
                    timeout=10)
            except (OSError, asyncio.TimeoutError) as e:
                self.on_note(f"{client[0]}:{client[1]}: cannot reach broker "
                             f"{listener.upstream[0]}:{listener.upstream[1]} ({e}); "
                             f"closing the client's connection so it retries")
                return
            broker = upstream_w.get_extra_info("peername")[:2]
            conn = KafkaConnection(next(self._index), client, broker, self._emit,
                                   self.on_gap, lambda: next(self._messages))
            pending: dict[int, tuple[int, int]] = {}
            offsets = [0, 0]
            recorded = self.recorder.connection(client, broker) if self.recorder else None
            up = asyncio.create_task(self._pump(reader, upstream_w, conn, 0, offsets,
                                                pending, client, recorded))
            down = asyncio.create_task(self._pump(up_reader, writer, conn, 1, offsets,
                                                  pending, client, recorded))
            _, rest = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            for t in rest:                       # one side ended: end the other cleanly
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            self._safely(conn.close)
            if recorded is not None:
                self._safely(recorded.close)
        finally:
            self.stats.open -= 1
            for w in (writer, upstream_w):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    async def _tls_accept(self, writer: asyncio.StreamWriter, client) -> bool:
        """On a TLS listener: peek at the client's first byte. A TLS handshake goes on
        (TLS from here); anything else is a plaintext client, told so and closed.
        (asyncio's own TLS listeners drop such clients without a word.)"""
        loop = asyncio.get_running_loop()
        writer.transport.pause_reading()
        # a duplicate of the socket: asyncio lets no one else watch the transport's own
        peek = socket.fromfd(writer.get_extra_info("socket").fileno(), socket.AF_INET,
                             socket.SOCK_STREAM)
        ready = loop.create_future()
        loop.add_reader(peek.fileno(), lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, 60)
            first = peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (asyncio.TimeoutError, OSError):
            return False
        finally:
            loop.remove_reader(peek.fileno())
            peek.close()
        who = f"{client[0]}:{client[1]}"
        if first != b"\x16":
            self.on_note(f"{who}: a plaintext client on a TLS listener (its first byte is "
                         f"{first.hex() or 'nothing'}): configure it for TLS "
                         f"(security.protocol=SSL) or run the proxy without --tls-cert; "
                         f"closing the connection")
            return False
        try:
            await writer.start_tls(self.server_ssl)
        except (ssl.SSLError, OSError) as e:
            self.on_note(f"{who}: the TLS handshake failed ({e}); closing the connection")
            return False
        return True

    def _emit(self, ex: Exchange) -> None:
        self._safely(self.on_exchange, ex)

    def _safely(self, fn, *args) -> None:
        """Decoding and display must never disturb forwarding."""
        try:
            fn(*args)
        except Exception as e:                    # pragma: no cover - reported, not raised
            note = f"decoding failed and was skipped: {type(e).__name__}: {e}"
            if note not in self.stats.notes:
                self.stats.notes.append(note)
                self.on_note(note)

    async def _pump(self, reader, writer, conn: KafkaConnection, side: int,
                    offsets: list[int], pending: dict[int, tuple[int, int]], client,
                    recorded=None) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                size = struct.unpack(">i", head)[0]
                if side == 0 and offsets[0] == 0 and _looks_like_tls(head):
                    self.on_note(f"{client[0]}:{client[1]}: a TLS handshake on a plaintext "
                                 f"listener: the client speaks TLS (point it at a plaintext "
                                 f"listener, or give the proxy --tls-cert/--tls-key); "
                                 f"closing the connection")
                    return
                if size < 0 or size > MAX_FRAME:
                    self.on_note(f"{client[0]}:{client[1]}: a frame of {size} bytes is not "
                                 f"Kafka (the limit is {MAX_FRAME}); closing the connection")
                    return
                body = await reader.readexactly(size)
                out = body
                if side == 0 and size >= 8:
                    api_key, api_version, corr = struct.unpack_from(">hhi", body)
                    if len(pending) < MAX_PENDING:
                        pending[corr] = (api_key, api_version)
                elif side == 1 and size >= 4:
                    corr = struct.unpack_from(">i", body)[0]
                    asked = pending.pop(corr, None)
                    if asked is not None and asked[0] in REWRITES:
                        out = await self._rewritten(body, *asked)
                frame = head + body        # once: the stream layer and the recording take it
                if out is body:
                    writer.write(frame)    # one write: two (size, body) cost ~2 ms a trip
                else:
                    writer.write(struct.pack(">i", len(out)) + out)
                await writer.drain()
                self.stats.frames += 1
                if side == 0:
                    self.stats.bytes_up += 4 + size
                else:
                    self.stats.bytes_down += 4 + len(out)
                now = time.time()
                if recorded is not None:
                    self._safely(self._record, recorded, side, frame, now, conn.sasl_mode)
                self._safely(conn.data, side, offsets[side], frame, now, 0)
                offsets[side] += 4 + size
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return

    def _record(self, recorded, side: int, frame: bytes, ts: float, sasl_raw: bool) -> None:
        recorded.data(side, self.recorder.mask(frame, side, sasl_raw), ts)

    async def _rewritten(self, body: bytes, api_key: int, api_version: int) -> bytes:
        """``body`` with every broker address replaced by the proxy's listener for that
        broker (the listeners are made first, so a client can connect at once)."""
        try:
            tree = decode_response(body, api_key, api_version).tree
            found = endpoints(tree)
            if not found:
                return body
            ports = {}
            for ep in found:
                ports[ep.node_id] = (await self._listener_for(ep)).port
            new = rewrite(body, tree, lambda ep: (self.advertise, ports[ep.node_id]))
        except Exception as e:                    # never let a rewrite break the stream
            self.on_note(f"could not rewrite a response ({type(e).__name__}: {e}); "
                         f"forwarded unchanged")
            return body
        if new is None:
            return body
        self.stats.rewritten += 1
        return new
