"""Sockets in tests: reading exactly ``n`` bytes, or an error naming how many came; a
server that serves each connection in a thread of its own."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


def recv_exactly(s: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``s`` (in linear time: a bytearray, reads of at most 1 MiB)."""
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def serve_each(server: socket.socket, serve: Callable[[socket.socket], None]) -> None:
    """Each connection ``server`` accepts (until it is closed) served by ``serve(conn)``
    in a thread of its own."""

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
