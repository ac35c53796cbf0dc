"""The framing core: one direction of a byte stream -> size-delimited Kafka messages.

Every path that meets Kafka on a stream frames it here: capture files and live
interfaces (with holes in the stream), the proxy (a socket; a bad size ends it) and
pasted blobs (``chain``). The 4-byte size cap lives here and only here.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Collection
from dataclasses import dataclass

# The broker's default socket.request.max.bytes is 100 MiB; a size beyond this bound
# means we are not at a message boundary (or the peer is not speaking Kafka).
MAX_MESSAGE = 512 * 1024 * 1024
# ... and a message whose start is not confirmed by the one before it (found by
# resynchronisation, or the first of a connection seen without its start) must fit what
# a broker accepts by default: a bigger size there is taken for bytes that only look
# like one (a capture begun mid-connection once gave a "Produce v0" of 137,967,921 bytes)
UNSURE_MAX = 100 * 1024 * 1024
_SMALL_FIRST = re.compile(rb"[\x00-\x06]")  # the first byte of a size <= UNSURE_MAX
_NONZERO = re.compile(rb"[^\x00]")
UNSURE = (
    "; its start was not confirmed (found by resynchronisation, or the capture "
    "began inside the connection): its size may be false"
)
RESYNC_TAIL = 4096  # bytes kept while searching for a boundary (a header's worth)
HEAD = 14  # bytes the boundary test reads: a request's size and header to its client id's size
MAX_NEEDLES = 32  # more needles than this: the places are found as without them
HEAD_KEPT = 512  # bytes of a message kept when the memory budget gives it up

_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class Frame:
    offset: int  # stream offset of the message (after its size)
    data: bytes  # the message, without its 4-byte size (up to a hole)
    truncated: str | None = None  # set when part of it was not captured
    # a cut message: the bytes captured after its first hole, as (offset in the message,
    # bytes), and the holes as (offset in the message, length)
    pieces: list[tuple[int, bytes]] | None = None
    holes: list[tuple[int, int]] | None = None
    budget: bool = False  # given up because the memory budget was spent


class _Cut:
    """A message with a hole in it, collected until its announced end."""

    __slots__ = ("start", "size", "prefix", "pieces", "holes", "kept")

    def __init__(self, start: int, size: int, prefix: bytes):
        self.start, self.size, self.prefix = start, size, prefix
        self.pieces: list[tuple[int, bytearray]] = []
        self.holes: list[tuple[int, int]] = []
        self.kept = len(prefix)  # bytes captured so far

    @property
    def end(self) -> int:
        return self.start + self.size

    def add(self, offset: int, data: bytes) -> None:
        rel = offset - self.start
        self.kept += len(data)
        last = self.pieces[-1] if self.pieces else None
        if last is not None and last[0] + len(last[1]) == rel:
            last[1].extend(data)
        else:
            self.pieces.append((rel, bytearray(data)))

    def hole(self, offset: int, length: int) -> None:
        rel = offset - self.start
        if self.holes and sum(self.holes[-1]) == rel:
            self.holes[-1] = (self.holes[-1][0], self.holes[-1][1] + length)
        else:
            self.holes.append((rel, length))

    def frame(self, ended: bool) -> Frame:
        """``ended``: the capture stops before the message's end (the rest unknown)."""
        have = self.kept
        lost = sum(n for _, n in self.holes)
        why = (
            f"truncated: {self.size - have} of {self.size} bytes not captured "
            f"({lost} in {len(self.holes)} hole{'s' * (len(self.holes) != 1)}"
            + (", the rest after the capture ended)" if ended and self.size - have > lost else ")")
        )
        return Frame(
            self.start,
            self.prefix,
            why,
            [(rel, bytes(p)) for rel, p in self.pieces],
            list(self.holes),
        )


class Framer:
    """Feed one direction's bytes as they arrive; take complete messages.

    ``boundary(buf, pos)``, if given, says whether a message plausibly starts at
    ``buf[pos]``: after a hole in the stream (``gap``), or a size that cannot be one,
    the framer searches forward for such a place and resumes there (a capture that
    starts mid-connection is the same case). Without it, a bad size stops the framer
    and ``error`` says why (the proxy then ends the connection: nothing is skipped)."""

    __slots__ = (
        "_buf",
        "_held",
        "_base",
        "_boundary",
        "max_message",
        "resync",
        "_cut",
        "_skip_until",
        "_want",
        "error",
        "unsure_at",
        "_check_start",
        "_unread_from",
        "unread",
        "_needles",
        "_inside_at",
        "_inside_from",
        "_inside_starts",
    )

    def __init__(
        self,
        boundary: Callable[[bytearray, int], bool] | None = None,
        max_message: int = MAX_MESSAGE,
        needles: Callable[[], Collection[bytes]] | None = None,
    ):
        """``needles``, if given: the 4-byte strings one of which follows the size of
        every place ``boundary`` takes (an answer's pending correlation ids), found by
        ``bytes.find``; and an unconfirmed message still arriving whose start
        ``boundary`` does not take may give way to a chaining start inside it."""
        self._buf = bytearray()
        # the first piece of a message, kept as the bytes it came in (not copied into
        # _buf) while nothing else is held: the piece completing it is joined to it
        self._held: bytes | None = None
        self._base = 0  # stream offset of _buf[0] (or _held[0])
        self._boundary = boundary
        self.max_message = max_message
        self.resync = False  # searching for the next message boundary
        self._cut: _Cut | None = None  # a message with a hole, still being collected
        self._skip_until = 0  # the rest of a message given up ends here
        self._want = 0  # buffered bytes that complete the next message
        self.error: str | None = None
        # the stream offset of a message start not confirmed by the message before it
        # (-1: none); ``begun_inside`` sets it for the first
        self.unsure_at = -1
        self._check_start = False  # ``boundary`` also checks the first message
        # bytes passed over while searching for a boundary are reported, never dropped
        # silently: where the search began (-1: not searching), and the stretches
        # passed over since the caller last took them, as (stream offset, length)
        self._unread_from = -1
        self.unread: list[tuple[int, int]] = []
        self._needles = needles
        # the starts inside an unconfirmed message still arriving (``_arriving``): for
        # the start at ``_inside_at``, places up to ``_inside_from`` were looked at, and
        # those taken whose messages have not arrived yet are kept (stream offsets)
        self._inside_at = -1
        self._inside_from = 0
        self._inside_starts: list[int] = []

    def begun_inside(self, check: bool) -> None:
        """The capture began inside the connection: its first bytes may be anywhere in a
        message. Their size must fit ``UNSURE_MAX``, and with ``check`` pass the boundary
        test too; else the framer searches for the next boundary."""
        self.unsure_at = self._base
        self._check_start = check and self._boundary is not None

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message waiting for more data."""
        cut, held = self._cut, self._held
        return (
            len(self._buf) + (0 if held is None else len(held)) + (0 if cut is None else cut.kept)
        )

    def held(self) -> bytes:
        """The bytes of the message being filled, as they came (its size included), or
        after a bad size the bytes from it on (the proxy records them when a connection
        ends there)."""
        return bytes(self._held if self._held is not None else self._buf)

    def skip_to(self, offset: int) -> None:
        """The stream goes on at ``offset`` (nothing held: the bytes before it are not
        given, and are no hole)."""
        if not self.pending:
            self._base = offset

    def _unhold(self) -> bytearray:
        """The buffer, with the piece held as bytes moved into it."""
        if self._held is not None:
            self._buf += self._held
            self._held = None
        return self._buf

    @property
    def base(self) -> int:
        return self._base

    def position(self) -> tuple[int, bytes] | None:
        """(stream offset of the message being filled, the bytes held of it) while the
        framer simply frames by sizes (no hole, search or skip); else None. The compiled
        reassembler then tracks the sizes itself (capture/native.py)."""
        if self._held is not None:
            return self._base, self._held
        if (
            self._cut is not None
            or self.resync
            or self.error is not None
            or self.unsure_at >= 0  # (a start not confirmed yet: Python checks the next)
            or self._skip_until > self._base + len(self._buf)
        ):
            return None
        return self._base, bytes(self._buf)

    def at_rest(self) -> int | None:
        """The stream offset of the next message when the framer holds nothing and
        ``whole_body`` would take any whole message there (of at most ``MAX_MESSAGE``
        bytes); else None. The compiled reassembler's pass then frames such messages
        itself (``passed``)."""
        if (
            self._held is not None
            or self._buf
            or self._cut is not None
            or self._skip_until > self._base
            or self.resync
            or self.error is not None
            or self.unsure_at >= 0
            or self.unread
            or self.max_message != MAX_MESSAGE
        ):
            return None
        return self._base

    def passed(self, end: int) -> None:
        """Messages up to stream offset ``end`` were framed elsewhere, each whole where
        the framer stood (``whole_body`` of each leaves this state)."""
        self._base, self._want = end, 0

    def whole(self, data: bytes, offset: int) -> bytes | None:
        """``data`` at stream ``offset`` when it is exactly one whole message where the
        next one starts, nothing held (the compiled reassembler's usual chunk): the
        message after its size, the framer past it, as ``feed`` would leave it (without
        a ``Frame`` and a list: a message's framing costs a call). None: nothing done,
        ``feed`` it."""
        if (
            self._held is not None
            or self._buf
            or self._cut is not None
            or offset < self._skip_until
            or self.resync
            or self.error is not None
            or self.unsure_at >= 0
            or type(data) is not bytes
            or len(data) < 4
        ):
            return None
        size = len(data) - 4
        if _SIZE.unpack_from(data)[0] != size or size > self.max_message:
            return None
        self._base, self._want = offset + len(data), 0
        return data[4:]

    def whole_body(self, body: bytes, offset: int) -> bool:
        """``whole`` of a message the compiled reassembler found whole, given without its
        size (``body``, at stream ``offset``): True when taken (the framer past it, as
        ``whole`` would leave it); False: nothing done (``whole`` would not take it)."""
        if (
            self._held is not None
            or self._buf
            or self._cut is not None
            or offset - 4 < self._skip_until
            or self.resync
            or self.error is not None
            or self.unsure_at >= 0
            or len(body) > self.max_message
        ):
            return False
        self._base, self._want = offset + len(body), 0
        return True

    def feed(self, data: bytes, offset: int | None = None) -> list[Frame]:
        """``data`` found at stream ``offset`` (default: right after what came before)."""
        held = self._held
        if offset is None:
            offset = self._base + len(self._buf) + (0 if held is None else len(held))
        out: list[Frame] = []
        if offset < self._skip_until:  # the rest of a message given up
            n = min(self._skip_until - offset, len(data))
            data, offset = data[n:], offset + n
            if not data:
                return out
        cut = self._cut
        if cut is not None:  # the rest of a message with a hole
            n = min(cut.end - offset, len(data))
            cut.add(offset, data[:n])
            if offset + n < cut.end:
                return []
            out.append(self._end_cut(False))
            data, offset = data[n:], offset + n
            if not data:
                return out
        have = len(self._buf) if held is None else len(held)
        if not have:
            if (
                type(data) is bytes
                and len(data) >= 4
                and not self.resync
                and self.error is None
                and self.unsure_at < 0
            ):
                size = _SIZE.unpack_from(data)[0]
                if len(data) <= 4 + size and 0 <= size <= self.max_message:
                    if len(data) < 4 + size:
                        # the first piece of a message (the compiled reassembler's
                        # usual first chunk): kept as it came, not copied
                        self._held, self._base, self._want = data, offset, 4 + size
                        return out
                    # exactly one whole message (its usual chunk otherwise): no copy
                    # through the buffer
                    self._base, self._want = offset + 4 + size, 0
                    out.append(Frame(offset + 4, data[4:]))
                    return out
            self._base = offset
        elif len(data) >= self._want - have > 0 and not self.resync and self.unsure_at < 0:
            # the piece completing the message begun (the compiled reassembler's usual
            # second chunk): joined to the first once, not through the buffer
            n = self._want - have
            first = self._buf if held is None else held
            out.append(
                Frame(self._base + 4, b"".join((memoryview(first)[4:], memoryview(data)[:n])))
            )
            self._base += self._want
            self._buf.clear()
            self._held = None
            self._want = 0
            if len(data) == n:
                return out
            return out + self.feed(data[n:], offset + n)
        buf = self._unhold()
        buf += data
        if len(buf) < self._want:
            if self.unsure_at == self._base and self._needles is not None:
                return out + self._arriving()
            return out  # a big message still arriving: nothing to look at
        return out + self._frames()

    def search_again(self, offset: int) -> None:
        """A place the boundary test may now take (a request was sent) at stream
        ``offset`` or after: bytes from there are looked at again."""
        if self._inside_at == self._base and offset < self._inside_from:
            self._inside_from = max(offset, self._base + 1)

    def _arriving(self) -> list[Frame]:
        """An unconfirmed message still arriving whose start the boundary test does not
        take (an answer's tail can read as a size of megabytes: it held every later
        answer until the capture ended). A start inside it that the test takes, whose
        message ends where another plausible one starts or exactly where the bytes
        end, is the real one. A start the test takes (an answer to a pending request)
        is never given up this way: a false start inside a real answer once replaced
        it. Each byte is looked at once (``bytes.find``), but again from a request's
        place when it is sent (``search_again``)."""
        buf, base, boundary = self._buf, self._base, self._boundary
        assert boundary is not None, "needles come with a boundary test"
        if self._inside_at != base:
            self._inside_at, self._inside_from, self._inside_starts = base, base + 1, []
        if len(buf) < 8 or boundary(buf, 0):
            return []
        starts, stop = self._inside_starts, len(buf) - 7
        taken = -1
        for start in list(starts):  # the places kept (before those not looked at yet)
            chains = self._arrived(start - base)
            if chains:
                taken = start - base
                break
            if chains is not None:
                starts.remove(start)
        pos = self._inside_from - base
        while taken < 0 and pos < stop:
            found = self._find_boundary(pos, stop)
            if found is None:
                break
            chains = self._arrived(found)
            if chains:
                taken = found
            elif chains is None and len(starts) < 64 and found + base not in starts:
                starts.append(found + base)  # (bounded: the first are the likeliest)
            pos = found + 1
        if taken < 0:
            self._inside_from = base + max(pos, stop)
            return []
        pos = taken
        self._inside_at = -1
        self._false_start(base, base + pos)
        del buf[:pos]
        self._base += pos
        self._check_start = False
        self._want = 0
        return self._frames()

    def _arrived(self, pos: int) -> bool | None:
        """Does the message at ``buf[pos]`` (still) answer and chain? None: its end (and
        the start after it) has not arrived yet."""
        buf, boundary = self._buf, self._boundary
        assert boundary is not None, "a chain is checked only with a boundary test"
        end = pos + 4 + _SIZE.unpack_from(buf, pos)[0]
        if end > len(buf) or end != len(buf) and end + HEAD > len(buf):
            return None
        if end == len(buf):
            return boundary(buf, pos)
        # (the next size too: zeros after a size read as a message's pass an answer's test)
        size = _SIZE.unpack_from(buf, end)[0]
        return 4 <= size <= UNSURE_MAX and boundary(buf, pos) and boundary(buf, end)

    def _end_cut(self, ended: bool) -> Frame:
        cut = self._cut
        assert cut is not None
        self._cut = None
        self._buf.clear()
        self._base = cut.end
        f = cut.frame(ended)
        if self.unsure_at == cut.start - 4:
            self.unsure_at = -1
            f.truncated = (f.truncated or "truncated") + UNSURE
        return f

    def _search_from(self, offset: int) -> None:
        """Search for the next message boundary, passing over the bytes from ``offset``."""
        self.resync = self._boundary is not None
        if self.resync and self._unread_from < 0:
            self._unread_from = offset

    def _found(self, offset: int) -> None:
        """The search ended at ``offset``: what it passed over is unread."""
        start, self._unread_from = self._unread_from, -1
        if 0 <= start < offset:
            last = self.unread[-1] if self.unread else None
            if last is not None and sum(last) == start:  # (a false start passed over too)
                self.unread[-1] = (last[0], offset - last[0])
            else:
                self.unread.append((start, offset - start))

    def gap(self, offset: int, length: int) -> list[Frame]:
        """``length`` bytes at stream ``offset`` were lost. A hole inside a message
        whose size is known cuts it: the message is collected on (holes marked, every
        captured byte kept) and returned truncated at its end, and framing goes on
        right after it; otherwise the framer searches for the next boundary."""
        end = offset + length
        out: list[Frame] = []
        if end <= self._skip_until:
            return out  # inside a message given up
        if offset < self._skip_until:
            offset, length = self._skip_until, end - self._skip_until
        cut = self._cut
        if cut is None:
            out += self._reframe()
        buf = self._unhold()
        self._want = 0
        if cut is None:
            size = _SIZE.unpack_from(buf)[0] if len(buf) >= 4 and not self.resync else -1
            if 4 <= size <= self.max_message and len(buf) >= 12 and offset < self._base + 4 + size:
                cut = self._cut = _Cut(self._base + 4, size, bytes(buf[4:]))
                buf.clear()
        if cut is not None:
            cut.hole(offset, min(end, cut.end) - offset)
            if end < cut.end:
                return out
            out.append(self._end_cut(False))
            if end == cut.end:
                return out  # the next message starts right here
        if self.resync:
            self._found(offset)  # the search passed over bytes up to the hole
        buf.clear()
        self._base = end
        self._search_from(end)
        return out

    def give_up(self) -> Frame | None:
        """Drop the partial message held (the memory budget is spent): its first bytes
        come back as a truncated frame (enough to read its header), the rest of it is
        skipped as it arrives. None when no message was begun (nothing to report)."""
        buf, cut = self._unhold(), self._cut
        self._want = 0
        if cut is not None:
            self._cut = None
            prefix, size, start = cut.prefix, cut.size, cut.start
        elif len(buf) >= 12 and not self.resync:
            size = _SIZE.unpack_from(buf)[0]
            prefix, start = bytes(buf[4 : 4 + HEAD_KEPT]), self._base + 4
        else:  # not even a header: search anew
            self._search_from(self._base)
            self._base += len(buf)
            buf.clear()
            return None
        buf.clear()
        head = prefix[:HEAD_KEPT]
        self._skip_until = self._base = start + size
        return Frame(
            start,
            head,
            f"truncated: the memory budget was spent: {size - len(head)} "
            f"of {size} bytes dropped (raise --max-memory to keep them)",
            budget=True,
        )

    def close(self) -> list[Frame]:
        """The capture ended: the messages an unconfirmed start hid (``_reframe``), then
        a message begun but not finished, truncated (with its size known)."""
        if self._cut is not None:
            return [self._end_cut(True)]
        out = self._reframe()
        buf = self._buf
        if self._unread_from >= 0:  # still searching: the rest is unread
            self._found(self._base + len(buf))
        if not buf:
            return out
        size = _SIZE.unpack_from(buf)[0] if len(buf) >= 12 and not self.resync else -1
        if 4 <= size <= self.max_message and len(buf) - 4 < size:
            self._cut = _Cut(self._base + 4, size, bytes(buf[4:]))
            buf.clear()
            out.append(self._end_cut(True))
        return out

    def _reframe(self) -> list[Frame]:
        """The bytes stop (the capture ends, or a hole) before the unconfirmed message
        begun reaches its claimed end. If a start inside it chains (its message ends
        where another plausible one starts, or where the bytes stop), that start was the
        real one: the 4 bytes before a real size (the end of noise, or of a message cut
        by a hole) often read as a size of their own, and the real size after them as a
        plausible header. The bytes before it are unread, and framing goes on from it."""
        buf = self._unhold()
        out: list[Frame] = []
        while self.unsure_at == self._base and not self.resync and len(buf) >= 4:
            found = self._inside(1, len(buf), True)
            if found is None:
                break
            self._false_start(self._base, self._base + found)
            del buf[:found]
            self._base += found
            self._check_start = False
            out += self._frames()
        return out

    def _false_start(self, offset: int, real: int) -> None:
        """The unconfirmed start at stream ``offset`` gives way to the one at ``real``
        (unconfirmed too): the bytes between are unread."""
        self._unread_from = offset
        self._found(real)
        self.unsure_at = real

    def _chains(self, pos: int, ended: bool) -> bool:
        """Does the message at ``buf[pos]`` end where another plausible one starts (or,
        ``ended``, exactly where the bytes stop)?"""
        buf, boundary = self._buf, self._boundary
        assert boundary is not None, "a chain is checked only with a boundary test"
        end = pos + 4 + _SIZE.unpack_from(buf, pos)[0]
        if end + HEAD <= len(buf):
            return boundary(buf, end)
        return ended and end == len(buf)

    def _inside(self, start: int, stop: int, ended: bool) -> int | None:
        """The first plausible start in ``buf[start:stop]`` whose message chains."""
        # (a message ending past the bytes held cannot be seen to chain: its start is not
        # even tested, so many such starts cost no more than a search)
        reach = len(self._buf) - (0 if ended else HEAD)
        while True:
            found = self._find_boundary(start, stop, reach)
            if found is None or self._chains(found, ended):
                return found
            start = found + 1

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
                self._found(self._base + pos)
                self.unsure_at = self._base + pos
            if len(buf) - pos < 4:
                break
            size = _SIZE.unpack_from(buf, pos)[0]
            if self.unsure_at >= 0 and self.unsure_at != self._base + pos:
                self.unsure_at = -1  # the unconfirmed message ended where said
            if self.unsure_at == self._base + pos and self._check_start:
                if len(buf) - pos < HEAD and size > len(buf) - pos - 4:
                    break  # (too few bytes to check the start yet)
                self._check_start = False
                assert self._boundary is not None, "checked only with a boundary test"
                if size > UNSURE_MAX or not self._boundary(buf, pos):
                    self.unsure_at = -1
                    self._search_from(self._base + pos)
                    pos += 1
                    continue
            unsure = self.unsure_at == self._base + pos
            # (a message has at least its correlation id: an unconfirmed start whose
            # size is smaller is bytes that only look like one, e.g. zeros in an answer)
            if size < (4 if unsure else 0) or size > (UNSURE_MAX if unsure else limit):
                if self._boundary is None:
                    self.error = (
                        f"implausible message size {size} at stream offset {self._base + pos}"
                    )
                    break
                self._search_from(self._base + pos)  # not a boundary: search from the next byte
                pos += 1
                continue
            if len(buf) - pos - 4 < size:
                want = 4 + size
                break
            end = pos + 4 + size
            chained = True
            if (
                self.unsure_at == self._base + pos
                and end + HEAD <= len(buf)
                and self._boundary is not None
                and not self._boundary(buf, end)
            ):
                # an unconfirmed message whose end does not chain: when a start inside it
                # does, that start is the real one (see _reframe)
                found = self._inside(pos + 1, end, False)
                if found is not None:
                    self._false_start(self._base + pos, self._base + found)
                    pos = found
                    continue
                chained = False
            # one copy (a bytearray slice would make a second)
            out.append(Frame(self._base + pos + 4, bytes(memoryview(buf)[pos + 4 : end])))
            pos = end
            if not chained:
                # nor is the start after it confirmed (an answer's tail read as a size
                # once swallowed the answers after it): a start inside its message may
                # still be taken when it chains (``_arriving``, ``_reframe``)
                self.unsure_at = self._base + end
        if pos:
            del buf[:pos]
            self._base += pos
        self._want = want
        return out

    def _find_boundary(
        self, start: int, stop: int | None = None, reach: int | None = None
    ) -> int | None:
        """The first plausible message start in ``buf[start:stop]`` (whose message ends
        by ``reach``, if given)."""
        buf, limit, boundary = self._buf, self.max_message, self._boundary
        if boundary is None:  # resync is only set with a boundary test
            return None
        limit = min(limit, UNSURE_MAX)
        if self._needles is not None:
            needles = self._needles()
            if len(needles) <= MAX_NEEDLES:
                return self._find_needles(needles, start, stop, reach, limit)
        # the candidates found at C speed: a size of at most 100 MiB starts with a byte of
        # 0-6, and a run of zero bytes (a size of 0 at each place) is skipped whole; a
        # Python step per byte took 70 CPU-s over 800 MB of zeros
        pos, end = start, len(buf) - 7 if stop is None else min(stop, len(buf) - 7)
        while pos < end:
            found = _SMALL_FIRST.search(buf, pos, end)
            if found is None:
                return None
            pos = found.start()
            size = _SIZE.unpack_from(buf, pos)[0]
            if size == 0:
                nonzero = _NONZERO.search(buf, pos, end + 3)
                if nonzero is None:
                    return None
                pos = max(pos + 1, nonzero.start() - 3)
                continue
            if (
                4 <= size <= limit
                and (reach is None or pos + 4 + size <= reach)
                and boundary(buf, pos)
            ):
                return pos
            pos += 1
        return None

    def _find_needles(
        self,
        needles: Collection[bytes],
        start: int,
        stop: int | None,
        reach: int | None,
        limit: int,
    ) -> int | None:
        """``_find_boundary`` with needles: only places they follow are tested, each
        needle found at C speed (a Python step per likely byte took 0.85 CPU-s per MB
        of a large answer's records)."""
        buf, boundary = self._buf, self._boundary
        assert boundary is not None, "needles come with a boundary test"
        end = len(buf) - 7 if stop is None else min(stop, len(buf) - 7)
        # the next place of each needle not yet tested (needles with none left dropped)
        found = {n: buf.find(n, start + 4, end + 8) - 4 for n in needles}
        found = {n: p for n, p in found.items() if p >= 0}
        while found:
            needle = min(found, key=found.__getitem__)
            pos = found[needle]
            if pos >= end:
                return None
            size = _SIZE.unpack_from(buf, pos)[0]
            if (
                4 <= size <= limit
                and (reach is None or pos + 4 + size <= reach)
                and boundary(buf, pos)
            ):
                return pos
            if size == 0:  # (a run of zeros, e.g. of id 0, passed over whole)
                nonzero = _NONZERO.search(buf, pos, end + 3)
                nxt = -1 if nonzero is None else buf.find(needle, nonzero.start() + 1, end + 8) - 4
            else:
                nxt = buf.find(needle, pos + 5, end + 8) - 4
            if nxt < 0:
                del found[needle]
            else:
                found[needle] = nxt
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
