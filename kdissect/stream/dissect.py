"""Bytes of unknown provenance (a pasted blob) -> decoded Kafka messages.

Finds whether the bytes carry the 4-byte size prefix, splits a dump of several
size-prefixed messages, pairs responses with requests seen earlier in the same bytes,
and guesses the API of whatever remains unexplained.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..protocol import Options, decode_request, decode_response
from ..protocol.guess import Candidate, confidence, guess
from ..protocol.message import Message


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


def split_messages(data: bytes) -> tuple[bool, list[tuple[int, int]]]:
    """(size_prefixed, [(start, end)]) of the messages in ``data``.

    A single message whose size prefix matches the input exactly, or a chain of at
    least two size-prefixed messages that uses every byte; otherwise the whole input
    is one message without a prefix."""
    n = len(data)
    if n >= 8 and struct.unpack_from(">i", data)[0] == n - 4:
        return True, [(4, n)]
    spans, pos = [], 0
    while pos + 4 <= n:
        size = struct.unpack_from(">i", data, pos)[0]
        if size < 4 or pos + 4 + size > n:
            break
        spans.append((pos + 4, pos + 4 + size))
        pos += 4 + size
    if pos == n and len(spans) >= 2:
        return True, spans
    return False, [(0, n)]


def dissect(data: bytes, hints: Hints | None = None, options: Options | None = None) -> list[Dissected]:
    hints = hints or Hints()
    options = options or Options()
    prefixed, spans = split_messages(data)
    pending: dict[int, tuple[int, int]] = {}        # correlation id -> (api_key, version)
    out: list[Dissected] = []
    for start, end in spans:
        chunk = data[start:end]
        item = _one(chunk, hints, options, pending)
        item.offset, item.size_prefixed = start, prefixed
        msg = item.message
        if msg.direction == "request" and msg.api_key is not None and msg.correlation_id is not None:
            pending[msg.correlation_id] = (msg.api_key, msg.api_version)
        out.append(item)
    return out


def _one(chunk: bytes, hints: Hints, options: Options, pending) -> Dissected:
    if hints.direction == "request":
        return Dissected(0, False, decode_request(chunk, options), "told: request")
    if hints.direction == "response" and hints.api_key is not None and hints.api_version is not None:
        return Dissected(0, False, decode_response(chunk, hints.api_key, hints.api_version, options),
                         "told: API and version")
    if len(chunk) >= 4:                 # (a told request returned above)
        corr = struct.unpack_from(">i", chunk)[0]
        if corr in pending and hints.api_key in (None, pending[corr][0]):
            key, version = pending.pop(corr)
            msg = decode_response(chunk, key, version, options)
            if not msg.problems:
                return Dissected(0, False, msg, f"paired with request {corr} in the same input")
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
    else:
        how = f"guessed {top.label} (confidence {confidence(cands)})"
    return Dissected(0, False, msg, how, cands)
