"""Broker endpoints in a response, found by walking lengths only.

The proxy must rewrite the (node id, host, port) entries of Metadata, FindCoordinator,
DescribeCluster and the ``node_endpoints`` of Produce, Fetch, ShareFetch and
ShareAcknowledge. This walker follows the message layout but reads only counts,
lengths and the endpoint fields themselves: ``records`` and every other string or
bytes field are skipped by their length, never decoded, and the walk stops after the
last field that can hold an endpoint. Pure: bytes in, byte ranges out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..protocol import schemas
from ..protocol.apis import NAMES_BROKERS
from ..protocol.layout import Field, Struct
from ..protocol.reader import DecodeError, Reader
from ..protocol.wire import codec, length, skip_value

_ID_NAMES = ("node_id", "broker_id")
# Broker entries one answer may hold for the proxy to rewrite it: the walk is Python, and
# 100,000 entries took 2.4 s (every other client waiting); real clusters name hundreds.
MAX_ENDPOINTS = 5000


class TooManyEndpoints(DecodeError):
    """An answer names more brokers than MAX_ENDPOINTS."""


@dataclass
class Tagged:
    """A tagged field around an endpoint: its size prefix must follow the value's size."""

    size_start: int  # offset of the size uvarint
    size_end: int
    size: int
    end: int  # offset just past the value
    tag_start: int = -1  # offset of the tag number (a uvarint before the size)
    tag: int = -1
    known_tags: tuple[int, ...] = ()  # the tags the enclosing struct defines


@dataclass
class EndpointSpan:
    node_id: int
    host: str
    port: int
    host_start: int  # the host string, length prefix included
    host_end: int
    host_compact: bool
    port_start: int
    tagged: list[Tagged] = field(default_factory=list)  # enclosing ones, outermost first


def _is_endpoint(st: Struct) -> bool:
    types = {f.name: f.type for f in st.fields if not f.array}
    return (
        types.get("host") == "string"
        and types.get("port") == "int32"
        and any(types.get(n) == "int32" for n in _ID_NAMES)
    )


# What the walk needs to know of a struct, by identity: layouts live as long as the
# process, and hashing one (lru_cache) hashes every nested field again: measured, 80,000
# hash calls (an eighth of the forwarder's time) for 3,400 answers walked.
_SHAPES: dict[int, tuple[Struct, bool, bool, tuple[bool, ...], int, bool]] = {}


def _shape(st: Struct) -> tuple[Struct, bool, bool, tuple[bool, ...], int, bool]:
    """(st, is an endpoint, holds endpoints, per field: holds endpoints, last field that
    does, a tagged field does)."""
    found = _SHAPES.get(id(st))
    if found is not None and found[0] is st:
        return found
    holds = tuple(_field_holds(f) for f in st.fields)
    tagged_hold = any(_field_holds(f) for f in st.tagged)
    endpoint = _is_endpoint(st)
    last = max((i for i, h in enumerate(holds) if h), default=-1)
    found = (st, endpoint, endpoint or any(holds) or tagged_hold, holds, last, tagged_hold)
    _SHAPES[id(st)] = found
    return found


def _holds_endpoints(st: Struct) -> bool:
    return _shape(st)[2]


def _field_holds(f: Field) -> bool:
    return f.struct is not None and _holds_endpoints(f.struct)


@lru_cache(maxsize=None)
def response_layout(api_key: int, api_version: int) -> Struct | None:
    """The layout of a response that can carry endpoints in this version, else None
    (such responses are forwarded without any parsing beyond the header). A version
    newer than kdissect's tables is read with the newest known one's layout (``assumed``):
    passing it unread would hand clients the brokers' own addresses."""
    read_as = schemas.effective_version(api_key, api_version)
    if read_as is None:
        return None
    st = schemas.layout(api_key, read_as, "response")
    return st if st is not None and _holds_endpoints(st) else None


@lru_cache(maxsize=None)
def assumed(api_key: int, api_version: int) -> int | None:
    """The known version whose layout reads this newer one, or None (it is known)."""
    read_as = schemas.effective_version(api_key, api_version)
    return read_as if read_as is not None and read_as != api_version else None


def _header_version(api_key: int, api_version: int) -> int:
    read_as = assumed(api_key, api_version)
    return schemas.response_header_version(api_key, api_version if read_as is None else read_as)


def warm() -> None:
    """Load the layouts of every response that can name brokers now, so that the first
    Metadata answer does not wait for the schema tables to load."""
    for key, versions in schemas.all_versions().items():
        for version in versions:
            if key in NAMES_BROKERS:
                response_layout(key, version)
                schemas.response_header_version(key, version)


def endpoint_spans(body: bytes, api_key: int, api_version: int) -> list[EndpointSpan]:
    """The endpoints in ``body`` (a response after its size prefix). Raises DecodeError
    when the bytes do not follow the layout (the caller forwards them unchanged). An
    answer read with an assumed layout (``assumed``) is walked to its end and must end
    exactly there, every real broker's port a port: a newer version that changed the layout then
    fails loudly instead of having the wrong bytes rewritten."""
    st = response_layout(api_key, api_version)
    if st is None:
        return []
    r = Reader(body)
    r.need(4, "correlation id")
    r.pos = 4
    if _header_version(api_key, api_version) >= 1:
        _skip_tagged(r)
    out: list[EndpointSpan] = []
    read_as = assumed(api_key, api_version)
    _walk(r, st, out, [], top=read_as is None)
    if read_as is not None:
        if r.pos != len(body):
            raise DecodeError(
                f"read with v{read_as}'s layout (v{api_version} is newer than kdissect's "
                f"tables), it ends at byte {r.pos} of {len(body)}"
            )
        real = (sp for sp in out if sp.node_id >= 0 and sp.host)  # (what is rewritten)
        bad = next((sp for sp in real if not 0 <= sp.port <= 0xFFFF), None)
        if bad is not None:
            raise DecodeError(
                f"read with v{read_as}'s layout (v{api_version} is newer than kdissect's "
                f"tables), broker {bad.node_id}'s port would be {bad.port}"
            )
    return out


def _walk(
    r: Reader, st: Struct, out: list[EndpointSpan], tagged: list[Tagged], top: bool = False
) -> None:
    _, endpoint, _, holds, last, tagged_hold = _shape(st)
    found: dict[str, Any] = {}
    for i, f in enumerate(st.fields):
        if top and not endpoint and i > last and not tagged_hold:
            return  # nothing further can name a broker
        if endpoint and not f.array and f.name in ("host", "port", *_ID_NAMES):
            found[f.name] = _read_endpoint_field(r, f, st.flexible)
        elif holds[i]:
            _walk_field(r, f, st.flexible, out, tagged)
        else:
            _skip_field(r, f, st.flexible)
    if endpoint:
        ident = found["node_id"] if "node_id" in found else found["broker_id"]  # one is
        (host, h0, h1, compact), (port, p0) = found["host"], found["port"]
        out.append(EndpointSpan(ident, host, port, h0, h1, compact, p0, list(tagged)))
        if len(out) > MAX_ENDPOINTS:
            raise TooManyEndpoints(f"more than {MAX_ENDPOINTS:,} broker entries")
    if st.flexible:
        if tagged_hold:
            _walk_tagged(r, st, out, tagged)
        else:
            _skip_tagged(r)


def _read_endpoint_field(r: Reader, f: Field, flexible: bool) -> Any:
    start = r.pos
    if f.type == "int32":
        value = r.int32()
        return value if f.name != "port" else (value, start)
    compact = flexible if f.compact is None else f.compact  # as the decoder reads it
    n = length(r, compact, False)
    raw = r.raw(n, "host") if n >= 0 else b""
    return raw.decode("utf-8", "replace"), start, r.pos, compact


def _walk_field(r: Reader, f: Field, flexible: bool, out, tagged) -> None:
    """A field whose struct can hold endpoints."""
    assert f.struct is not None, "only struct fields hold endpoints"
    if f.array:
        n = _count(r, flexible)
        for _ in range(n):
            _walk(r, f.struct, out, tagged)
    elif f.nullable and r.int8() < 0:
        return
    else:
        _walk(r, f.struct, out, tagged)


def _walk_tagged(r: Reader, st: Struct, out, tagged: list[Tagged]) -> None:
    for _ in range(_count_tags(r)):
        tag_start = r.pos
        tag = r.uvarint("tag")
        size_start = r.pos
        size = _size(r)
        start = end = r.pos
        end += size
        known = st.tag_field(tag)
        if known is not None and _field_holds(known):
            sub = Reader(r.buf, start, end)
            known_tags = tuple(f.tag for f in st.tagged if f.tag is not None)
            _walk_field(
                sub,
                known,
                st.flexible,
                out,
                tagged + [Tagged(size_start, start, size, end, tag_start, tag, known_tags)],
            )
        r.pos = end


def _count(r: Reader, flexible: bool) -> int:
    n = r.uvarint("array count") - 1 if flexible else r.int32()
    if n > r.remaining:  # every element takes at least one byte
        raise DecodeError(f"array count {n} exceeds the {r.remaining} bytes left")
    return max(n, 0)


def _count_tags(r: Reader) -> int:
    n = r.uvarint("tagged field count")
    if n > r.remaining:
        raise DecodeError(f"tagged field count {n} exceeds the {r.remaining} bytes left")
    return n


def _skip_tagged(r: Reader) -> None:
    for _ in range(_count_tags(r)):
        r.uvarint("tag")
        size = _size(r)  # not `r.pos += _size(r)`: that adds to r.pos read before the size
        r.pos += size


def _size(r: Reader) -> int:
    size = r.uvarint("tag size")
    r.check_length(size, "tagged field")
    return size


def _skip_field(r: Reader, f: Field, flexible: bool) -> None:
    compact = flexible if f.compact is None else f.compact
    if f.array:
        n = _count(r, flexible)
        if f.struct is not None:
            for _ in range(n):
                _skip_struct(r, f.struct)
        else:
            elem = Field(f.name, f.type, nullable=f.nullable)
            for _ in range(n):
                skip_value(r, elem, compact)
    elif f.struct is not None:
        if f.nullable and r.int8() < 0:
            return
        _skip_struct(r, f.struct)
    else:
        skip_value(r, f, compact)


def _skip_struct(r: Reader, st: Struct) -> None:
    for f in st.fields:
        _skip_field(r, f, st.flexible)
    if st.flexible:
        _skip_tagged(r)


def skip_body(buf: bytes, pos: int, st: Struct) -> int:
    """Where a ``st`` read from ``pos`` ends, walking lengths only (the differential tests
    hold it to the located decoder); raises DecodeError where the bytes do not follow."""
    r = Reader(buf, pos)
    _skip_struct(r, st)
    return r.pos


@lru_cache(maxsize=None)
def _error_code_at(api_key: int, api_version: int) -> tuple[int, bool] | None:
    """(offset of the response's top-level ``error_code`` after the header, whether the
    header has tagged fields), when only fixed-width fields come before it; else None
    (the answer has no top-level error code, or it is behind a variable-length field)."""
    st = schemas.layout(api_key, api_version, "response")
    if st is None:
        return None
    at = 0
    for f in st.fields:
        if f.name == "error_code" and f.type == "int16" and not f.array:
            return at, schemas.response_header_version(api_key, api_version) >= 1
        size = codec(f.type).size if f.struct is None and not f.array else None
        if size is None:
            return None
        at += size
    return None


def top_error_code(body: bytes, api_key: int, api_version: int) -> int | None:
    """The response's top-level error code (``body`` after its size prefix), or None
    when it has none there or the bytes are too short. Reads two bytes, for metrics."""
    where = _error_code_at(api_key, api_version)
    if where is None:
        return None
    at, flexible = where
    pos = 4
    try:
        if flexible:
            if body[pos] == 0:  # no tagged fields: the usual case
                pos += 1
            else:
                r = Reader(body, pos)
                _skip_tagged(r)
                pos = r.pos
        pos += at
        if pos + 2 > len(body):
            return None
    except (IndexError, DecodeError):
        return None
    return int.from_bytes(body[pos : pos + 2], "big", signed=True)


# -- what the thread forwarder checks without Python --------------------------------------
# A program (a list of ints) that walks an answer's lengths as _skip_struct does, for
# native/src/relay.rs: an answer whose brokers can only be named in its top-level tagged
# fields (Produce v10+, Fetch v16+: NodeEndpoints) is seen to name none without Python,
# which is every such answer but those carrying leader hints.
FIXED, VARINT, LENGTH, ARRAY, STRUCT = 1, 2, 3, 4, 5


@lru_cache(maxsize=None)
def quick_check(api_key: int, api_version: int) -> tuple[bool, list[int], list[int]] | None:
    """(the header has tagged fields, the top-level tags that may name brokers, the
    program), or None when brokers may be named outside those tags (Python looks)."""
    st = response_layout(api_key, api_version)
    if st is None or not st.flexible or any(_field_holds(f) for f in st.fields):
        return None
    named_in = [f for f in st.tagged if f.tag is not None and _field_holds(f)]
    if not all(f.array for f in named_in):  # (the check reads an empty array as none)
        return None
    tags = [f.tag for f in named_in if f.tag is not None]
    program: list[int] = []
    try:
        _program(st, program)
    except DecodeError:  # a type the walk does not know
        return None
    return _header_version(api_key, api_version) >= 1, tags, program


def _program(st: Struct, out: list[int]) -> None:
    out += (len(st.fields), int(st.flexible))
    for f in st.fields:
        _op(f, st.flexible, out)


def _op(f: Field, flexible: bool, out: list[int]) -> None:
    compact = flexible if f.compact is None else f.compact
    if f.array:
        out += (ARRAY, int(flexible))  # (counts follow the struct, as _count reads them)
        if f.struct is not None:
            out += (STRUCT, 0)
            _program(f.struct, out)
        else:
            _scalar(f.type, compact, out)
    elif f.struct is not None:
        out += (STRUCT, int(f.nullable))
        _program(f.struct, out)
    else:
        _scalar(f.type, compact, out)


def _scalar(type_: str, compact: bool, out: list[int]) -> None:
    c = codec(type_)
    if c.size is not None:
        out += (FIXED, c.size)
    elif c.varint:
        out += (VARINT, c.varint)
    else:
        out += (LENGTH, int(compact), int(c.wide))
