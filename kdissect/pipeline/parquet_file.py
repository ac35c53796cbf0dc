"""A small Parquet writer for kdissect's tables (``kdissect pcap --format parquet``).

Why not pyarrow: importing it costs about 0.18 CPU-s and 43 MiB, more than writing a table
of a few thousand rows takes here, and it makes the one-process Parquet output need the
spark extra. The tables are simple (nullable scalars, lists of scalars, lists of flat
structs: pipeline/columns.py), so the format's plain subset is enough:

- one row group per ``ROW_GROUP`` rows, one data page (v1) per column chunk, snappy;
- values PLAIN; definition and repetition levels (Dremel's, for the standard three-level
  LIST layout: ``optional group x (LIST) { repeated group list { optional element } }``)
  in the RLE/bit-packed hybrid, written as RLE runs;
- logical types as pyarrow writes them (STRING, INT(16), TIMESTAMP(µs, UTC)), so pyarrow,
  DuckDB and Spark read the columns as the Arrow schemas of pipeline/tables.py say;
- metadata in Thrift's compact protocol (pipeline/thrift.py); no statistics or indexes.
"""

from __future__ import annotations

import struct
from math import isfinite
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from operator import itemgetter
from typing import Any, BinaryIO

import snappy

from . import thrift as t
from .columns import FLOAT64, INT16, INT32, INT64, STRING, TIMESTAMP, Columns
from ..protocol.native_ext import bind

ROW_GROUP = 8_192

# parquet.thrift's enums
_INT32, _INT64, _DOUBLE, _BYTE_ARRAY = 1, 2, 5, 6  # physical types
_OPTIONAL, _REPEATED = 1, 2
_PLAIN, _RLE, _SNAPPY, _DATA_PAGE = 0, 3, 1, 0
_UTF8, _LIST, _TIMESTAMP_MICROS, _INT_16 = 0, 3, 10, 16  # converted types

# kind -> (physical type, struct code of a value, converted type, logical type)
_SCALARS: dict[str, tuple[int, str, int | None, t.Struct | None]] = {
    STRING: (_BYTE_ARRAY, "", _UTF8, [(1, t.STRUCT, [])]),
    INT16: (_INT32, "i", _INT_16, [(10, t.STRUCT, [(1, t.I8, 16), (2, t.BOOL, True)])]),
    INT32: (_INT32, "i", None, None),
    INT64: (_INT64, "q", None, None),
    FLOAT64: (_DOUBLE, "d", None, None),
    TIMESTAMP: (
        _INT64,
        "q",
        _TIMESTAMP_MICROS,  # isAdjustedToUTC, unit MICROS
        [(8, t.STRUCT, [(1, t.BOOL, True), (2, t.STRUCT, [(2, t.STRUCT, [])])])],
    ),
}
_U32 = struct.Struct("<I").pack

# a column that is not a list, its levels and values in one compiled pass
# (native/src/parquet_plain.rs: the bytes of _Leaf.levels and _Leaf.plain, or None: this
# module writes it)
_plain_native = bind(__name__, "_plain_native", "parquet_plain")
_NATIVE_KIND = {STRING: 0, INT16: 1, INT32: 2, INT64: 3, FLOAT64: 4, TIMESTAMP: 5}


class _Leaf:
    """One Parquet column: a table column, or one field of a list's struct items."""

    def __init__(self, column: str, kind: str, in_list: bool, field: str | None):
        self.column, self.kind, self.in_list, self.field = column, kind, in_list, field
        self.path = (
            [column, "list", "element"] + ([field] if field else []) if in_list else [column]
        )
        self.max_def = (2 if field else 1) + 2 if in_list else 1

    def levels(
        self, rows: dict[str, Sequence], lists: dict[str, _Slots]
    ) -> tuple[bytes | None, bytes, list]:
        """(repetition levels or None, definition levels, the values that are not null);
        levels one byte each. ``rows``: the row group's values by column; ``lists``: the
        slots of list columns, made once for all fields of their structs."""
        col = self.column
        if not self.in_list:
            values = rows[col]
            if self.kind == TIMESTAMP:
                values = _micros(values)
            present = [v for v in values if v is not None]
            if present and self.kind in _BOUNDS and not _within(present, self.kind):
                values = _in_range(values, self.kind)
                present = [v for v in values if v is not None]
            return (
                None,
                b"\x01" * len(values)
                if len(present) == len(values)
                else bytes([v is not None for v in values]),
                present,
            )
        if col not in lists:
            lists[col] = _Slots(rows[col])
        slots, field, top = lists[col], self.field, self.max_def
        values = slots.items
        if field is not None:
            if None in values:
                values = [_NULL_ITEM if it is None else it.get(field) for it in values]
            else:
                try:
                    values = list(map(itemgetter(field), values))
                except KeyError:  # an item without the field: null there
                    values = [it.get(field) for it in values]
        if self.kind == TIMESTAMP:
            values = _micros(values)
        if self.kind in _BOUNDS:
            present = [v for v in values if v is not None and v is not _NULL_ITEM]
            if present and not _within(present, self.kind):
                values = _in_range(values, self.kind)
        if None not in values and _NULL_ITEM not in values:
            return slots.reps, slots.kinds.replace(_ITEM, _BYTE[top]), values
        # a null struct (2), a null value (top - 1) or a value (top), put in the items' places
        item_defs = [2 if v is _NULL_ITEM else top - 1 if v is None else top for v in values]
        pieces = slots.kinds.split(_ITEM)
        defs = b"".join(chain.from_iterable(zip(pieces, map(_BYTE.__getitem__, item_defs))))
        return (
            slots.reps,
            defs + pieces[-1],
            [v for v in values if v is not None and v is not _NULL_ITEM],
        )

    def encoded(
        self, rows: dict[str, Sequence], lists: dict[str, _Slots]
    ) -> tuple[bytes | None, bytes, bytes]:
        """(repetition levels or None, definition levels, the PLAIN values) of this leaf
        in a row group (``levels``' arguments)."""
        if not self.in_list and _plain_native is not None:
            got = _plain_native(rows[self.column], _NATIVE_KIND[self.kind])
            if got is not None:
                return None, got[0], got[1]
        reps, defs, values = self.levels(rows, lists)
        return reps, defs, self.plain(values)

    def plain(self, values: list) -> bytes:
        if self.kind == STRING:
            distinct = set(values)
            if len(distinct) * 4 <= len(values):
                # few values, many times (records' capture, topic, exchange...): each one
                # encoded once (encoding every value was a sixth of the records table)
                keys = list(distinct)
                data = _utf8(keys)
                each = {k: _U32(len(b)) + b for k, b in zip(keys, data)}
                return b"".join(map(each.__getitem__, values))
            data = _utf8(values)
            return b"".join(chain.from_iterable(zip(map(_U32, map(len, data)), data)))
        return struct.pack(f"<{len(values)}{_SCALARS[self.kind][1]}", *values)


# what the integer types hold: a value outside (a damaged capture's record timestamp
# past 2^63, a capture time past year 294,247) is written as null, not a traceback
_BOUNDS = {
    INT16: (-(2**15), 2**15 - 1),
    INT32: (-(2**31), 2**31 - 1),
    INT64: (-(2**63), 2**63 - 1),
    TIMESTAMP: (-(2**63), 2**63 - 1),
}


def _within(present: list, kind: str) -> bool:
    lo, hi = _BOUNDS[kind]
    return lo <= min(present) and max(present) <= hi


def _in_range(values: Sequence, kind: str) -> list:
    lo, hi = _BOUNDS[kind]
    return [v if v is None or v is _NULL_ITEM or lo <= v <= hi else None for v in values]


def _micros(values: Sequence) -> list:
    """Float seconds as µs (as columns.micros_row makes them); not finite: null."""
    return [
        (round(v * 1_000_000) if isfinite(v) else None) if isinstance(v, float) else v
        for v in values
    ]


_NULL_ITEM = object()  # a list's null struct, in the list of one field's values
_ITEM = b"\xff"  # in _Slots.kinds: an item's place
_BYTE = [bytes([i]) for i in range(256)]


class _Slots:
    """A list column's shape in a row group: repetition levels, and per level entry
    whether the list is null (0), empty (1) or holds an item there (_ITEM); the items."""

    def __init__(self, lists: Sequence[list | None]):
        reps, kinds = bytearray(), bytearray()
        self.items: list[Any] = []
        for items in lists:
            if not items:
                reps.append(0)
                kinds.append(0 if items is None else 1)
                continue
            reps.append(0)
            reps += b"\x01" * (len(items) - 1)
            kinds += _ITEM * len(items)
            self.items += items
        self.reps, self.kinds = bytes(reps), bytes(kinds)


def _utf8(values: list[str]) -> list[bytes]:
    try:
        return [v.encode() for v in values]
    except UnicodeEncodeError:  # a lone surrogate: not UTF-8, replaced
        return [v.encode("utf-8", "replace") for v in values]


_BITS = {w: [format(v, f"0{w}b")[-w:] for v in range(256)] for w in range(1, 9)}


def _hybrid(levels: bytes, max_level: int) -> bytes:
    """Levels (one byte each) in the RLE/bit-packed hybrid, with the 4-byte length a v1
    data page puts before them: one RLE run when they are all the same, else one
    bit-packed run of them all (LSB first: the bits made by int() of a binary string of
    the levels in reverse, which runs in C)."""
    width, n = max_level.bit_length(), len(levels)
    out = bytearray()
    if width > 8:
        raise ValueError("levels above 255 are not written here")
    if n == 0 or levels.count(levels[0]) == n:
        t.varint(out, n << 1)
        out += levels[:1] or b"\0"
    else:
        groups = (n + 7) // 8
        bits = "".join(map(_BITS[width].__getitem__, reversed(levels + bytes(groups * 8 - n))))
        t.varint(out, groups << 1 | 1)
        out += int(bits, 2).to_bytes(groups * width, "little")
    return _U32(len(out)) + bytes(out)


def _leaves(columns: Columns) -> list[_Leaf]:
    out = []
    for name, kind in columns:
        if isinstance(kind, str):
            out.append(_Leaf(name, kind, False, None))
        elif isinstance(kind.item, str):
            out.append(_Leaf(name, kind.item, True, None))
        else:
            out += (_Leaf(name, k, True, field) for field, k in kind.item)
    return out


def _schema(columns: Columns) -> list[t.Struct]:
    def leaf(name: str, kind: str) -> t.Struct:
        physical, _code, converted, logical = _SCALARS[kind]
        return [
            (1, t.I32, physical),
            (3, t.I32, _OPTIONAL),
            (4, t.BINARY, name),
            (6, t.I32, converted),
            (10, t.STRUCT, logical),
        ]

    out: list[t.Struct] = [[(4, t.BINARY, "schema"), (5, t.I32, len(columns))]]
    for name, kind in columns:
        if isinstance(kind, str):
            out.append(leaf(name, kind))
            continue
        out += [
            [
                (3, t.I32, _OPTIONAL),
                (4, t.BINARY, name),
                (5, t.I32, 1),
                (6, t.I32, _LIST),
                (10, t.STRUCT, [(3, t.STRUCT, [])]),
            ],
            [(3, t.I32, _REPEATED), (4, t.BINARY, "list"), (5, t.I32, 1)],
        ]
        if isinstance(kind.item, str):
            out.append(leaf("element", kind.item))
        else:
            out.append(
                [(3, t.I32, _OPTIONAL), (4, t.BINARY, "element"), (5, t.I32, len(kind.item))]
            )
            out += (leaf(field, k) for field, k in kind.item)
    return out


class ParquetWriter:
    """Rows (dicts keyed by column name, a missing key null; or tuples of every column's
    value in ``columns``' order, all of one write call alike) into a Parquet file of
    ``columns``, one row group per ``write`` call of at most ``ROW_GROUP`` rows."""

    def __init__(self, out: BinaryIO, columns: Columns, metadata: dict[str, str] | None = None):
        self.out, self.columns = out, columns
        self.metadata = metadata or {}  # the footer's key-value metadata
        self.leaves = _leaves(columns)
        self.groups: list[t.Struct] = []
        self.rows = 0
        self.pos = 4
        out.write(b"PAR1")

    def write(self, rows: Sequence[Any]) -> None:
        for start in range(0, len(rows), ROW_GROUP):
            self._group(rows[start : start + ROW_GROUP])

    def _group(self, rows: Sequence[Any]) -> None:
        chunks: list[t.Struct] = []
        first, size, packed = self.pos, 0, 0
        names = [name for name, _kind in self.columns]
        by_column: dict[str, Sequence]
        if type(rows[0]) is tuple:  # tuple rows, in the columns' order: transposed in C
            # (zip would cut longer rows and read a dict row as its keys: all checked, in C)
            if set(map(type, rows)) != {tuple} or set(map(len, rows)) != {len(names)}:
                raise ValueError(f"rows are not all tuples of the {len(names)} columns")
            by_column = dict(zip(names, zip(*rows)))
        else:
            try:  # the values by column, transposed in C
                if len(names) < 2:
                    raise KeyError  # (itemgetter of one name gives values, not tuples)
                by_column = dict(zip(names, zip(*map(itemgetter(*names), rows))))
            except KeyError:  # a row without some column: null there
                by_column = {name: [r.get(name) for r in rows] for name in names}
        lists: dict[str, _Slots] = {}
        for leaf in self.leaves:
            reps, defs, plain = leaf.encoded(by_column, lists)
            page = (
                (_hybrid(reps, 1) if reps is not None else b"")
                + _hybrid(defs, leaf.max_def)
                + plain
            )
            data = snappy.compress(page)
            header = t.encode(
                [
                    (1, t.I32, _DATA_PAGE),
                    (2, t.I32, len(page)),
                    (3, t.I32, len(data)),
                    (
                        5,
                        t.STRUCT,
                        [
                            (1, t.I32, len(defs)),
                            (2, t.I32, _PLAIN),
                            (3, t.I32, _RLE),
                            (4, t.I32, _RLE),
                        ],
                    ),
                ]
            )
            chunks.append(
                [
                    (2, t.I64, self.pos),
                    (
                        3,
                        t.STRUCT,
                        [
                            (1, t.I32, _SCALARS[leaf.kind][0]),
                            (2, t.LIST, (t.I32, [_PLAIN, _RLE])),
                            (3, t.LIST, (t.BINARY, leaf.path)),
                            (4, t.I32, _SNAPPY),
                            (5, t.I64, len(defs)),
                            (6, t.I64, len(header) + len(page)),
                            (7, t.I64, len(header) + len(data)),
                            (9, t.I64, self.pos),
                        ],
                    ),
                ]
            )
            self.out.write(header)
            self.out.write(data)
            self.pos += len(header) + len(data)
            size += len(header) + len(page)
            packed += len(header) + len(data)
        self.groups.append(
            [
                (1, t.LIST, (t.STRUCT, chunks)),
                (2, t.I64, size),
                (3, t.I64, len(rows)),
                (5, t.I64, first),
                (6, t.I64, packed),
            ]
        )
        self.rows += len(rows)

    def close(self) -> None:
        kv = [[(1, t.BINARY, k), (2, t.BINARY, v)] for k, v in self.metadata.items()]
        footer = t.encode(
            [
                (1, t.I32, 1),
                (2, t.LIST, (t.STRUCT, _schema(self.columns))),
                (3, t.I64, self.rows),
                (4, t.LIST, (t.STRUCT, self.groups)),
                (5, t.LIST, (t.STRUCT, kv)) if kv else (5, t.LIST, None),
                (6, t.BINARY, "kdissect"),
            ]
        )
        self.out.write(footer + _U32(len(footer)) + b"PAR1")


class WriteError(Exception):
    """The file could not be written (says which, and why)."""


def write_table(
    rows: Iterable[Any], columns: Columns, path: str, metadata: dict[str, str] | None = None
) -> int:
    """Write ``rows`` as a Parquet file of ``columns`` at ``path`` (with ``metadata`` as
    the file's key-value metadata); returns the row count."""
    try:
        with open(path, "wb") as f:
            writer = ParquetWriter(f, columns, metadata)
            it = iter(rows)
            while True:
                batch = list(islice(it, ROW_GROUP))  # (a row group at once, in C)
                writer.write(batch)
                if len(batch) < ROW_GROUP:
                    break
            writer.close()
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror or e}") from None
    return writer.rows
