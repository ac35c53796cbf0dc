"""Kafka's files on disk besides the segments' record batches: pure decoders, bytes in ->
located nodes (offsets are positions in the file). Segments themselves are record
batches (records.py) read by the log source; this module knows the other file kinds:

- ``.index`` (8-byte entries: int32 offset relative to the segment's base, int32 position)
- ``.timeindex`` (12-byte entries: int64 timestamp, int32 relative offset)
- ``.txnindex`` (34-byte entries: aborted transactions)
- producer-state ``.snapshot`` (version, CRC32C, producer entries)
- text files: ``leader-epoch-checkpoint``, offset checkpoints (recovery, replication,
  log-start, cleaner), ``partition.metadata``, ``meta.properties``, ``quorum-state`` (JSON)
- 0.7 ``.kafka`` logs (4-byte length, magic, [attributes,] CRC32, payload; the message's
  offset is its byte position)

Index files are preallocated: the zero-filled tail past the last entry is one node.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

from .batch import FIELDS, Batch, record_starts
from .crc import crc32_of, crc32c_of

from .context import Decoding, Options
from .decode import decode_body
from .internal import internal_layout
from .internal_schemas import MESSAGES
from .json_bounded import JsonError, load_json
from .node import Node
from .varint import Buf

_SNAPSHOT_VERSIONS = f"{MESSAGES['ProducerSnapshot'][2]}..{MESSAGES['ProducerSnapshot'][3]}"

# entries turned into nodes (3-6 nodes each, about 300 bytes a node: a segment's full
# .index and .timeindex together stay near 400 MB); an index gets an entry per
# log.index.interval.bytes (4 KiB) of batches, at most one a batch: a 1 GiB segment of
# 16 KB batches has 65,536. Past this the rest is kept as bytes (node_budget)
MAX_ENTRIES = 150_000


def _entries(
    buf: bytes, size: int, name: str, kind: str, fields: Any, max_entries: int = MAX_ENTRIES
) -> Node:
    """Fixed-size entries; a trailing run of all-zero entries is the preallocated tail
    (Kafka never writes an all-zero entry: an index entry is added only after
    log.index.interval.bytes of batches, so never at position 0)."""
    root = Node(name, "array", 0, len(buf))
    n = len(buf) // size
    # (the last nonzero byte ends the last entry used: one C-speed pass, where a test per
    # entry cost seconds on the 10 MiB an unclean stop leaves preallocated)
    used = min(n, -(-len(bytes(buf[: n * size]).rstrip(b"\0")) // size))
    for i in range(min(used, max_entries)):
        pos = i * size
        entry = root.add(Node(f"[{i}]", "struct", pos, size))
        at = pos
        for fname, ftype, fmt in fields:
            width = struct.calcsize(fmt)
            entry.add(Node(fname, ftype, at, width, struct.unpack_from(fmt, buf, at)[0]))
            at += width
    if used > max_entries:
        root.add(
            Node(
                "_rest",
                "bytes",
                max_entries * size,
                (used - max_entries) * size,
                bytes(buf[max_entries * size : used * size]),
                problem=f"{used - max_entries} more entries kept as bytes: kdissect "
                f"shows at most {max_entries} entries of an index",
                code="node_budget",
            )
        )
    if used < n:
        root.add(
            Node(
                "_preallocated",
                "bytes",
                used * size,
                (n - used) * size,
                (n - used) * size,
                note=f"{n - used} unused zero-filled entries (the index is preallocated)",
            )
        )
    if len(buf) % size:
        left = len(buf) % size
        root.add(
            Node(
                "_trailing",
                "bytes",
                n * size,
                left,
                buf[n * size :],
                problem=f"{left} bytes after the last whole {size}-byte entry",
                code="trailing_bytes",
            )
        )
    root.value = used
    return root


def offset_index(buf: bytes, base_offset: int) -> Node:
    root = _entries(
        buf,
        8,
        "offset_index",
        "offset_index",
        (("relative_offset", "int32", ">i"), ("position", "int32", ">i")),
    )
    for e in root.children:
        if e.name.startswith("["):
            e.children[0].note = f"offset {base_offset + e.children[0].value}"
    return root


def time_index(buf: bytes, base_offset: int) -> Node:
    root = _entries(
        buf,
        12,
        "time_index",
        "time_index",
        (("timestamp", "int64", ">q"), ("relative_offset", "int32", ">i")),
    )
    for e in root.children:
        if e.name.startswith("["):
            e.children[0].hint = "time"
            e.children[1].note = f"offset {base_offset + e.children[1].value}"
    return root


def txn_index(buf: bytes) -> Node:
    return _entries(
        buf,
        34,
        "txn_index",
        "txn_index",
        (
            ("version", "int16", ">h"),
            ("producer_id", "int64", ">q"),
            ("first_offset", "int64", ">q"),
            ("last_offset", "int64", ">q"),
            ("last_stable_offset", "int64", ">q"),
        ),
    )


def producer_snapshot(buf: bytes, options: Options | None = None) -> Node:
    """int16 version, then Kafka's ProducerSnapshot struct of that version (its layout
    is among the generated internal schemas): a CRC32C of what follows it, the producers."""
    ctx = Decoding(options or Options())
    root = Node("producer_snapshot", "struct", 0, len(buf))
    if len(buf) < 2:
        root.add(
            Node(
                "version",
                "int16",
                0,
                len(buf),
                None,
                problem="truncated: the file has no version",
                code="truncated",
            )
        )
        return root
    (version,) = struct.unpack_from(">h", buf)
    vnode = root.add(Node("version", "int16", 0, 2, version))
    layout = internal_layout("ProducerSnapshot", version)
    if layout is None:
        vnode.problem = f"producer snapshot version {version}; kdissect knows {_SNAPSHOT_VERSIONS}"
        vnode.code = "unknown_version"
        root.add(Node("_rest", "bytes", 2, len(buf) - 2, bytes(buf[2:])))
        return root
    body = decode_body(buf, 2, layout, "snapshot", ctx)
    for child in body.children:
        root.add(child)
    crc = root.child("crc")
    if crc is not None and isinstance(crc.value, int) and len(buf) >= 6:
        computed = crc32c_of(buf, 6, len(buf))
        if computed != crc.value:
            crc.problem = f"CRC32C mismatch: stored {crc.value:#010x}, computed {computed:#010x}"
            crc.code = "crc_mismatch"
    return root


# -- text files ----------------------------------------------------------------------


def _lines(buf: bytes) -> Iterator[tuple[int, bytes]]:
    """(start, raw bytes) of each line (one at a time: a file of newlines costs no list);
    widths are of the raw bytes (a replaced invalid byte is 1 byte, not U+FFFD's 3)."""
    pos, end = 0, len(buf)
    while pos <= end:
        nl = buf.find(b"\n", pos)
        stop = end if nl < 0 else nl
        yield pos, bytes(buf[pos:stop])
        pos = stop + 1


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


_KAFKA_REFUSES = (
    'Kafka cannot read this file ("Malformed line in checkpoint file"): a '
    "broker fails to load this log dir at start-up"
)


# checkpoint columns Java reads with Integer.parseInt (the others: Long.parseLong)
_INT32_COLUMNS = frozenset({"partition", "epoch"})


def _checkpoint_int(text: str, bits: int = 64) -> int:
    """A checkpoint's number as Java's parseInt (``bits`` 32) or parseLong (64) takes it:
    decimal, a sign, in range. ValueError saying what is wrong otherwise (a hostile
    value is marked, never taken as a number Kafka would not read)."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit():
        raise ValueError("is not a number")
    # (more than 19 digits is past int64: not parsed, however long)
    if len(digits) > 19 or not -(1 << (bits - 1)) <= int(text) < 1 << (bits - 1):
        parse = "Integer.parseInt" if bits == 32 else "Long.parseLong"
        raise ValueError(f"is past int{bits} (Java's {parse} refuses it)")
    return int(text)


def checkpoint(
    buf: bytes, name: str, columns: tuple[str, ...], max_entries: int = MAX_ENTRIES
) -> Node:
    """Kafka's checkpoint files: a version line, a count line, then one entry per line
    (``columns`` are its space-separated fields; numbers become ints)."""
    root = Node(name, "checkpoint", 0, len(buf))
    lines = ((p, raw) for p, raw in _lines(buf) if raw.strip())
    entries = root.add(Node("entries", "array", 0, 0))
    for i, (pos, raw) in enumerate(lines):
        if i - 2 >= max_entries:
            root.add(
                Node(
                    "_rest",
                    "bytes",
                    pos,
                    len(buf) - pos,
                    bytes(buf[pos:]),
                    problem=f"kdissect shows at most {max_entries} entries of a "
                    f"checkpoint; the rest is kept as bytes",
                    code="node_budget",
                )
            )
            break
        text = _text(raw)
        if i < 2:
            what = ("version", "count")[i]
            node = root.add(Node(what, "int32", pos, len(raw)))
            try:
                node.value = _checkpoint_int(text, 32)
            except ValueError as e:
                node.value = text
                node.problem = f"{what} line {e}: {text!r}; {_KAFKA_REFUSES}"
                node.code = "malformed_field"
            continue
        entry = entries.add(Node(f"[{i - 2}]", "struct", pos, len(raw)))
        parts = raw.split(b" ")
        if len(parts) != len(columns):
            entry.value = text
            entry.problem = (
                f"expected {len(columns)} fields ({' '.join(columns)}), found "
                f"{text!r}; {_KAFKA_REFUSES}"
            )
            entry.code = "malformed_field"
            continue
        at = pos
        for col, part in zip(columns, parts):
            value = _text(part)
            bits = 32 if col in _INT32_COLUMNS else 64
            kind = "string" if col == "topic" else f"int{bits}"
            field = entry.add(Node(col, kind, at, len(part), value))
            if col != "topic":
                try:
                    field.value = _checkpoint_int(value, bits)
                except ValueError as e:
                    field.problem = f"{col} {e}: {value!r}; {_KAFKA_REFUSES}"
                    field.code = "malformed_field"
            at += len(part) + 1
    if entries.children:
        entries.offset = entries.children[0].offset
        entries.length = entries.children[-1].end - entries.offset
    entries.value = len(entries.children)
    count = root.child("count")
    if count is not None and isinstance(count.value, int) and count.value != entries.value:
        count.problem = f"count says {count.value} entries, the file has {entries.value}"
        count.code = "record_count_mismatch"
    root.children = sorted(root.children, key=lambda n: n.offset)
    return root


def properties(buf: bytes, name: str) -> Node:
    """``key=value`` (meta.properties) or ``key: value`` (partition.metadata) lines."""
    root = Node(name, "properties", 0, len(buf))
    for pos, raw in _lines(buf):
        text = _text(raw)
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        sep = "=" if "=" in text and (":" not in text or text.index("=") < text.index(":")) else ":"
        key, _, value = text.partition(sep)
        root.add(Node(key.strip(), "string", pos, len(raw), value.strip()))
    return root


def quorum_state(buf: bytes) -> Node:
    root = Node("quorum_state", "json", 0, len(buf))
    try:
        data = load_json(buf)
    except JsonError as e:
        root.value = bytes(buf)
        root.problem = f"not JSON Kafka can read: {e}"
        root.code = "malformed_field"
        return root
    if isinstance(data, dict):
        text = buf.decode("utf-8")
        at = 0
        for key, value in data.items():  # keys in file order: each found after the last
            found = text.find(json.dumps(key), at)
            if found >= 0:
                at = found + 1
            root.add(Node(key, "json", max(found, 0), len(key) + 2 if found >= 0 else 0, value))
    else:
        root.value = data
    return root


# -- 0.7 logs -------------------------------------------------------------------------


def kafka07_message(buf: bytes, pos: int, end: int, base_offset: int) -> Node:
    """One 0.7 log entry at ``pos``: int32 length N, then N bytes (magic, attributes for
    magic 1, CRC32 of the payload, payload). The caller checked the 4-byte length fits."""
    (size,) = struct.unpack_from(">i", buf, pos)
    node = Node(
        "message",
        "message_07",
        pos,
        min(4 + max(size, 0), end - pos),
        {"offset": base_offset + pos},
    )
    node.add(Node("length", "int32", pos, 4, size))
    head = 6 if size >= 1 and pos + 4 < end and buf[pos + 4] == 1 else 5
    if size < head or pos + 4 + size > end:
        node.children[
            0
        ].problem = f"message length {size} impossible with {end - pos - 4} bytes left"
        node.children[0].code = "bad_length"
        return node
    at = pos + 4
    magic = buf[at]
    node.add(Node("magic", "int8", at, 1, magic))
    at += 1
    if magic == 1:
        attrs = buf[at]
        node.add(
            Node(
                "attributes",
                "int8",
                at,
                1,
                attrs,
                note={0: "none", 1: "gzip", 2: "snappy"}.get(attrs & 3, "codec ?"),
            )
        )
        at += 1
    crc = node.add(Node("crc", "uint32", at, 4, struct.unpack_from(">I", buf, at)[0]))
    at += 4
    payload = bytes(buf[at : pos + 4 + size])
    computed = crc32_of(payload, 0, len(payload))
    if computed != crc.value:
        crc.problem = f"CRC32 mismatch: stored {crc.value:#010x}, computed {computed:#010x}"
        crc.code = "crc_mismatch"
    node.add(Node("payload", "bytes", at, len(payload), payload))
    node.note = f"offset {base_offset + pos}"
    return node


# -- record batches as plain values (bulk output) ----------------------------------------

BATCH_FIELDS = FIELDS  # a v2 batch's header fields (batch.RECORD_BATCH)


def clean_batch(
    buf: Buf, start: int, end: int, max_decompressed: int, max_nodes: int
) -> tuple[Batch, Any, int, int] | None:
    """The v2 batch in ``buf[start:end]`` if its header, CRC, codec, count and the budgets
    are clean: (the Batch; the records' bytes; where they start and end in them: the
    file's map itself when uncompressed). None at the first oddity: the caller decodes
    the batch located, whose tree says what is wrong."""
    b = Batch(buf, start, end)
    got = b.clean(max_decompressed, max_nodes)
    return None if got is None else (b, got[0], got[1], got[2])


def batch_values(
    buf: Buf,
    start: int,
    end: int,
    max_decompressed: int,
    max_nodes: int,
    conv: Callable[[bytes], Any],
) -> tuple[dict[Any, Any], list[int], list[dict[Any, Any]]] | None:
    """A clean v2 batch in ``buf[start:end]`` as plain values, without located nodes:
    (its header fields by name, each record's position, the records as
    ``render.records.record_json`` shows them, bytes through ``conv``). None at the first
    oddity (CRC, codec, lengths, counts, the budgets): the caller decodes the batch
    located, whose tree says what is wrong. The records are read by the values decoder's
    record loop (values.py), the one the pcap JSON lines use."""
    from .reader import VarintTooLong
    from .reader import Bail
    from .values import record_loop

    got = clean_batch(buf, start, end, max_decompressed, max_nodes)
    if got is None:
        return None
    b, data, pos, end = got
    try:
        records, stop = record_loop(data, pos, end, *b.loop_args(), conv)
    except (Bail, IndexError, UnicodeDecodeError, VarintTooLong):
        return None
    if stop != end:
        return None
    return b.fields(), record_starts(data, pos, b.head[12]), records


def batch_lines(
    buf: Buf,
    start: int,
    end: int,
    max_decompressed: int,
    max_nodes: int,
    lines: Callable[..., str | None],
) -> tuple[dict[Any, Any], str] | None:
    """``batch_values`` for JSON lines: (the header fields by name, the records' text as
    ``lines`` writes it: render/log_lines.py), or None as there."""
    got = clean_batch(buf, start, end, max_decompressed, max_nodes)
    if got is None:
        return None
    b, data, pos, end = got
    text = lines(data, pos, end, *b.loop_args())
    return None if text is None else (b.fields(), text)
