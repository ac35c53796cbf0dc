"""The values-only decoder: a message's body as plain values, without located nodes.

Bulk output (JSON lines; the Parquet and Spark record tables could follow) needs the
values of every field but never their offsets, and building a ``Node`` per field is most of the time a full decode
takes. So each layout (``Struct``) has a specialised reader function, generated from the
same layouts ``decode.py`` walks and the same wire-type table (``wire.py``) by
``python -m codegen.gen_readers`` into the checked-in package ``values_readers``
(the way kio and franz-go generate their parsers): the result is the dict
``render.records.plain_json`` makes of the located tree. This module holds what those
readers call (tagged fields, record batches) and ``body_values``.

Only clean messages take this path. The readers check everything the located decoder
checks (lengths, counts, bools, UTF-8, CRCs, codecs, trailing bytes, the message's budget)
and raise ``Bail`` at the first oddity; the caller then decodes the message with the
located decoder, whose tree says what is wrong. Both paths therefore agree value for value
(tests/test_values.py asserts it on every repo capture and on random kio messages).

Pure: no I/O; nothing is compiled at run time.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from . import schemas
from .apis import EMBEDDED, ENVELOPE
from .batch import (
    CODEC_MASK,
    FRAME,
    HEAD,
    HEAD_SIZE,
    LENGTH_AT,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_AT,
    attributes_note,
    computed_crc,
    payload,
)
from .context import Decoding, Options
from .node import Node
from .internal import RECORD_CARRIERS as _RECORD_CARRIERS, base_needles, mentions_internal_topic
from .reader import Bail as Bail, VarintTooLong, uvarint
from .records import read_records
from .native_ext import forget_on_change
from .values_native import program
from .varint import Buf, uvarint_bytes
from .values_readers.record_loop import loop as _generated_loop

# APIs whose bytes fields may hold embedded structures (consumer protocol, SASL tokens):
# their JSON shows those structures, so they take the located path
_EMBEDDED_APIS = EMBEDDED | {ENVELOPE}  # Envelope: its request decoded
_I32 = struct.Struct(">i")


# the generated record loop (values_readers/record_loop.py, unannotated): records, end
_loop: Callable[..., tuple[list[dict[str, Any]], int]] = _generated_loop
# a generated reader: (buffer, position, state) -> (values, position after them)
ValuesReader = Callable[[bytes, int, "_State"], tuple[dict[Any, Any], int]]


class _State:
    """Per-message: the bytes converter and what the budget still allows (the located
    decoder's accounting, charged never less than it charges, so a message this path
    finishes never breaches the located decoder's budget; records exactly as much)."""

    __slots__ = (
        "conv",
        "records",
        "nodes",
        "decompressed",
        "batch_records",
        "values",
        "text_values",
        "compact",
        "batch_text",
        "internal",
        "batches",
        "tagged",
    )

    def __init__(
        self,
        conv: Callable[[bytes], Any],
        options: Options,
        compact: bool = False,
        batch_records: Callable[[list[Any]], Any] | None = None,
        text_values: bool = False,
        batch_text: Callable[..., Any] | None = None,
    ):
        self.conv = conv
        # record keys/values by schema (values_schema.fast), when asked for
        values = options.values
        self.values = values if values is not None and getattr(values, "framed", False) else None
        # True: decode batches; "batches": their headers only (BatchHeads); False: raw
        self.records = options.records
        self.compact = compact  # a flexible version: compact lengths
        self.nodes = options.max_nodes
        self.decompressed = options.max_decompressed
        self.batch_records = batch_records
        self.text_values = text_values
        self.batch_text = batch_text
        # a message that may carry internal topics' records, which the located path
        # decodes by their schemas: read here only if it carries no record at all
        self.internal = False
        # what the generated readers call back (they import nothing of this module)
        self.batches, self.tagged = _records, _tagged

    def charge(self, n: int) -> None:
        self.nodes -= n
        if self.nodes < 0:
            raise Bail


def _tagged(
    buf: bytes, pos: int, n: int, s: _State, out: dict[Any, Any], readers: dict[Any, Any]
) -> int:
    """A flexible struct's tagged fields (count ``n`` already read): known tags by their
    name, unknown ones as ``tag_N`` bytes; returns where they end. (One-byte tags and
    sizes, nearly all of them, read inline: this was a tenth of a KRaft cluster's
    summary, whose Fetches carry several tagged fields each.)"""
    blen = len(buf)
    if n > blen - pos:
        raise Bail
    for _ in range(n):
        s.nodes -= 4  # s.charge(4), inline
        if s.nodes < 0:
            raise Bail
        tag = buf[pos]  # (past the end: IndexError, as uvarint's)
        if tag < 128:
            pos += 1
        else:
            tag, pos = uvarint(buf, pos, blen, 5)
        size = buf[pos]
        if size < 128:
            pos += 1
        else:
            size, pos = uvarint(buf, pos, blen, 5)
        end = pos + size
        if end > blen:
            raise Bail
        read = readers.get(tag)
        if read is None:
            out[f"tag_{tag}"] = s.conv(buf[pos:end])
        else:
            value, used = read(buf[pos:end], 0, s)  # its own region: reads stop at end
            if used != size:
                raise Bail
            out.update(value)
        pos = end
    return pos


# -- records ------------------------------------------------------------------------


class BatchHeads(list[dict[str, Any]]):
    """A records field read for a summary (``Options(records="batches")``): the headers
    of its v2 batches as dicts (the fields ``stream.diagnoses.plain`` makes of the
    located summary's batch nodes), and ``size``, the field's bytes with its length
    prefix (what the located tree's records node spans)."""

    __slots__ = ("size",)

    def __init__(self, heads: list[dict[Any, Any]], size: int):
        super().__init__(heads)
        self.size = size


def _batch_heads(buf: bytes, pos: int, end: int, s: _State) -> BatchHeads:
    """The located decoder's summary of a records field (``records.read_records`` with
    ``records="batches"``: headers and CRCs, no records), without its nodes; Bail where
    that summary would hold a problem or a message set (v0/v1), which it decodes whole."""
    n = end - pos
    if s.compact:  # the located node spans the uvarint (n + 1) too
        prefix = uvarint_bytes(n + 1)
        if buf[pos - len(prefix) : pos] != prefix:
            raise Bail  # written in more bytes than needed (legal, rare)
        size = n + len(prefix)
    else:
        size = n + 4
    heads = []
    while pos < end:
        left = end - pos
        if left < FRAME:
            break  # a partial batch: no problem, no count
        total = LOG_OVERHEAD + _I32.unpack_from(buf, pos + LENGTH_AT)[0]
        if total < LOG_OVERHEAD:
            raise Bail  # a negative length
        if total > left:
            break  # a partial batch
        if s.nodes <= 0 or buf[pos + MAGIC_AT] != 2 or total < HEAD_SIZE:
            raise Bail  # budget spent, v0/v1 or unknown, short
        s.nodes -= 16  # what the located summary charges
        # (the Batch view's checks, without a view per batch: summaries of small batches)
        (
            base,
            length,
            epoch,
            magic,
            crc,
            attrs,
            last_delta,
            base_ts,
            max_ts,
            pid,
            pe,
            seq,
            count,
        ) = HEAD.unpack_from(buf, pos)
        if computed_crc(buf, pos, pos + total) != crc:
            raise Bail
        # (a literal: dict(zip(...)) took twice as long, a fifth of a big Produce's read)
        heads.append(
            {
                "base_offset": base,
                "batch_length": length,
                "partition_leader_epoch": epoch,
                "magic": magic,
                "crc": crc,
                "attributes": attrs,
                "last_offset_delta": last_delta,
                "base_timestamp": base_ts,
                "max_timestamp": max_ts,
                "producer_id": pid,
                "producer_epoch": pe,
                "base_sequence": seq,
                "record_count": count,
                "records": [],
            }
        )
        pos += total
    return BatchHeads(heads, size)


def _records(buf: bytes, pos: int, end: int, s: _State) -> list[Any]:
    """Record batches (v2 only: message sets bail) in ``buf[pos:end]``, as
    ``render.records.batch_json`` shows them (with ``records="batches"``: BatchHeads)."""
    if s.records == "batches":
        return _batch_heads(buf, pos, end, s)
    if s.internal and pos < end:
        raise Bail  # records of an internal topic maybe: the located path
    out = []
    while pos < end:
        left = end - pos
        if left < FRAME or LOG_OVERHEAD + _I32.unpack_from(buf, pos + LENGTH_AT)[0] > left:
            tail = Node("records", "records", pos)
            read_records(buf, tail, pos, end, Decoding(Options()))  # the located partial batch
            (node,) = tail.children
            if node.problem:
                raise Bail
            out.append({"partial": node.note, "length": node.length})
            return out
        if buf[pos + MAGIC_AT] != 2:
            raise Bail
        s.charge(16)  # the located decoder's charge per batch, and it needs > 0
        if s.nodes <= 0:
            raise Bail
        total = LOG_OVERHEAD + _I32.unpack_from(buf, pos + LENGTH_AT)[0]
        out.append(_batch(buf, pos, pos + total, s))
        pos += total
    return out


def _batch(buf: bytes, start: int, end: int, s: _State) -> dict[Any, Any]:
    # Batch.clean's checks, without a view per batch (the hot path: Fetch responses of
    # many small batches)
    if end - start < HEAD_SIZE:
        raise Bail
    head = HEAD.unpack_from(buf, start)
    (base, length, epoch, magic, crc, attrs, last_delta, base_ts, max_ts, pid, pe, seq, count) = (
        head
    )
    if computed_crc(buf, start, end) != crc:
        raise Bail
    got = payload(buf, start, end, head, s.decompressed)
    if got is None:
        raise Bail
    data, pos, end = got
    if attrs & CODEC_MASK:
        s.decompressed -= len(data)
    stamp = max_ts if attrs & LOG_APPEND_TIME else None
    # charged before the loop: a count of millions must not build millions of records
    # first (4 Mi records of 7 bytes zstd to 2.5 KB). Exactly what the located decoder
    # charges for them (a record's fields and itself; headers are inside the record's
    # headers array): charging more sent clean Fetch responses with a header per
    # record to the located decoder, whose tree of them took 250 MB
    s.charge(9 * count)
    ts0 = stamp if stamp is not None else base_ts
    # the records' JSON text at once, when the caller has a writer for it (None: unsure)
    records = (
        s.batch_text(data, pos, end, count, base, ts0, stamp is not None)
        if s.batch_text is not None and s.values is None
        else None
    )
    if records is None:
        records, pos = _loop(
            data,
            pos,
            end,
            count,
            base,
            ts0,
            stamp is not None,
            s.conv if s.values is None else bytes,
        )
        if pos != end:
            raise Bail
        if s.values is not None:
            _schema_values(records, s)
    if s.batch_records is not None:
        records = s.batch_records(records)
    return {
        "base_offset": base,
        "batch_length": length,
        "partition_leader_epoch": epoch,
        "magic": magic,
        "crc": crc,
        "attributes": attributes_note(attrs, 2),
        "last_offset_delta": last_delta,
        "base_timestamp": base_ts,
        "max_timestamp": max_ts,
        "producer_id": pid,
        "producer_epoch": pe,
        "base_sequence": seq,
        "record_count": count,
        "problems": [],
        "records": records,
    }


def _schema_values(records: list[dict[Any, Any]], s: _State) -> None:
    """Keys and values decoded by their schemas, as ``render.records.record_json`` shows
    them from the located tree; Bail where that tree would hold a finding."""
    from .values_schema.fast import Unfit, value_json, value_text

    conv, source = s.conv, s.values
    # a caller writing JSON lines takes Avro values as JSON text (body_values)
    decode = value_text if s.text_values else value_json
    for r in records:
        headers = r["headers"]
        if headers and any((h["key"] or "").startswith("apicurio.") for h in headers):
            raise Bail  # a schema id in a header (values_schema.header_id)
        for role in ("key", "value"):
            raw = r[role]
            if raw is None:
                continue
            if role == "key" and (len(raw) < 5 or raw[0]):
                r[role] = conv(raw)  # an unframed key: as bytes (as Unfit below)
                continue
            tally = [0]
            try:
                r[role], r[f"{role}_schema"] = decode(source, raw, role, tally)
                s.charge(tally[0] + 2)  # the located tree: each value, magic, id
            except Unfit:
                if raw and (role == "value" or (len(raw) >= 5 and raw[0] == 0)):
                    raise Bail from None
                r[role] = conv(raw)
        for h in r["headers"]:
            h["value"] = conv(h["value"]) if h["value"] is not None else None


def record_loop(
    data: Buf,
    pos: int,
    end: int,
    count: int,
    base: int,
    ts0: int,
    fixed_ts: bool,
    conv: Callable[[bytes], Any],
) -> tuple[list[dict[Any, Any]], int]:
    """The ``count`` records of a v2 batch at ``data[pos:end]`` as dicts (offset, timestamp,
    key, value, headers; bytes through ``conv``) and where they end; raises ``Bail`` at
    the first oddity. ``ts0`` is the base timestamp, or with ``fixed_ts`` the batch's
    log-append time. Public: the log source's bulk path reads segments with it."""
    return _loop(data, pos, end, count, base, ts0, fixed_ts, conv)


# -- messages -------------------------------------------------------------------------

_TABLES: dict[int, dict[tuple[int, str], ValuesReader]] = {}


def reader(api_key: int, api_version: int, direction: str) -> ValuesReader | None:
    """The generated reader of a message's body (None: no layout, or not generated);
    each API's module is imported on first use."""
    table = _TABLES.get(api_key)
    if table is None:
        from .values_readers import MODULES

        name = MODULES.get(api_key)
        if name is None:
            return None
        module = importlib.import_module(f"{__package__}.values_readers.{name}")
        table = _TABLES[api_key] = module.READERS
    return table.get((api_version, direction))


def _headers() -> Any:
    """The generated header readers (imported once: an import statement per message was
    4 % of JSON lines of small messages)."""
    global _HEADERS
    if _HEADERS is None:
        from .values_readers import headers

        _HEADERS = headers
    return _HEADERS


_HEADERS: Any = None


def _plan(api_key: int, api_version: int, direction: str) -> tuple[Any, Any, bool, Any]:
    """(body reader or None, header reader, compact, compiled reader or None) of one
    message kind."""
    read = reader(api_key, api_version, direction)
    if direction == "request":
        head = _headers().REQUEST[schemas.request_header_version(api_key, api_version)]
    else:
        head = _headers().RESPONSE[schemas.response_header_version(api_key, api_version)]
    st = schemas.layout(api_key, api_version, direction)
    fast = (
        program(api_key, api_version, direction, _records, BatchHeads) if read is not None else None
    )
    return read, head, st is not None and st.flexible, fast


# (api_key, api_version, direction) -> _plan's answer, made once per kind (looked up
# per message, it was a tenth of the values path's cost on small messages)
_PLANS: dict[tuple[int, int, str], tuple[Any, Any, bool, Any]] = {}
forget_on_change(_PLANS.clear)


def _plan_of(api_key: int, api_version: int, direction: str) -> tuple[Any, Any, bool, Any]:
    """``_plan`` of a message kind, made once."""
    plan = _PLANS.get((api_key, api_version, direction))
    if plan is None:
        plan = _PLANS[(api_key, api_version, direction)] = _plan(api_key, api_version, direction)
    return plan


def _may_carry_internal(
    data: bytes,
    api_key: int,
    direction: str,
    options: Options,
    topic_ids: Mapping[str, str] | None,
) -> bool:
    """Whether a message's records may be an internal topic's, which the located path
    decodes by schema (a record carrier naming one's name or a known id)."""
    return bool(
        options.embedded
        and (api_key, direction) in _RECORD_CARRIERS
        and mentions_internal_topic(data, topic_ids)
    )


# bytes fields left out (None): for a reader that only checks or learns from the fields
NO_BYTES: Callable[[bytes], Any] = lambda b: None  # noqa: E731
_BARE = Options(records=False, embedded=False)


def bare_values(
    data: bytes, direction: str, api_key: int, api_version: int
) -> dict[Any, Any] | None:
    """``body_values`` without records, embedded structures or bytes fields: the cheapest
    read of what a message's other fields say (None: not clean, as ``body_values``)."""
    return body_values(data, direction, api_key, api_version, _BARE, NO_BYTES)


def plain_reader(
    api_key: int, api_version: int, direction: str, options: Options
) -> tuple[Any, bool] | None:
    """(compiled reader, compact) of a kind whose ``body_values`` with ``options`` (and
    no ``batch_records``) is ``reader.read_plain(data, conv, options.records, compact,
    options.max_nodes)``, or ``body_values`` itself where that gives None: for a caller
    reading every message of a run (enrichment), which so asks once per kind what
    ``body_values`` asks per message. None: no such reader (call ``body_values``)."""
    if options.records not in (False, "batches") or (
        options.embedded and api_key in _EMBEDDED_APIS
    ):
        return None
    read, _, compact, fast = _plan_of(api_key, api_version, direction)
    return (fast, compact) if read is not None and fast is not None else None


def lean_reader(
    api_key: int, api_version: int, direction: str, options: Options, keep: frozenset[str]
) -> tuple[Any, bool] | None:
    """``plain_reader`` whose dicts hold only the fields ``keep`` names (and error codes,
    records and the structs holding any: ``values_native.kept``), for a caller that reads
    no other (a summary's enrichment: building and freeing the rest was a fifth of its
    work). The same messages read (the same checks), or None where ``plain_reader``
    says None. ``keep``: one set object for a run (its programs are kept by its id)."""
    got = plain_reader(api_key, api_version, direction, options)
    if got is None:
        return None
    fast = program(api_key, api_version, direction, _records, BatchHeads, keep)
    return (fast, got[1]) if fast is not None else None


def _records_compiled(options: Options, api_key: int) -> bool:
    """Whether a compiled read may give a body with its records read (``options.records``
    True): no value schemas to apply, no embedded structures of ``api_key`` to decode
    (the Python readers do both)."""
    return (
        options.records is True
        and options.values is None
        and not (options.embedded and api_key in _EMBEDDED_APIS)
    )


def table_reader(
    api_key: int, api_version: int, direction: str, keep: frozenset[str]
) -> tuple[Any, bool] | None:
    """(compiled reader, compact) of a message kind for ``table_values``, its dicts
    holding only the fields ``keep`` names (``values_native.kept``); None: no such reader.
    ``keep``: one set object for a run (its programs are kept by its id)."""
    read, _, compact, fast = _plan_of(api_key, api_version, direction)
    if read is None or fast is None:
        return None
    table = program(api_key, api_version, direction, _records, BatchHeads, keep)
    return (table, compact) if table is not None else None


def table_values(
    reader: tuple[Any, bool],
    data: bytes,
    api_key: int,
    direction: str,
    options: Options,
    route: tuple[Any, ...],
    topic_of_id: Callable[[str, dict[str, str]], str],
) -> list[tuple[Any, Any, list[Any]]] | None:
    """For the records table (stream/record_table.py), by the compiled read ``reader``
    (``table_reader``'s) alone: the body ``body_values`` gives with ``batch_text`` the
    records table's rows of a batch (``record_table._batch_rows``) and bytes fields left
    out (NO_BYTES), followed as ``record_table._follow`` follows it along ``route``
    (``_Route.spec``; ``topic_of_id``: what names a topic by its id): ``(topic,
    partition, rows)`` of each batch. None where it is not sure: a message for the
    Python readers or the located path, or records it leaves to them (a batch partial,
    compressed, a control batch's, not clean; any records of a message that may carry an
    internal topic's); ``body_values`` then decides."""
    if not _records_compiled(options, api_key):
        return None
    # Records of a message that may carry an internal topic's are body_values' (the
    # located path decodes them by schema). Asked after the read, and only when it gave
    # a batch: the look for a name costs more than a read that gives up (a fetch ending
    # in a partial batch: 68 µs against 0.6 for 120 KB), and body_values looks again.
    # The read looks itself when given the needles (what _may_carry_internal asks).
    needles = (
        base_needles() if options.embedded and (api_key, direction) in _RECORD_CARRIERS else None
    )
    got: list[tuple[Any, Any, list[Any]]] | None = reader[0].table(
        data, NO_BYTES, reader[1], options.max_nodes, route, topic_of_id, needles
    )
    if got is None or (
        needles is None and got and _may_carry_internal(data, api_key, direction, options, None)
    ):
        return None
    return got


def body_values(
    data: bytes,
    direction: str,
    api_key: int,
    api_version: int,
    options: Options,
    conv: Callable[[bytes], Any],
    batch_records: Callable[[list[Any]], Any] | None = None,
    text_values: bool = False,
    batch_text: Callable[..., Any] | None = None,
    topic_ids: Mapping[str, str] | None = None,
    replayable: bool = False,
) -> dict[Any, Any] | None:
    """The body of a clean message as plain values (bytes through ``conv``); None when the
    message is not clean or not for this path (the caller decodes it located).
    ``batch_records``, if given, takes each record batch's list of records as soon as it
    is read and returns what stands for it (a caller writing JSON encodes it at once, so
    a big Fetch response never holds all its records as objects). ``text_values``: the
    records' decoded Avro values come as ``values_schema.fast.JsonText``, for a caller
    encoding them with ``fast.dumps``. ``batch_text(data, pos, end, count, base, ts0,
    fixed_ts)``, with ``batch_records``: a batch's records already encoded (what
    ``batch_records`` gets instead of the list), or None to read them here. ``topic_ids``:
    the topic names learned so far (``context.Decoding``).
    ``replayable``: ``batch_records`` and ``batch_text`` do nothing but answer, so the
    compiled reader may call them and then hand the message over (the Python readers
    then call them again)."""
    if options.records not in (True, False, "batches") or (
        options.embedded and api_key in _EMBEDDED_APIS
    ):
        return None
    # internal topics' records are decoded by schema on the located path; a message that
    # may hold some is read here when it holds none (most of KRaft's replication
    # Fetches: in a cluster's JSON lines, they were half the located decodes)
    internal = options.records is True and _may_carry_internal(
        data, api_key, direction, options, topic_ids
    )
    if (
        getattr(options.values, "overrides", None)
        and options.records is True
        and schemas.has_records(api_key, api_version, direction)
    ):
        return None  # per-topic schemas: the located path knows the topics
    read, head, compact, fast = _plan_of(api_key, api_version, direction)
    if read is None:
        return None
    if fast is not None and (batch_records is None or replayable):
        # compiled (values_native): the same dict, or None when the readers below decide
        records = options.records
        got: dict[Any, Any] | None
        if records is True:  # (Python's _records reads them: it needs a state)
            s = _State(
                conv,
                options,
                compact,
                batch_records,
                text_values,
                batch_text if batch_records is not None else None,
            )
            s.internal = internal
            got = fast.read(data, s)
        else:
            got = fast.read_plain(data, conv, records, compact, options.max_nodes)
        if got is not None:
            return got
    s = _State(
        conv,
        options,
        compact,
        batch_records,
        text_values,
        batch_text if batch_records is not None else None,
    )
    s.internal = internal
    try:
        _, pos = head(data, 0, s)
        body, pos = read(data, pos, s)
    except (Bail, VarintTooLong, struct.error, IndexError, UnicodeDecodeError):
        return None
    return body if pos == len(data) else None


def body_json(
    data: bytes,
    direction: str,
    api_key: int,
    api_version: int,
    options: Options,
    topic_ids: Mapping[str, str] | None = None,
    internal_records: Callable[..., tuple[str, int, int] | None] | None = None,
) -> str | None:
    """The JSON text JSON lines write for a clean message's body (``body_values`` with
    ``render.records.json_bytes``, its record batches read, encoded by ``json``), written
    by the compiled reader without a dict per struct (native/src/body_json.rs); None when
    it is not sure or not for this path: ``body_values`` then reads it, which decides.
    Secrets are not masked here: for a message without any (``secrets.mask_values``).
    ``internal_records``: ``json_view.internal_records_json``, for the records of a
    message that may carry an internal topic's (without it, such a message is not read
    here)."""
    if not _records_compiled(options, api_key):
        return None
    fast = _plan_of(api_key, api_version, direction)[3]
    if fast is None:
        return None
    internal = None
    if _may_carry_internal(data, api_key, direction, options, topic_ids):
        if internal_records is None:
            return None
        internal = partial(internal_records, options, topic_ids)
    text: str | None = fast.json(data, options.max_nodes, internal)
    return text
