"""The one-way channel from the forwarding process to the display: what passed, as
records on a pipe, behind a buffer bounded in bytes.

The forwarder never waits for the display. Before a request is queued it asks for room;
without room the whole exchange is shed (its response is dropped too) and counted, and
the display is told how many it missed. A response to a shown request may use up to
twice the budget; beyond that only its first bytes and its size go (a CUT record, up to
three times the budget), so the display pairs it with its request and says the answer
was not shown, instead of calling the request unanswered.

Record: kind (1 byte), connection (4), side (1), time (float64), stream offset (8),
payload length (4), payload. The kernel's pipe (1 MiB asked for) holds records beyond
the budget; the display reads them as they come.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import struct

from .buffers import filled_later

HEADER = struct.Struct(">BIBdQI")
OPEN, FRAME, CLOSE, NOTE, DROPPED, READY, ERROR, CUT = range(8)
CUT_HEAD = 64  # bytes of an answer passed when the answer itself has no room (CUT)
_PIPE_SIZE = 1 << 20  # ask the kernel for a 1 MiB pipe (Linux)
_READ = 1 << 20  # the display reads up to this much at a time
BIG = 64 << 10  # a payload this large is read into a buffer of its own


class FeedWriter:
    """The forwarder's end (asyncio). ``budget``: bytes the channel may hold."""

    def __init__(self, fd: int, budget: int, on_broken=lambda: None):
        self.fd, self.budget, self.on_broken = fd, budget, on_broken
        self.transport: asyncio.WriteTransport | None = None
        self._out: list[bytes] = []
        self._out_bytes = 0
        self.broken = False  # the display went away: forwarding goes on
        self.unreported = 0  # exchanges shed since the display was last told
        self._shedding = False  # shedding began since the last message shown, and was said

    async def start(self) -> None:
        try:
            import fcntl

            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        except (ImportError, AttributeError, OSError):
            pass
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(self.fd, "wb", buffering=0)
        self.transport, protocol = await loop.connect_write_pipe(_Protocol, pipe)
        protocol.feed = self

    @property
    def buffered(self) -> int:
        t = self.transport
        return self._out_bytes + (t.get_write_buffer_size() if t is not None else 0)

    def room(self, size: int, answer: bool = False) -> bool:
        """Is there room for a message of ``size`` bytes? (``answer``: the response
        to a request the display already has)."""
        if self.broken:
            return False
        limit = self.budget * 2 if answer else self.budget
        return self.buffered + size + HEADER.size <= limit

    def frame(self, conn: int, side: int, ts: float, offset: int, data: bytes) -> None:
        """A message (without its size prefix) found at stream ``offset``."""
        if self.unreported:
            self.dropped(self.unreported)
        self._shedding = False
        self._put(FRAME, conn, side, ts, offset, data)

    def shed(self) -> None:
        """An exchange left out. The first since a message was shown is said at once: a
        display far behind may be given up on before the next message shown or the end
        (at most two records per message shown: the channel stays bounded)."""
        self.unreported += 1
        if not self._shedding:
            self._shedding = True
            self.dropped(self.unreported)

    def cut(self, conn: int, side: int, ts: float, offset: int, data, size: int = -1) -> bool:
        """The answer at ``offset`` has no room: its first bytes and its size (``size``,
        when ``data`` holds only its first bytes) instead. False when even those have none
        (the display is far behind)."""
        if self.broken or self.buffered + HEADER.size + 4 + CUT_HEAD > self.budget * 3:
            return False
        head = bytes(data[:CUT_HEAD])
        whole = len(data) if size < 0 else size
        self._put(CUT, conn, side, ts, offset, struct.pack(">I", whole) + head)
        return True

    def open(self, conn: int, client, broker) -> None:
        self._put(OPEN, conn, 0, 0.0, 0, json.dumps([list(client), list(broker)]).encode())

    def close(self, conn: int) -> None:
        self._put(CLOSE, conn, 0, 0.0, 0, b"")

    def note(self, text: str, kind: int = NOTE) -> None:
        self._put(kind, 0, 0, 0.0, 0, text.encode())

    def dropped(self, count: int) -> None:
        self.unreported = 0
        self._put(DROPPED, 0, 0, 0.0, count, b"")

    def _put(self, kind: int, conn: int, side: int, ts: float, offset: int, payload: bytes) -> None:
        if self.broken or self.transport is None:
            return
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(HEADER.pack(kind, conn, side, ts, offset, len(payload)))
        self._out.append(payload)
        self._out_bytes += HEADER.size + len(payload)

    def _flush(self) -> None:
        """Once per turn of the event loop: one write for everything queued in it."""
        out, self._out, self._out_bytes = self._out, [], 0
        if not self.broken and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)  # uvloop writes them without joining

    async def aclose(self, timeout: float = 10.0) -> None:
        """Flush, give the display ``timeout`` seconds to take what is queued, close."""
        if self.transport is None:
            return
        self._flush()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.broken and self.transport.get_write_buffer_size() and loop.time() < deadline:
            await asyncio.sleep(0.02)
        self.transport.close()


class _Protocol(asyncio.BaseProtocol):
    feed: FeedWriter | None = None

    def connection_lost(self, exc) -> None:
        if self.feed is not None:
            self.feed.broken = True
            self.feed.on_broken()


def read_record(fd: int):
    """One record, read without reading ahead (others may read the rest); None at the
    end of the channel."""

    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    head = exactly(HEADER.size)
    if head is None:
        return None
    kind, conn, side, ts, offset, size = HEADER.unpack(head)
    payload = exactly(size) if size else b""
    return None if payload is None else (kind, conn, side, ts, offset, payload)


def read_records(fd: int, waiting=lambda: None, working=lambda: None, stopped=lambda: False):
    """The display's end: (kind, conn, side, ts, offset, payload) until the forwarder
    closes the channel, or ``stopped()`` says to end while the channel is empty.
    ``waiting()`` is called before a read that would block (the channel is empty),
    ``working()`` after it. A payload of ``BIG`` bytes or more is a bytearray of its
    own that the pipe was read straight into (one copy fewer of each large answer:
    measured 0.8 ms of the display's CPU per 1.4 MB answer through a growing buffer);
    smaller ones are bytes."""
    chunk = bytearray(_READ)
    view = memoryview(chunk)
    start = end = 0  # chunk[start:end]: read, not yet handed out

    # non-blocking: a read finds the channel empty itself (None), so a channel with
    # bytes waiting costs one system call per read, not a select() before each
    os.set_blocking(fd, False)
    with os.fdopen(fd, "rb", buffering=0) as f:

        def read(into: memoryview) -> int:
            """Bytes read into ``into``; 0 at the end of the channel or when stopped."""
            n = f.readinto(into)
            while n is None:  # empty: wait for the forwarder
                waiting()
                while not select.select([fd], [], [], 0.1)[0]:
                    if stopped():
                        return 0
                working()
                n = f.readinto(into)
            return n

        while True:
            while end - start >= HEADER.size:
                kind, conn, side, ts, offset, size = HEADER.unpack_from(chunk, start)
                body = start + HEADER.size
                if size >= BIG:
                    payload = filled_later(size)  # (handed on only once all read)
                    have = min(end - body, size)
                    payload[:have] = view[body : body + have]
                    start = body + have
                    rest = memoryview(payload)
                    while have < size:
                        n = read(rest[have:])
                        if not n:
                            return
                        have += n
                    rest.release()
                    yield kind, conn, side, ts, offset, payload
                    continue
                if end - body < size:
                    break
                start = body + size
                yield kind, conn, side, ts, offset, bytes(view[body:start])
            if start == end:
                start = end = 0
            elif end == len(chunk):  # the tail of a record (< BIG + HEADER.size) to the front
                tail = bytes(view[start:end])
                start, end = 0, len(tail)
                chunk[:end] = tail
            n = read(view[end:])
            if not n:
                return
            end += n
