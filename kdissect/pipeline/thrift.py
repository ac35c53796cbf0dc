"""Thrift's compact protocol, the writing half, for Parquet's metadata (pipeline/parquet_file.py).

A struct is a list of (field id, type, value) in field id order; None values are left
out (Thrift's optional fields). Values: ints for I8/I32/I64, True/False for BOOL, str or
bytes for BINARY, a struct (list) for STRUCT, (element type, items) for LIST."""

from __future__ import annotations

from typing import Any

from ..protocol.varint import uvarint_bytes

BOOL, I8, I32, I64, BINARY, LIST, STRUCT = 1, 3, 5, 6, 8, 9, 12

Struct = list[tuple[int, int, Any]]


def encode(struct: Struct) -> bytes:
    out = bytearray()
    _struct(out, struct)
    return bytes(out)


def varint(out: bytearray, n: int) -> None:
    out += uvarint_bytes(n)


def _zigzag(n: int) -> int:
    return n << 1 if n >= 0 else (-n << 1) - 1


def _struct(out: bytearray, fields: Struct) -> None:
    last = 0
    for fid, kind, value in fields:
        if value is None:
            continue
        # a bool's value is its field type: 1 true, 2 false
        t = (1 if value else 2) if kind == BOOL else kind
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | t)
        else:
            out.append(t)
            varint(out, _zigzag(fid))
        last = fid
        if kind != BOOL:
            _value(out, kind, value)
    out.append(0)


def _value(out: bytearray, kind: int, value: Any) -> None:
    if kind in (I32, I64):
        varint(out, _zigzag(value))
    elif kind == BINARY:
        data = value.encode() if isinstance(value, str) else value
        varint(out, len(data))
        out += data
    elif kind == STRUCT:
        _struct(out, value)
    elif kind == LIST:
        elem, items = value
        if len(items) < 15:
            out.append(len(items) << 4 | elem)
        else:
            out.append(0xF0 | elem)
            varint(out, len(items))
        for item in items:
            if elem == BOOL:
                out.append(1 if item else 2)
            else:
                _value(out, elem, item)
    elif kind == I8:
        out.append(value & 0xFF)
    else:
        raise ValueError(f"thrift type {kind} is not written here")
