"""Reading a socket in tests: exactly ``n`` bytes, or an error naming how many came."""

from __future__ import annotations

import socket


def recv_exactly(s: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``s`` (in linear time: a bytearray, reads of at most 1 MiB)."""
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)
