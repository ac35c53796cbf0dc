"""Which reading of a paste to show: a small policy on top of the engine.

Each way the framing core cuts the paste (``pasted.cuts``, then ``pasted.resync_cut``)
runs through the engine as a ``PastedBytes`` source; its items (decoded, paired and
guessed there) make a ``Reading``. The policy, in order:

1. ``--records``: the one reading as a bare record batch; ``--at N``: everything from
   byte N (offsets still count from the paste's start).
2. The cuts from the paste's start, likeliest first (chained size prefixes, the whole
   paste without a prefix, a prefix that nearly matches). When the first cut has size
   prefixes that chain and every message decodes cleanly, it is the reading (the others
   are not decoded at all).
3. Otherwise the best by ``Reading.score``: all clean, then the share of bytes in clean
   messages, then fewer bytes skipped, then the best guess's score; a tie keeps the
   likelier cut.
4. If the best is still not clean (and the paste is not a bare body, nor read from
   ``--at``): the resync cut of a mid-stream fragment competes the same way.

``Reading.why`` says what was chosen over what.

A pasted text may hold several regions that can be bytes (``blob.find_candidates``):
``read_regions`` reads each as above and ranks them by ``Candidate.rank`` (every
message clean, size prefixes that match, bytes in clean messages less bytes in broken
ones, the guess's score); the best region is the paste's reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol import Options
from ..stream.engine import Engine
from ..stream.sink import ItemSink
from .pasted import Cut, Dissected, Hints, PastedBytes, cuts, records_cut, resync_cut


@dataclass
class Reading:
    items: list[Dissected]
    label: str  # "one message without a size prefix", ...
    why: str = ""  # why this reading was chosen over the others
    skipped: int = 0  # bytes before the first message (--at, resync)

    def score(self) -> tuple:
        size = sum(len(i.message.data) for i in self.items) or 1
        clean = sum(len(i.message.data) for i in self.items if i.clean)
        best = max((i.candidates[0].score for i in self.items if i.candidates), default=0.0)
        return (all(i.clean for i in self.items), clean / size, -self.skipped, best)


def read_paste(data: bytes, hints: Hints | None = None, options: Options | None = None) -> Reading:
    hints = hints or Hints()
    options = options or Options()
    base = max(0, min(hints.at, len(data)))
    data = data[base:]
    if hints.records:
        return _shift(_read(data, records_cut(data), hints, options), base)
    best: Reading | None = None
    for cut in cuts(data, hints.api_key is not None):  # the likeliest first
        if hints.body:
            cut.label = cut.label.replace("message", "body")
        reading = _read(data, cut, hints, options)
        if best is None:
            best = reading
            if cut.prefixed and all(i.clean for i in reading.items):
                best.why = "its sizes chain and every message decodes " + (
                    "cleanly"
                    if all(i.whole for i in reading.items)
                    else "without a problem, bytes a newer version added left unexplained"
                )
                break  # no need to hold a second decode of the paste
            continue
        best = _better(best, reading)
    assert best is not None, "cuts() gives at least one"
    if not all(i.clean for i in best.items) and not hints.body and base == 0:
        resync = resync_cut(data)
        if resync is not None:
            best = _better(best, _read(data, resync, hints, options))
    return _shift(best, base)


class _Items(ItemSink):
    """The sink of one reading: keeps the paste's items."""

    def __init__(self) -> None:
        self.items: list[Dissected] = []

    def item(self, item: Dissected) -> None:
        self.items.append(item)


def _read(data: bytes, cut: Cut, hints: Hints, options: Options) -> Reading:
    """One cut through the engine: its items make a reading."""
    sink = _Items()
    Engine(PastedBytes(data, cut, hints, options), sink, options).run()
    return Reading(sink.items, cut.label, skipped=cut.skipped)


def _better(best: Reading, reading: Reading) -> Reading:
    if reading.score() > best.score():  # ties: the earlier (likelier) reading
        reading, best = best, reading
    best.why = f"chosen over {reading.label}, which " + (
        "decodes less cleanly" if best.score() > reading.score() else "decodes as well"
    )
    return best


def _shift(reading: Reading, base: int) -> Reading:
    """Offsets from the start of the paste, not from --at."""
    if base:
        for item in reading.items:
            item.offset += base
        reading.skipped += base
        reading.label += f", from offset {base}"
    return reading


class Region(Protocol):
    """A region of a pasted text that can be bytes (blob.find_candidates gives them)."""

    @property
    def data(self) -> bytes: ...


@dataclass
class Candidate:
    """One region of a pasted text read as bytes, and the reading of those bytes."""

    blob: Any  # a Region
    reading: Reading

    def rank(self) -> tuple:
        """Better first when larger: every message clean, then size prefixes that match
        the bytes, then the bytes in clean messages less those in broken ones (a header
        with a known API and a clean body read more of them), then the guess's score."""
        items = self.reading.items
        clean = sum(len(i.message.data) for i in items if i.clean)
        broken = sum(len(i.message.data) for i in items if not i.clean)
        best = max((i.candidates[0].score for i in items if i.candidates), default=0.0)
        framed = all(i.size_prefixed and not i.findings for i in items)  # sizes that match
        return (
            all(i.clean for i in items),
            framed,
            clean - 2 * broken - self.reading.skipped,
            best,
        )


@dataclass
class TextReading:
    """The chosen region's reading, and every candidate region ranked (chosen first)."""

    candidates: list[Candidate]
    chosen: int = 0

    @property
    def blob(self) -> Any:
        return self.candidates[self.chosen].blob

    @property
    def reading(self) -> Reading:
        return self.candidates[self.chosen].reading


DECODE_BUDGET = 4 << 20  # bytes decoded over all the candidates of one paste


class NoSuchCandidate(ValueError):
    pass


def read_regions(
    regions: Sequence[Region],
    hints: Hints | None = None,
    options: Options | None = None,
    pick: int | None = None,
) -> TextReading:
    """The regions of a pasted text that can be bytes (at least one), each read as a
    paste, ranked by how well they decode: the best is the paste's reading (``pick``:
    the region of that rank instead, 1 = the best)."""
    assert regions, "find_candidates found something"
    hints = hints or Hints()
    decoded: list[Candidate] = []
    spent = 0
    for region in regions:  # the decode work is bounded, whatever the paste
        if decoded and spent + len(region.data) > DECODE_BUDGET:
            continue
        spent += len(region.data)
        decoded.append(Candidate(region, read_paste(region.data, hints, options)))
    ranked = sorted(decoded, key=Candidate.rank, reverse=True)  # stable: earlier wins ties
    chosen = 0
    if pick is not None:
        if not 1 <= pick <= len(ranked):
            raise NoSuchCandidate(
                f"there is no candidate {pick}: the input holds "
                f"{len(ranked)} (see --show-extraction)"
            )
        chosen = pick - 1
    return TextReading(ranked, chosen)
