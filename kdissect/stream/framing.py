"""Size-delimited Kafka messages on one direction of a byte stream."""

from __future__ import annotations

import struct
from collections.abc import Iterator

# The broker's default socket.request.max.bytes is 100 MiB; a size beyond this bound
# means we are not at a message boundary (or the peer is not speaking Kafka).
MAX_MESSAGE = 512 * 1024 * 1024


class Framer:
    """Feed bytes as they arrive; take complete messages as (stream offset, bytes)."""

    def __init__(self, max_message: int = MAX_MESSAGE):
        self._buf = bytearray()
        self._base = 0                 # stream offset of _buf[0]
        self.max_message = max_message
        self.error: str | None = None  # set when the stream stops looking like Kafka

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        self._buf += data
        pos = 0
        buf = self._buf
        while self.error is None and len(buf) - pos >= 4:
            size = struct.unpack_from(">i", buf, pos)[0]
            if size < 0 or size > self.max_message:
                self.error = f"implausible message size {size} at stream offset {self._base + pos}"
                break
            if len(buf) - pos - 4 < size:
                break
            yield self._base + pos + 4, bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
        del buf[:pos]
        self._base += pos

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message waiting for more data."""
        return len(self._buf)
