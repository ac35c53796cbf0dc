"""The framing core: one direction of a byte stream -> size-delimited Kafka messages.

Every path that meets Kafka on a stream frames it here: capture files and live
interfaces (with holes in the stream), the proxy (a socket; a bad size ends it) and
pasted blobs (``chain``). The 4-byte size cap lives here and only here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

# The broker's default socket.request.max.bytes is 100 MiB; a size beyond this bound
# means we are not at a message boundary (or the peer is not speaking Kafka).
MAX_MESSAGE = 512 * 1024 * 1024
RESYNC_TAIL = 4096         # bytes kept while searching for a boundary (a header's worth)

_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class Frame:
    offset: int                    # stream offset of the message (after its size)
    data: bytes                    # the message, without its 4-byte size
    truncated: str | None = None   # set when part of it was not captured


class Framer:
    """Feed one direction's bytes as they arrive; take complete messages.

    ``boundary(buf, pos)``, if given, says whether a message plausibly starts at
    ``buf[pos]``: after a hole in the stream (``gap``), or a size that cannot be one,
    the framer searches forward for such a place and resumes there (a capture that
    starts mid-connection is the same case). Without it, a bad size stops the framer
    and ``error`` says why (the proxy then ends the connection: nothing is skipped)."""

    def __init__(self, boundary: Callable[[bytearray, int], bool] | None = None,
                 max_message: int = MAX_MESSAGE):
        self._buf = bytearray()
        self._base = 0                  # stream offset of _buf[0]
        self._boundary = boundary
        self.max_message = max_message
        self.resync = False             # searching for the next message boundary
        self._skip_until = 0            # the rest of a truncated message ends here
        self._want = 0                  # buffered bytes that complete the next message
        self.error: str | None = None

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message waiting for more data."""
        return len(self._buf)

    @property
    def base(self) -> int:
        return self._base

    def feed(self, data: bytes, offset: int | None = None) -> list[Frame]:
        """``data`` found at stream ``offset`` (default: right after what came before)."""
        if offset is None:
            offset = self._base + len(self._buf)
        if offset < self._skip_until:            # the tail of a message reported truncated
            cut = min(self._skip_until - offset, len(data))
            data, offset = data[cut:], offset + cut
            if not data:
                return []
        if not self._buf:
            self._base = offset
        self._buf += data
        if len(self._buf) < self._want:
            return []                   # a big message still arriving: nothing to look at
        return self._frames()

    def already_reported(self, end: int) -> bool:
        """Whether stream bytes up to ``end`` belong to a message reported truncated."""
        return end <= self._skip_until

    def gap(self, offset: int, length: int) -> Frame | None:
        """``length`` bytes at stream ``offset`` were lost. When the hole is inside a
        message whose size is known, that message is returned as truncated and framing
        continues after it; otherwise the framer searches for the next boundary.
        Returns None also when the hole is inside a message already reported."""
        end = offset + length
        if end <= self._skip_until:
            return None
        self._want = 0
        buf = self._buf
        size = _SIZE.unpack_from(buf)[0] if len(buf) >= 4 and not self.resync else -1
        message_end = self._base + 4 + size
        if 4 <= size <= self.max_message and end <= message_end and len(buf) >= 12:
            frame = Frame(self._base + 4, bytes(buf[4:]),
                          f"truncated: {size - (len(buf) - 4)} of {size} bytes not captured")
            self._skip_until = message_end
            buf.clear()
            self._base = message_end
            return frame
        buf.clear()
        self._base = end
        self.resync = self._boundary is not None
        return None

    def _frames(self) -> list[Frame]:
        buf = self._buf
        out: list[Frame] = []
        pos = want = 0
        limit = self.max_message
        while self.error is None:
            if self.resync:
                found = self._find_boundary(pos)
                if found is None:
                    # keep only a tail that may hold the start of the next message, so
                    # the search neither grows memory nor rescans what it has seen
                    pos = max(pos, len(buf) - RESYNC_TAIL)
                    break
                pos, self.resync = found, False
            if len(buf) - pos < 4:
                break
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0 or size > limit:
                if self._boundary is None:
                    self.error = (f"implausible message size {size} at stream offset "
                                  f"{self._base + pos}")
                    break
                self.resync = True       # not a message boundary: search from the next byte
                pos += 1
                continue
            if len(buf) - pos - 4 < size:
                want = 4 + size
                break
            # one copy (a bytearray slice would make a second)
            out.append(Frame(self._base + pos + 4,
                             bytes(memoryview(buf)[pos + 4:pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
            self._base += pos
        self._want = want
        return out

    def _find_boundary(self, start: int) -> int | None:
        buf, limit, boundary = self._buf, self.max_message, self._boundary
        for pos in range(start, len(buf) - 7):
            size = _SIZE.unpack_from(buf, pos)[0]
            if 4 <= size <= limit and boundary(buf, pos):
                return pos
        return None


def chain(data: bytes) -> list[tuple[int, int]] | None:
    """The (start, end) spans of ``data`` read as back-to-back size-prefixed messages
    that use every byte, or None when the sizes do not chain exactly."""
    spans, pos, n = [], 0, len(data)
    while pos + 4 <= n:
        size = _SIZE.unpack_from(data, pos)[0]
        if size < 4 or pos + 4 + size > n:
            return None
        spans.append((pos + 4, pos + 4 + size))
        pos += 4 + size
    return spans if pos == n and spans else None
