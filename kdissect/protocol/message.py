"""Whole Kafka messages (the bytes after the 4-byte size): header + body."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import NamedTuple

from . import schemas, secrets
from .apis import API_VERSIONS, ENVELOPE, PRODUCE
from .context import Decoding, Options
from .decode import decode_body, decode_prefix, no_cyclic_gc
from .embedded import add_sasl_fields, decode_embedded
from .internal import RECORD_CARRIERS, decode_wire_records
from .layout import Struct
from .names import api_name
from .native_ext import bind
from .node import Node
from .plain import Compared
from .reader import VarintTooLong, uvarint

_HEAD = struct.Struct(">hhi")


# what a message that belongs to no API is called (blob --records, raw SASL tokens)
_NO_API_TITLES = {"records": "Record batches", "sasl": "SASL token"}


class Message(Compared):
    """A decoded message: its header's facts and its located tree."""

    _fields = (
        "direction",
        "api_key",
        "api_version",
        "correlation_id",
        "client_id",
        "tree",
        "data",
        "assumed_from",
    )

    def __init__(
        self,
        direction: str,  # "request" | "response"
        api_key: int | None,
        api_version: int | None,
        correlation_id: int | None,
        client_id: str | None,
        tree: Node,  # ktype "message": children "header" and "body"
        data: bytes,
        # a version newer than the schemas, read with the newest known layout of its API
        assumed_from: int | None = None,
    ):
        self.direction, self.api_key, self.api_version = direction, api_key, api_version
        self.correlation_id, self.client_id, self.tree = correlation_id, client_id, tree
        self.data, self.assumed_from = data, assumed_from

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)

    @property
    def title(self) -> str:
        if self.api_key is None and self.direction in _NO_API_TITLES:
            return _NO_API_TITLES[self.direction]  # (not "Unknown v? Records")
        version = "?" if self.api_version is None else self.api_version
        return f"{self.api_name} v{version} {self.direction.title()}"

    @property
    def body(self) -> Node | None:
        return self.tree.child("body")

    @property
    def problems(self) -> list[tuple[str, str]]:
        return self.tree.problems()

    @property
    def unexplained(self) -> int:
        """Bytes of the body its layout does not explain (a version read as an older
        one, ``assumed_from``, with fields the newer version added), or 0."""
        body = self.body
        left = body.child("_unexplained") if body is not None else None
        return left.length if left is not None else 0

    def assumed(self) -> str | None:
        """What an ``assumed_version`` finding says of it (None: its version is known):
        the layout used and what it left unexplained."""
        if self.assumed_from is None:
            return None
        text = f"v{self.api_version} read as v{self.assumed_from}, the newest kdissect knows"
        if self.unexplained:
            text += f"; {self.unexplained} bytes it does not explain"
        return text


class RequestHeader(NamedTuple):  # (a tuple: made per request, a frozen dataclass was slow)
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # header length in bytes


def peek_request_header(data: bytes) -> RequestHeader | None:
    """Read a request header cheaply (for indexing); None if the bytes cannot be one."""
    if len(data) < 8:
        return None
    key, version, corr = _HEAD.unpack_from(data)
    hv = _HEADER_VERSIONS.get((key, version))
    if hv is None:
        hv = 1
        # a version newer than the tables has the newest known one's header (what its
        # body is read as); only pairs of known APIs with a sane version are kept (a
        # bounded table)
        read_as = schemas.effective_version(key, version) if 0 <= version <= 127 else None
        if read_as is not None:
            hv = schemas.request_header_version(key, read_as)
            if read_as != version and hv == 2:
                hv = _ASSUMED_FLEXIBLE  # (its tag section is not required)
            _HEADER_VERSIONS[(key, version)] = hv
    if hv == 0:
        return RequestHeader(key, version, corr, None, 8)
    if len(data) < 10:
        return None
    n = struct.unpack_from(">h", data, 8)[0]
    if n < -1 or 10 + max(n, 0) > len(data):
        return None
    client_id = None if n == -1 else str(data[10 : 10 + n], "utf-8", "replace")
    size = 10 + max(n, 0)
    if hv == 2 or hv == _ASSUMED_FLEXIBLE:
        if size >= len(data):
            # a version newer than the tables may not be flexible after all
            return None if hv == 2 else RequestHeader(key, version, corr, client_id, size)
        size += 1 if data[size] == 0 else 0  # only the empty tag section is cheap to skip
    return RequestHeader(key, version, corr, client_id, size)


# (api key, version, correlation id, client id, header size, a Produce's acks or None)
RequestHead = tuple[int, int, int, "str | None", int, "int | None"]


def request_head(data: bytes) -> RequestHead | None:
    """What pairing a request needs, in one read: its header (``peek_request_header``)
    and, for a Produce, its acks (``produce_acks``); None if the bytes cannot be a
    request header. Read by the compiled extension when it is at hand (on traffic of
    many small exchanges the header and acks were a twentieth of a summary's CPU);
    ``python_request_head`` is the reference."""
    if _REQUEST_HEAD is not None and type(data) is bytes:
        got = _REQUEST_HEAD(data, _HEADER_VERSIONS)
        if got is not False:  # (False: a kind not in the table yet, a client id not UTF-8)
            return got  # type: ignore[no-any-return]
    return python_request_head(data)


def python_request_head(data: bytes) -> RequestHead | None:
    """``request_head`` in Python: the reference."""
    head = peek_request_header(data)
    if head is None:
        return None
    key, version, corr, client_id, size = head
    acks = produce_acks(data, size, version) if key == PRODUCE else None
    return key, version, corr, client_id, size, acks


# (api key, version) -> its request header's version, for the pairs kdissect knows
# (and versions newer than it knows, read as the newest known one)
_HEADER_VERSIONS: dict[tuple[int, int], int] = {}
_ASSUMED_FLEXIBLE = -2  # a newer version of a flexible API: header v2, probably


def header_versions() -> dict[tuple[int, int], int]:
    """The table of request header versions ``request_head`` reads by (the compiled
    reassembler's pass reads headers by it too: pairs are added, never changed)."""
    return _HEADER_VERSIONS


# native/src/head.rs's request_head (None: no extension, or KDISSECT_PURE; native_ext.refresh)
_REQUEST_HEAD = bind(__name__, "_REQUEST_HEAD", "request_head")


_UNSUPPORTED = struct.pack(">h", 35)  # UNSUPPORTED_VERSION, the first field of every version


def answered_version(api_key: int | None, api_version: int | None, response: bytes) -> int | None:
    """The version a response to this request is written in: the request's, but a broker
    answers an ApiVersions version it does not support in v0 (Kafka's
    RequestContext.apiVersion), and its clients read it so."""
    if api_key == API_VERSIONS and api_version and response[4:6] == _UNSUPPORTED:
        return 0
    return api_version


def produce_acks(data: bytes, header_size: int, api_version: int) -> int | None:
    """The acks of a Produce request (message bytes after the size), read without
    decoding the body; None if the bytes are too short."""
    pos = header_size
    try:
        if api_version >= 3:  # transactional_id comes first
            if api_version >= 9:  # compact nullable string: uvarint length + 1
                n, pos = uvarint(data, pos, len(data), 5)
                pos += max(n - 1, 0)
            else:
                n = int.from_bytes(data[pos : pos + 2], "big", signed=True)
                pos += 2 + max(n, 0)
        if pos + 2 > len(data):
            return None
        return int.from_bytes(data[pos : pos + 2], "big", signed=True)
    except (IndexError, VarintTooLong):
        return None


def _message(
    direction: str,
    key: int | None,
    version: int | None,
    data: bytes,
    header_struct: Struct,
    options: Options,
    topic_ids: Mapping[str, str] | None,
    forwarded: tuple[int, int] | None = None,
) -> Message:
    with no_cyclic_gc():
        ctx = Decoding(options, topic_ids)
        return _build(direction, key, version, data, header_struct, ctx, forwarded)


def _build(
    direction: str,
    key: int | None,
    version: int | None,
    data: bytes,
    header_struct: Struct,
    ctx: Decoding,
    forwarded: tuple[int, int] | None = None,
) -> Message:
    name = f"{api_name(key)}{direction.title()}" if key is not None else direction.title()
    root = Node(name, "message", 0, len(data))
    header, complete = decode_prefix(data, 0, header_struct, "header", ctx)
    root.add(header)
    corr = header.child("correlation_id")
    client = header.child("client_id")
    msg = Message(
        direction,
        key,
        version,
        corr.value if corr else None,
        client.value if client else None,
        root,
        data,
    )
    if not complete:
        return msg  # the header's failing field already holds the remaining bytes
    read_as = (
        schemas.effective_version(key, version) if key is not None and version is not None else None
    )
    layout = schemas.layout(key, read_as, direction) if read_as is not None else None
    start = header.end
    if layout is None:
        if key is None or key < 0:
            what, code = "unknown API: give --api/--version", "unknown_api"
        elif key in schemas.all_versions():
            what, code = (
                f"{api_name(key)} v{version} {direction}s are not in kdissect's schemas",
                "unknown_version",
            )
        else:
            what, code = f"API key {key} is not in kdissect's schemas", "unknown_api"
        if key is not None and key >= 0 and not header_struct.flexible:
            header.note = _HEADER_UNKNOWN[direction]
        root.add(
            Node("body", "bytes", start, len(data) - start, data[start:], problem=what, code=code)
        )
        return msg
    assert key is not None, "a layout was found for the key"
    if read_as != version:
        msg.assumed_from = read_as
    body = decode_body(data, start, layout, "body", ctx)
    if msg.assumed_from is not None:
        _unexplained(body, data, version, read_as)
    root.add(body)
    decode_embedded(body, data, key, direction, ctx)
    options = ctx.options
    if body is not None and options.embedded and (key, direction) in RECORD_CARRIERS:
        decode_wire_records(body, key, ctx)  # internal topics' records, by schema
    if options.values is not None and options.records is True:
        from .values_schema import decode_values  # only when values are asked for

        decode_values(body, options.values, ctx.budget)
    if key == ENVELOPE:
        _envelope(body, direction, forwarded, ctx)
    secrets.mark(body, key)  # after them: metadata records hold secrets too
    return msg


# a message whose layout kdissect lacks: its header version is that of the layout's
# flexibility, which is not known; read without tagged fields, it says so
_HEADER_UNKNOWN = {
    d: f"version unknown without the API's schema: read as v{v} (no tagged fields); if "
    f"it is v{v + 1} (a flexible version), the body's first byte here is its tagged fields"
    for d, v in (("request", 1), ("response", 0))
}


def _envelope(body: Node, direction: str, forwarded: tuple[int, int] | None, ctx: Decoding) -> None:
    """The request an Envelope forwards (KRaft: a broker to the controller), decoded
    under its ``request_data``, and the controller's answer under the response's
    ``response_data`` (header and body, as Kafka's ``serializeWithHeader`` writes it),
    read as the response of the forwarded request's API and version (``forwarded``,
    from the paired Envelope request: ``forwarded_api``); the secrets of both masked as
    in any message. An Envelope inside one is left as bytes (Kafka never nests them; the
    depth stays one); bytes that cannot be read so stay bytes, masked whole."""
    holder = body.child("request_data" if direction == "request" else "response_data")
    if (
        holder is None
        or not isinstance(holder.value, (bytes, bytearray))
        or holder.children
        or len(holder.value) < 4
    ):
        return
    inner = bytes(holder.value)
    if direction == "request":
        if struct.unpack_from(">h", inner)[0] == ENVELOPE:
            return
        tree = decode_request(inner, ctx.options, ctx.topic_ids).tree
    elif forwarded is None or forwarded[0] == ENVELOPE:
        return  # its request is not known: masked whole (secrets.EMBEDDED)
    else:
        tree = decode_response(inner, *forwarded, ctx.options, topic_ids=ctx.topic_ids).tree
    if tree.problems():
        # not a message kdissect can read (Kafka's classes leave these bytes opaque too):
        # kept as bytes, masked whole as they may hold what a message would mask
        holder.secret = True
        return
    base = holder.end - len(inner)
    for n in tree.walk():
        n.offset += base
    holder.children = tree.children
    holder.note = tree.name
    # its own bytes, as hex (JSON with --show-secrets) or as a value, would show what its
    # fields mask: masked; views show it by its size (holds_message), its fields below
    holder.secret = True


def holds_message(node: Node) -> bool:
    """Whether ``node`` is a bytes field holding a whole message decoded under it (an
    Envelope's request_data and response_data: its header and body)."""
    return (
        node.ktype == "bytes"
        and len(node.children) >= 2
        and node.children[0].name == "header"
        and node.children[1].name == "body"
    )


def _unexplained(body: Node, data: bytes, version: int | None, read_as: int | None) -> None:
    """A version newer than the tables read with the newest known layout: where that
    layout stops making sense is not an error of the message (the newer version may add
    a field the layout lacks), so the fields from the one holding the first problem on
    are replaced by the bytes they covered, unexplained, with one note (the finding is
    ``assumed_version``'s)."""
    bad = [n.offset for n in body.walk() if n.problem]
    if not bad:
        return
    first = min(bad)
    kept = [c for c in body.children if c.end <= first and not c.problem]
    at = kept[-1].end if kept else body.offset
    end = len(data)
    body.children = kept
    body.problem = body.code = None
    body.add(
        Node(
            "_unexplained",
            "bytes",
            at,
            end - at,
            data[at:end],
            note=f"{end - at} bytes the v{read_as} layout does not explain "
            f"(v{version} is newer than kdissect knows)",
        )
    )
    body.length = end - body.offset


def decode_request(
    data: bytes, options: Options | None = None, topic_ids: Mapping[str, str] | None = None
) -> Message:
    """``topic_ids``: the topic names learned so far (topic id -> name; ``Decoding``)."""
    key = version = None
    hv = 1
    if len(data) >= 4:
        key, version = struct.unpack_from(">hh", data)
        read_as = schemas.effective_version(key, version)
        if read_as is not None:
            hv = schemas.request_header_version(key, read_as)
    return _message(
        "request", key, version, data, schemas.REQUEST_HEADERS[hv], options or Options(), topic_ids
    )


def decode_request_as(
    data: bytes,
    api_key: int,
    api_version: int,
    options: Options | None = None,
    topic_ids: Mapping[str, str] | None = None,
) -> Message:
    """A request read as ``api_key`` v``api_version`` whatever its header says (a user's
    hint overriding the header): the header is read with that API's header version."""
    read_as = schemas.effective_version(api_key, api_version)
    hv = schemas.request_header_version(api_key, read_as) if read_as is not None else 1
    return _message(
        "request",
        api_key,
        api_version,
        data,
        schemas.REQUEST_HEADERS[hv],
        options or Options(),
        topic_ids,
    )


def decode_bare_body(
    data: bytes, api_key: int, api_version: int, direction: str, options: Options | None = None
) -> Message:
    """Bytes that are a body without its header (as client test fixtures hold them)."""
    ctx = Decoding(options or Options())
    with no_cyclic_gc():
        root = Node(f"{api_name(api_key)}{direction.title()}", "message", 0, len(data))
        msg = Message(direction, api_key, api_version, None, None, root, data)
        read_as = schemas.effective_version(api_key, api_version)
        layout = schemas.layout(api_key, read_as, direction) if read_as is not None else None
        if layout is None:
            root.add(
                Node(
                    "body",
                    "bytes",
                    0,
                    len(data),
                    data,
                    code="unknown_version",
                    problem=f"{api_name(api_key)} v{api_version} {direction}s are not "
                    f"in kdissect's schemas",
                )
            )
            return msg
        if read_as != api_version:
            msg.assumed_from = read_as
        body = decode_body(data, 0, layout, "body", ctx)
        root.add(body)
        decode_embedded(body, data, api_key, direction, ctx)
        return msg


def decode_response(
    data: bytes,
    api_key: int,
    api_version: int,
    options: Options | None = None,
    forwarded: tuple[int, int] | None = None,
    topic_ids: Mapping[str, str] | None = None,
) -> Message:
    """``forwarded``: for an Envelope response, the (api key, version) of the request its
    Envelope request forwarded (``forwarded_api``): its ``response_data`` is read as
    that request's response. ``topic_ids``: as for ``decode_request``."""
    read_as = schemas.effective_version(api_key, api_version)
    hv = schemas.response_header_version(api_key, api_version if read_as is None else read_as)
    return _message(
        "response",
        api_key,
        api_version,
        data,
        schemas.RESPONSE_HEADERS[hv],
        options or Options(),
        topic_ids,
        forwarded,
    )


def forwarded_api(envelope: bytes) -> tuple[int, int] | None:
    """The (api key, version) of the request an Envelope request (its bytes after the
    size) forwards, read from its header without decoding it; None if these bytes are
    not an Envelope request holding one."""
    if len(envelope) < 4 or struct.unpack_from(">h", envelope)[0] != ENVELOPE:
        return None
    head, complete = decode_prefix(
        envelope, 0, schemas.REQUEST_HEADERS[2], "header", Decoding(Options())
    )
    if not complete:
        return None
    try:  # request_data: compact bytes, the body's first
        n, pos = uvarint(envelope, head.end, len(envelope))
    except (IndexError, VarintTooLong):
        return None
    if n - 1 < 4 or pos + 4 > len(envelope):
        return None
    key, version = struct.unpack_from(">hh", envelope, pos)
    return (key, version) if key != ENVELOPE and key >= 0 and version >= 0 else None


def decode(
    data: bytes,
    direction: str,
    api_key: int | None = None,
    api_version: int | None = None,
    options: Options | None = None,
    topic_ids: Mapping[str, str] | None = None,
) -> Message:
    if direction == "request":
        return decode_request(data, options, topic_ids)
    if api_key is None or api_version is None:
        raise ValueError("a response needs api_key and api_version (or use guess)")
    return decode_response(data, api_key, api_version, options, topic_ids=topic_ids)


def sasl_token_message(data: bytes, options: Options | None = None) -> Message:
    """A raw SASL token (sent without a Kafka header after SaslHandshake v0)."""
    root = Node("SaslToken", "message", 0, len(data))
    token = root.add(Node("token", "bytes", 0, len(data), data))
    add_sasl_fields(token, data, 0, len(data), Decoding(options or Options()))
    return Message("sasl", None, None, None, None, root, data)
