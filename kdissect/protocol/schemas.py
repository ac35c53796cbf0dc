"""(api_key, api_version, direction) -> layout, from kio and kdissect's legacy table."""

from __future__ import annotations

from typing import Any, Protocol

from functools import lru_cache

from . import snapshot
from .apis import API_VERSIONS, CONTROLLED_SHUTDOWN, TABLE
from .grammar import message_headers, parse_grammar
from .layout import Field, Struct, resource_hints
from .names import API_NAMES
from .wire import carries_records

_I16 = "int16"
_CLIENT_ID = Field("client_id", "string", nullable=True, compact=False)  # legacy even in v2
REQUEST_HEADERS = {
    0: Struct(
        "RequestHeader",
        (
            Field("request_api_key", _I16, hint="api"),
            Field("request_api_version", _I16),
            Field("correlation_id", "int32"),
        ),
    ),
    1: Struct(
        "RequestHeader",
        (
            Field("request_api_key", _I16, hint="api"),
            Field("request_api_version", _I16),
            Field("correlation_id", "int32"),
            _CLIENT_ID,
        ),
    ),
    2: Struct(
        "RequestHeader",
        (
            Field("request_api_key", _I16, hint="api"),
            Field("request_api_version", _I16),
            Field("correlation_id", "int32"),
            _CLIENT_ID,
        ),
        flexible=True,
    ),
}
RESPONSE_HEADERS = {
    0: Struct("ResponseHeader", (Field("correlation_id", "int32"),)),
    1: Struct("ResponseHeader", (Field("correlation_id", "int32"),), flexible=True),
}


@lru_cache(maxsize=None)
def _table(name: str) -> dict[tuple[int, str, int], Struct]:
    """One of kdissect's own tables, for what kio lacks: legacy.bnf (versions Kafka 4
    dropped) and recent.bnf (the pinned release's versions kio lacks or gets wrong,
    written by scripts/kafka/update)."""
    text = _text(name)
    if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        return {}  # a table with nothing in it (recent.bnf when kio is current)
    keys = {name: key for key, name in API_NAMES.items()}
    return {
        (keys[api], direction, version): st
        for (api, direction, version), st in parse_grammar(text).messages.items()
        if direction in ("request", "response")
    }


@lru_cache(maxsize=None)
def _text(name: str) -> str:
    return snapshot.package_data(name).decode("utf-8")


@lru_cache(maxsize=None)
def _versions(name: str) -> frozenset[tuple[int, int]]:
    """(api key, version) of the messages in one of the tables, from their header lines:
    knowing which versions exist parses no layout (parsing all of legacy.bnf was most of
    the decoding work of a small capture whose clients speak no legacy version).
    tests/test_startup.py checks it against the parsed tables."""
    keys = {name: key for key, name in API_NAMES.items()}
    return frozenset(
        (keys[api], version)
        for api, direction, version in message_headers(_text(name))
        if direction in ("request", "response")
    )


def legacy_versions() -> set[tuple[int, int]]:
    return set(_versions("legacy.bnf"))


def recent_versions() -> set[tuple[int, int]]:
    return set(_versions("recent.bnf"))


@lru_cache(maxsize=None)
def layout(api_key: int, api_version: int, direction: str) -> Struct | None:
    st = _layout(api_key, api_version, direction)
    api = TABLE.get(api_key)
    if st is None or api is None or not api.resources:
        return st
    return resource_hints(st, api.resources)


def _layout(api_key: int, api_version: int, direction: str) -> Struct | None:
    # recent.bnf first: it also corrects versions kio has (one direction may be there alone)
    if (api_key, api_version) in _versions("recent.bnf"):
        st = _table("recent.bnf").get((api_key, direction, api_version))
        if st is not None:
            return _hinted(st, _kio_before(api_key, api_version, direction))
    if (api_key, api_version) in _versions("legacy.bnf"):
        st = _table("legacy.bnf").get((api_key, direction, api_version))
        if st is not None:
            return st
    return _kio().layout(api_key, api_version, direction)


def _kio_before(api_key: int, api_version: int, direction: str) -> Struct | None:
    """kio's layout of the newest version up to ``api_version`` (None for a key kio lacks)."""
    older = [v for v in _kio().versions().get(api_key, ()) if v <= api_version]
    return _kio().layout(api_key, max(older), direction) if older else None


def _hinted(st: Struct, ref: Struct | None) -> Struct:
    """``st`` with the hints ("duration", "time") kio gives the same fields in ``ref``:
    recent.bnf comes from Kafka's runtime schemas, which do not say that an int32 is a
    duration, and a newer version should read like the one before it."""
    if ref is None:
        return st
    known = {f.name: f for f in (*ref.fields, *ref.tagged)}

    def one(f: Field) -> Field:
        r = known.get(f.name)
        if r is None or r.type != f.type:
            return f
        sub = _hinted(f.struct, r.struct) if f.struct is not None else None
        return Field(f.name, f.type, f.array, f.nullable, f.tag, sub, f.hint or r.hint, f.compact)

    return Struct(st.name, tuple(map(one, st.fields)), tuple(map(one, st.tagged)), st.flexible)


def wire_shape(st: Struct) -> tuple[Any, ...]:
    """What the wire sees of a layout, to compare layouts from different sources
    (scripts/kafka/update, tests/test_kafka_schemas.py): (flexible, fields), each field
    (name, type, array, nullable, compact, tag, its struct's shape); tagged fields after
    the others by tag. Nullability counts only where the wire has a null (strings, bytes,
    arrays, structs: kio also calls fixed-width uuids optional); hints and struct names
    do not count."""
    fields = []
    for f in (*st.fields, *st.tagged):
        sub = wire_shape(f.struct) if f.struct is not None else None
        variable = f.array or f.type in ("string", "bytes", "records")
        compact = (f.compact if f.compact is not None else st.flexible) if variable else None
        nullable = f.nullable if f.array or f.type in ("string", "bytes", "struct") else None
        fields.append((f.name, f.type, f.array, nullable, compact, f.tag, sub))
    return st.flexible, tuple(sorted(fields, key=lambda f: (f[5] is not None, f[5] or 0)))


class _Layouts(Protocol):
    """What the snapshot and kio_schemas both answer (modules, checked structurally)."""

    def versions(self) -> dict[int, list[int]]: ...

    def layout(self, api_key: int, version: int, direction: str) -> Struct | None: ...


def _kio() -> _Layouts:
    """kio's layouts: from the shipped snapshot (fast), else from kio itself."""
    if snapshot.available():
        return snapshot
    from . import kio_schemas

    return kio_schemas


@lru_cache(maxsize=None)
@lru_cache(maxsize=None)  # asked per message; layouts never change in a run
def has_records(api_key: int, api_version: int, direction: str) -> bool:
    """Whether the layout carries record batches anywhere (unknown layouts: True)."""
    found = layout(api_key, api_version, direction)

    def walk(s: Struct) -> bool:
        return any(
            carries_records(f.type) or (f.struct is not None and walk(f.struct))
            for f in (*s.fields, *s.tagged)
        )

    return found is None or walk(found)


@lru_cache(maxsize=1)
def all_versions() -> dict[int, tuple[int, ...]]:
    """Every API key kdissect can decode -> its versions."""
    out: dict[int, set[int]] = {}
    for key, vs in _kio().versions().items():
        out.setdefault(key, set()).update(vs)
    for key, v in legacy_versions() | recent_versions():
        out.setdefault(key, set()).add(v)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


def is_known(api_key: int, api_version: int) -> bool:
    return api_version in all_versions().get(api_key, ())


MAX_VERSION = 127  # a request version believed by its shape (Kafka's are near 20)
NEWER = 8  # versions past the newest known that a newer client may speak (~2 a year)


def readable(api_key: int, api_version: int) -> bool:
    """A pasted request of this API and version can be read: a version kdissect knows,
    or one a client newer than its tables may speak (up to ``NEWER`` past the newest),
    read with the newest known layout. (Bytes that are no request read as one of a
    version far past the newest.)"""
    versions = all_versions().get(api_key)
    if not versions:
        return False
    return api_version in versions or versions[-1] < api_version <= versions[-1] + NEWER


def effective_version(api_key: int, api_version: int) -> int | None:
    """The version whose layout reads ``api_version``: itself when known; for a version
    newer than any kdissect knows, the newest known one (Kafka adds fields as tagged
    fields or in new versions that mostly extend the last; the reading is marked as
    assumed); None for an unknown API or an old version not in the tables."""
    versions = all_versions().get(api_key)
    if not versions:
        return None
    if api_version in versions:
        return api_version
    return versions[-1] if api_version > versions[-1] else None


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:  # v0 predates client ids
        return 0
    st = layout(api_key, api_version, "request")
    return 2 if st is not None and st.flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS:  # it answers in header v0 so old clients can read it
        return 0
    st = layout(api_key, api_version, "response")
    return 1 if st is not None and st.flexible else 0
