"""Kafka's varints (unsigned LEB128, and zigzag for signed ones): kdissect's one reader
and one writer of them. Generated readers inline the one- and two-byte cases
(gen_readers.py) and call ``uvarint`` for longer ones."""

from __future__ import annotations

import functools
from typing import Any

# the bytes decoders read: bytes, bytearray, memoryview or an mmap'd segment (indexed and
# sliced; typed loosely, as none of them has a common indexable protocol in 3.11)
Buf = Any


class VarintTooLong(ValueError):
    """A varint with more continuation bytes than its type allows."""


def uvarint(buf: Any, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """(value, next position) of the unsigned LEB128 varint at ``pos``. At most
    ``max_bytes`` bytes (5 for varint/uvarint, 10 for varlong); raises IndexError when it
    runs past ``end``, VarintTooLong when it is longer."""
    value = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise IndexError("varint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise VarintTooLong(f"varint longer than {max_bytes} bytes")


def zigzag(n: int) -> int:
    """The signed value a zigzag-encoded varint holds."""
    return (n >> 1) ^ -(n & 1)


def varint(buf: Any, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """(signed value, next position) of the zigzag varint at ``pos`` (as ``uvarint``)."""
    n, pos = uvarint(buf, pos, end, max_bytes)
    return (n >> 1) ^ -(n & 1), pos


@functools.lru_cache(maxsize=4096)  # lengths repeat (a capture's batches, strings)
def uvarint_bytes(n: int) -> bytes:
    """The shortest unsigned LEB128 encoding of ``n`` (>= 0)."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_bytes(n: int) -> bytes:
    """The shortest zigzag varint encoding of the signed ``n``."""
    return uvarint_bytes(n << 1 if n >= 0 else (-n << 1) - 1)
