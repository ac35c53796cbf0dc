"""The proxy's sockets (asyncio): a bootstrap listener, one listener per broker created
when a response first names that broker, and for each client connection one upstream
connection. Client bytes pass to the broker as they arrive; broker responses pass whole
and in order, unchanged except those whose broker addresses are rewritten.

The forwarding path reads only request headers and response correlation ids; responses
that can carry broker addresses in their version are walked by the skip-scanner (no
records read). Decoding happens in another process, fed through ``feed`` (a
``feed.FeedWriter``), which sheds what the display cannot take: forwarding never waits
for it. Each write waits for the other side to drain, so a slow reader slows its sender
instead of filling memory.
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
from typing import TYPE_CHECKING

from ..protocol.message import peek_request_header, produce_acks
from ..protocol.reader import DecodeError
from ..protocol.apis import PRODUCE
from ..stream.connection import RawSasl
from ..stream.correlation import Correlator
from .held import DEFAULT_LIMIT, HeldBytes
from .metrics import Counters, Metrics
from .rewrite import rewrite
from .skipscan import EndpointSpan, endpoint_spans, response_layout

if TYPE_CHECKING:
    from ..capture.pcapng_writer import RecordedConnection, Recorder

CONNECT_TIMEOUT = 10
READ_SIZE = 1 << 18                  # bytes taken from a socket at a time
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_WILDCARDS = ("", "0.0.0.0", "::")


@dataclass
class Listener:
    node_id: int | None              # None: the bootstrap listener
    upstreams: list[tuple[str, int]] # tried in order (the bootstrap list, or one broker)
    port: int
    server: asyncio.base_events.Server | None = None
    bound: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True)
class _Connection:
    index: int
    client: tuple[str, int]
    broker: tuple[str, int]
    advertise: str                   # the host name handed to this client for brokers
    counters: Counters
    recorded: RecordedConnection | None = None
    # requests awaiting answers: (api key, api version, shown by the display)
    # requests as (api key, version, shown on the display)
    pending: Correlator[tuple[int, int, bool]] = field(default_factory=Correlator)
    sasl: RawSasl = field(default_factory=RawSasl)    # SASL tokens without headers


def _looks_like_tls(head: bytes) -> bool:
    return len(head) >= 3 and head[0] == 0x16 and head[1] == 0x03 and head[2] <= 0x04


def _acks0(body: bytes) -> bool:
    """A Produce request that asks for no response (read without decoding the body)."""
    head = peek_request_header(body)
    return head is not None and produce_acks(body, head.size, head.api_version) == 0


class Proxy:
    """``upstreams``: bootstrap brokers (the first reachable is used). Listeners bind
    ``host``; the addresses handed to clients use ``advertise``, by default ``host``, or
    when ``host`` is a wildcard the address the client connected to. Broker listeners
    take ``broker_port(node_id)`` when given, else a free port."""

    def __init__(self, upstreams: list[tuple[str, int]], host: str = "127.0.0.1",
                 port: int = 9092, advertise: str | None = None,
                 broker_port: Callable[[int], int] | None = None,
                 feed=None, on_note: Callable[[str], None] = lambda text: None,
                 server_ssl=None, upstream_ssl=None, recorder: Recorder | None = None,
                 upstream_map: dict[tuple[str, int], tuple[str, int]] | None = None,
                 max_memory: int = DEFAULT_LIMIT):
        self.upstreams, self.host, self.port = upstreams, host, port
        self.advertise = advertise
        self.broker_port = broker_port
        self.feed, self.on_note = feed, on_note
        self.server_ssl, self.upstream_ssl = server_ssl, upstream_ssl   # ssl.SSLContext
        self.recorder = recorder
        # advertised broker address -> the address the proxy really connects to
        self.upstream_map = upstream_map or {}
        self.listeners: dict[int | None, Listener] = {}
        self.metrics = Metrics()
        # partial messages of all connections together (forwarded regardless)
        self.held = HeldBytes(max_memory, self._gave_up)
        self.notes: set[str] = set()
        self._index = itertools.count(1)
        self._tasks: set[asyncio.Task] = set()

    # -- listeners ----------------------------------------------------------------------

    async def start(self) -> None:
        bootstrap = Listener(None, list(self.upstreams), self.port)
        bootstrap.server = await self._serve(bootstrap, self.port)
        bootstrap.port = bootstrap.server.sockets[0].getsockname()[1]
        bootstrap.bound.set()
        self.listeners[None] = bootstrap

    @property
    def bootstrap_port(self) -> int:
        return self.listeners[None].port

    async def _listener_for(self, sp: EndpointSpan) -> Listener:
        """The listener standing for broker ``sp.node_id`` (made on first mention; its
        upstream follows the broker's latest advertised address)."""
        upstream = self.upstream_map.get((sp.host, sp.port), (sp.host, sp.port))
        current = self.listeners.get(sp.node_id)
        if current is not None:
            current.upstreams = [upstream]
            await current.bound.wait()             # made by another response just now
            return current
        wanted = self.broker_port(sp.node_id) if self.broker_port else 0
        listener = Listener(sp.node_id, [upstream], wanted)
        self.listeners[sp.node_id] = listener      # before awaiting: one listener per id
        try:
            listener.server = await self._serve(listener, wanted)
        except OSError:
            del self.listeners[sp.node_id]
            raise
        listener.port = listener.server.sockets[0].getsockname()[1]
        listener.bound.set()
        via = f" at {upstream[0]}:{upstream[1]}" if upstream != (sp.host, sp.port) else ""
        self.on_note(f"broker {sp.node_id} ({sp.host}:{sp.port}{via}) is reached through "
                     f"port {listener.port}")
        return listener

    async def close(self) -> None:
        for listener in self.listeners.values():
            if listener.server is not None:
                listener.server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one client connection ------------------------------------------------------------

    async def _connect(self, listener: Listener, who: str):
        """The first reachable of the listener's upstreams: (reader, writer), or None.
        The bootstrap list then starts with the one that answered."""
        failures = []
        for host, port in listener.upstreams:
            try:
                streams = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=self.upstream_ssl,
                    # SNI even with --insecure: brokers behind SNI routing need it
                    server_hostname=host if self.upstream_ssl else None), CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as e:
                failures.append(f"{host}:{port} ({e or type(e).__name__})")
                continue
            if failures and (host, port) in listener.upstreams:
                listener.upstreams.remove((host, port))
                listener.upstreams.insert(0, (host, port))
            return streams
        self.on_note(f"{who}: cannot reach broker {', '.join(failures)}; closing the "
                     f"client's connection so it retries")
        return None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      listener: Listener) -> None:
        task = asyncio.current_task()
        assert task is not None, "a connection is served in its own task"
        self._tasks.add(task)
        client = writer.get_extra_info("peername")[:2]
        who = f"{client[0]}:{client[1]}"
        upstream_w: asyncio.StreamWriter | None = None
        c: _Connection | None = None
        try:
            up = await self._connect(listener, who)
            if up is None:
                return
            up_reader, upstream_w = up
            broker = upstream_w.get_extra_info("peername")[:2]
            index = next(self._index)
            advertise = self.advertise or self.host
            if advertise in _WILDCARDS:   # never hand out 0.0.0.0: the address this client used
                advertise = writer.get_extra_info("sockname")[0].removeprefix("::ffff:")
            c = _Connection(index, client, broker, advertise,
                            self.metrics.open(index, client, broker))
            if self.recorder is not None:
                c.recorded = self.recorder.connection(client, broker)
            if self.feed is not None:
                self.feed.open(index, client, broker)
            ups = asyncio.create_task(self._requests(reader, upstream_w, c, who))
            down = asyncio.create_task(self._responses(up_reader, writer, c))
            try:
                await asyncio.wait({ups, down}, return_when=asyncio.FIRST_COMPLETED)
            finally:                               # one side ended: end the other cleanly
                for t in (ups, down):
                    t.cancel()
                await asyncio.gather(ups, down, return_exceptions=True)
        except asyncio.CancelledError:
            # the proxy is closing: end normally, or asyncio's stream callback reports the
            # cancellation as an error with a traceback
            pass
        except Exception as e:                    # a bug: this connection ends, no other
            self.note_once(f"{who}: the connection ended on an internal error "
                           f"({type(e).__name__}: {e}); please report it")
        finally:
            if c is not None:
                self.metrics.close(c.index)
                if self.feed is not None:
                    self.feed.close(c.index)
                if c.recorded is not None:
                    self._safely(c.recorded.close)
            for w in (writer, upstream_w):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    async def _serve(self, listener: Listener, port: int):
        """Listen for ``listener`` on ``port`` (0: a free one)."""
        if self.server_ssl is None:
            return await asyncio.start_server(
                lambda r, w: self._client(r, w, listener), self.host, port)
        return _TlsServer(self, listener, socket.create_server((self.host, port)))

    async def _tls_client(self, sock: socket.socket, listener: Listener) -> None:
        """On a TLS listener: peek at the client's first byte before any event loop reads
        it. A TLS handshake goes on (TLS from here); anything else is a plaintext client,
        told so and closed (asyncio's own TLS listeners drop such clients silently)."""
        loop = asyncio.get_running_loop()
        client = sock.getpeername()[:2]
        who = f"{client[0]}:{client[1]}"
        readable = loop.create_future()

        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(sock.fileno(), ready)
        try:
            await asyncio.wait_for(readable, 60)
            first = sock.recv(1, socket.MSG_PEEK)
        except (asyncio.TimeoutError, OSError):
            sock.close()
            return
        finally:
            loop.remove_reader(sock.fileno())
        if first != b"\x16":
            self.on_note(f"{who}: a plaintext client on a TLS listener (its first byte is "
                         f"{first.hex() or 'nothing'}): configure it for TLS "
                         f"(security.protocol=SSL) or run the proxy without --tls-cert; "
                         f"closing the connection")
            sock.close()
            return
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, sock, ssl=self.server_ssl, ssl_handshake_timeout=60)
        except (ssl.SSLError, OSError, asyncio.TimeoutError) as e:
            self.on_note(f"{who}: the TLS handshake failed ({e}); closing the connection")
            sock.close()
            return
        await self._client(reader, asyncio.StreamWriter(transport, protocol, reader, loop),
                           listener)

    def _safely(self, fn, *args) -> None:
        """Recording and display must never disturb forwarding."""
        try:
            fn(*args)
        except Exception as e:                    # pragma: no cover - reported, not raised
            self.note_once(f"recording failed and was skipped: {type(e).__name__}: {e}")

    def _gave_up(self, text: str) -> None:
        self.metrics.given_up += 1
        self.on_note(text)

    def note_once(self, text: str) -> None:
        if text not in self.notes:
            self.notes.add(text)
            self.on_note(text)

    async def _requests(self, reader, writer, c: _Connection, who: str) -> None:
        """Client to broker: each chunk is written as it comes (requests are never
        rewritten); the framing core finds the requests in it for pairing, display and
        recording."""
        feed, pending, counters = self.feed, c.pending, c.counters
        clock = asyncio.get_running_loop().time
        held = self.held
        side = held.side(f"{who} request")  # no resync: a bad size ends the connection
        try:
            first = True
            while True:
                chunk = await reader.read(READ_SIZE)
                if not chunk:
                    return
                if first and _looks_like_tls(chunk):
                    self.on_note(f"{who}: a TLS handshake on a plaintext listener: the client "
                                 f"speaks TLS (point it at a plaintext listener, or give the "
                                 f"proxy --tls-cert/--tls-key); closing the connection")
                    return
                first = False
                frames = held.feed(side, chunk)
                if side.error:
                    self.on_note(f"{who}: the client sent an {side.error}, which is not "
                                 f"Kafka; closing the connection")
                    return
                writer.write(chunk)
                counters.bytes_to_broker += len(chunk)
                ts = time.time()
                now = clock()
                for f in frames:
                    data = f.data
                    shown = feed is not None and feed.room(len(data))
                    token = c.sasl.client_token(data)
                    if len(data) >= 8 and not token:
                        key, version, corr = _HEAD.unpack_from(data)
                        pending.request(corr, (key, version, shown),
                                        key != PRODUCE or not _acks0(data), now)
                    counters.requests += 1
                    if shown:
                        feed.frame(c.index, 0, ts, f.offset, data)
                    elif feed is not None:
                        counters.dropped += 1
                        feed.unreported += 1
                    if c.recorded is not None:
                        self._safely(self._record, c, 0, data, ts, token)
                await writer.drain()
        except (ConnectionError, OSError):
            return
        finally:
            held.forget(side)

    async def _responses(self, reader, writer, c: _Connection) -> None:
        """Broker to client: whole responses (one that names brokers may be rewritten
        before its first byte goes out); a chunk of whole, unchanged responses is
        written as it came."""
        feed, pending, counters = self.feed, c.pending, c.counters
        clock = asyncio.get_running_loop().time
        held = self.held
        side = held.side(f"{c.client[0]}:{c.client[1]} response", forwarded=False)
        try:
            while True:
                chunk = await reader.read(READ_SIZE)
                if not chunk:
                    return
                whole = not side.framer.pending    # the chunk starts at a message boundary
                frames = held.feed(side, chunk)
                if side.error:
                    self.on_note(f"broker {c.broker[0]}:{c.broker[1]} sent an "
                                 f"{side.error}, which is not Kafka; closing the connection")
                    return
                if not frames:
                    continue
                ts = time.time()
                out: list[bytes] = []
                changed = False
                for f in frames:
                    data = new = f.data
                    match = None
                    token = c.sasl.broker_token()
                    if len(data) >= 4 and not token:
                        match, _ = pending.response(_SIZE.unpack_from(data)[0], clock())
                    if match is not None:
                        p = match.pending
                        key, version, shown = p.item
                        counters.observe(clock() - p.ts)
                        if response_layout(key, version) is not None:
                            new = await self._rewritten(data, key, version, c) or data
                        else:
                            c.sasl.answered(key, version, data)
                    if new is not data:
                        changed = True
                    out.append(_SIZE.pack(len(new)))
                    out.append(new)
                    counters.responses += 1
                    if feed is not None:
                        # the display gets whole exchanges: no answer to a request it missed
                        if match is None or shown:
                            if feed.room(len(data), answer=match is not None):
                                feed.frame(c.index, 1, ts, f.offset, data)
                            else:
                                counters.dropped += 1
                                feed.unreported += 1
                    if c.recorded is not None:      # as the broker sent it
                        self._safely(self._record, c, 1, data, ts, token)
                if whole and not side.framer.pending and not changed:
                    writer.write(chunk)             # no copy: the bytes as they came
                    counters.bytes_to_client += len(chunk)
                else:
                    writer.writelines(out)          # uvloop writes them without joining
                    counters.bytes_to_client += sum(map(len, out))
                await writer.drain()
        except (ConnectionError, OSError):
            return
        finally:
            held.forget(side)

    def _record(self, c: _Connection, side: int, data: bytes, ts: float,
                sasl_raw: bool) -> None:
        if c.recorded is None or self.recorder is None:
            return
        frame = _SIZE.pack(len(data)) + data
        c.recorded.frame(side, frame, ts, sasl_raw)

    async def _rewritten(self, body: bytes, api_key: int, api_version: int,
                         c: _Connection) -> bytes | None:
        """``body`` with every broker address replaced by the proxy's listener for that
        broker (the listeners are made first, so a client can connect at once); None
        when nothing changes."""
        try:
            spans = endpoint_spans(body, api_key, api_version)
        except DecodeError as e:
            self.note_once(f"a response (API {api_key} v{api_version}) does not follow its "
                           f"layout ({e}); forwarded unchanged")
            return None
        if not spans:
            return None
        ports = {}
        try:
            for sp in spans:
                listener = self.listeners.get(sp.node_id)
                if listener is None or not listener.bound.is_set() or \
                        listener.upstreams[0] != self.upstream_map.get((sp.host, sp.port),
                                                                       (sp.host, sp.port)):
                    listener = await self._listener_for(sp)
                ports[sp.node_id] = listener.port
        except OSError as e:
            self.note_once(f"cannot listen for a broker ({e}); a response is forwarded with "
                           f"the broker's own addresses")
            return None
        new = rewrite(body, spans, lambda sp: (c.advertise, ports[sp.node_id]))
        if new is not None:
            c.counters.rewritten += 1
        return new


class _TlsServer:
    """A listening socket whose connections go to ``Proxy._tls_client`` (the proxy
    accepts them itself, to look at the first byte before TLS starts)."""

    def __init__(self, proxy: Proxy, listener: Listener, sock: socket.socket):
        sock.setblocking(False)
        self.sockets = [sock]
        self._task = asyncio.create_task(self._accept(proxy, listener, sock))

    async def _accept(self, proxy: Proxy, listener: Listener, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError:
                return
            conn.setblocking(False)
            task = asyncio.create_task(proxy._tls_client(conn, listener))
            proxy._tasks.add(task)
            task.add_done_callback(proxy._tasks.discard)

    def close(self) -> None:
        self._task.cancel()
        self.sockets[0].close()
