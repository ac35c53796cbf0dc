"""Bytes of unknown provenance (a pasted blob) -> decoded Kafka messages.

A paste may be one message with or without its 4-byte size prefix, several
size-prefixed messages in a row, a size-prefixed message whose prefix does not match
what was pasted, a fragment from mid-stream, a body without its header, or a bare
record batch / message set. Each reading that fits the bytes is decoded (the framing
core's ``chain`` finds back-to-back messages and its resync finds the first message
boundary in a fragment; the correlation core pairs responses with requests earlier in
the same paste; guessing names what remains) and the reading that decodes best is
chosen: with hints, the one in which the hinted API decodes cleanly; without, by the
candidates' scores. ``Reading.why`` says which was chosen over what.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..protocol import Options, decode_request, decode_response, schemas
from ..protocol.findings import Finding
from ..protocol.guess import Candidate, confidence, guess
from ..protocol.message import Message, decode_bare_body, decode_request_as, peek_request_header
from ..protocol.node import Node
from ..protocol.records import read_records
from .connection import plausible_request
from .correlation import Correlator
from .framing import Framer, chain


@dataclass
class Hints:
    api_key: int | None = None
    api_version: int | None = None
    direction: str | None = None        # "request" | "response" | None (unknown)
    body: bool = False                  # the bytes are a body without its header
    records: bool = False               # the bytes are a bare record batch / message set
    at: int = 0                         # start reading at this offset of the paste


@dataclass
class Dissected:
    offset: int                  # where the message (after any size prefix) starts in the input
    size_prefixed: bool
    message: Message
    how: str                     # how the API was determined
    candidates: list[Candidate] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.message.problems and (not self.candidates or self.candidates[0].clean)


@dataclass
class Reading:
    items: list[Dissected]
    label: str                   # "one message without a size prefix", ...
    why: str = ""                # why this reading was chosen over the others
    skipped: int = 0             # bytes before the first message (--at, resync)

    def score(self) -> tuple:
        size = sum(len(i.message.data) for i in self.items) or 1
        clean = sum(len(i.message.data) for i in self.items if i.clean)
        best = max((i.candidates[0].score for i in self.items if i.candidates), default=0.0)
        return (all(i.clean for i in self.items), clean / size, -self.skipped, best)


def readings(data: bytes) -> list[tuple[str, bool, list[tuple[int, int]], list[Finding]]]:
    """(label, size_prefixed, spans, findings) of each way the bytes can be cut into
    messages, the likeliest first."""
    out: list[tuple[str, bool, list[tuple[int, int]], list[Finding]]] = [
        ("one message without a size prefix", False, [(0, len(data))], [])]
    spans = chain(data)
    if spans is not None:
        label = ("one size-prefixed message" if len(spans) == 1 else
                 f"{len(spans)} size-prefixed messages")
        out.insert(0, (label, True, spans, []))
    elif len(data) >= 12:
        size, left = struct.unpack_from(">i", data)[0], len(data) - 4
        # a prefix that is near the byte count: a paste cut short, or with bytes after it
        if 8 <= size != left and size <= 2 * left + 64:
            end = 4 + min(size, left)
            what = (f"{size - left} bytes are missing" if size > left else
                    f"{left - size} bytes follow the message")
            finding = Finding("size_mismatch", f"the size prefix says {size} bytes, but "
                                               f"{left} follow it: {what}")
            out.append((f"one size-prefixed message whose size ({size}) does not match the "
                        f"{left} bytes after it", True, [(4, end)], [finding]))
    return out


def dissect(data: bytes, hints: Hints | None = None, options: Options | None = None) -> list[Dissected]:
    return read_paste(data, hints, options).items


def read_paste(data: bytes, hints: Hints | None = None,
               options: Options | None = None) -> Reading:
    hints = hints or Hints()
    options = options or Options()
    base = max(0, min(hints.at, len(data)))
    data = data[base:]
    if hints.records:
        return _shift(Reading([_records(data, options)], "a bare record batch / message "
                              "set (told: --records)"), base)
    best: Reading | None = None
    for label, prefixed, spans, findings in readings(data):   # the likeliest first
        if hints.body:
            label = label.replace("message", "body")
        reading = Reading(_decode(data, spans, prefixed, hints, options), label)
        for f in findings:
            for item in reading.items:
                item.findings.append(f)
        if best is None:
            best = reading
            if prefixed and all(i.clean for i in reading.items):
                best.why = "its sizes chain and every message decodes cleanly"
                break                   # no need to hold a second decode of the paste
            continue
        best = _better(best, reading)
    assert best is not None, "readings() gives at least one"
    if not all(i.clean for i in best.items) and not hints.body and base == 0:
        resynced = _resync(data, hints, options)
        if resynced is not None:
            best = _better(best, resynced)
    return _shift(best, base)


def _better(best: Reading, reading: Reading) -> Reading:
    if reading.score() > best.score():              # ties: the earlier (likelier) reading
        reading, best = best, reading
    best.why = f"chosen over {reading.label}, which " + (
        "decodes less cleanly" if best.score() > reading.score() else "decodes as well")
    return best


def _shift(reading: Reading, base: int) -> Reading:
    """Offsets from the start of the paste, not from --at."""
    if base:
        for item in reading.items:
            item.offset += base
        reading.skipped += base
        reading.label += f", from offset {base}"
    return reading


def _resync(data: bytes, hints: Hints, options: Options) -> Reading | None:
    """A fragment from mid-stream: the framing core searches for the first place where a
    size-prefixed request starts, and frames from there."""
    framer = Framer(plausible_request)
    framer.resync = True
    frames = framer.feed(data, 0)
    if not frames or frames[0].offset - 4 <= 0:
        return None
    spans = [(f.offset, f.offset + len(f.data)) for f in frames]
    skip = spans[0][0] - 4
    items = _decode(data, spans, True, hints, options)
    return Reading(items, f"a fragment: {skip} bytes skipped, then {len(items)} "
                          f"size-prefixed message(s) found by resync", skipped=skip)


def _records(data: bytes, options: Options) -> Dissected:
    ctx = options.for_message()
    root = Node("Records", "message", 0, len(data))
    holder = root.add(Node("records", "records", 0, len(data)))
    read_records(data, holder, 0, len(data), ctx)
    msg = Message("records", None, None, None, None, root, data)
    return Dissected(0, False, msg, "told: a bare record batch / message set (--records)")


def _decode(data: bytes, spans, prefixed: bool, hints: Hints, options: Options) -> list[Dissected]:
    pending: Correlator[tuple[int, int | None]] = Correlator()
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
    if hints.body:
        return _body(chunk, hints, options)
    if hints.direction == "request":
        return _told_request(chunk, hints, options)
    if hints.direction == "response" and hints.api_key is not None and hints.api_version is not None:
        return Dissected(0, False, decode_response(chunk, hints.api_key, hints.api_version, options),
                         "told: API and version")
    if len(chunk) >= 4:                 # (a told request returned above)
        corr = struct.unpack_from(">i", chunk)[0]
        if pending.waiting_for(corr):
            match, _ = pending.response(corr)
            assert match is not None, "waiting_for(corr) said so"
            key, version = match.item
            if hints.api_key in (None, key):
                msg = decode_response(chunk, key, version, options)
                if not msg.problems:
                    return Dissected(0, False, msg,
                                     f"paired with request {corr} in the same input")
    cands = guess(chunk, hints.direction, hints.api_key, hints.api_version)
    head = peek_request_header(chunk) if hints.direction is None else None
    readable_request = head is not None and schemas.is_known(head.api_key, head.api_version) \
        and (head.client_id is None or head.client_id.isprintable())
    if hints.api_key is not None and readable_request and hints.direction is None and \
            not any(c.clean for c in cands):
        return _told_request(chunk, hints, options)     # a header that disagrees with hints
    if not cands or (readable_request and not any(c.clean for c in cands)):
        # a request whose body decodes badly keeps its header
        how = ("no candidate matches the hints" if not cands else
               "the request header names the API; its body does not decode cleanly")
        return Dissected(0, False, decode_request(chunk, options), how, cands)
    top = cands[0]
    if top.direction == "request":
        msg = decode_request(chunk, options)
    else:
        msg = decode_response(chunk, top.api_key, top.api_version, options)
    if top.direction == "request" and top.clean:
        how = "request header names the API"
    elif top.clean:
        how = f"guessed {top.label} (confidence {confidence(cands, len(chunk))})"
    else:
        how = f"no API decodes these bytes cleanly; the closest is {top.label}"
    return Dissected(0, False, msg, how, cands)


def _told_request(chunk: bytes, hints: Hints, options: Options) -> Dissected:
    """A request; hinted API/version win over a header that says otherwise."""
    msg = decode_request(chunk, options)
    key = hints.api_key if hints.api_key is not None else msg.api_key
    version = hints.api_version if hints.api_version is not None else msg.api_version
    if key is None or (key, version) == (msg.api_key, msg.api_version) or version is None:
        return Dissected(0, False, msg, "told: request")
    said = f"{msg.api_name} v{msg.api_version}"
    msg = decode_request_as(chunk, key, version, options)
    finding = Finding("hint_disagrees", f"the request header says {said}; read as "
                                        f"{msg.api_name} v{version} as told")
    return Dissected(0, False, msg, f"told: {msg.api_name} v{version} (the header says {said})",
                     findings=[finding])


def _body(chunk: bytes, hints: Hints, options: Options) -> Dissected:
    """A body without its header: as told, or the best of every layout."""
    key, version, direction = hints.api_key, hints.api_version, hints.direction
    if key is not None and version is not None and direction is not None:
        return Dissected(0, False, decode_bare_body(chunk, key, version, direction, options),
                         "told: a body of this API and version")
    cands = guess(chunk, direction, key, version, body=True)
    if not cands:
        msg = Message(direction or "response", key, version, None, None,
                      Node("body", "bytes", 0, len(chunk), chunk,
                           problem="no API matches the hints", code="unknown_api"), chunk)
        return Dissected(0, False, msg, "no candidate matches the hints")
    top = cands[0]
    msg = decode_bare_body(chunk, top.api_key, top.api_version, top.direction, options)
    how = (f"guessed the body of {top.label} (confidence {confidence(cands, len(chunk))})"
           if top.clean else f"no API decodes this body cleanly; the closest is {top.label}")
    return Dissected(0, False, msg, how, cands)
