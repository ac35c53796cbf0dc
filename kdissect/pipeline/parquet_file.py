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

import re
import struct
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any, BinaryIO

import snappy

from .. import __version__
from . import thrift as t
from .columns import FLOAT64, INT16, INT32, INT64, STRING, TIMESTAMP, Columns

ROW_GROUP = 16_384

# parquet.thrift's enums
_INT32, _INT64, _DOUBLE, _BYTE_ARRAY = 1, 2, 5, 6               # physical types
_OPTIONAL, _REPEATED = 1, 2
_PLAIN, _RLE, _SNAPPY, _DATA_PAGE = 0, 3, 1, 0
_UTF8, _LIST, _TIMESTAMP_MICROS, _INT_16 = 0, 3, 10, 16          # converted types

# kind -> (physical type, struct code of a value, converted type, logical type)
_SCALARS: dict[str, tuple[int, str, int | None, t.Struct | None]] = {
    STRING: (_BYTE_ARRAY, "", _UTF8, [(1, t.STRUCT, [])]),
    INT16: (_INT32, "i", _INT_16, [(10, t.STRUCT, [(1, t.I8, 16), (2, t.BOOL, True)])]),
    INT32: (_INT32, "i", None, None),
    INT64: (_INT64, "q", None, None),
    FLOAT64: (_DOUBLE, "d", None, None),
    TIMESTAMP: (_INT64, "q", _TIMESTAMP_MICROS,        # isAdjustedToUTC, unit MICROS
                [(8, t.STRUCT, [(1, t.BOOL, True), (2, t.STRUCT, [(2, t.STRUCT, [])])])]),
}
_U32 = struct.Struct("<I").pack


class _Leaf:
    """One Parquet column: a table column, or one field of a list's struct items."""

    def __init__(self, column: str, kind: str, in_list: bool, field: str | None):
        self.column, self.kind, self.in_list, self.field = column, kind, in_list, field
        self.path = [column, "list", "element"] + ([field] if field else []) \
            if in_list else [column]
        self.max_def = (2 if field else 1) + 2 if in_list else 1

    def levels(self, rows: Sequence[dict]) -> tuple[bytes | None, bytes, list]:
        """(repetition levels or None, definition levels, the values that are not null);
        levels one byte each."""
        col = self.column
        if not self.in_list:
            values = [r.get(col) for r in rows]
            present = [v for v in values if v is not None]
            return None, b"\x01" * len(values) if len(present) == len(values) else \
                bytes([v is not None for v in values]), present
        reps, defs = bytearray(), bytearray()
        found: list[Any] = []
        field, top = self.field, self.max_def
        full = bytes([top])
        for r in rows:
            items = r.get(col)
            if not items:                   # null (0) or empty (1)
                reps.append(0)
                defs.append(0 if items is None else 1)
                continue
            reps.append(0)
            reps += b"\x01" * (len(items) - 1)
            if field is not None:
                if None in items:           # a null struct: no field below it
                    items = [_NULL_ITEM if it is None else it.get(field) for it in items]
                else:
                    items = [it.get(field) for it in items]
            if None in items or _NULL_ITEM in items:
                for item in items:
                    if item is None or item is _NULL_ITEM:
                        defs.append(2 if item is _NULL_ITEM else top - 1)
                    else:
                        defs.append(top)
                        found.append(item)
            else:
                defs += full * len(items)
                found += items
        return bytes(reps), bytes(defs), found

    def plain(self, values: list) -> bytes:
        if self.kind == STRING:
            data = _utf8(values)
            return b"".join(chain.from_iterable(zip(map(_U32, map(len, data)), data)))
        if self.kind == TIMESTAMP:            # float seconds -> µs, as columns.micros_row does
            values = [round(v * 1_000_000) if isinstance(v, float) else v for v in values]
        return struct.pack(f"<{len(values)}{_SCALARS[self.kind][1]}", *values)


_NULL_ITEM = object()           # a list's null struct, in the list of one field's values


def _utf8(values: list[str]) -> list[bytes]:
    try:
        return [v.encode() for v in values]
    except UnicodeEncodeError:              # a lone surrogate: not UTF-8, replaced
        return [v.encode("utf-8", "replace") for v in values]


_RUNS = re.compile(rb"(.)\1*", re.S)


def _rle(levels: bytes) -> bytes:
    """Levels (one byte each, so a bit width of at most 8: one byte per run's value) in
    the RLE/bit-packed hybrid as RLE runs, with the 4-byte length a v1 data page puts
    before them."""
    out = bytearray()
    for run in _RUNS.finditer(levels):
        t.varint(out, (run.end() - run.start()) << 1)
        out.append(levels[run.start()])
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
        return [(1, t.I32, physical), (3, t.I32, _OPTIONAL), (4, t.BINARY, name),
                (6, t.I32, converted), (10, t.STRUCT, logical)]

    out: list[t.Struct] = [[(4, t.BINARY, "schema"), (5, t.I32, len(columns))]]
    for name, kind in columns:
        if isinstance(kind, str):
            out.append(leaf(name, kind))
            continue
        out += [[(3, t.I32, _OPTIONAL), (4, t.BINARY, name), (5, t.I32, 1),
                 (6, t.I32, _LIST), (10, t.STRUCT, [(3, t.STRUCT, [])])],
                [(3, t.I32, _REPEATED), (4, t.BINARY, "list"), (5, t.I32, 1)]]
        if isinstance(kind.item, str):
            out.append(leaf("element", kind.item))
        else:
            out.append([(3, t.I32, _OPTIONAL), (4, t.BINARY, "element"),
                        (5, t.I32, len(kind.item))])
            out += (leaf(field, k) for field, k in kind.item)
    return out


class ParquetWriter:
    """Rows (dicts keyed by column name; a missing key is null) into a Parquet file of
    ``columns``, one row group per ``write`` call of at most ``ROW_GROUP`` rows."""

    def __init__(self, out: BinaryIO, columns: Columns):
        self.out, self.columns = out, columns
        self.leaves = _leaves(columns)
        self.groups: list[t.Struct] = []
        self.rows = 0
        self.pos = 4
        out.write(b"PAR1")

    def write(self, rows: Sequence[dict]) -> None:
        for start in range(0, len(rows), ROW_GROUP):
            self._group(rows[start:start + ROW_GROUP])

    def _group(self, rows: Sequence[dict]) -> None:
        chunks: list[t.Struct] = []
        first, size, packed = self.pos, 0, 0
        for leaf in self.leaves:
            reps, defs, values = leaf.levels(rows)
            page = (_rle(reps) if reps is not None else b"") + _rle(defs) \
                + leaf.plain(values)
            data = snappy.compress(page)
            header = t.encode([
                (1, t.I32, _DATA_PAGE), (2, t.I32, len(page)), (3, t.I32, len(data)),
                (5, t.STRUCT, [(1, t.I32, len(defs)), (2, t.I32, _PLAIN), (3, t.I32, _RLE),
                               (4, t.I32, _RLE)])])
            chunks.append([(2, t.I64, self.pos), (3, t.STRUCT, [
                (1, t.I32, _SCALARS[leaf.kind][0]), (2, t.LIST, (t.I32, [_PLAIN, _RLE])),
                (3, t.LIST, (t.BINARY, leaf.path)), (4, t.I32, _SNAPPY),
                (5, t.I64, len(defs)), (6, t.I64, len(header) + len(page)),
                (7, t.I64, len(header) + len(data)), (9, t.I64, self.pos)])])
            self.out.write(header)
            self.out.write(data)
            self.pos += len(header) + len(data)
            size += len(header) + len(page)
            packed += len(header) + len(data)
        self.groups.append([(1, t.LIST, (t.STRUCT, chunks)), (2, t.I64, size),
                            (3, t.I64, len(rows)), (5, t.I64, first), (6, t.I64, packed)])
        self.rows += len(rows)

    def close(self) -> None:
        footer = t.encode([(1, t.I32, 1), (2, t.LIST, (t.STRUCT, _schema(self.columns))),
                           (3, t.I64, self.rows), (4, t.LIST, (t.STRUCT, self.groups)),
                           (6, t.BINARY, f"kdissect version {__version__}")])
        self.out.write(footer + _U32(len(footer)) + b"PAR1")


class WriteError(Exception):
    """The file could not be written (says which, and why)."""


def write_table(rows: Iterable[dict], columns: Columns, path: str) -> int:
    """Write ``rows`` as a Parquet file of ``columns`` at ``path``; returns the row count."""
    try:
        with open(path, "wb") as f:
            writer = ParquetWriter(f, columns)
            batch: list[dict] = []
            for row in rows:
                batch.append(row)
                if len(batch) == ROW_GROUP:
                    writer.write(batch)
                    batch = []
            writer.write(batch)
            writer.close()
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror or e}") from None
    return writer.rows
