"""Decompression for Kafka's codecs, every one capped so a bomb cannot exhaust memory.

``decompress`` returns (data, note); it raises ``CodecError`` with a readable reason, and
``TooBig`` when the output would exceed the cap (the caller's remaining budget). Every
codec runs in time linear in its input and output.
"""

from __future__ import annotations

import io
import struct
import zlib

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class CodecError(Exception):
    pass


class TooBig(CodecError):
    """The output would exceed the cap."""


def _too_big(cap: int) -> TooBig:
    return TooBig(f"decompressed size exceeds the {cap} bytes left in the budget")


def decompress(codec: int, data: bytes, cap: int) -> tuple[bytes, str | None]:
    try:
        if codec == 1:
            return _gzip(data, cap), None
        if codec == 2:
            return _snappy(data, cap)
        if codec == 3:
            return _lz4(data, cap)
        if codec == 4:
            return _zstd(data, cap), None
    except CodecError:
        raise
    except MemoryError:
        raise _too_big(cap) from None
    except Exception as e:  # codec libraries raise many types on corrupt input
        raise CodecError(f"{CODECS[codec]} data is corrupt: {_one_line(e)}") from None
    raise CodecError(f"unknown compression codec {codec}")


def _one_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def _gzip(data: bytes, cap: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data, cap + 1)
    if len(out) > cap:
        raise _too_big(cap)
    if not d.eof:
        raise CodecError("gzip stream is truncated")
    return out


def _raw_snappy(data: bytes, cap: int) -> bytes:
    import snappy
    from .reader import uvarint

    # the uncompressed length leads the block as a varint: check it before inflating (a
    # zero byte after the first five ends it, so a cut or overlong one counts as read)
    n = uvarint(data[:5] + b"\x00", 0, 6, 6)[0]
    if n > cap:
        raise _too_big(cap)
    out: bytes = snappy.uncompress(data)
    return out


def _snappy(data: bytes, cap: int) -> tuple[bytes, str | None]:
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, cap), None
    # xerial framing (Java clients): magic, version, compatible version, then
    # blocks of int32 length + raw snappy
    pos, out, total = 16, [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CodecError("xerial snappy block header is truncated")
        n = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CodecError(f"xerial snappy block of {n} bytes runs past the data")
        block = _raw_snappy(data[pos : pos + n], cap - total)
        total += len(block)
        out.append(block)
        pos += n
    return b"".join(out), "xerial-framed snappy"


def _lz4(data: bytes, cap: int) -> tuple[bytes, str | None]:
    try:
        return _lz4_frame(data, cap), None
    except CodecError:
        raise
    except Exception:
        fixed = _fix_kafka_lz4_header(data)
        if fixed is None:
            raise
        return (
            _lz4_frame(fixed, cap),
            "pre-0.10 Kafka LZ4 framing (header checksum over the magic bytes)",
        )


def _lz4_frame(data: bytes, cap: int) -> bytes:
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    out: bytes = d.decompress(data, max_length=cap + 1)
    if len(out) > cap:
        raise _too_big(cap)
    return out


def _fix_kafka_lz4_header(data: bytes) -> bytes | None:
    """Kafka before 0.10 computed the frame header checksum over the magic number too;
    recompute it the standard way (over the descriptor only)."""
    if len(data) < 7 or not data.startswith(_LZ4_MAGIC):
        return None
    flg = data[4]
    desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    end = 4 + desc_len
    if len(data) <= end:
        return None
    hc = (xxh32(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes([hc]) + data[end + 1 :]


_ZSTD_CHUNK = 1 << 20


def _zstd(data: bytes, cap: int) -> bytes:
    import zstandard

    # read in bounded chunks (a read allocates its whole size up front) across every
    # frame, keeping a running total: linear however many tiny frames the data holds
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    out = bytearray()
    while True:
        chunk = reader.read(min(_ZSTD_CHUNK, cap + 1 - len(out)))
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > cap:
            raise _too_big(cap)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, only needed for the few bytes of an LZ4 frame descriptor."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed, (seed - _P1) & _M32]
        while i + 16 <= n:
            for j in range(4):
                lane = struct.unpack_from("<I", data, i + 4 * j)[0]
                v[j] = (_rotl((v[j] + lane * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + struct.unpack_from("<I", data, i)[0] * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
