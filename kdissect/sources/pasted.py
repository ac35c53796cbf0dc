"""A paste as a source: bytes of unknown provenance, cut one way into messages.

A paste may be one message with or without its 4-byte size prefix, several
size-prefixed messages in a row, a size-prefixed message whose prefix does not match
what was pasted, a fragment from mid-stream, a body without its header, or a bare
record batch / message set. ``cuts`` and ``resync_cut`` list the ways the framing core
cuts the bytes (``chain`` finds back-to-back messages, its resync the first message
boundary in a fragment); ``PastedBytes`` is the source of one cut: it decodes each
message in order, pairs responses with requests earlier in the paste through the
correlation core, names the rest with the guesser (``protocol.guess``) and the hints,
and emits each message as an item (``Dissected``):

    Engine(PastedBytes(data, cut, hints, options), sink).run()

Which cut is the paste's reading is decided on top of this, by the policy of
``sources/paste_choice.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..protocol import Options, api_name, decode_request, decode_response
from ..protocol.message import answered_version
from ..protocol.context import Decoding
from ..protocol.findings import Finding
from ..protocol.guess import Candidate, believable_request, confidence, guess
from ..protocol.message import Message, decode_bare_body, decode_request_as, peek_request_header
from ..protocol.node import Node
from ..protocol.crc import crc32_of
from ..protocol.records import read_records
from ..protocol.schemas import readable
from ..stream.connection import plausible_request
from ..stream.correlation import Correlator
from ..stream.framing import MAX_MESSAGE, Framer, chain
from ..stream.sink import Sink


@dataclass
class Hints:
    api_key: int | None = None
    api_version: int | None = None
    direction: str | None = None  # "request" | "response" | None (unknown)
    body: bool = False  # the bytes are a body without its header
    records: bool = False  # the bytes are a bare record batch / message set
    at: int = 0  # start reading at this offset of the paste


@dataclass
class Dissected:
    """One message of a paste: the item ``PastedBytes`` emits."""

    offset: int  # where the message (after any size prefix) starts in the input
    size_prefixed: bool
    message: Message
    how: str  # how the API was determined
    candidates: list[Candidate] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Decoded without a problem (what choosing a reading weighs)."""
        return not self.message.problems and (not self.candidates or self.candidates[0].clean)

    @property
    def whole(self) -> bool:
        """Clean, and every byte explained by its layout: a version newer than the
        schemas, read as the newest known one, may leave what it added unexplained (what
        the reading says of itself)."""
        return self.clean and not self.message.unexplained


@dataclass
class Cut:
    """One way to cut a paste into messages: ``spans`` (start, end) of each message's
    bytes after any size prefix; ``findings`` go to every message; ``skipped``: bytes
    before the first message. ``records``: the whole paste is a bare record batch."""

    label: str
    prefixed: bool
    spans: list[tuple[int, int]]
    findings: list[Finding] = field(default_factory=list)
    skipped: int = 0
    records: bool = False
    short: bool = False  # the message's size prefix says it goes on past the bytes


def cuts(data: bytes, told: bool = False) -> list[Cut]:
    """The ways the bytes can be cut into messages from their start, the likeliest first
    (``told``: the API is hinted, so a prefix larger than the bytes is believed)."""
    out = [Cut("one message without a size prefix", False, [(0, len(data))])]
    spans = chain(data)
    if spans is not None:
        label = (
            "one size-prefixed message"
            if len(spans) == 1
            else f"{len(spans)} size-prefixed messages"
        )
        out.insert(0, Cut(label, True, spans))
    elif len(data) >= 12:
        size, left = struct.unpack_from(">i", data)[0], len(data) - 4
        if left < size <= MAX_MESSAGE and not _request_header(data) and _plausible_id(data):
            # a fixture or a dump (a packet's payload) that holds the first bytes of a
            # longer message: decode what is there (slices only: the prefix never sizes
            # anything), the rest is missing. The likeliest reading when the API is told
            # or a request header follows; else (a response's first bytes?) it competes
            # with the others. (Bytes that start with a request header, client id and
            # all, have no prefix.)
            finding = Finding(
                "truncated",
                f"the size prefix says {size} bytes, but only "
                f"{left} were pasted: the last {size - left} are "
                f"missing; what is there is decoded",
            )
            short = Cut(
                f"one size-prefixed message cut short ({left} of {size} bytes)",
                True,
                [(4, len(data))],
                [finding],
                short=True,
            )
            out.insert(0 if told or _request_header(data[4:]) else len(out), short)
        # a prefix that is near the byte count: a paste cut short, or with bytes after it
        elif 8 <= size != left and size <= 2 * left + 64:
            end = 4 + min(size, left)
            what = (
                f"{size - left} bytes are missing"
                if size > left
                else f"{left - size} bytes follow the message"
            )
            finding = Finding(
                "size_mismatch", f"the size prefix says {size} bytes, but {left} follow it: {what}"
            )
            out.append(
                Cut(
                    f"one size-prefixed message whose size ({size}) does not match "
                    f"the {left} bytes after it",
                    True,
                    [(4, end)],
                    [finding],
                )
            )
    return out


def _plausible_id(data: bytes) -> bool:
    """The 4 bytes after a size prefix can be a correlation id (a response's first
    field, or a request's, after its API key and version): clients count them up from
    0, and one above 2**28 is more likely text (four printable characters read as a
    number are above it) or a body's first fields."""
    return 0 <= struct.unpack_from(">i", data, 4)[0] < 1 << 28 or _request_header(data[4:])


def _request_header(chunk: bytes) -> bool:
    """The bytes start with a request header of a known API and version and a client id
    (zeros, as a response's correlation id often is, read as a Produce v0 header)."""
    head = peek_request_header(chunk)
    return (
        head is not None
        and believable_request(head.api_key, head.api_version, head.client_id)
        and bool(head.client_id)
        and head.client_id is not None
        and head.client_id.isprintable()
    )


def resync_cut(data: bytes) -> Cut | None:
    """A fragment from mid-stream: the framing core searches for the first place where a
    size-prefixed request starts, and frames from there (None: nowhere after byte 0)."""
    framer = Framer(plausible_request)
    framer.resync = True
    frames = framer.feed(data, 0)
    if not frames or frames[0].offset - 4 <= 0:
        return None
    spans = [(f.offset, f.offset + len(f.data)) for f in frames]
    skip = spans[0][0] - 4
    return Cut(
        f"a fragment: {skip} bytes skipped, then {len(spans)} size-prefixed "
        f"message(s) found by resync",
        True,
        spans,
        skipped=skip,
    )


def records_cut(data: bytes) -> Cut:
    return Cut(
        "a bare record batch / message set (told: --records)", False, [(0, len(data))], records=True
    )


class PastedBytes:
    """The source of one cut of a paste: a ``Dissected`` item per message, in order."""

    def __init__(
        self, data: bytes, cut: Cut, hints: Hints | None = None, options: Options | None = None
    ):
        self.data, self.cut = data, cut
        self.hints, self.options = hints or Hints(), options or Options()

    def feed(self, sink: Sink) -> None:
        for item in self.items():
            sink.item(item)
        sink.done()

    def items(self) -> Iterator[Dissected]:
        data, hints, options = self.data, self.hints, self.options
        if self.cut.records:
            yield _records(data, options)
            return
        pending: Correlator[tuple[int, int | None]] = Correlator()
        for start, end in self.cut.spans:
            item = _one(data[start:end], hints, options, pending, self.cut.short)
            item.offset, item.size_prefixed = start, self.cut.prefixed
            item.findings.extend(self.cut.findings)
            msg = item.message
            assumed = msg.assumed()
            if assumed is not None:
                item.findings.append(Finding("assumed_version", assumed, msg.direction))
            if (
                msg.direction == "request"
                and msg.api_key is not None
                and msg.correlation_id is not None
            ):
                pending.request(msg.correlation_id, (msg.api_key, msg.api_version))
            yield item


def _records(data: bytes, options: Options) -> Dissected:
    ctx = Decoding(options)
    root = Node("Records", "message", 0, len(data))
    holder = root.add(Node("records", "records", 0, len(data)))
    if _bare_message(data):
        _read_bare_message(data, holder, ctx)
        how = (
            "told: records (--records); a bare v0/v1 message without its offset and size, "
            "read as a MessageSet entry"
        )
    else:
        read_records(data, holder, 0, len(data), ctx)
        how = "told: a bare record batch / message set (--records)"
    msg = Message("records", None, None, None, None, root, data)
    return Dissected(0, False, msg, how)


def _bare_message(data: bytes) -> bool:
    """A MessageSet v0/v1 message without its offset and size: crc, magic 0 or 1, ...,
    the CRC verifying (a record batch starts with an 8-byte offset instead)."""
    return (
        len(data) >= 14
        and data[4] in (0, 1)
        and crc32_of(data, 4, len(data)) == int.from_bytes(data[:4], "big")
    )


def _read_bare_message(data: bytes, holder: Node, ctx: Decoding) -> None:
    """Read it as the one entry of a MessageSet: the records reader is given the offset
    and size it lacks, and the entry's nodes are moved back onto the pasted bytes."""
    head = struct.pack(">qi", 0, len(data))
    read_records(head + data, holder, 0, len(head) + len(data), ctx)
    for entry in holder.children:
        entry.children = [c for c in entry.children if c.name not in ("offset", "message_size")]
        _shift(entry, -len(head))
        entry.offset, entry.length = 0, len(data)
        entry.note = "a bare message: no offset or size in front of it"


def _shift(node: Node, by: int) -> None:
    """Move a node and its children; a decompressed buffer's nodes keep their places
    (they are located in that buffer, not in the paste)."""
    node.offset += by
    if getattr(node, "buffer", None) is not None:
        return
    for child in node.children:
        _shift(child, by)


def _one(
    chunk: bytes, hints: Hints, options: Options, pending: Correlator, short: bool = False
) -> Dissected:
    """One message's reading (``short``: the first bytes of a longer one)."""
    if hints.body:
        return _body(chunk, hints, options, short)
    if hints.direction == "request":
        return _told_request(chunk, hints, options)
    if (
        hints.direction == "response"
        and hints.api_key is not None
        and hints.api_version is not None
    ):
        return Dissected(
            0,
            False,
            decode_response(chunk, hints.api_key, hints.api_version, options),
            "told: API and version",
        )
    if len(chunk) >= 4:  # (a told request returned above)
        corr = struct.unpack_from(">i", chunk)[0]
        if pending.waiting_for(corr):
            match, _ = pending.response(corr)
            assert match is not None, "waiting_for(corr) said so"
            key, asked = match.item
            version = answered_version(key, asked, chunk)
            if hints.api_key in (None, key) and version is not None:
                msg = decode_response(chunk, key, version, options)
                if not msg.problems:
                    how = f"paired with request {corr} in the same input"
                    if version == asked:
                        return Dissected(0, False, msg, how)
                    said = Finding(
                        "answered_in_v0",
                        f"v{asked} is not a version the broker supports: it answered in "
                        f"v{version}, which says the versions it does",
                    )
                    return Dissected(0, False, msg, how, findings=[said])
    cands = guess(chunk, hints.direction, hints.api_key, hints.api_version, cut=short)
    head = peek_request_header(chunk) if hints.direction is None else None
    readable_request = (
        head is not None
        and believable_request(head.api_key, head.api_version, head.client_id)
        and (head.client_id is None or head.client_id.isprintable())
    )
    if short and readable_request and cands and cands[0].leaves and not _request_header(chunk):
        # the first bytes of a longer message, read up to where they end as the top
        # candidate reads them: a header without a client id is weaker evidence
        readable_request = False
    if (
        readable_request
        and hints.direction is None
        and (
            (hints.api_key is not None and not any(c.clean for c in cands))
            # a version alone is the API's that a whole, clean request header names: a
            # response of another API that happens to read cleanly at that version is no
            # better evidence (a response's first bytes can look like a header: then the
            # request does not decode cleanly, and the candidates decide)
            or (
                hints.api_key is None
                and hints.api_version is not None
                and not decode_request(chunk, options).problems
            )
        )
    ):
        return _told_request(chunk, hints, options)  # a header that disagrees with hints
    if not cands or (readable_request and not any(c.clean for c in cands)):
        # a request whose body decodes badly keeps its header
        how = (
            "no candidate matches the hints"
            if not cands
            else "the request header names the API; its body does not decode cleanly"
        )
        return Dissected(0, False, decode_request(chunk, options), how, cands)
    top = cands[0]
    if top.direction == "request":
        msg = decode_request(chunk, options)
    else:
        msg = decode_response(chunk, top.api_key, top.api_version, options)
    if top.direction == "request" and top.clean:
        how = "request header names the API"
    elif top.clean:
        verdict = confidence(cands, len(chunk))
        how = f"guessed {top.label} (confidence {verdict})"
        if not verdict.startswith("high") and "--api" not in verdict:
            how += "; if you know the API, give --api NAME --version N"
    elif short and top.leaves:
        others = [c.label for c in cands[1:3] if c.leaves]
        how = (
            f"the first bytes of a longer message: read as {top.label}, the likeliest "
            f"reading up to where they end"
            + (f" (then {', '.join(others)})" if others else "")
            + (
                ""
                if not others
                else "; if you know the version, give --version N"
                if hints.api_key is not None
                else "; if you know the API, give --api NAME --version N"
            )
        )
    else:
        # (with hints, only what they allow was tried: say so, not "no API")
        tried = (
            "no API decodes"
            if hints.api_key is None
            else f"{api_name(hints.api_key)} does not decode"
        )
        if hints.api_key is None and hints.api_version is not None:
            tried = f"no API at v{hints.api_version} decodes"
        how = (
            f"{tried} these bytes cleanly; the closest is {top.label}; a body "
            f"without its header? try --body (with --api, --version and --request or "
            f"--response if you know them)"
        )
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
    if not readable(key, version):
        # no client speaks it: these first bytes are no request header (a size prefix
        # read as API key and version), and the reading must not count as clean
        node = msg.tree.child("header")
        node = node.child("request_api_version") if node is not None else None
        if node is not None:
            node.code = "unknown_version"
            node.problem = (
                f"{msg.api_name} has no v{version}: these bytes are not the request "
                f"header (a size prefix?)"
            )
    finding = Finding(
        "hint_disagrees",
        f"the request header says {said}; read as {msg.api_name} v{version} as told",
    )
    return Dissected(
        0,
        False,
        msg,
        f"told: {msg.api_name} v{version} (the header says {said})",
        findings=[finding],
    )


def _body(chunk: bytes, hints: Hints, options: Options, short: bool = False) -> Dissected:
    """A body without its header: as told, or the best of every layout."""
    key, version, direction = hints.api_key, hints.api_version, hints.direction
    if key is not None and version is not None and direction is not None:
        return Dissected(
            0,
            False,
            decode_bare_body(chunk, key, version, direction, options),
            "told: a body of this API and version",
        )
    cands = guess(chunk, direction, key, version, body=True, cut=short)
    if not cands:
        msg = Message(
            direction or "response",
            key,
            version,
            None,
            None,
            Node(
                "body",
                "bytes",
                0,
                len(chunk),
                chunk,
                problem="no API matches the hints",
                code="unknown_api",
            ),
            chunk,
        )
        return Dissected(0, False, msg, "no candidate matches the hints")
    top = cands[0]
    msg = decode_bare_body(chunk, top.api_key, top.api_version, top.direction, options)
    how = (
        f"guessed the body of {top.label} (confidence {confidence(cands, len(chunk))})"
        if top.clean
        else f"no API decodes this body cleanly; the closest is {top.label}"
    )
    return Dissected(0, False, msg, how, cands)
