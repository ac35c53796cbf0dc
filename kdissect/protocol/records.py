"""Record data: MessageSet v0/v1 and RecordBatch v2.

Nodes inside decompressed data carry offsets into the decompressed buffer, which the
node introducing it holds in ``buffer``.
"""

from __future__ import annotations

from typing import Any

import struct
from collections.abc import Callable

from .batch import (
    CODEC_MASK,
    CONTROL,
    FRAME,
    HEAD_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_AT,
    MESSAGE,
    RECORD_BATCH,
    Batch,
    attributes_note,
    unknown_bits,
    length_at,
)
from .codecs import CODECS, CodecError, TooBig, decompress
from .crc import crc32_of
from .context import Abort, Decoding, charge_nodes, fail, time_note
from .node import NOTE_MAKERS, Node
from .reader import DecodeError, Reader
from .values_readers.record_loop import located_record

CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
# the generated fast reader of one record (values_readers/record_loop.py)
FastRecord = Callable[[bytes, int, int, str, int, int, bool, list[Node]], "Node | None"]


def _record_note(value: dict[Any, Any]) -> str:
    return f"offset {value['offset']}, {time_note(value['timestamp']) or value['timestamp']}"


NOTE_MAKERS["record"] = _record_note


def _leaf(r: Reader, parent: Node, name: str, kind: str, read: Callable[..., Any]) -> Node:
    node = parent.add(Node(name, kind, r.pos))
    try:
        node.value = read(r)
    except DecodeError as e:
        raise fail(r, node, str(e), e.code) from None
    node.length = r.pos - node.offset
    return node


def _sized(r: Reader, parent: Node, name: str, length_kind: str) -> Node:
    """A length-prefixed byte field (int32 or varint length; -1 is null)."""
    node = parent.add(Node(name, "bytes", r.pos))
    try:
        n = r.int32() if length_kind == "int32" else r.varint()
        if n < -1:
            raise DecodeError(f"length {n} is negative", "bad_length")
        node.value = None if n == -1 else r.raw(n, name)
    except DecodeError as e:
        raise fail(r, node, str(e), e.code) from None
    node.length = r.pos - node.offset
    return node


def read_records(
    buf: bytes, parent: Node, start: int, end: int, ctx: Decoding, depth: int = 0
) -> None:
    """Append one node per batch / message found in ``buf[start:end]`` to ``parent``."""
    pos = start
    while pos < end:
        left = end - pos
        if left < FRAME:
            parent.add(
                Node(
                    "partial_batch",
                    "bytes",
                    pos,
                    left,
                    buf[pos:end],
                    note=f"partial batch: {left} bytes (a Fetch response may end "
                    f"inside a batch; the client fetches the rest later)",
                )
            )
            return
        size = length_at(buf, pos)
        magic = buf[pos + MAGIC_AT]
        if size < 0:
            parent.add(
                Node(
                    "batch",
                    "bytes",
                    pos,
                    left,
                    buf[pos:end],
                    problem=f"batch length {size} is negative",
                    code="bad_length",
                )
            )
            return
        total = LOG_OVERHEAD + size
        if total > left:
            parent.add(
                Node(
                    "partial_batch",
                    "bytes",
                    pos,
                    left,
                    buf[pos:end],
                    note=f"partial batch: {left} of {total} bytes (a Fetch response "
                    f"may end inside a batch; the client fetches the rest later)",
                )
            )
            return
        budget = ctx.budget
        if budget.nodes <= 0:
            parent.add(
                Node(
                    "_rest",
                    "bytes",
                    pos,
                    left,
                    buf[pos:end],
                    code="node_budget",
                    problem=f"node budget of {budget.max_nodes} fields spent; the "
                    f"remaining {left} bytes are kept raw (raise it with "
                    f"--max-nodes)",
                )
            )
            return
        budget.nodes -= 16
        if magic == 2:
            parent.add(_batch_v2(buf, pos, pos + total, ctx))
        elif magic in (0, 1):
            parent.add(_message_v01(buf, pos, pos + total, ctx, depth))
        else:
            parent.add(
                Node(
                    "batch",
                    "bytes",
                    pos,
                    total,
                    buf[pos : pos + total],
                    problem=f"unknown record format (magic {magic})",
                    code="unknown_magic",
                )
            )
        pos += total


def _decompressed(
    parent: Node, codec: int, payload: bytes, offset: int, ctx: Decoding, name: str
) -> bytes | None:
    """Add a node holding the decompressed buffer; None (with a problem) on failure.
    Every payload of the message draws on one budget of decompressed bytes."""
    node = parent.add(Node(name, "records", offset, len(payload)))
    budget = ctx.budget
    try:
        data, how = decompress(codec, payload, budget.decompressed)
    except TooBig:
        node.problem = (
            f"decompressed-bytes budget spent: the message may decompress to "
            f"{budget.max_decompressed} bytes in all and "
            f"{budget.max_decompressed - budget.decompressed} are used; this "
            f"payload is kept compressed (raise it with --max-decompressed)"
        )
        node.code = "decompressed_budget"
        node.value = payload
        return None
    except CodecError as e:
        node.problem = str(e)
        node.code = "decompression_failed"
        node.value = payload
        return None
    budget.decompressed -= len(data)
    node.buffer = data
    node.value = len(data)
    node.note = f"{CODECS[codec]}: {len(payload)} -> {len(data)} bytes" + (
        f" ({how})" if how else ""
    )
    return data


# -- MessageSet v0 / v1 -------------------------------------------------------------


def _message_v01(buf: bytes, start: int, end: int, ctx: Decoding, depth: int) -> Node:
    node = Node("message", "message_v0", start, end - start)
    r = Reader(buf, start, end)
    at: dict[str, Node] = {}
    magic = 0
    try:
        for f in MESSAGE.fields:  # field by field (located), from the layout
            if f.name == "timestamp" and magic < 1:
                continue  # v1 only
            if f.type == "bytes":
                at[f.name] = _sized(r, node, f.name, "int32")
                continue
            leaf = at[f.name] = _leaf(r, node, f.name, f.type, getattr(Reader, f.type))
            if f.hint:
                leaf.hint = f.hint
            if f.name == "crc":
                computed = crc32_of(buf, r.pos, end)
                if computed != leaf.value:
                    leaf.problem = (
                        f"CRC32 mismatch: stored {leaf.value:#010x}, computed {computed:#010x}"
                    )
                    leaf.code = "crc_mismatch"
            elif f.name == "magic":
                magic = leaf.value
                node.ktype = f"message_v{magic}"
            elif f.name == "attributes":
                _attributes(leaf, magic)
    except Abort:
        return node
    offset, attrs, value = at["offset"], at["attributes"], at["value"]
    codec = attrs.value & CODEC_MASK
    node.note = f"offset {offset.value}" + (
        f", {CODECS.get(codec, codec)} wrapper" if codec else ""
    )
    if codec and value.value is not None:
        if depth >= ctx.options.max_nesting:
            value.problem = (
                f"compressed wrappers nested more than {ctx.options.max_nesting} deep; "
                f"this one is kept compressed"
            )
            value.code = "nesting_budget"
            return node
        value.add(Node("_length", "int32", value.offset, 4, len(value.value)))
        inner = _decompressed(value, codec, value.value, value.offset + 4, ctx, "messages")
        if inner is not None:
            holder = value.children[-1]
            read_records(inner, holder, 0, len(inner), ctx, depth + 1)
            if magic >= 1:
                _resolve_relative_offsets(holder, offset)
            first, last, count = message_set_span(node)
            if first is not None and last is not None and count:
                node.note = f"offsets {first}..{last}, {count} record(s), " + (
                    f"{CODECS.get(codec, codec)} wrapper"
                )
    return node


def _attributes(leaf: Node, magic: int) -> None:
    """A batch's or message's attributes, named; bits no Kafka defines are said."""
    leaf.note = attributes_note(leaf.value, magic)
    unknown = unknown_bits(leaf.value, magic)
    if unknown:
        leaf.problem = (
            f"attribute bits {unknown:#x} are defined by no Kafka version (Kafka ignores them)"
        )
        leaf.code = "unknown_attribute_bits"


def _resolve_relative_offsets(holder: Node, wrapper: Node) -> None:
    """Magic 1 inner messages carry offsets relative to the wrapper, whose offset is the
    absolute offset of the last inner message -- as Kafka reads them
    (AbstractLegacyRecordBatch): a wrapper offset of 0 (a producer's message set, as
    some clients send it) leaves them as they are; one below the last inner offset is
    invalid (Kafka refuses the message set), and they are left as they are too."""
    inner = [c for c in holder.children if c.ktype.startswith("message_v")]
    if not inner:
        return
    last_offset = inner[-1].child("offset")
    if last_offset is None:
        return
    last = last_offset.value
    base = wrapper.value - last
    if wrapper.value == 0:
        base = 0
    elif base < 0:
        base = 0
        wrapper.problem = (
            f"the wrapper's offset {wrapper.value} is below its last inner message's "
            f"relative offset {last}: Kafka refuses such a message set"
        )
        wrapper.code = "malformed_field"
    for m in inner:
        off = m.child("offset")
        if off is None:
            continue
        absolute = base + off.value
        off.note = f"absolute offset {absolute}"
        m.value = {"offset": absolute}  # what views read (as for v2 records)


def message_set_span(message: Node) -> tuple[int | None, int | None, int]:
    """A v0/v1 message's (first offset, last offset, records): a compressed wrapper's
    are its inner messages' (its own offset is its last one's), a plain message's its
    own offset and 1 (as kafka-dump-log's baseOffset, lastOffset and count)."""
    attrs = message.child("attributes")
    inner = (
        [n for n in message.walk() if n is not message and n.ktype.startswith("message_v")]
        if attrs is not None and isinstance(attrs.value, int) and attrs.value & 7
        else []
    )
    own = record_offset(message)
    if not inner:
        return own, own, 1
    last = record_offset(inner[-1])
    return record_offset(inner[0]), last if last is not None else own, len(inner)


def record_offset(n: Node) -> int | None:
    """The absolute offset of a record (v2) or a v0/v1 message node."""
    if isinstance(n.value, dict) and "offset" in n.value:
        offset: int | None = n.value["offset"]
        return offset
    off = n.child("offset")
    return off.value if off is not None and isinstance(off.value, int) else None


# -- RecordBatch v2 ----------------------------------------------------------------


def _batch_v2(buf: bytes, start: int, end: int, ctx: Decoding) -> Node:
    node = Node("record_batch", "record_batch", start, end - start)
    r = Reader(buf, start, end)
    at: dict[str, Node] = {}
    try:
        for f in RECORD_BATCH.fields:  # the header, field by field (located)
            leaf = at[f.name] = _leaf(r, node, f.name, f.type, getattr(Reader, f.type))
            if f.hint:
                leaf.hint = f.hint
            if f.name == "crc":
                computed = Batch(buf, start, end).crc_computed
                if computed != leaf.value:
                    leaf.problem = (
                        f"CRC32C mismatch: stored {leaf.value:#010x}, computed {computed:#010x}"
                    )
                    leaf.code = "crc_mismatch"
            elif f.name == "attributes":
                _attributes(leaf, 2)
    except Abort:
        return node
    base, last_delta = at["base_offset"].value, at["last_offset_delta"].value
    attrs, count, max_ts = at["attributes"], at["record_count"], at["max_timestamp"]
    codec = attrs.value & CODEC_MASK
    if ctx.options.records == "batches":  # a summary: the header says enough
        node.note = (
            f"offsets {base}..{base + last_delta}, {count.value} record(s), "
            f"{attributes_note(attrs.value, 2)}"
        )
        node.add(
            Node(
                "records",
                "records",
                r.pos,
                end - r.pos,
                end - r.pos,
                note="not decoded in a summary",
            )
        )
        return node
    control = bool(attrs.value & CONTROL)
    log_append = bool(attrs.value & LOG_APPEND_TIME)
    node.note = (
        f"offsets {base}..{base + last_delta}, {count.value} record(s), "
        f"{attributes_note(attrs.value, 2)}"
    )
    budget = ctx.budget
    if count.value < 0 or count.value > end - r.pos + (budget.decompressed if codec else 0):
        count.problem = f"record count {count.value} is impossible for the bytes present"
        count.code = "array_past_end"
        node.add(
            Node(
                "records",
                "bytes",
                r.pos,
                end - r.pos,
                buf[r.pos : end],
                problem="records not decoded",
                code="array_past_end",
            )
        )
        return node
    if codec:
        data = _decompressed(node, codec, buf[r.pos : end], r.pos, ctx, "records")
        if data is None:
            return node
        holder, rr = node.children[-1], Reader(data)
    else:
        holder, rr = node, r
    stamp = max_ts.value if log_append else None
    bad_keys: list[Node] = []  # header keys that are not UTF-8: one problem says them all
    try:
        for i in range(count.value):
            if rr.remaining == 0:
                holder.add(
                    Node(
                        f"record[{i}]",
                        "record",
                        rr.pos,
                        0,
                        problem=f"batch says {count.value} records, found {i}",
                        code="record_count_mismatch",
                    )
                )
                break
            rec = _record(
                rr,
                holder,
                i,
                base,
                at["base_timestamp"].value,
                stamp,
                control,
                located_record,
                bad_keys,
            )
            if rec is None:
                break
            charge_nodes(rr, holder, ctx, len(rec.children) + 1)
    except Abort:
        pass  # the budget is spent: the rest is kept raw
    if bad_keys:
        _say_bad_keys(bad_keys)
    if rr.remaining:
        holder.add(
            Node(
                "_trailing",
                "bytes",
                rr.pos,
                rr.remaining,
                rr.buf[rr.pos : rr.end],
                problem=f"{rr.remaining} bytes after the last record",
                code="trailing_bytes",
            )
        )
    return node


def _record(
    r: Reader,
    parent: Node,
    i: int,
    base_offset: int,
    base_ts: int,
    log_append_ts: int | None,
    control: bool,
    fast_read: FastRecord,
    bad_keys: list[Node],
) -> Node | None:
    """Record ``i``: the common case by the generated fast reader (a well-formed record in
    one tight pass), else read field by field, saying what is wrong."""
    if not control:
        fast = fast_read(
            r.buf,
            r.pos,
            r.end,
            f"record[{i}]",
            base_offset,
            base_ts if log_append_ts is None else log_append_ts,
            log_append_ts is not None,
            bad_keys,
        )
        if fast is not None:
            r.pos = fast.end
            return parent.add(fast)
    node = parent.add(Node(f"record[{i}]", "record", r.pos))
    try:
        length = _leaf(r, node, "length", "varint", Reader.varint).value
        if length < 1 or length > r.remaining:
            # a record holds at least its attributes byte: 0 would never advance
            raise fail(
                r,
                node.children[-1],
                f"record length {length} is impossible with {r.remaining} bytes left",
                "bad_length",
            )
        sub = Reader(r.buf, r.pos, r.pos + length)
        try:
            _record_body(sub, node, base_offset, base_ts, log_append_ts, control, bad_keys)
            if sub.remaining:
                node.add(
                    Node(
                        "_unread",
                        "bytes",
                        sub.pos,
                        sub.remaining,
                        r.buf[sub.pos : sub.end],
                        problem=f"{sub.remaining} bytes inside the record left over",
                        code="trailing_bytes",
                    )
                )
        except Abort:
            pass
        r.pos += length
    except Abort:
        node.length = r.pos - node.offset
        return None
    node.length = r.pos - node.offset
    return node


def _record_body(
    r: Reader,
    node: Node,
    base_offset: int,
    base_ts: int,
    log_append_ts: int | None,
    control: bool,
    bad_keys: list[Node],
) -> None:
    _leaf(r, node, "attributes", "int8", Reader.int8)
    ts_delta = _leaf(r, node, "timestamp_delta", "varlong", Reader.varlong)
    off_delta = _leaf(r, node, "offset_delta", "varint", Reader.varint)
    timestamp = log_append_ts if log_append_ts is not None else base_ts + ts_delta.value
    offset = base_offset + off_delta.value
    key = _sized(r, node, "key", "varint")
    value = _sized(r, node, "value", "varint")
    headers = _leaf(r, node, "headers_count", "varint", Reader.varint)
    if headers.value < 0 or headers.value > r.remaining:
        raise fail(
            r,
            headers,
            f"header count {headers.value} exceeds the {r.remaining} bytes left",
            "array_past_end",
        )
    hnode = node.add(Node("headers", "array", r.pos, 0, headers.value))
    try:
        for j in range(headers.value):
            h = hnode.add(Node(f"[{j}]", "struct", r.pos))
            try:
                hk = _sized(r, h, "key", "varint")
                if hk.value is not None:
                    hk.ktype, hk.value = "string", _header_key(hk, bad_keys)
                _sized(r, h, "value", "varint")
            finally:
                h.length = r.pos - h.offset
    finally:
        hnode.length = r.pos - hnode.offset
    node.value = {"offset": offset, "timestamp": timestamp}
    node.hint = "record"
    if control:
        _control(key, value)


def _header_key(node: Node, bad_keys: list[Node]) -> str:
    """A header's key as text. Kafka's clients write it as UTF-8 (Java decodes other bytes
    as U+FFFD, as shown here): a key that is not goes to ``bad_keys``."""
    raw: bytes = node.value
    try:
        return raw.decode()
    except UnicodeDecodeError:
        bad_keys.append(node)
        return raw.decode("utf-8", "replace")


def _say_bad_keys(keys: list[Node]) -> None:
    """The problem of a batch's header keys that are not UTF-8, on the first: a client
    that writes such keys writes them on every record, and a problem each made a topic's
    output hundreds of times its size."""
    more = len(keys) - 1
    keys[0].problem = "header key is not valid UTF-8 (shown with U+FFFD)" + (
        f"; so are {more} more header key(s) of this batch" if more else ""
    )
    keys[0].code = "bad_utf8"


def _control(key: Node, value: Node) -> None:
    """Control records: key = version + type (ABORT/COMMIT), value = version + epoch."""
    if isinstance(key.value, bytes) and len(key.value) >= 4:
        version, kind = struct.unpack_from(">hh", key.value)
        key.note = f"control record: {CONTROL_TYPES.get(kind, f'type {kind}')} (v{version})"
    if isinstance(value.value, bytes) and len(value.value) >= 6:
        version, epoch = struct.unpack_from(">hi", value.value)
        value.note = f"end-transaction marker v{version}, coordinator epoch {epoch}"


_MAX_CHECKED = 4  # CRC work over a buffer: at most this many times its length


def locate_batches(buf: bytes, ctx: Decoding) -> list[Node]:
    """Record batches (v2) found anywhere in ``buf``: bytes captured after a hole, whose
    place in the message's layout is lost. A batch is claimed only where its length fits
    and its CRC32C matches; the bytes between are ``_unlocated`` raw nodes, so the nodes
    cover ``buf`` exactly. CRC work is bounded (linear in ``len(buf)``)."""
    out: list[Node] = []
    n, pos, raw, budget = len(buf), 0, 0, _MAX_CHECKED * len(buf)
    while pos + HEAD_SIZE <= n and budget > 0:
        if buf[pos + MAGIC_AT] == 2:
            b = Batch(buf, pos)
            if b.fits(n):
                budget -= b.length
                if b.crc_ok:
                    if pos > raw:
                        out.append(_unlocated(buf, raw, pos))
                    out.append(_batch_v2(buf, pos, b.end, ctx))
                    pos = raw = b.end
                    continue
        pos += 1
    if raw < n:
        out.append(_unlocated(buf, raw, n))
    return out


def _unlocated(buf: bytes, start: int, end: int) -> Node:
    return Node(
        "_unlocated",
        "bytes",
        start,
        end - start,
        buf[start:end],
        note=f"{end - start} bytes whose place in the message is not known",
    )
