"""Bytes of unknown provenance (a pasted blob) -> decoded Kafka messages.

A paste may be one message with or without its 4-byte size prefix, or several
size-prefixed messages in a row. Each reading that fits the bytes is decoded (the
framing core's ``chain`` finds the split; the correlation core pairs responses with
requests earlier in the same paste; guessing names what remains) and the reading
that decodes best is chosen: with hints, the one in which the hinted API decodes
cleanly; without, by the candidates' scores. ``Reading.why`` says which was chosen
over what.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..protocol import Options, decode_request, decode_response
from ..protocol.guess import Candidate, confidence, guess
from ..protocol.message import Message
from .correlation import Correlator
from .framing import chain


@dataclass
class Hints:
    api_key: int | None = None
    api_version: int | None = None
    direction: str | None = None        # "request" | "response" | None (unknown)


@dataclass
class Dissected:
    offset: int                  # where the message (after any size prefix) starts in the input
    size_prefixed: bool
    message: Message
    how: str                     # how the API was determined
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.message.problems and (not self.candidates or self.candidates[0].clean)


@dataclass
class Reading:
    items: list[Dissected]
    label: str                   # "one message without a size prefix", ...
    why: str = ""                # why this reading was chosen over the others

    def score(self) -> tuple:
        size = sum(len(i.message.data) for i in self.items) or 1
        clean = sum(len(i.message.data) for i in self.items if i.clean)
        best = max((i.candidates[0].score for i in self.items if i.candidates), default=0.0)
        return (all(i.clean for i in self.items), clean / size, best)


def readings(data: bytes) -> list[tuple[str, bool, list[tuple[int, int]]]]:
    """(label, size_prefixed, spans) of each way the bytes can be cut into messages."""
    out = [("one message without a size prefix", False, [(0, len(data))])]
    spans = chain(data)
    if spans is not None:
        label = ("one size-prefixed message" if len(spans) == 1 else
                 f"{len(spans)} size-prefixed messages")
        out.insert(0, (label, True, spans))
    return out


def dissect(data: bytes, hints: Hints | None = None, options: Options | None = None) -> list[Dissected]:
    return read_paste(data, hints, options).items


def read_paste(data: bytes, hints: Hints | None = None,
               options: Options | None = None) -> Reading:
    hints = hints or Hints()
    options = options or Options()
    best: Reading | None = None
    for label, prefixed, spans in readings(data):     # the size-prefixed reading first
        reading = Reading(_decode(data, spans, prefixed, hints, options), label)
        if best is None:
            best = reading
            if prefixed and all(i.clean for i in reading.items):
                best.why = "its sizes chain and every message decodes cleanly"
                break                   # no need to hold a second decode of the paste
            continue
        if reading.score() > best.score():          # ties: the size-prefixed reading
            reading, best = best, reading
        best.why = f"chosen over {reading.label}, which " + (
            "decodes less cleanly" if best.score() > reading.score() else "decodes as well")
    return best


def _decode(data: bytes, spans, prefixed: bool, hints: Hints, options: Options) -> list[Dissected]:
    pending: Correlator[tuple[int, int]] = Correlator()
    out: list[Dissected] = []
    for start, end in spans:
        item = _one(data[start:end], hints, options, pending)
        item.offset, item.size_prefixed = start, prefixed
        msg = item.message
        if msg.direction == "request" and msg.api_key is not None and msg.correlation_id is not None:
            pending.request(msg.correlation_id, (msg.api_key, msg.api_version))
        out.append(item)
    return out


def _one(chunk: bytes, hints: Hints, options: Options, pending: Correlator) -> Dissected:
    if hints.direction == "request":
        return Dissected(0, False, decode_request(chunk, options), "told: request")
    if hints.direction == "response" and hints.api_key is not None and hints.api_version is not None:
        return Dissected(0, False, decode_response(chunk, hints.api_key, hints.api_version, options),
                         "told: API and version")
    if len(chunk) >= 4:                 # (a told request returned above)
        corr = struct.unpack_from(">i", chunk)[0]
        if pending.waiting_for(corr):
            match, _ = pending.response(corr)
            key, version = match.item
            if hints.api_key in (None, key):
                msg = decode_response(chunk, key, version, options)
                if not msg.problems:
                    return Dissected(0, False, msg,
                                     f"paired with request {corr} in the same input")
    cands = guess(chunk, hints.direction, hints.api_key, hints.api_version)
    if not cands:
        return Dissected(0, False, decode_request(chunk, options),
                         "no candidate matches the hints", [])
    top = cands[0]
    if top.direction == "request":
        msg = decode_request(chunk, options)
    else:
        msg = decode_response(chunk, top.api_key, top.api_version, options)
    if top.direction == "request" and top.clean:
        how = "request header names the API"
    elif top.clean:
        how = f"guessed {top.label} (confidence {confidence(cands)})"
    else:
        how = f"no API decodes these bytes cleanly; the closest is {top.label}"
    return Dissected(0, False, msg, how, cands)
