"""Bounded readers for Kafka's primitive types.

Every read checks the bytes that remain first, so a length field can never make us
allocate or slice beyond what exists. Failures raise ``DecodeError``; the decoder turns
it into a problem node (callers of kdissect never see it).
"""

from __future__ import annotations

import struct

# re-exported: the generated readers and older callers import them from here
from .varint import VarintTooLong as VarintTooLong, uvarint as uvarint, zigzag as zigzag

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class Bail(Exception):
    """A values-only reader met something not clean: the message needs the located
    decoder, whose tree says what is wrong (protocol/values.py)."""


def uuid_text(raw: bytes) -> str:
    """A UUID's 16 bytes as Kafka's tools print them (``str(uuid.UUID)``, faster)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class DecodeError(Exception):
    """Bytes that cannot be read as the expected field; ``code`` is its finding code
    (kdissect.protocol.findings)."""

    def __init__(self, message: str, code: str = "malformed_field"):
        super().__init__(message)
        self.code = code


class Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else min(end, len(buf))

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, what: str = "field") -> None:
        if n > self.end - self.pos:
            raise DecodeError(
                f"truncated: {what} needs {n} bytes, {self.end - self.pos} left", "truncated"
            )

    def _fixed(self, s: struct.Struct, what: str) -> int:
        if s.size > self.end - self.pos:
            raise DecodeError(
                f"truncated: {what} needs {s.size} bytes, {self.end - self.pos} left", "truncated"
            )
        v: int = s.unpack_from(self.buf, self.pos)[0]
        self.pos += s.size
        return v

    def int8(self) -> int:
        return self._fixed(_I8, "int8")

    def int16(self) -> int:
        return self._fixed(_I16, "int16")

    def uint16(self) -> int:
        return self._fixed(_U16, "uint16")

    def int32(self) -> int:
        return self._fixed(_I32, "int32")

    def uint32(self) -> int:
        return self._fixed(_U32, "uint32")

    def int64(self) -> int:
        return self._fixed(_I64, "int64")

    def float64(self) -> float:
        return self._fixed(_F64, "float64")

    def boolean(self) -> bool:
        v = self._fixed(_I8, "bool")
        if v not in (0, 1):
            raise DecodeError(f"bool must be 0 or 1, found {v}")
        return bool(v)

    def uuid(self) -> str:
        return uuid_text(self.raw(16, "uuid"))

    def check_length(self, n: int, what: str) -> None:
        """A length read from the bytes must fit in the bytes that remain."""
        if n < 0:
            raise DecodeError(f"negative length {n} for {what}", "bad_length")
        if n > self.end - self.pos:
            raise DecodeError(
                f"length {n} of {what} exceeds the {self.end - self.pos} bytes that remain",
                "bad_length",
            )

    def raw(self, n: int, what: str = "bytes") -> bytes:
        self.check_length(n, what)
        start = self.pos
        self.pos += n
        return self.buf[start : self.pos]

    def uvarint(self, what: str = "uvarint") -> int:
        """Unsigned LEB128 varint, at most 5 bytes (10 for varlong is ``uvarlong``)."""
        return self._leb(5, what)

    def uvarlong(self, what: str = "uvarlong") -> int:
        return self._leb(10, what)

    def _leb(self, max_bytes: int, what: str) -> int:
        pos = self.pos
        if pos < self.end and self.buf[pos] < 0x80:  # one byte: nearly all of them
            self.pos = pos + 1
            return self.buf[pos]
        try:
            value, self.pos = uvarint(self.buf, self.pos, self.end, max_bytes)
        except IndexError:
            raise DecodeError(f"truncated: {what} runs past the end", "truncated") from None
        except VarintTooLong:
            raise DecodeError(f"{what} longer than {max_bytes} bytes") from None
        return value

    def varint(self, what: str = "varint") -> int:
        return zigzag(self._leb(5, what))

    def varlong(self, what: str = "varlong") -> int:
        return zigzag(self._leb(10, what))
