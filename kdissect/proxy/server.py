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
import errno
import itertools
import socket
import ssl
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol.message import peek_request_header, produce_acks
from ..protocol.reader import DecodeError
from ..protocol.apis import FETCH, PRODUCE, SASL
from ..stream.connection import RawSasl
from ..stream.correlation import Correlator
from .buffers import filled_later
from .held import DEFAULT_LIMIT, HeldBytes, Side
from .metrics import Counters, DisplayShared, Metrics
from .notes import Notes
from .rewrite import rewrite, rewrite_same_size
from .peer import Peer, connect, writer as peer_writer
from .skipscan import (
    EndpointSpan,
    TooManyEndpoints,
    endpoint_spans,
    assumed,
    response_layout,
    top_error_code,
)

if TYPE_CHECKING:
    from ..capture.pcapng_writer import RecordedConnection, Recorder
    from .threaded import ThreadForwarder

CONNECT_TIMEOUT = 10
PROBE_TIMEOUT = 5.0  # seconds the start's look at each upstream waits
READ_SIZE = 1 << 18  # bytes taken from a socket at a time
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_WILDCARDS = ("", "0.0.0.0", "::")
# Linux caps it at net.core.somaxconn (4096 by default): asyncio's 100 overflowed when
# 2,000 clients connected at once, and the overflow waited for SYN retries (1 s, 3 s...)
BACKLOG = 4096
# brokers in one answer that get a new listener, and listeners in all: one answer naming
# 100,000 broker ids must not take every file descriptor (real clusters: dozens)
MAX_NEW_LISTENERS = 256
MAX_LISTENERS = 1024
LATE_ANSWERS = 5.0  # seconds answers are awaited after the client left
# Responses larger than this are passed on as they arrive instead of whole (a Fetch
# answer of megabytes held until its last byte doubled its time on the way: consume
# through the proxy was 0.41-0.46 of direct). A Fetch answer that may carry leader
# hints at its end keeps its last STREAM_TAIL bytes until it is whole.
STREAM_TAIL = 64 * 1024
LARGE_FIRST = 4 << 20  # bytes made ready for a large response before they come
_HOLD, _STREAM, _TAIL = 1, 2, 3
HOUSEKEEPING = 1.0  # seconds between flushes of -w, idle sweeps, notes
DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_IDLE_TIMEOUT = 600.0  # the brokers' connections.max.idle.ms (10 minutes)
_SASL_KEYS = SASL
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass
class Listener:
    node_id: int | None  # None: the bootstrap listener
    upstreams: list[tuple[str, int]]  # tried in order (the bootstrap list, or one broker)
    port: int
    server: asyncio.base_events.Server | None = None
    bound: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True)
class _Connection:
    index: int
    client: tuple[str, int]
    broker: tuple[str, int]
    advertise: str  # the host name handed to this client for brokers
    counters: Counters
    recorded: RecordedConnection | None = None
    # requests awaiting answers: (api key, api version, shown by the display)
    # requests as (api key, version, shown on the display)
    pending: Correlator[tuple[int, int, bool]] = field(default_factory=Correlator)
    sasl: RawSasl = field(default_factory=RawSasl)  # SASL tokens without headers
    last: float = 0.0  # (event loop clock) when bytes last passed
    # requests awaiting answers, by correlation id (bytes): what decides how a large
    # response is passed on when its first bytes come
    kinds: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    task: asyncio.Task | None = None
    shut: Callable[[], None] | None = None  # closes it (the thread forwarder's)


class _Large:
    """A large response passed on as it comes, and collected once (for the display, the
    recording and, for a Fetch answer, the leader hints at its end) into buffers made for
    its size: the socket reads its body straight into them (``space``). A buffer holds
    up to LARGE_FIRST bytes and is made only when the one before is full (a size field
    alone never makes the proxy take more); an answer longer than one buffer is joined
    at its end (rare: clients ask for about 1 MB per partition). ``tail``: its last
    STREAM_TAIL bytes wait until it is whole. Buffers are never resized or changed where
    filled, so what is written from them stays valid while the client's socket holds
    it."""

    __slots__ = ("start", "end", "tail", "prefix", "parts", "got", "sent", "first")

    def __init__(self, start: int, size: int, tail: bool, head: bytes, out: list):
        self.start, self.end, self.tail = start, start + 4 + size, tail
        self.prefix = head[:4]
        self.parts = [filled_later(min(size, LARGE_FIRST))]  # (only filled bytes are read)
        self.first = memoryview(self.parts[0])
        self.got = len(head)  # bytes received, the size prefix included
        self.sent = 0  # bytes written, the size prefix included
        self.parts[0][: len(head) - 4] = memoryview(head)[4:]
        self._send(out, memoryview(head))

    @property
    def offset(self) -> int:  # where its body starts in the stream
        return self.start + 4

    @property
    def whole(self) -> bool:
        return self.got == self.end - self.start

    @property
    def body(self) -> bytearray | bytes:
        """All of it after the size (once whole)."""
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)

    def space(self) -> memoryview:
        """Where its next bytes go (up to its end): the rest of the last buffer, or a
        new one when that is full (its bytes have all come)."""
        at = self.got - 4 - (len(self.parts) - 1) * LARGE_FIRST
        if at == len(self.parts[-1]):
            self.parts.append(filled_later(min(self.end - self.start - self.got, LARGE_FIRST)))
            at = 0
        return memoryview(self.parts[-1])[at:]

    def _limit(self) -> int:
        if self.tail:
            return min(self.got, self.end - self.start - STREAM_TAIL)
        return self.got

    def _send(self, out: list, head: memoryview | None = None) -> None:
        """What may go now to ``out``: from ``head`` (its first bytes, as received) or
        from its buffers."""
        limit = self._limit()
        if limit <= self.sent:
            return
        if head is not None:
            out.append(head[self.sent : limit])
            self.sent = limit
            return
        self._from_parts(self.sent, limit, out)
        self.sent = limit

    def _from_parts(self, lo: int, hi: int, out: list) -> None:
        lo, hi = lo - 4, hi - 4  # offsets in its body
        while lo < hi:
            k, at = divmod(lo, LARGE_FIRST)
            n = min(hi - lo, LARGE_FIRST - at)
            out.append(memoryview(self.parts[k])[at : at + n])
            lo += n

    def more(self, n: int) -> memoryview | None:
        """``filled`` for an answer of one buffer (the usual case, and cheaper): ``n``
        more bytes of it were read into ``space()``; what may go now (None: nothing)."""
        self.got += n
        limit = self._limit()
        sent = self.sent
        if limit <= sent:
            return None
        self.sent = limit
        return self.first[sent - 4 : limit - 4]

    def filled(self, n: int, out: list) -> None:
        """``n`` more bytes of it were read into ``space()``; what may go to ``out``."""
        self.got += n
        self._send(out)

    def add(self, chunk: bytes, n: int, out: list) -> None:
        """The next ``n`` bytes of it, the first of ``chunk`` (received in the common
        buffer); what may go to ``out``."""
        piece = memoryview(chunk)[:n]
        while piece:
            into = self.space()
            k = min(len(into), len(piece))
            into[:k] = piece[:k]
            self.got += k
            piece = piece[k:]
        self._send(out)

    def rest(self, out: list) -> None:
        """It is whole: what is left of it to ``out``."""
        self._from_parts(self.sent, self.got, out)
        self.sent = self.got

    def received(self) -> bytes:
        """Its bytes so far, size prefix included (for the recording when the broker
        ended inside it): only what was filled, never a buffer's unwritten rest."""
        out: list = [self.prefix]
        self._from_parts(4, self.got, out)
        return b"".join(out)


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

    def __init__(
        self,
        upstreams: list[tuple[str, int]],
        host: str = "127.0.0.1",
        port: int = 9092,
        advertise: str | None = None,
        broker_port: Callable[[int], int] | None = None,
        feed=None,
        on_note: Callable[[str], None] = lambda text: None,
        server_ssl=None,
        upstream_ssl=None,
        recorder: Recorder | None = None,
        upstream_map: dict[tuple[str, int], tuple[str, int]] | None = None,
        max_memory: int = DEFAULT_LIMIT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        display: DisplayShared | None = None,
        forwarder: str = "event-loop",
        budget: int = 64 << 20,
    ):
        self.upstreams, self.host, self.port = upstreams, host, port
        self.advertise = advertise
        self.broker_port = broker_port
        self.feed, self.on_note = feed, on_note
        self.server_ssl, self.upstream_ssl = server_ssl, upstream_ssl  # ssl.SSLContext
        self.recorder = recorder
        # advertised broker address -> the address the proxy really connects to
        self.upstream_map = upstream_map or {}
        self.listeners: dict[int | None, Listener] = {}
        self.metrics = Metrics(display)
        # partial messages of all connections together (forwarded regardless)
        self.held = HeldBytes(max_memory, self._gave_up)
        self.notes: set[str] = set()
        self.repeated = Notes(on_note)  # notes a client can repeat: once, then counted
        self.max_connections, self.idle_timeout = max_connections, idle_timeout
        self.active = 0  # client connections admitted and not ended
        self.live: dict[int, _Connection] = {}
        self.saw_sasl = False  # a client authenticated with SASL here
        self._index = itertools.count(1)
        self._scratch = bytearray(READ_SIZE)  # every socket reads here first (peer.py)
        self._tasks: set[asyncio.Task] = set()
        self._housekeeping: asyncio.Task | None = None
        # "threads": each connection forwarded by two threads of the compiled extension
        # (threaded.py; plaintext only); ``budget``: the bytes their queue holds
        self.forwarder, self.budget = forwarder, budget
        self.threads: ThreadForwarder | None = None

    # -- listeners ----------------------------------------------------------------------

    async def start(self) -> None:
        if self.forwarder == "threads":
            if self.server_ssl is not None or self.upstream_ssl is not None:
                raise ValueError(
                    "--forwarder threads forwards plaintext only: use --forwarder "
                    "event-loop with TLS"
                )
            from .threaded import ThreadForwarder

            self.threads = ThreadForwarder(self, self.budget, STREAM_TAIL, LATE_ANSWERS)
        bootstrap = Listener(None, list(self.upstreams), self.port)
        bootstrap.server = await self._serve(bootstrap, self.port)
        bootstrap.port = bootstrap.server.sockets[0].getsockname()[1]
        bootstrap.bound.set()
        self.listeners[None] = bootstrap
        self._housekeeping = asyncio.create_task(self._keep_house())

    async def _keep_house(self) -> None:
        """Every second: the recording flushed (a crash loses at most the last second),
        idle connections closed, repeated notes summed up."""
        clock = asyncio.get_running_loop().time
        while True:
            await asyncio.sleep(HOUSEKEEPING)
            if self.recorder is not None:
                self._safely(self.recorder.flush)
            if self.idle_timeout:
                now = clock()
                for c in list(self.live.values()):
                    # (the threads say when bytes last came, though a message is whole
                    # only at its end)
                    idle = now - c.last
                    if self.threads is not None and c.shut is not None:
                        idle = min(idle, self.threads.idle(c) or 0.0)
                    if (
                        idle > self.idle_timeout
                        and not len(c.pending)
                        and (c.task is not None or c.shut is not None)
                    ):
                        self.metrics.idle_closed += 1
                        self.repeated(
                            "idle connections closed",
                            f"{c.client[0]}:"
                            f"{c.client[1]}: no traffic for {self.idle_timeout:g} s"
                            f" (--idle-timeout): connection closed",
                        )
                        if c.task is not None:
                            c.task.cancel()
                        elif c.shut is not None:
                            c.shut()
                            # ended now, not when its threads say so: a client may
                            # connect again at once (--max-connections counts it)
                            self._ended(c)
            self.repeated.tick()

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
            await current.bound.wait()  # made by another response just now
            return current
        wanted = self.broker_port(sp.node_id) if self.broker_port else 0
        if not 0 <= wanted <= 65535:  # never wrapped (50000 + 19100 is not 3564)
            self.on_note(
                f"broker {sp.node_id}: --broker-ports would give it port {wanted}, "
                f"which is not a TCP port (0-65535); it gets a free port instead"
            )
            wanted = 0
        listener = Listener(sp.node_id, [upstream], wanted)
        self.listeners[sp.node_id] = listener  # before awaiting: one listener per id
        try:
            listener.server = await self._serve(listener, wanted)
        except OSError:
            del self.listeners[sp.node_id]
            raise
        listener.port = listener.server.sockets[0].getsockname()[1]
        listener.bound.set()
        via = f" at {upstream[0]}:{upstream[1]}" if upstream != (sp.host, sp.port) else ""
        self.on_note(
            f"broker {sp.node_id} ({sp.host}:{sp.port}{via}) is reached through "
            f"port {listener.port}"
        )
        return listener

    async def close(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        self.repeated.tick(final=True)
        for listener in self.listeners.values():
            if listener.server is not None:
                listener.server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.threads is not None:
            await self.threads.close()

    # -- one client connection ------------------------------------------------------------

    def _streams(self, host: str, port: int):
        """Connect to a broker (the event-loop forwarder's streams)."""
        return connect(
            host,
            port,
            self._scratch,
            READ_SIZE,
            ssl=self.upstream_ssl,
            # SNI even with --insecure: brokers behind SNI routing need it
            server_hostname=host if self.upstream_ssl else None,
        )

    async def _connect(self, listener: Listener, who: str, dial=None):
        """The first reachable of the listener's upstreams, connected by ``dial(host,
        port)`` (default: ``_streams``), or None. The bootstrap list then starts with
        the one that answered."""
        failures = []
        # a copy: another connection that reaches a later upstream reorders the list
        # while this one awaits, and iterating the list itself then skipped the live one
        for host, port in list(listener.upstreams):
            try:
                streams = await asyncio.wait_for(
                    (dial or self._streams)(host, port), CONNECT_TIMEOUT
                )
            except (OSError, asyncio.TimeoutError) as e:
                failures.append(f"{host}:{port} ({e or type(e).__name__})")
                continue
            if failures and (host, port) in listener.upstreams:
                listener.upstreams.remove((host, port))
                listener.upstreams.insert(0, (host, port))
            return streams
        self.repeated(
            f"cannot reach broker {listener.upstreams[0][0]}:{listener.upstreams[0][1]}",
            f"{who}: cannot reach broker {', '.join(failures)}; closing the "
            f"client's connection so it retries",
        )
        return None

    async def unreachable(self) -> str | None:
        """Why no --upstream broker answers a TCP connect (each tried at once), or None
        when one does: told at start, not first when a client connects and is closed."""

        async def reach(host: str, port: int) -> str | None:
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), PROBE_TIMEOUT
                )
            except (OSError, asyncio.TimeoutError) as e:
                return f"{host}:{port} ({getattr(e, 'strerror', None) or e or 'timed out'})"
            writer.close()
            return None

        failures = await asyncio.gather(*(reach(h, p) for h, p in self.upstreams))
        if not all(failures):
            return None
        return (
            f"no --upstream broker answers: {', '.join(f for f in failures if f)}; "
            f"clients are closed (so that they retry) until one does"
        )

    def admit(self, who: str) -> bool:
        """Whether one more client connection may open (--max-connections); a refused
        one is closed at once, so its client retries instead of waiting."""
        if self.active >= self.max_connections:
            self.metrics.refused += 1
            self.repeated(
                "connections refused",
                f"{who}: {self.active} client connections "
                f"are open (--max-connections {self.max_connections}): closing "
                f"new ones at once until some end",
            )
            return False
        self.active += 1
        return True

    async def _client(
        self,
        reader: Peer,
        writer: asyncio.StreamWriter,
        listener: Listener,
        admitted: bool = False,
    ) -> None:
        task = asyncio.current_task()
        assert task is not None, "a connection is served in its own task"
        client = writer.get_extra_info("peername")[:2]
        who = f"{client[0]}:{client[1]}"
        if not admitted and not self.admit(who):
            writer.close()
            return
        self._tasks.add(task)
        upstream_w: asyncio.StreamWriter | None = None
        c: _Connection | None = None
        try:
            up = await self._connect(listener, who)
            if up is None:
                return
            up_reader, upstream_w = up
            c = self._opened(
                client,
                upstream_w.get_extra_info("peername")[:2],
                writer.get_extra_info("sockname")[0],
            )
            c.task = task
            ups = asyncio.create_task(self._requests(reader, upstream_w, c, who))
            down = asyncio.create_task(self._responses(up_reader, writer, c))
            try:
                await asyncio.wait({ups, down}, return_when=asyncio.FIRST_COMPLETED)
                if ups.done() and not down.done() and len(c.pending):
                    # the client left with requests in flight: their answers are still
                    # read (and recorded) for a while
                    await asyncio.wait({down}, timeout=LATE_ANSWERS)
            finally:  # one side ended: end the other cleanly
                for t in (ups, down):
                    t.cancel()
                ended = await asyncio.gather(ups, down, return_exceptions=True)
            for e in ended:  # a bug in either side: said (below), not swallowed
                if isinstance(e, Exception):
                    raise e
        except asyncio.CancelledError:
            # the proxy is closing: end normally, or asyncio's stream callback reports the
            # cancellation as an error with a traceback
            pass
        except Exception as e:  # a bug: this connection ends, no other
            # one kind per exception type: a bug met by every connection is counted, a
            # different one is still told (with its traceback, once)
            self.repeated(
                f"connections ended on an internal error ({type(e).__name__})",
                f"{who}: the connection ended on an internal error "
                f"({type(e).__name__}: {e}); please report it\n"
                + "".join(traceback.format_exception(e)).rstrip(),
            )
        finally:
            self._ended(c)
            for w in (writer, upstream_w):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    def _opened(self, client: tuple[str, int], broker: tuple[str, int], local: str) -> _Connection:
        """A client connection forwarded to ``broker``, counted, recorded and shown
        from now on; ``local``: the address the client connected to."""
        index = next(self._index)
        advertise = self.advertise or self.host
        if advertise in _WILDCARDS:  # never hand out 0.0.0.0: the address this client used
            advertise = local.removeprefix("::ffff:")
        c = _Connection(index, client, broker, advertise, self.metrics.open(index, client, broker))
        c.last = asyncio.get_running_loop().time()
        self.live[index] = c
        if self.recorder is not None:
            c.recorded = self.recorder.connection(client, broker)
        if self.feed is not None:
            self.feed.open(index, client, broker)
        return c

    def _ended(self, c: _Connection | None) -> None:
        """An admitted client connection ended (``c``: None if it never reached a
        broker)."""
        if c is not None and c.index not in self.live:
            return  # (ended already: closed for being idle)
        self.active -= 1
        if c is None:
            return
        self.live.pop(c.index, None)
        self.metrics.close(c.index)
        if self.feed is not None:
            self.feed.close(c.index)
        if c.recorded is not None:
            self._safely(c.recorded.close)

    async def _serve(self, listener: Listener, port: int):
        """Listen for ``listener`` on ``port`` (0: a free one)."""
        if self.server_ssl is None and self.threads is None:
            loop = asyncio.get_running_loop()

            def made(peer: Peer, transport) -> None:
                task = loop.create_task(self._client(peer, peer_writer(peer, transport), listener))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

            return await loop.create_server(
                lambda: Peer(self._scratch, READ_SIZE, made), self.host, port, backlog=BACKLOG
            )
        sock = socket.create_server((self.host, port), backlog=BACKLOG)
        if self.server_ssl is not None:
            return _Acceptor(self, listener, sock, self._tls_client)
        assert self.threads is not None, "a plaintext listener of the thread forwarder"
        return _Acceptor(self, listener, sock, self.threads.client)

    async def _tls_client(self, sock: socket.socket, listener: Listener) -> None:
        """On a TLS listener: peek at the client's first byte before any event loop reads
        it. A TLS handshake goes on (TLS from here); anything else is a plaintext client,
        told so and closed (asyncio's own TLS listeners drop such clients silently)."""
        loop = asyncio.get_running_loop()
        try:
            client = sock.getpeername()[:2]
        except OSError:  # reset as soon as it connected (ENOTCONN)
            self.active -= 1
            sock.close()
            return
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
            self.active -= 1
            sock.close()
            return
        finally:
            loop.remove_reader(sock.fileno())
        if not first:  # it left without a word
            self.active -= 1
            sock.close()
            return
        if first != b"\x16":
            self.active -= 1
            # SASL_SSL when clients here authenticate (a SASL_PLAINTEXT client told
            # "SSL" would fail again, differently)
            protocol_hint = (
                "SASL_SSL" if self.saw_sasl else "SSL, or SASL_SSL if it authenticates with SASL"
            )
            self.repeated(
                f"plaintext clients on a TLS listener ({protocol_hint})",
                f"{who}: a plaintext client on a TLS listener (its first byte is "
                f"{first.hex() or 'nothing'}): configure it for TLS "
                f"(security.protocol={protocol_hint}) or run the proxy without "
                f"--tls-cert; closing the connection",
            )
            sock.close()
            return
        protocol = Peer(self._scratch, READ_SIZE)
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, sock, ssl=self.server_ssl, ssl_handshake_timeout=60
            )
        except (ssl.SSLError, OSError, asyncio.TimeoutError) as e:
            self.active -= 1
            self.repeated(
                "TLS handshakes failed",
                f"{who}: the TLS handshake failed ({e}); closing the connection",
            )
            sock.close()
            return
        await self._client(protocol, peer_writer(protocol, transport), listener, admitted=True)

    def _safely(self, fn, *args) -> None:
        """Recording and display must never disturb forwarding."""
        try:
            fn(*args)
        except Exception as e:  # pragma: no cover - reported, not raised
            self.note_once(f"recording failed and was skipped: {type(e).__name__}: {e}")

    def _gave_up(self, text: str) -> None:
        self.metrics.given_up += 1
        self.on_note(text)

    def note_once(self, text: str) -> None:
        if text not in self.notes:
            self.notes.add(text)
            self.on_note(text)

    async def _requests(self, reader: Peer, writer, c: _Connection, who: str) -> None:
        """Client to broker: each chunk is written as it comes (requests are never
        rewritten); the framing core finds the requests in it for pairing, display and
        recording."""
        counters = c.counters
        clock = asyncio.get_running_loop().time
        held = self.held
        side = held.side(f"{who} request")  # no resync: a bad size ends the connection
        try:
            first = True
            while True:
                _, chunk = await reader.read()  # (nothing is given to read into)
                if not chunk:
                    return
                if first and _looks_like_tls(chunk):
                    self.on_note(
                        f"{who}: a TLS handshake on a plaintext listener: the client "
                        f"speaks TLS (point it at a plaintext listener, or give the "
                        f"proxy --tls-cert/--tls-key); closing the connection"
                    )
                    return
                first = False
                frames = held.feed(side, chunk)
                if side.error:
                    # the whole requests before the bad size pass (as the threads pass
                    # them); the bytes from it on do not
                    end = frames[-1].offset + len(frames[-1].data) if frames else 0
                    upto = end - (side.pos - len(chunk))
                    if upto > 0:
                        writer.write(chunk[:upto])
                        counters.bytes_to_broker += upto
                        ts, now = time.time(), time.perf_counter()
                        for f in frames:
                            self.request_seen(c, f.data, f.offset, ts, now)
                    self.on_note(
                        f"{who}: the client sent an {side.error}, which is not "
                        f"Kafka; closing the connection"
                    )
                    return
                writer.write(chunk)
                counters.bytes_to_broker += len(chunk)
                ts = time.time()
                c.last = clock()
                # latencies by perf_counter: the loop's clock (uvloop's) counts whole ms
                now = time.perf_counter()
                for f in frames:
                    self.request_seen(c, f.data, f.offset, ts, now)
                await writer.drain()
        except (ConnectionError, OSError):
            return
        finally:
            # forwarded, never framed: a request cut by the client's end, bytes that
            # are not Kafka (the recording holds every byte the broker was sent)
            self._record_rest(c, 0, side)
            held.forget(side)

    def request_seen(
        self, c: _Connection, data: bytes, offset: int, ts: float, now: float, size: int = -1
    ) -> None:
        """A request passed (``data``: after its size prefix; its first bytes only when
        its ``size`` is more): paired, counted, shown and recorded. ``ts``: wall clock;
        ``now``: ``time.perf_counter``'s."""
        feed = self.feed
        whole = size < 0 or size == len(data)
        shown = whole and feed is not None and feed.room(len(data))
        token = c.sasl.client_token(data)
        if len(data) >= 8 and not token:
            key, version, corr = _HEAD.unpack_from(data)
            answered = key != PRODUCE or not _acks0(data)
            c.pending.request(corr, (key, version, shown), answered, now)
            if answered:
                if len(c.kinds) > 4096:  # answers that never came
                    c.kinds.clear()
                # (bytes: a view's slice would keep the whole request alive with it)
                c.kinds[bytes(data[4:8])] = (key, version)
            self.metrics.api(key).requests += 1
            if key in _SASL_KEYS:
                self.saw_sasl = True
        c.counters.requests += 1
        if shown:
            feed.frame(c.index, 0, ts, offset, data)
        elif feed is not None:
            c.counters.dropped += 1
            feed.shed()
            self.metrics.shed()
        if c.recorded is not None:
            self._record_seen(c, 0, data, ts, token, whole, offset, size)

    def response_seen(
        self, c: _Connection, data: bytes, offset: int, ts: float, now: float, size: int = -1
    ) -> tuple[int, int] | None:
        """An answer came (``data`` as the broker sent it): paired, counted, shown and
        recorded. Its request's (api key, version), None when unpaired."""
        feed, counters = self.feed, c.counters
        match = None
        kind = None
        token = c.sasl.broker_token()
        if len(data) >= 4 and not token:
            match, _ = c.pending.response(_SIZE.unpack_from(data)[0], now)
        shown = False
        if match is not None:
            p = match.pending
            key, version, shown = p.item
            kind = key, version
            c.kinds.pop(bytes(data[:4]), None)
            a = self.metrics.api(key)
            a.responses += 1
            a.observe(now - p.ts)
            code = top_error_code(data, key, version)
            if code:
                a.error(code)
            if response_layout(key, version) is None:
                c.sasl.answered(key, version, data)
        counters.responses += 1
        whole = size < 0 or size == len(data)
        if feed is not None:
            # the display gets whole exchanges: no answer to a request it missed
            if match is None or shown:
                if whole and feed.room(len(data), answer=match is not None):
                    feed.frame(c.index, 1, ts, offset, data)
                elif match is None or not feed.cut(c.index, 1, ts, offset, data, size):
                    # (cut: the exchange shown, its answer said not shown)
                    counters.dropped += 1
                    feed.shed()
                    self.metrics.shed()
        if c.recorded is not None:  # as the broker sent it
            self._record_seen(c, 1, data, ts, token, whole, offset, size)
        return kind

    def _record_seen(
        self,
        c: _Connection,
        side: int,
        data: bytes,
        ts: float,
        token: bool,
        whole: bool,
        offset: int,
        size: int,
    ) -> None:
        if whole:
            self._safely(self._record, c, side, data, ts, token)
            return
        # (the thread forwarder collects whole messages up to --max-memory in all)
        self._gave_up(
            f"{c.client[0]}:{c.client[1]} {('request', 'response')[side]}: a message of "
            f"{size:,} bytes at stream offset {offset - 4:,} is not recorded: messages "
            f"being collected reached --max-memory {self.held.limit:,} bytes; it is "
            f"forwarded unchanged all the same"
        )

    def _record_rest(self, c: _Connection, direction: int, side: Side) -> None:
        # (not after bytes that are not Kafka: the chunk holding them was not forwarded)
        if c.recorded is not None and not side.error:
            self.partial_seen(c, direction, side.framer.held(), time.time())

    def partial_seen(self, c: _Connection, direction: int, rest: bytes, ts: float) -> None:
        """A message the connection's end cut (its bytes, size included): recorded."""
        if rest and c.recorded is not None:
            raw = c.sasl.active if direction == 0 else bool(c.sasl.awaiting)
            self._safely(c.recorded.partial, direction, rest, ts, raw)

    async def rewrite_for(
        self, index: int, api_key: int, api_version: int, body: bytes, sent: int
    ) -> bytes | None:
        """For the thread forwarder: connection ``index``'s answer with its broker
        addresses rewritten (``body`` itself when nothing changes), keeping its size when
        ``sent`` >= 0 of its bytes are passed on already; None: the connection closes."""
        c = self.live.get(index)
        if c is None:
            return None
        return await self._answer_rewritten(c, body, api_key, api_version, sent)

    async def _answer_rewritten(
        self, c: _Connection, body: bytes, api_key: int, api_version: int, sent: int
    ) -> bytes | None:
        """``body`` with its broker addresses rewritten (itself when nothing changes),
        keeping its size when ``sent`` >= 0 of its bytes are passed on already; None: it
        cannot be, and the connection closes (said)."""
        if sent < 0:
            new = await self._rewritten(body, api_key, api_version, c) or body
        else:
            same = await self._rewritten_same_size(body, api_key, api_version, c, sent)
            if same is None:
                return None
            new = same
        if new is not body:
            self.metrics.api(api_key).rewritten += 1
        return new

    async def _responses(self, reader: Peer, writer, c: _Connection) -> None:
        """Broker to client, in order. A response that names brokers may be rewritten,
        so it goes out whole (they are small); a chunk of whole, unchanged responses is
        written as it came; a large response that cannot name brokers is passed on as
        its bytes come, and a large Fetch answer (whose leader hints come last) as its
        bytes come but its last STREAM_TAIL bytes, changed only in ways that keep its
        size (``rewrite_same_size``). A large response is copied once, into a buffer of
        its size (``_Large``), and written from there: no growing, joining or slicing
        of megabytes per chunk (which made the forwarder the Java consumer's ceiling)."""
        pending, counters = c.pending, c.counters
        clock = asyncio.get_running_loop().time
        held = self.held
        side = held.side(f"{c.client[0]}:{c.client[1]} response", forwarded=False)
        gone = False  # the client left: answers are recorded only
        large: _Large | None = None  # the large response being passed on
        early = b""  # the first bytes (< 8) of an undecided one
        early_at = hold_at = -1  # where it starts; where one kept whole starts
        transport = writer.transport

        def pass_on(n: int) -> bool:
            """``n`` more bytes of ``large`` came: passed on at once, from the event
            loop's callback, when nothing waits to be written and they are not its last
            (a chunk of a large answer then costs no wake-up of this task: consume
            through the proxy spent a fifth of its forwarding there)."""
            big = large
            if (
                big is None
                or gone
                or big.got + n >= big.end - big.start
                or transport.get_write_buffer_size()
                or transport.is_closing()
            ):
                return False
            c.last = clock()
            held.passed(side, n)
            if len(big.parts) == 1:
                piece = big.more(n)
                if piece is not None:
                    transport.write(piece)
                    counters.bytes_to_client += len(piece)
                return True
            out: list = []
            big.filled(n, out)
            if out:
                transport.writelines(out)
                counters.bytes_to_client += sum(map(len, out))
            return True

        reader.on_into = pass_on
        try:
            while True:
                if gone and not len(pending):
                    return
                if large is not None and reader.idle:
                    reader.give(large.space())  # its next bytes read straight in
                direct, chunk = await reader.read()
                if not direct and not chunk:
                    return
                c.last = clock()
                out: list = []
                done: list = []  # a large response ended in this chunk
                if direct:  # (the bytes of `large` that came straight into it)
                    assert large is not None, "bytes are read into a large answer only"
                    held.passed(side, direct)
                    large.filled(direct, out)
                    if large.whole:
                        done.append(large)
                        large = None
                chunk_start = side.pos
                whole = not direct and not side.framer.pending and large is None
                if large is not None and chunk:
                    n = min(len(chunk), large.end - chunk_start)
                    large.add(chunk, n, out)
                    if large.whole:
                        done.append(large)
                        large = None
                frames = held.feed(side, chunk) if chunk else []
                ts = time.time()
                changed = False
                for f in done + frames:
                    big = f if isinstance(f, _Large) else None
                    data = new = f.body if big is not None else f.data
                    kind = self.response_seen(c, data, (big or f).offset, ts, time.perf_counter())
                    if kind is not None and response_layout(*kind) is not None:
                        sent = big.sent - 4 if big is not None else -1
                        rewritten = await self._answer_rewritten(c, data, *kind, sent)
                        if rewritten is None:
                            return  # (said why) the client reconnects
                        new = rewritten
                    if new is not data:
                        changed = True
                    if big is not None:  # the rest of it (size unchanged)
                        if new is data:
                            big.rest(out)
                        else:
                            out.append(memoryview(new)[big.sent - 4 :])
                    else:
                        out.append(_SIZE.pack(len(new)))
                        out.append(new)
                if side.error:
                    # the whole answers before the bad size pass (as the threads pass
                    # them); the bytes from it on do not
                    if out and not gone and not writer.transport.is_closing():
                        writer.writelines(out)
                        counters.bytes_to_client += sum(map(len, out))
                        try:
                            await writer.drain()
                        except (ConnectionError, OSError):
                            pass  # (the client left: the note below still says why)
                    self.on_note(
                        f"broker {c.broker[0]}:{c.broker[1]} sent an "
                        f"{side.error}, which is not Kafka; closing the connection"
                    )
                    return
                framer = side.framer
                if chunk and framer.pending and framer.base != hold_at:  # not whole yet
                    base = framer.base
                    if base >= chunk_start:  # it began in this chunk
                        head = chunk[base - chunk_start :]
                    elif base == early_at:
                        head = early + chunk
                    else:  # (cannot happen) kept whole
                        head, hold_at = b"", base
                    if len(head) < 8:
                        early, early_at = head, base
                    elif head:
                        early, early_at = b"", -1
                        size = _SIZE.unpack_from(head)[0]
                        mode = self._passing(c, size, head[4:8])
                        if mode == _HOLD:
                            hold_at = base
                        else:  # the proxy collects it from here
                            held.take(side, base + 4 + size)
                            large = _Large(base, size, mode == _TAIL, head, out)
                if not out or gone:
                    continue
                if writer.transport.is_closing():
                    gone = True
                    continue
                if whole and not large and not side.framer.pending and not changed:
                    writer.write(chunk)  # no copy: the bytes as they came
                    counters.bytes_to_client += len(chunk)
                else:
                    writer.writelines(out)  # uvloop writes them without joining
                    counters.bytes_to_client += sum(map(len, out))
                try:
                    await writer.drain()
                except (ConnectionError, OSError):
                    gone = True
        except (ConnectionError, OSError):
            return
        finally:
            reader.on_into = None
            # an answer begun when the broker ended: a large one's bytes are its own
            # (the framer skipped them), any other's the framer holds
            if large is not None and c.recorded is not None:
                self.partial_seen(c, 1, large.received(), time.time())
            else:
                self._record_rest(c, 1, side)
            held.forget(side)

    @staticmethod
    def _passing(c: _Connection, size: int, correlation: bytes) -> int:
        """How a response of ``size`` bytes answering ``correlation`` is passed on:
        whole (small, or it may need rewriting, or unknown), as it comes (it cannot name
        brokers), or as it comes but its tail (a Fetch answer: leader hints last)."""
        kind = c.kinds.get(correlation)
        if size <= STREAM_TAIL or kind is None or c.sasl.awaiting:
            return _HOLD
        if response_layout(*kind) is None:
            return _STREAM
        return _TAIL if kind[0] == FETCH else _HOLD

    def _record(self, c: _Connection, side: int, data: bytes, ts: float, sasl_raw: bool) -> None:
        if c.recorded is None or self.recorder is None:
            return
        frame = _SIZE.pack(len(data)) + data
        c.recorded.frame(side, frame, ts, sasl_raw)

    async def _rewritten(
        self, body: bytes, api_key: int, api_version: int, c: _Connection
    ) -> bytes | None:
        """``body`` with every broker address replaced by the proxy's listener for that
        broker (the listeners are made first, so a client can connect at once); None
        when nothing changes."""
        found = await self._ports(body, api_key, api_version)
        if found is None:
            return None
        spans, ports = found
        new = rewrite(body, spans, lambda sp: (c.advertise, ports[sp.node_id]))
        if new is not None:
            c.counters.rewritten += 1
        return new

    async def _rewritten_same_size(
        self, body: bytes, api_key: int, api_version: int, c: _Connection, sent: int
    ) -> bytes | None:
        """``body`` (a response whose first ``sent`` bytes are written already) with
        its broker addresses rewritten without changing its size (or its leader hints
        hidden: ``rewrite_same_size``); None when that cannot be done: the connection is
        then closed (the client reconnects) rather than a broker's own address passed."""
        found = await self._ports(body, api_key, api_version)
        if found is None:
            return body
        spans, ports = found
        done = rewrite_same_size(body, spans, lambda sp: (c.advertise, ports[sp.node_id]))
        if done is None or done[1] < sent:
            self.repeated(
                "a streamed answer could not be rewritten",
                f"{c.client[0]}:{c.client[1]}: a large answer (API {api_key} "
                f"v{api_version}) names brokers where the proxy could no longer "
                f"rewrite them; closing the connection (the client reconnects)",
            )
            return None
        if done[0] is not body:
            c.counters.rewritten += 1
        return done[0]

    async def _ports(
        self, body: bytes, api_key: int, api_version: int
    ) -> tuple[list[EndpointSpan], dict[int, int]] | None:
        """The endpoints in ``body`` to rewrite and the proxy's port for each broker
        (listeners made as needed); None when there is nothing to rewrite."""
        try:
            spans = endpoint_spans(body, api_key, api_version)
        except TooManyEndpoints as e:
            self.metrics.listeners_refused += 1
            self.repeated(
                "answers naming too many brokers",
                (
                    f"an answer (API {api_key} v{api_version}) names {e}: forwarded with the "
                    f"brokers' own addresses (clients reaching them bypass the proxy)"
                ),
            )
            return None
        except DecodeError as e:
            self.repeated(
                f"responses not following their layout (API {api_key})",
                f"a response (API {api_key} v{api_version}) does not follow its "
                f"layout ({e}); forwarded unchanged",
            )
            return None
        read_as = assumed(api_key, api_version)
        if read_as is not None and spans:
            self.repeated(
                f"answers read with an assumed layout (API {api_key} v{api_version})",
                f"API {api_key} v{api_version} is newer than kdissect's tables: its "
                f"answers' broker addresses are read with v{read_as}'s layout (each "
                f"answer checked to fit it to its last byte, else forwarded unchanged)",
            )
        # only what names a real broker: error answers (FindCoordinator's "no
        # coordinator": node -1, host "", port -1) pass as the broker sent them
        spans = [sp for sp in spans if sp.node_id >= 0 and sp.host]
        if not spans:
            return None
        latest: dict[int, EndpointSpan] = {}  # one look per broker, not per entry
        for sp in spans:
            latest[sp.node_id] = sp
        ports: dict[int, int] = {}
        new_ids = 0
        refused = []
        for node_id, sp in latest.items():
            listener = self.listeners.get(node_id)
            if (
                listener is not None
                and listener.bound.is_set()
                and listener.upstreams[0]
                == self.upstream_map.get((sp.host, sp.port), (sp.host, sp.port))
            ):
                ports[node_id] = listener.port
                continue
            if listener is None:
                if new_ids >= MAX_NEW_LISTENERS or len(self.listeners) > MAX_LISTENERS:
                    refused.append(node_id)
                    continue
                new_ids += 1
            try:
                ports[node_id] = (await self._listener_for(sp)).port
            except (OSError, OverflowError) as e:
                refused.append(node_id)
                self.repeated(
                    "cannot listen for a broker",
                    f"cannot listen for broker "
                    f"{node_id} ({getattr(e, 'strerror', None) or e}): answers "
                    f"name it with its own address (clients reach it directly)",
                )
        if refused:
            self.metrics.listeners_refused += len(refused)
            self.repeated(
                "brokers beyond the listener caps",
                (
                    f"an answer (API {api_key} v{api_version}) names {len(latest):,} brokers; "
                    f"{len(refused):,} got no listener of the proxy (at most "
                    f"{MAX_NEW_LISTENERS} new ones per answer, {MAX_LISTENERS} in all) and are "
                    f"passed with their own addresses: clients reaching them bypass the proxy"
                ),
            )
        if not ports:
            return None
        return [sp for sp in spans if sp.node_id in ports], ports


class _Acceptor:
    """A listening socket whose connections the proxy accepts itself and hands to
    ``handle(socket, listener)``: on a TLS listener to look at the first byte before TLS
    starts (``Proxy._tls_client``), for the thread forwarder to give the socket to its
    threads."""

    def __init__(self, proxy: Proxy, listener: Listener, sock: socket.socket, handle):
        sock.setblocking(False)
        self.sockets = [sock]
        self._task = asyncio.create_task(self._accept(proxy, listener, sock, handle))

    async def _accept(self, proxy: Proxy, listener: Listener, sock: socket.socket, handle) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except (ConnectionAbortedError, InterruptedError):
                continue  # that client gave up: the next one
            except OSError as e:
                if sock.fileno() < 0:  # closed: the proxy is stopping
                    return
                # out of file descriptors (EMFILE) or memory: the listener stays, and
                # takes the clients waiting in its backlog once connections end
                what = "out of file descriptors" if e.errno in _OUT_OF_FDS else e.strerror
                proxy.repeated(
                    "accept failed",
                    f"cannot accept a client on port "
                    f"{sock.getsockname()[1]} ({what}): the listener retries "
                    f"every 0.1 s",
                )
                await asyncio.sleep(0.1)
                continue
            if not proxy.admit(f"{peer[0]}:{peer[1]}"):
                conn.close()
                continue
            conn.setblocking(False)
            task = asyncio.create_task(handle(conn, listener))
            proxy._tasks.add(task)
            task.add_done_callback(proxy._tasks.discard)

    def close(self) -> None:
        self._task.cancel()
        self.sockets[0].close()
