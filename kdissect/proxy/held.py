"""The proxy's cap on what it holds for partial messages, across all connections.

The forwarding path frames each direction to pair requests and responses and feed the
display; a message is held until its last byte arrives. Four clients announcing 500 MB
requests would make the proxy hold 2 GB, so the bytes held by all framers together are
capped (``--max-memory``). Past the cap the oldest partial request is given up: its
bytes were forwarded already (forwarding never waits for framing and never changes a
client's bytes); only its decoding is lost. Its framer is replaced by a fresh one that
starts after the message's announced end, so the connection's framing stays in step.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

from ..stream.framing import Frame, Framer

_SIZE = struct.Struct(">i")
DEFAULT_LIMIT = 512 * 1024 * 1024


@dataclass(eq=False, slots=True)
class Side:
    """One direction of one connection: its framer, and what is known about the
    message it holds (where it starts, its size prefix)."""

    who: str  # e.g. "127.0.0.1:50000 request"
    # requests are forwarded as they come, so giving one up loses no byte; responses
    # are held until whole (one may be rewritten): they count, but are never given up
    forwarded: bool = True
    framer: Framer = field(default_factory=Framer)
    pos: int = 0  # stream offset of the next byte
    skip_until: int = 0  # a given-up message ends here
    start: int = -1  # stream offset of the held message
    head: bytes = b""  # its size prefix (up to 4 bytes)
    since: int = 0  # order in which held messages started
    held: int = 0
    taken: bool = False  # the message up to skip_until is the caller's

    @property
    def error(self) -> str | None:
        return self.framer.error


class HeldBytes:
    """``side()`` for each direction of a connection; ``feed`` frames through it and
    gives up the oldest partial messages while all sides together hold more than
    ``limit`` bytes. ``given_up`` counts them; ``on_give_up(text)`` says which."""

    def __init__(self, limit: int = DEFAULT_LIMIT, on_give_up=lambda text: None):
        self.limit, self.on_give_up = limit, on_give_up
        self.total = 0
        self.given_up = 0
        self.holding: set[Side] = set()
        self._order = itertools.count()

    def side(self, who: str, forwarded: bool = True) -> Side:
        return Side(who, forwarded=forwarded)

    def forget(self, s: Side) -> None:
        """The connection ended: its held bytes go."""
        self.total -= s.held
        s.held = 0
        self.holding.discard(s)

    def feed(self, s: Side, chunk: bytes) -> list[Frame]:
        start = s.pos
        s.pos += len(chunk)
        if start < s.skip_until:  # the rest of a given-up message
            cut = min(s.skip_until - start, len(chunk))
            chunk, start = chunk[cut:], start + cut
            if s.taken:  # (or of one taken: it counts)
                s.held += cut
                self.total += cut
                if start >= s.skip_until:
                    self.total -= s.held
                    s.held, s.taken = 0, False
            if not chunk:
                return []
        framer = s.framer
        frames = framer.feed(chunk, start)
        if framer.pending:
            if framer.base != s.start:  # a new message began in this chunk
                s.start, s.head, s.since = framer.base, b"", next(self._order)
            if len(s.head) < 4:
                at = s.start + len(s.head) - start
                s.head += chunk[max(at, 0) : max(at, 0) + 4 - len(s.head)]
            self.holding.add(s)
        else:
            s.start, s.head = -1, b""
            self.holding.discard(s)
        self.total += framer.pending - s.held
        s.held = framer.pending
        while self.total > self.limit and self._give_up_oldest():
            pass
        return frames

    def take(self, s: Side, end: int) -> None:
        """The caller collects the message being framed itself, up to stream offset
        ``end`` (a large response, copied once into a buffer of its size instead of grown
        chunk by chunk and joined): the framer lets it go and starts again at ``end``.
        Its bytes count against the limit until it ends."""
        s.skip_until, s.taken = end, True
        s.framer = Framer(max_message=s.framer.max_message)
        s.start, s.head = -1, b""
        self.holding.discard(s)

    def passed(self, s: Side, n: int) -> None:
        """``n`` bytes of the message taken (``take``) reached the caller without
        ``feed`` (read straight into its buffer): counted as ``feed`` counts them."""
        assert s.taken and s.pos + n <= s.skip_until, "only bytes of the taken message"
        s.pos += n
        s.held += n
        self.total += n
        if s.pos >= s.skip_until:
            self.total -= s.held
            s.held, s.taken = 0, False

    def _give_up_oldest(self) -> bool:
        sides = [s for s in self.holding if s.forwarded and len(s.head) == 4]
        if not sides:
            return False
        s = min(sides, key=lambda x: x.since)
        size = _SIZE.unpack(s.head)[0]
        s.skip_until = s.start + 4 + size
        held = s.held
        s.framer = Framer(max_message=s.framer.max_message)
        self.forget(s)
        s.start, s.head = -1, b""
        self.given_up += 1
        self.on_give_up(
            f"{s.who}: a message of {size:,} bytes at stream offset {s.skip_until - 4 - size:,} "
            f"is not decoded: the proxy held {held:,} bytes of it while partial messages of "
            f"all connections reached --max-memory {self.limit:,} bytes; it is forwarded "
            f"unchanged all the same"
        )
        return True
