"""Responses whose request was not captured (a capture of one direction, or begun
mid-connection): which API and version each answers, guessed cheaply and boundedly.

A full guess (protocol/guess.py) tries every API and version, some milliseconds per
response; a one-way capture holds thousands. But a connection's answers repeat a few
kinds (a consumer's Fetch and Heartbeat, a producer's Produce), and so does a capture.
So each orphan is first read as the kinds its connection's requests use (an answer
that reads cleanly as several versions is the version the client speaks: Fetch v13 and
v16 answers are alike but for a tagged field), then as the kinds its connection's
earlier orphans were, then as the capture's commonest; only when none of those reads it
cleanly (every byte, by the values decoder) is a full guess made, at most ``FULL_PER_CONNECTION`` times per
connection, its answer remembered by the response's shape (its length and first body
bytes: the same answer on another connection is not guessed again).
"""

from __future__ import annotations

from typing import Any

from collections import Counter, OrderedDict

from ..protocol.names import api_name
from ..protocol.values import bare_values

# full guesses: the first FULL_FREE of a capture, then one per FULL_EVERY orphans (on
# average ~10 ms / FULL_EVERY each), at most FULL_PER_CONNECTION on one connection
FULL_FREE = 64
FULL_EVERY = 250
FULL_PER_CONNECTION = 8
RECENT = 3  # kinds remembered per connection
SPOKEN = 8  # kinds of a connection's requests remembered
COMMON = 24  # the capture's commonest kinds tried after them (a failing
# read costs a few microseconds, a full guess milliseconds)
SHAPES = 4096  # shapes remembered (a bound)
STREAMS = 65536  # connections remembered (a bound)
_SHAPE_BYTES = 48  # body bytes that make a shape

Kind = tuple[int, int]  # (api key, version)


class Orphans:
    """One per capture (enrichment's state): ``guess(stream, data)`` -> (kind or None,
    how it was decided)."""

    def __init__(self) -> None:
        # stream -> (its kinds, latest first; full guesses made), the latest streams
        self.streams: OrderedDict[int, tuple[list[Kind], list[int]]] = OrderedDict()
        # stream -> the kinds its requests used, latest first (oldest streams forgotten)
        self.spoken: dict[int, list[Kind]] = {}
        self.kinds: Counter[Kind] = Counter()  # the capture's orphans by kind
        self.shapes: OrderedDict[tuple[Any, ...], Kind | None] = OrderedDict()
        self.seen = 0  # orphans asked about
        self.full_guesses = 0  # full guesses made

    def spoke(self, stream: int, kind: Kind) -> None:
        """A request of ``kind`` on ``stream`` (called for every request: cheap)."""
        kinds = self.spoken.get(stream)
        if kinds is None:
            kinds = self.spoken[stream] = []
            if len(self.spoken) > STREAMS:
                del self.spoken[next(iter(self.spoken))]
        elif kinds[0] == kind:
            return
        _to_front(kinds, kind, SPOKEN)

    def guess(self, stream: int, data: bytes) -> tuple[Kind | None, str]:
        state = self.streams.get(stream)
        if state is None:
            state = self.streams[stream] = ([], [0])
            if len(self.streams) > STREAMS:
                self.streams.popitem(last=False)
        else:
            self.streams.move_to_end(stream)
        recent, full = state
        self.seen += 1
        # the connection's own requests first, before any other connection's answer
        # alike (not remembered by shape: another client may speak another version)
        spoken = self.spoken.get(stream, [])
        for said in spoken:
            if _reads(data, said):
                return self._found(recent, said), (
                    f"guessed {_label(said)} (reads cleanly as a kind the connection's "
                    f"own requests use)"
                )
        shape = (len(data), data[4 : 4 + _SHAPE_BYTES])
        if shape in self.shapes:
            self.shapes.move_to_end(shape)
            kind = self.shapes[shape]
            if kind is None:
                return None, "no API decodes it cleanly"
            return self._found(recent, kind), f"guessed {_label(kind)} (as an alike answer)"
        tried = set(spoken)
        for kind in recent + [k for k, _ in self.kinds.most_common(COMMON)]:
            if kind in tried:
                continue
            tried.add(kind)
            if _reads(data, kind):
                self._remember(shape, kind)
                where = "the connection's" if kind in recent else "the capture's"
                return self._found(
                    recent, kind
                ), f"guessed {_label(kind)} (reads cleanly as {where} other orphans)"
        if full[0] >= FULL_PER_CONNECTION:
            return None, (
                f"not guessed: {FULL_PER_CONNECTION} full guesses on this "
                f"connection found no kind that reads it"
            )
        if self.full_guesses >= FULL_FREE + self.seen // FULL_EVERY:
            return None, (
                f"not guessed: reads as none of the kinds seen; the capture's "
                f"{self.full_guesses} full guesses are spent for now"
            )
        full[0] += 1
        self.full_guesses += 1
        # (not the values decoder over every kind: it compiles a reader per kind, more
        # than a full guess costs, once per process)
        from ..protocol.guess import guess  # (only with orphans: not at start-up)

        cands = guess(data, "response")
        top = cands[0] if cands and cands[0].clean else None
        kind = (top.api_key, top.api_version) if top is not None else None
        self._remember(shape, kind)
        if top is None:
            return None, "no API decodes it cleanly"
        assert kind is not None
        return self._found(recent, kind), f"guessed {top.label}"

    def _remember(self, shape: tuple[Any, ...], kind: Kind | None) -> None:
        self.shapes[shape] = kind
        if len(self.shapes) > SHAPES:
            self.shapes.popitem(last=False)

    def _found(self, recent: list[Kind], kind: Kind) -> Kind:
        _to_front(recent, kind, RECENT)
        self.kinds[kind] += 1
        return kind


def _to_front(kinds: list[Kind], kind: Kind, keep: int) -> None:
    """``kind`` first in ``kinds`` (latest first, at most ``keep``)."""
    if kind in kinds:
        kinds.remove(kind)
    kinds.insert(0, kind)
    del kinds[keep:]


def _reads(data: bytes, kind: Kind) -> bool:
    """Does the whole response read cleanly as this kind?"""
    return bare_values(data, "response", kind[0], kind[1]) is not None


def _label(kind: Kind) -> str:
    return f"{api_name(kind[0])} v{kind[1]} response"
