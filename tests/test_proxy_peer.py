"""The proxy's read path from a broker (proxy/peer.py): the body of a large answer is
read by the socket straight into that answer's buffers, every other byte into one reused
buffer. Whatever the cuts of the stream, a client that reads slowly (so that pieces of
those buffers wait in the proxy's write queue while more bytes land beside them) gets the
broker's bytes exactly, and the display gets each answer whole. In-process, on both event
loops the proxy runs on; a scripted upstream (no real broker sends these cuts on demand)."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import threading
import time

import pytest

from kdissect.proxy.server import LARGE_FIRST, STREAM_TAIL, Proxy

from tests.support.sockets import recv_exactly


def _fetch_v4_request(corr: int) -> bytes:
    """A Fetch v4 request's header (the scripted upstream reads nothing more)."""
    body = struct.pack(">hhih", 1, 4, corr, 2) + b"fc"
    return struct.pack(">i", len(body)) + body


class _Upstream:
    """Reads ``n`` requests, then sends ``stream`` cut at ``cuts``, pausing between
    pieces so that the proxy reads them apart."""

    def __init__(self, stream: bytes, n: int, cuts: list[int]) -> None:
        self.stream, self.n, self.cuts = stream, n, cuts
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            for _ in range(self.n):
                recv_exactly(conn, struct.unpack(">i", recv_exactly(conn, 4))[0])
            at = 0
            for cut in [*self.cuts, len(self.stream)]:
                conn.sendall(self.stream[at:cut])
                at = cut
                time.sleep(0.01)
            conn.recv(1)  # until the proxy leaves

    def close(self) -> None:
        self.sock.close()


class _Display:
    """Takes every frame the forwarder hands the display (a copy of each, as the real
    feed writes it to its pipe)."""

    unreported = 0

    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes]] = []

    def room(self, size: int, answer: bool = False) -> bool:
        return True

    def frame(self, conn: int, side: int, ts: float, offset: int, data: bytes) -> None:
        if side == 1:
            self.frames.append((offset, bytes(data)))

    def open(self, *_) -> None:
        pass

    def close(self, *_) -> None:
        pass


@pytest.mark.parametrize("slow", [True, False], ids=["slow-client", "fast-client"])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_answers_read_into_their_buffers_arrive_byte_exact(loop, slow):
    """A slow client keeps the proxy's writes waiting (each chunk then goes through the
    forwarding task); a fast one takes them as they come (passed on from the socket's
    callback, ``pass_on``)."""
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
    rng = random.Random(44)
    # Fetch v4 answers (streamed as they come): one over two buffers of LARGE_FIRST, one
    # ending where a buffer ends, a small one held whole, one just over STREAM_TAIL
    sizes = [2 * LARGE_FIRST + 12_345, LARGE_FIRST, 100, STREAM_TAIL + 5, 300_000]
    answers = [struct.pack(">ii", i + 1, 0) + os.urandom(n - 8) for i, n in enumerate(sizes)]
    stream = b"".join(struct.pack(">i", len(a)) + a for a in answers)
    starts = [0]
    for a in answers:
        starts.append(starts[-1] + 4 + len(a))
    # cuts inside sizes, at buffer ends and one byte either side, across answers, random
    first_body = 4 + 0
    cuts = {2, 6, 9, starts[1] - 1, starts[1] + 3, starts[2] + 1, starts[3] + 50}
    for k in (1, 2):
        end = first_body + k * LARGE_FIRST
        cuts |= {end - 1, end, end + 1}
    cuts |= {rng.randrange(1, len(stream)) for _ in range(30)}
    upstream = _Upstream(stream, len(answers), sorted(cuts))
    display = _Display()

    async def run() -> bytes:
        proxy = Proxy([("127.0.0.1", upstream.port)], port=0, feed=display)
        await proxy.start()

        def client() -> bytes:
            with socket.create_connection(("127.0.0.1", proxy.bootstrap_port), timeout=60) as s:
                if slow:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
                s.sendall(b"".join(_fetch_v4_request(i + 1) for i in range(len(answers))))
                if not slow:
                    return recv_exactly(s, len(stream))
                time.sleep(0.3)  # the proxy's writes wait while it reads more
                got = bytearray()
                while len(got) < LARGE_FIRST:  # slowly, at first
                    got += s.recv(65536)
                    time.sleep(0.001)
                return bytes(got) + recv_exactly(s, len(stream) - len(got))

        try:
            return await asyncio.to_thread(client)
        finally:
            await proxy.close()

    try:
        got = uvloop.run(run()) if loop == "uvloop" else asyncio.run(run())
    finally:
        upstream.close()
    assert len(got) == len(stream)
    if got != stream:
        at = next(i for i, (a, b) in enumerate(zip(got, stream)) if a != b)
        pytest.fail(f"the client's bytes differ from the broker's from stream offset {at:,}")
    assert display.frames == [(starts[i] + 4, a) for i, a in enumerate(answers)]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_client_that_shut_its_sending_side_still_gets_its_answers(loop):
    """A client sends its requests and shuts its side (SHUT_WR): the proxy keeps the
    connection open for writing and passes the answers, large and small, exactly."""
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
    answers = [struct.pack(">ii", 1, 0) + os.urandom(200_000), struct.pack(">ii", 2, 0) + b"x"]
    stream = b"".join(struct.pack(">i", len(a)) + a for a in answers)
    upstream = _Upstream(stream, len(answers), [100_000])

    async def run() -> bytes:
        proxy = Proxy([("127.0.0.1", upstream.port)], port=0)
        await proxy.start()

        def client() -> bytes:
            with socket.create_connection(("127.0.0.1", proxy.bootstrap_port), timeout=60) as s:
                s.sendall(_fetch_v4_request(1) + _fetch_v4_request(2))
                s.shutdown(socket.SHUT_WR)
                return recv_exactly(s, len(stream))

        try:
            return await asyncio.to_thread(client)
        finally:
            await proxy.close()

    try:
        got = uvloop.run(run()) if loop == "uvloop" else asyncio.run(run())
    finally:
        upstream.close()
    assert got == stream
