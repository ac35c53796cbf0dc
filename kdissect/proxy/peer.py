"""One socket of the proxy (to a client or to a broker): its bytes read into buffers the
forwarder chooses (``asyncio.BufferedProtocol``).

With asyncio's streams each chunk was copied three times before the forwarder saw it
(the event loop's bytes, the reader's buffer, the bytes handed out), and a large answer
once more into its own buffer. Here the body of a large answer is read by the socket
straight into that buffer (``give``); every other byte is read into the proxy's one
scratch buffer and copied out at once (one copy; no buffer per connection, so 2,000 idle
connections hold nothing). The order of the stream is kept: ``give`` only while nothing
waits unread, and what is given ends where the answer does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Peer(asyncio.BufferedProtocol):
    """Reads: ``await read()``; writes: through ``asyncio.StreamWriter(transport, self,
    None, loop)`` (``drain`` waits while the socket is full). ``scratch``: shared by the
    proxy's sockets (each read is copied out before another socket reads); reading pauses
    while ``limit`` bytes wait unread. Not an ``asyncio.Protocol`` too (as asyncio's
    ``FlowControlMixin`` is): uvloop then calls ``data_received`` instead of
    ``get_buffer``."""

    def __init__(
        self,
        scratch: bytearray,
        limit: int,
        on_made: Callable[[Peer, asyncio.Transport], None] | None = None,
    ) -> None:
        self.transport: asyncio.Transport | None = None
        self._scratch, self._limit, self._on_made = memoryview(scratch), limit, on_made
        self._chunks: list[bytes] = []  # received, not handed out yet
        self._waiting = 0  # their bytes
        # where the next bytes go instead (the rest of a large answer's buffer), how far
        # it is filled, and how many of those bytes were not handed out yet
        self.into: memoryview | None = None
        self._into_at = 0
        self._into_new = 0
        # called with each count of bytes read into ``into`` (not filling it): True when
        # it passed them on itself, so the reading task need not wake for them
        self.on_into: Callable[[int], bool] | None = None
        self._eof = False
        self._error: BaseException | None = None
        self._paused_reading = False
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None  # set while writing is paused
        self._lost = False
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def idle(self) -> bool:
        """No bytes wait to be read, and none are going into ``into``."""
        return not self._chunks and self.into is None

    def give(self, into: memoryview) -> None:
        """The next ``len(into)`` bytes of the stream go into ``into``; only while
        ``idle`` (else they would come out of order)."""
        assert self.idle, "given only when nothing waits"
        self.into, self._into_at, self._into_new = into, 0, 0

    async def read(self) -> tuple[int, bytes]:
        """(bytes that went into ``into`` since the last read, the bytes received after
        them); (0, b"") at the end of the stream."""
        while not (self._into_new or self._chunks):
            if self._error is not None:
                raise self._error
            if self._eof:
                return 0, b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        direct, self._into_new = self._into_new, 0
        chunks, self._chunks, self._waiting = self._chunks, [], 0
        chunk = b"" if not chunks else chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if self._paused_reading and self.transport is not None:
            self._paused_reading = False
            self.transport.resume_reading()
        return direct, chunk

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- the event loop's side --------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self._on_made is not None:
            self._on_made(self, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        into = self.into
        if into is not None and self._into_at < len(into):
            return into[self._into_at :]
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        into = self.into
        if into is not None and self._into_at < len(into):
            self._into_at += nbytes
            if self._into_at == len(into):
                self.into = None  # full: the bytes after it go to the scratch buffer
            elif not self._into_new and self.on_into is not None and self.on_into(nbytes):
                return
            self._into_new += nbytes
        else:
            self._chunks.append(bytes(self._scratch[:nbytes]))
            self._waiting += nbytes
            if self._waiting >= self._limit and self.transport is not None:
                self._paused_reading = True  # until read() takes them
                self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # as asyncio's streams: a plain socket stays open for writing (a client that
        # shut its side down still gets its answers); TLS cannot half-close
        return self.transport is not None and self.transport.get_extra_info("sslcontext") is None

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    async def _drain_helper(self) -> None:  # (what StreamWriter.drain awaits)
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if self._writable is not None:
            await asyncio.shield(self._writable)
            if self._lost:
                raise ConnectionResetError("Connection lost")

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.resume_writing()  # (a writer waiting for room learns it is gone)
        self._eof = True
        if exc is not None:
            self._error = exc
        self._wake()
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream) -> asyncio.Future[None]:
        return self._closed


def writer(peer: Peer, transport: asyncio.Transport) -> asyncio.StreamWriter:
    return asyncio.StreamWriter(transport, peer, None, asyncio.get_running_loop())


async def connect(
    host: str, port: int, scratch: bytearray, limit: int, **kwargs
) -> tuple[Peer, asyncio.StreamWriter]:
    """A connection to ``host:port`` (``kwargs``: ``create_connection``'s, e.g. ssl):
    (the protocol to read from, a writer)."""
    loop = asyncio.get_running_loop()
    transport, peer = await loop.create_connection(
        lambda: Peer(scratch, limit), host, port, **kwargs
    )
    return peer, writer(peer, transport)
