"""The wire-type table: for each of Kafka's primitive types (``layout.PRIMITIVES``), how to
read it located (into a ``Node``), how to skip it by its length, and the source of its
values-only read (``codegen/gen_readers.py`` writes that into ``values_readers``). Every walker over a
layout (``decode``, ``values``, the proxy's ``skipscan``, ``schemas.has_records``) asks
this table, so a type's rules are written once.

Lengths: "string", "bytes" and "records" carry a compact length (uvarint N+1) where the
enclosing struct is flexible or the field says ``compact``, else a classic one (int16 for
strings, int32 for bytes and records); -1 is null.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .context import Decoding
from .layout import FIXED_FORMATS, VARINT_BYTES
from .node import Node
from .plain import Frozen
from .reader import DecodeError, Reader

if TYPE_CHECKING:
    from .layout import Field


class Emitter(Protocol):
    """What a codec needs to write the values reader's source (``codegen/gen_readers.py``)."""

    def emit(self, depth: int, line: str) -> None: ...

    def unpacker(self, fmt: str) -> str: ...


class Codec(Frozen):
    """How one wire type is read, located and values-only."""

    __slots__ = _fields = (
        "name",
        "size",
        "fmt",
        "packable",
        "plain",
        "read",
        "varint",
        "zigzag",
        "wide",
        "records",
    )

    def __init__(
        self,
        name: str,
        size: int | None = None,  # fixed width in bytes; None: variable
        fmt: str | None = None,  # struct format of a fixed width
        packable: bool = False,  # a fixed width whose unpacked value is the value
        plain: Callable[[Reader], Any] | None = None,  # read a value (fixed widths, varints)
        read: Callable[[Reader, Field, bool, Node, Decoding], None] | None = None,  # located
        varint: int = 0,  # varints: their longest encoding in bytes
        zigzag: bool = False,
        wide: bool = False,  # classic length prefix int32 (else int16)
        records: bool = False,
    ):  # carries record batches
        self.name, self.size, self.fmt, self.packable = name, size, fmt, packable
        self.plain, self.read, self.varint, self.zigzag = plain, read, varint, zigzag
        self.wide, self.records = wide, records


def length(r: Reader, compact: bool, wide: bool) -> int:
    """A length or count prefix: -1 means null. Compact lengths are uvarint N+1."""
    if compact:
        return r.uvarint("compact length") - 1
    return r.int32() if wide else r.int16()


# -- located reads of the length-prefixed types -------------------------------------------


def _read_string(r: Reader, f: Field, compact: bool, node: Node, ctx: Decoding) -> None:
    n = length(r, compact, False)
    if n < 0:
        if n != -1 or not f.nullable:
            raise DecodeError(
                f"string length {n} is not allowed here"
                if n != -1
                else "null string in a non-nullable field",
                "bad_length" if n != -1 else "malformed_field",
            )
        return
    raw = r.raw(n, "string")
    try:
        node.value = raw.decode("utf-8")
    except UnicodeDecodeError:
        node.value = raw.decode("utf-8", "replace")
        node.problem = "string is not valid UTF-8"
        node.code = "bad_utf8"


def _read_bytes(r: Reader, f: Field, compact: bool, node: Node, ctx: Decoding) -> None:
    n = length(r, compact, True)
    if n < -1 or (n == -1 and not f.nullable and f.type == "bytes"):
        raise DecodeError(f"bytes length {n} is not allowed here", "bad_length")
    if n < 0:
        return
    r.check_length(n, f.type)
    if f.type == "records" and ctx.options.records:
        from .records import read_records  # lazily: the proxy and pastes skip records

        node.value = n
        node.add(
            Node("_length", "uvarint" if compact else "int32", node.offset, r.pos - node.offset, n)
        )
        read_records(r.buf, node, r.pos, r.pos + n, ctx)
        r.pos += n
    else:
        node.value = r.raw(n, "bytes")


def _fixed(name: str, fmt: str, plain: Callable[[Reader], Any], packable: bool = True) -> Codec:
    return Codec(name, struct.calcsize(">" + fmt), fmt, packable, plain)


TYPES: dict[str, Codec] = {
    c.name: c
    for c in (
        *(_fixed(name, fmt, getattr(Reader, name)) for name, fmt in FIXED_FORMATS.items()),
        _fixed("bool", "b", Reader.boolean, packable=False),
        _fixed("uuid", "16s", Reader.uuid, packable=False),
        Codec("varint", plain=Reader.varint, varint=VARINT_BYTES["varint"], zigzag=True),
        Codec("varlong", plain=Reader.varlong, varint=VARINT_BYTES["varlong"], zigzag=True),
        Codec("uvarint", plain=Reader.uvarint, varint=VARINT_BYTES["uvarint"]),
        Codec("string", read=_read_string),
        Codec("bytes", read=_read_bytes, wide=True),
        Codec("records", read=_read_bytes, wide=True, records=True),
    )
}


def codec(type_: str) -> Codec:
    c = TYPES.get(type_)
    if c is None:
        raise DecodeError(f"unknown type {type_!r}")
    return c


# -- skipping -------------------------------------------------------------------------------


def skip_value(r: Reader, f: Field, compact: bool) -> None:
    """Step over one value of ``f`` by its size or length, checking what the located
    read checks about its framing (lengths, nulls) but not what the bytes hold."""
    c = codec(f.type)
    if c.size is not None:
        r.need(c.size, f.type)
        r.pos += c.size
    elif c.varint:
        r._leb(c.varint, f.type)
    else:
        n = length(r, compact, c.wide)
        if n < -1 or (n == -1 and not f.nullable and f.type != "records"):
            raise DecodeError(f"{f.type} length {n} is not allowed here", "bad_length")
        if n > 0:
            r.check_length(n, f.type)  # skipped by its length: never read
            r.pos += n


# -- the values reader's source -------------------------------------------------------------


def emit_length(g: Emitter, d: int, var: str, compact: bool, wide: bool) -> None:
    """Source setting ``var`` to a length or count prefix (-1: null)."""
    if compact:
        g.emit(d, f"{var} = buf[pos]")
        g.emit(d, f"if {var} < 128: pos += 1")
        g.emit(d, f"else: {var}, pos = _uvarint(buf, pos, len(buf), 5)")
        g.emit(d, f"{var} -= 1")
    else:
        g.emit(
            d, f"{var} = {g.unpacker('i' if wide else 'h')}(buf, pos)[0]; pos += {4 if wide else 2}"
        )


def emit_value(g: Emitter, d: int, f: Field, compact: bool, target: str) -> None:
    """Source reading one value of ``f`` (not an array, not a struct) into ``target``;
    anything the located read would fault raises Bail (or IndexError, struct.error)."""
    c = codec(f.type)
    if c.fmt is not None:
        g.emit(d, f"v = {g.unpacker(c.fmt)}(buf, pos)[0]; pos += {c.size}")
        if f.type == "bool":
            g.emit(d, "if v != 0 and v != 1: raise Bail")
            g.emit(d, f"{target} = v == 1")
        elif f.type == "uuid":
            g.emit(d, f"{target} = _uuid(v)")
        else:
            g.emit(d, f"{target} = v")
    elif c.varint:
        g.emit(d, f"v, pos = _uvarint(buf, pos, len(buf), {c.varint})")
        g.emit(d, f"{target} = (v >> 1) ^ -(v & 1)" if c.zigzag else f"{target} = v")
    else:
        emit_length(g, d, "n", compact, c.wide)
        null_ok = f.nullable or c.records
        g.emit(d, "if n < 0:")
        if null_ok:
            g.emit(d + 1, "if n != -1: raise Bail")
            g.emit(d + 1, f"{target} = None")
        else:
            g.emit(d + 1, "raise Bail")
        g.emit(d, "else:")
        g.emit(d + 1, "e = pos + n")
        g.emit(d + 1, "if e > len(buf): raise Bail")
        if f.type == "string":
            g.emit(d + 1, f"{target} = buf[pos:e].decode(); pos = e")
        elif c.records:
            g.emit(
                d + 1,
                f"{target} = s.batches(buf, pos, e, s) if s.records "
                f"else s.conv(buf[pos:e]); pos = e",
            )
        else:
            g.emit(d + 1, f"{target} = s.conv(buf[pos:e]); pos = e")


def carries_records(type_: str) -> bool:
    c = TYPES.get(type_)
    return c is not None and c.records
