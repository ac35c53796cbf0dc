"""The compiled read of a message's header and body values (``kdissect._native.Program``,
native/src/values.rs): the generated readers' dicts, several times cheaper. This module
turns the layouts into the programs it runs, by the rules ``gen_readers`` writes the
Python readers by (lengths, nulls, node charges, tagged fields); the generated readers
stay the reference and decide whenever the compiled read is not sure (it returns None).
``KDISSECT_PURE=1`` (or no extension) leaves the Python readers alone
(tests/test_native_values.py compares the two)."""

from __future__ import annotations

import struct
from typing import Any

from . import schemas
from .layout import Struct
from .native_ext import chosen, forget_on_change
from .reader import Bail, VarintTooLong

# the kinds of native/src/values.rs
_KINDS = {
    name: i
    for i, name in enumerate(
        (
            "int8",
            "int16",
            "int32",
            "int64",
            "uint16",
            "uint32",
            "float64",
            "bool",
            "uuid",
            "varint",
            "varlong",
            "uvarint",
            "string",
            "bytes",
            "records",
        )
    )
}
_STRUCT, _NULLABLE_STRUCT, _ARRAY_STRUCT, _ARRAY_VALUE = 20, 21, 22, 23


class Unsupported(Exception):
    """A layout with a type the compiled read does not know: the Python readers read it."""


# (id of a Struct, tagged, id of the names kept) -> (the Struct, kept so that its id
# stays its own; its program)
_Memo = dict[tuple[int, bool, int], tuple[Struct, tuple[Any, ...]]]


def kept(f: Any, keep: frozenset[str] | None) -> bool:
    """Whether a read keeping ``keep`` (None: every field) keeps the field ``f`` in its
    dict: a field named in ``keep``, an error code, a records field, or a struct (array)
    holding one. The others are read for their checks only (the same bails and charges),
    nothing built of them."""
    name = f.name
    if name.startswith("_"):
        return False
    if keep is None or name in keep or name.endswith("error_code") or f.type == "records":
        return True
    st = f.struct
    return st is not None and any(kept(g, keep) for g in st.fields + st.tagged)


def _compile(
    st: Struct, memo: _Memo, tagged: bool = True, keep: frozenset[str] | None = None
) -> tuple[Any, ...]:
    """(fields, tag -> program or None), as ``gen_readers._Gen.struct`` reads ``st``;
    ``keep``: the names of the fields kept (``kept``; None: all)."""
    key = (id(st), tagged, id(keep))
    got = memo.get(key)
    if got is not None:
        return got[1]
    fields = []
    for f in st.fields:
        compact = st.flexible if f.compact is None else f.compact
        name = f.name if kept(f, keep) else None
        if f.array:
            # the count's prefix follows the struct (gen_readers' emit_length(flexible))
            sub: Any = (
                (_compile(f.struct, memo, keep=keep), 1 + len(f.struct.fields))
                if f.struct is not None
                else (_kind(f.type), 1)
            )
            kind = _ARRAY_STRUCT if f.struct is not None else _ARRAY_VALUE
        elif f.struct is not None:
            sub, kind = (
                _compile(f.struct, memo, keep=keep),
                (_NULLABLE_STRUCT if f.nullable else _STRUCT),
            )
        else:
            sub, kind = None, _kind(f.type)
        fields.append((name, kind, compact, st.flexible, f.nullable, sub))
    table = None
    if st.flexible and tagged:
        table = {
            f.tag: _compile(Struct(f.name, (f,), flexible=True), memo, tagged=False, keep=keep)
            for f in st.tagged
        }
    program = (tuple(fields), table)
    memo[key] = (st, program)  # (st kept: its id stays its own)
    return program


def _kind(type_: str) -> int:
    k = _KINDS.get(type_)
    if k is None:
        raise Unsupported(type_)
    return k


_BAILS: tuple[type[Exception], ...] | None = None
_CLASS: Any = None
_MEMO: _Memo = {}


def _forget_class() -> None:
    global _CLASS
    _CLASS = None


forget_on_change(_forget_class)


def program(
    api_key: int,
    api_version: int,
    direction: str,
    records: Any,
    heads: Any,
    keep: frozenset[str] | None = None,
) -> Any | None:
    """The compiled reader of one message kind (header and body), or None: no extension,
    KDISSECT_PURE set, or a layout it does not read. ``records`` and ``heads``: the
    values decoder's record reader and batch-heads type, which it calls back. ``keep``:
    the body's dict holds only the fields ``kept`` says (None: all; the same set object
    for a run: its programs are kept by its id)."""
    global _CLASS, _BAILS
    if _CLASS is None:
        _CLASS = getattr(chosen(), "Program", False)
        _BAILS = (Bail, VarintTooLong, struct.error, IndexError, UnicodeDecodeError)
    if not _CLASS:
        return None
    body = schemas.layout(api_key, api_version, direction)
    if body is None:
        return None
    if direction == "request":
        head = schemas.REQUEST_HEADERS[schemas.request_header_version(api_key, api_version)]
    else:
        head = schemas.RESPONSE_HEADERS[schemas.response_header_version(api_key, api_version)]
    try:
        return _CLASS(
            _compile(head, _MEMO), _compile(body, _MEMO, keep=keep), records, heads, _BAILS, keep
        )
    except Unsupported:
        return None
