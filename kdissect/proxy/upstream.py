"""The proxy's connection to a broker: its answers read into buffers the forwarder
chooses (``asyncio.BufferedProtocol``).

With asyncio's streams each chunk of an answer was copied three times before the
forwarder saw it (the event loop's bytes, the reader's buffer, the bytes handed out),
then once more into the large answer's own buffer. Here the body of a large answer is
read by the socket straight into that buffer (``into``); every other byte lands in one
reused buffer and is handed out as one ``bytes`` (one copy). The order of the stream is
kept: ``into`` is only given while nothing else waits unread, and it ends exactly where
the answer does.
"""

from __future__ import annotations

import asyncio


class Upstream(asyncio.BufferedProtocol):
    """Reads: ``await read()``; writes: through ``asyncio.StreamWriter(transport,
    self, None, loop)`` (``drain`` waits while the broker's socket is full). Not an
    ``asyncio.Protocol`` too (as asyncio's ``FlowControlMixin`` is): uvloop then calls
    ``data_received`` instead of ``get_buffer``."""

    def __init__(self, size: int) -> None:
        self._writable: asyncio.Future[None] | None = None  # set while writing is paused
        self._lost = False
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(size)
        self._fill = 0  # bytes in _scratch not handed out yet
        # where the next bytes go instead (the rest of a large answer's buffer), and how
        # many of it arrived and were not handed out yet
        self.into: memoryview | None = None
        self._into_at = 0
        self._into_new = 0
        self._eof = False
        self._error: BaseException | None = None
        self._paused_reading = False
        self._waiter: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def idle(self) -> bool:
        """No bytes wait to be read, and none are going into ``into``."""
        return self._fill == 0 and self.into is None

    def give(self, into: memoryview) -> None:
        """The next ``len(into)`` bytes of the stream go into ``into``; only while
        ``idle`` (else they would come out of order)."""
        assert self.idle, "given only when nothing waits"
        self.into, self._into_at, self._into_new = into, 0, 0

    async def read(self) -> tuple[int, bytes]:
        """(bytes that went into ``into`` since the last read, the bytes received after
        them); (0, b"") at the end of the stream."""
        while not (self._into_new or self._fill):
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
        chunk = bytes(memoryview(self._scratch)[: self._fill]) if self._fill else b""
        self._fill = 0
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

    def get_buffer(self, sizehint: int) -> memoryview:
        into = self.into
        if into is not None:
            if self._into_at < len(into):
                return into[self._into_at :]
            self.into = None  # full: the bytes after it go to the other buffer
        return memoryview(self._scratch)[self._fill :]

    def buffer_updated(self, nbytes: int) -> None:
        if self.into is not None and self._into_at < len(self.into):
            self._into_at += nbytes
            self._into_new += nbytes
            if self._into_at == len(self.into):
                self.into = None
        else:
            self._fill += nbytes
            if self._fill == len(self._scratch) and self.transport is not None:
                self._paused_reading = True  # until read() takes them
                self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes itself

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


async def connect(
    host: str, port: int, size: int, **kwargs
) -> tuple[Upstream, asyncio.StreamWriter]:
    """A connection to ``host:port`` (``kwargs``: ``create_connection``'s, e.g. ssl):
    (the protocol to read from, a writer)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(lambda: Upstream(size), host, port, **kwargs)
    return protocol, asyncio.StreamWriter(transport, protocol, None, loop)
