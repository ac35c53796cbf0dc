"""Record batches: the one description of their layouts (MessageSet v0/v1, RecordBatch
v2, Record, Header), in the layout language (``layout.Struct``, its wire types' widths),
and ``Batch``, the one view every reader of batches walks them with: the pcap decoders
(records.py located, values.py values-only), ``kdissect log`` (ondisk.py, the log source),
content search (stream/content.py) and the TUI.

A ``Batch`` reads nothing until asked: its header fields are unpacked once (``head``),
its CRC32C computed once (``crc_ok``), its records' bytes decompressed within a budget
(``clean``), its records framed one at a time (``records``: ``Record`` views whose fields
are located, read when asked). Hot loops use the pieces without a view: values.py's
per-batch loop (``HEAD``, ``computed_crc``, ``payload``), content search's ``record_keys``,
and the generated record loop (values_readers/record_loop.py, the hot path of JSON
lines), whose varint widths come from ``RECORD``. The Rust writer (native/src/logjson.rs)
is checked against these views by tests/test_batch.py.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from .codecs import CODECS, CodecError, decompress
from .crc import crc32c_of
from .layout import FIXED_FORMATS, VARINT_BYTES, Field, Struct
from .varint import VarintTooLong, uvarint

# -- the layouts (Kafka's DefaultRecordBatch, LegacyRecord, DefaultRecord, RecordHeader) --

RECORD_BATCH = Struct(
    "RecordBatch",
    (
        Field("base_offset", "int64"),
        Field("batch_length", "int32"),  # the bytes after this field
        Field("partition_leader_epoch", "int32"),
        Field("magic", "int8"),
        Field("crc", "uint32"),  # CRC32C of everything after it
        Field("attributes", "int16"),
        Field("last_offset_delta", "int32"),
        Field("base_timestamp", "int64", hint="time"),
        Field("max_timestamp", "int64", hint="time"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("base_sequence", "int32"),
        Field("record_count", "int32"),
    ),
)
# v0 (magic 0) and v1 (magic 1, with the timestamp): CRC32 of everything after the crc
MESSAGE = Struct(
    "Message",
    (
        Field("offset", "int64"),
        Field("message_size", "int32"),
        Field("crc", "uint32"),
        Field("magic", "int8"),
        Field("attributes", "int8"),
        Field("timestamp", "int64", hint="time"),  # magic 1 only
        Field("key", "bytes", nullable=True),  # int32 length, -1 null
        Field("value", "bytes", nullable=True),
    ),
)
# inside a v2 batch: lengths and counts are zigzag varints (-1 null)
HEADER = Struct(
    "Header",
    (
        Field("key", "string"),
        Field("value", "bytes", nullable=True),
    ),
)
RECORD = Struct(
    "Record",
    (
        Field("length", "varint"),  # the bytes after this field
        Field("attributes", "int8"),
        Field("timestamp_delta", "varlong"),
        Field("offset_delta", "varint"),
        Field("key", "bytes", nullable=True),
        Field("value", "bytes", nullable=True),
        Field("headers", "struct", array=True, struct=HEADER),
    ),
)


def _offsets(st: Struct) -> dict[str, int]:
    """Where each leading fixed-width field starts."""
    out, at = {}, 0
    for f in st.fields:
        if f.type not in FIXED_FORMATS:
            break
        out[f.name] = at
        at += struct.calcsize(">" + FIXED_FORMATS[f.type])
    return out


FIELDS = tuple(f.name for f in RECORD_BATCH.fields)
HEAD = struct.Struct(">" + "".join(FIXED_FORMATS[f.type] for f in RECORD_BATCH.fields))
HEAD_SIZE = HEAD.size  # 61
AT = _offsets(RECORD_BATCH)
LENGTH_AT = AT["batch_length"]  # 8
LOG_OVERHEAD = LENGTH_AT + 4  # 12: offset and length frame any batch
MAGIC_AT = AT["magic"]  # 16: the same in v0, v1 and v2
assert MAGIC_AT == _offsets(MESSAGE)["magic"]
FRAME = MAGIC_AT + 1  # 17: enough to frame and tell the format
CRC_AT = AT["crc"]  # 17
CRC_FROM = AT["attributes"]  # 21: what the CRC32C covers starts here


def _least_message(magic: int) -> int:
    """The least message_size of a v0/v1 message: crc to value, key and value null."""
    after = [f for f in MESSAGE.fields[2:] if magic >= 1 or f.name != "timestamp"]
    return sum(struct.calcsize(">" + FIXED_FORMATS.get(f.type, "i")) for f in after)


# the least batch_length of each format (14, 22, 49)
MIN_LENGTH = {0: _least_message(0), 1: _least_message(1), 2: HEAD_SIZE - LOG_OVERHEAD}
# the longest varint of each record field's type (the generated record loop's too)
VARINT_MAX = {f.name: VARINT_BYTES[f.type] for f in RECORD.fields if f.type in VARINT_BYTES}

# attributes
CODEC_MASK = 0x07
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10  # v2
CONTROL = 0x20  # v2
DELETE_HORIZON = 0x40  # v2
KNOWN_ATTRIBUTES = 0x7F  # v2 (int16); v0/v1 (int8): CODEC_MASK | LOG_APPEND_TIME


def unknown_bits(attrs: int, magic: int) -> int:
    """The attribute bits no Kafka version defines (Kafka ignores them)."""
    if magic == 2:
        return attrs & 0xFFFF & ~KNOWN_ATTRIBUTES
    return attrs & 0xFF & ~(CODEC_MASK | LOG_APPEND_TIME)


# a batch's bytes: bytes, bytearray, a memoryview or a segment's map
Bytes = Any
Head = tuple[int, ...]  # HEAD's values, in FIELDS order
_Unpack = Callable[[Bytes, int], tuple[int, ...]]
_I32: _Unpack = struct.Struct(">i").unpack_from
_U32: _Unpack = struct.Struct(">I").unpack_from
_I16: _Unpack = struct.Struct(">h").unpack_from


def computed_crc(buf: Bytes, start: int, end: int) -> int:
    """The CRC32C of what the header's crc covers in the v2 batch at ``buf[start:end]``:
    the one CRC check of a batch (``Batch.crc_ok``; hot loops call it with the header
    they unpacked by ``HEAD``)."""
    return crc32c_of(buf, start + CRC_FROM, end)


def payload(
    buf: Bytes,
    start: int,
    end: int,
    head: Head,
    max_decompressed: int,
    max_nodes: int | None = None,
) -> tuple[Any, int, int] | None:
    """``Batch.clean`` after the header and the CRC (``head``: HEAD's values): a count
    the bytes (and the decompression budget) allow, the node budget (a record costs 9
    nodes in the located tree, its batch 16), a codec that decompresses within
    ``max_decompressed``. (records' bytes, start, end): the buffer itself when
    uncompressed; None at the first oddity."""
    count, codec = head[12], head[5] & CODEC_MASK
    pos = start + HEAD_SIZE
    if (
        count < 0
        or unknown_bits(head[5], 2)  # (the located tree says so)
        or (max_nodes is not None and 9 * count + 16 > max_nodes)
        or count > end - pos + (max_decompressed if codec else 0)
    ):
        return None
    if codec:
        try:
            data, _how = decompress(codec, buf[pos:end], max_decompressed)
        except CodecError:
            return None
        return data, 0, len(data)
    return buf, pos, end


def length_at(buf: Bytes, pos: int) -> int:
    """The batch_length (message_size in v0/v1) of the batch at ``pos``."""
    return _I32(buf, pos + LENGTH_AT)[0]


class Batch:
    """The batch (v2) or message (v0/v1) at ``buf[start:end]``; ``end`` defaults to where
    its length says it ends (which may be past the buffer: ``fits``). Nothing is read
    until asked; the header and the CRC are read once."""

    __slots__ = ("buf", "start", "end", "_head", "_crc")

    def __init__(self, buf: Bytes, start: int, end: int | None = None) -> None:
        self.buf, self.start = buf, start
        self.end = start + LOG_OVERHEAD + _I32(buf, start + LENGTH_AT)[0] if end is None else end
        self._head: Head | None = None
        self._crc: int | None = None

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def length(self) -> int:
        return _I32(self.buf, self.start + LENGTH_AT)[0]

    @property
    def magic(self) -> int:
        magic: int = self.buf[self.start + MAGIC_AT]
        return magic

    def fits(self, limit: int) -> bool:
        """Whether the batch's bytes end by ``limit`` (and it has its v2 header)."""
        return self.end <= limit and self.size >= HEAD_SIZE

    @property
    def plausible(self) -> bool:
        """Whether the first bytes look like a batch a broker wrote: a known magic, a
        length its format allows, not all zeros (a preallocated tail)."""
        magic, length = self.magic, self.length
        return (
            magic in (0, 1, 2)
            and length >= MIN_LENGTH[0 if magic < 2 else 2]
            and not (length == 0 and not any(self.buf[self.start : self.start + FRAME]))
        )

    # -- a v2 batch's header ---------------------------------------------------------

    @property
    def head(self) -> Head:
        """The header's values in ``FIELDS`` order (v2, at least HEAD_SIZE bytes)."""
        if self._head is None:
            self._head = HEAD.unpack_from(self.buf, self.start)
        return self._head

    def fields(self) -> dict[str, int]:
        return dict(zip(FIELDS, self.head))

    @property
    def attributes(self) -> int:
        return _I16(self.buf, self.start + CRC_FROM)[0]

    @property
    def codec(self) -> int:
        codec: int = self.buf[self.start + CRC_FROM + 1] & CODEC_MASK
        return codec

    @property
    def control(self) -> bool:
        return bool(self.buf[self.start + CRC_FROM + 1] & CONTROL)

    @property
    def crc(self) -> int:
        return _U32(self.buf, self.start + CRC_AT)[0]

    @property
    def crc_computed(self) -> int:
        """The CRC32C of the bytes the header's crc covers (computed once)."""
        if self._crc is None:
            self._crc = computed_crc(self.buf, self.start, self.end)
        return self._crc

    @property
    def crc_ok(self) -> bool:
        return self.crc_computed == self.crc

    def loop_args(self) -> tuple[int, int, int, bool]:
        """The record loop's count, base offset, first timestamp and whether every
        record has it (log-append time: the batch's max timestamp)."""
        h = self.head
        log_append = bool(h[5] & LOG_APPEND_TIME)
        return h[12], h[0], h[8] if log_append else h[7], log_append

    def clean(
        self, max_decompressed: int, max_nodes: int | None = None
    ) -> tuple[Any, int, int] | None:
        """(records' bytes, where they start, where they end) if this is a clean v2 batch:
        header, CRC, a count the bytes (and the decompression budget) allow, the node
        budget (a record costs 9 nodes in the located tree, its batch 16), a codec that
        decompresses within ``max_decompressed``; the buffer itself when uncompressed.
        None at the first oddity: the located decoder says what it is."""
        if self.size < HEAD_SIZE or self.magic != 2 or not self.crc_ok:
            return None
        return payload(self.buf, self.start, self.end, self.head, max_decompressed, max_nodes)

    def records(self, max_decompressed: int) -> Iterator[Record]:
        """The records of a clean batch (none when it is not: ``clean``); framing errors
        raise ``BadRecord``."""
        got = self.clean(max_decompressed)
        if got is None:
            return iter(())
        data, pos, end = got
        return records(data, pos, end, self.head[12])


# -- records ----------------------------------------------------------------------------


class BadRecord(ValueError):
    """A record whose bytes do not frame (a length or count past its end)."""


_TS = VARINT_MAX["timestamp_delta"]
_OFF = VARINT_MAX["offset_delta"]
_VARINT = VARINT_BYTES["varint"]  # the lengths of keys, values, headers and their count


def _signed(data: Bytes, p: int, end: int, longest: int) -> tuple[int, int]:
    if p < end:
        n = data[p]
        if n < 0x80:  # one byte: nearly all of them
            return (n >> 1) ^ -(n & 1), p + 1
    try:
        n, p = uvarint(data, p, end, longest)
    except (IndexError, VarintTooLong):
        raise BadRecord("a varint runs past the record or is too long") from None
    return (n >> 1) ^ -(n & 1), p


def _sized(data: Bytes, p: int, end: int) -> tuple[int | None, int]:
    """(where a varint-sized field's bytes start, None if null; where it ends)."""
    n, p = _signed(data, p, end, _VARINT)
    if n < -1 or p + n > end:
        raise BadRecord(f"a length of {n} with {end - p} bytes left")
    return (None, p) if n == -1 else (p, p + n)


# where a record's value and each header's key and value are (None: null)
_Tail = tuple[int | None, int, list[tuple[int | None, int, int | None, int]]]


class Record:
    """One v2 record at ``data[start:end]`` (``body``: after its length). Its fields are
    located and read when first asked: the key, then the rest."""

    __slots__ = (
        "data",
        "start",
        "body",
        "end",
        "attributes",
        "timestamp_delta",
        "offset_delta",
        "key_at",
        "key_end",
        "_tail",
    )

    def __init__(self, data: Bytes, start: int, body: int, end: int) -> None:
        self.data, self.start, self.body, self.end = data, start, body, end
        p = body + 1  # attributes
        if p > end:
            raise BadRecord("a record without its attributes")
        self.attributes = data[body]
        self.timestamp_delta, p = _signed(data, p, end, _TS)
        self.offset_delta, p = _signed(data, p, end, _OFF)
        self.key_at, self.key_end = _sized(data, p, end)
        self._tail: _Tail | None = None

    @property
    def key(self) -> bytes | None:
        return None if self.key_at is None else self.data[self.key_at : self.key_end]

    def _read_tail(self) -> _Tail:
        if self._tail is None:
            data, end = self.data, self.end
            value_at, p = _sized(data, self.key_end, end)
            value_end = p
            n, p = _signed(data, p, end, _VARINT)
            if n < 0 or n > end - p:
                raise BadRecord(f"a header count of {n} with {end - p} bytes left")
            headers = []
            for _ in range(n):
                k, p = _sized(data, p, end)
                kend = p
                v, p = _sized(data, p, end)
                headers.append((k, kend, v, p))
            if p != end:
                raise BadRecord(f"{end - p} bytes after the record's headers")
            self._tail = (value_at, value_end, headers)
        return self._tail

    @property
    def value(self) -> bytes | None:
        at, stop, _ = self._read_tail()
        return None if at is None else self.data[at:stop]

    @property
    def headers(self) -> list[tuple[bytes | None, bytes | None]]:
        data = self.data
        return [
            (None if k is None else data[k:ke], None if v is None else data[v:ve])
            for k, ke, v, ve in self._read_tail()[2]
        ]


def records(data: Bytes, pos: int, end: int, count: int) -> Iterator[Record]:
    """The ``count`` records framed in ``data[pos:end]``, one view at a time; a length
    that does not fit raises ``BadRecord`` (the caller checks the last one's end)."""
    for _ in range(count):
        length, body = _signed(data, pos, end, VARINT_MAX["length"])
        if length < 1 or body + length > end:  # at least its attributes byte
            raise BadRecord(f"record length {length} with {end - body} bytes left")
        yield Record(data, pos, body, body + length)
        pos = body + length


def record_keys(data: Bytes, pos: int, end: int, count: int, out: list[str]) -> int:
    """Append the keys (UTF-8, errors replaced) of the ``count`` records in
    ``data[pos:end]`` to ``out``, reading nothing after each key; where the last record
    ends. ``records`` without a view per record (content search's key filter reads every
    record of a capture): varints of one or two bytes are stepped over inline."""
    try:
        for _ in range(count):
            n = data[pos]
            if n < 0x80:
                length, p = (n >> 1) ^ -(n & 1), pos + 1
            else:
                length, p = _signed(data, pos, end, VARINT_MAX["length"])
            rec_end = p + length
            if length < 1 or rec_end > end:
                raise BadRecord(f"record length {length} with {end - p} bytes left")
            p += 1  # attributes
            if data[p] < 0x80:  # the timestamp delta
                p += 1
            elif data[p + 1] < 0x80:
                p += 2
            else:
                p = _signed(data, p, rec_end, _TS)[1]
            if data[p] < 0x80:  # the offset delta
                p += 1
            elif data[p + 1] < 0x80:
                p += 2
            else:
                p = _signed(data, p, rec_end, _OFF)[1]
            n = data[p]
            if n < 0x80:
                size, p = (n >> 1) ^ -(n & 1), p + 1
            else:
                size, p = _signed(data, p, rec_end, _VARINT)
            if size >= 0:
                if p + size > rec_end:
                    raise BadRecord(f"a key of {size} bytes with {rec_end - p} left")
                out.append(data[p : p + size].decode("utf-8", "replace"))
            elif size != -1:
                raise BadRecord(f"a key length of {size}")
            pos = rec_end
    except IndexError:
        raise BadRecord("a record runs past the end") from None
    return pos


def record_starts(data: Bytes, pos: int, count: int) -> list[int]:
    """Where each of ``count`` records starts (framing already checked by a reader)."""
    out = []
    end = len(data)
    for _ in range(count):
        out.append(pos)
        length, body = _signed(data, pos, end, VARINT_MAX["length"])
        pos = body + length
    return out


def attributes_note(attrs: int, magic: int) -> str:
    """The attributes as the located tree notes them (codec, flags)."""
    parts = [CODECS.get(attrs & CODEC_MASK, f"codec {attrs & CODEC_MASK}")]
    if attrs & LOG_APPEND_TIME:
        parts.append("log-append-time")
    if magic == 2:
        if attrs & TRANSACTIONAL:
            parts.append("transactional")
        if attrs & CONTROL:
            parts.append("control")
        if attrs & DELETE_HORIZON:
            parts.append("delete-horizon")
    unknown = unknown_bits(attrs, magic)
    return ", ".join(parts) + (f"; unknown bits {unknown:#x}" if unknown else "")
