"""Records of Kafka's internal topics decoded by their own schemas, wherever records appear
(a segment on disk, a Fetch response, a Produce request, KRaft replication).

The layouts come from ``internal_schemas`` (generated from Apache Kafka's jars). How each
family frames its records:

- ``group`` (__consumer_offsets), ``transaction`` (__transaction_state), ``share``
  (__share_group_state): key = int16 record type + the key struct (version 0); value =
  int16 version + the value struct of that type; a null value is a tombstone.
- ``metadata`` (__cluster_metadata, KRaft snapshots) and ``remote``
  (__remote_log_metadata): value = uvarint frame version, uvarint record type, uvarint
  version, then the struct; no key.
- KRaft control records (control batches in any of them): key = int16 version + int16
  type; the value is the struct of that type (its first field is its version).

Pure: no I/O. Decoded structures become children of the record's ``key``/``value`` nodes,
located in the same buffer as the record.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from functools import lru_cache

from .apis import FETCH, FETCH_SNAPSHOT, PRODUCE
from .context import Decoding
from .decode import decode_prefix
from .embedded import decode_consumer_bytes
from .grammar import parse_grammar
from .layout import Struct, resource_hints
from .native_ext import bind
from .node import Node
from . import secrets
from .reader import VarintTooLong, uvarint
from .internal_schemas import BNF, MESSAGES

TOPIC_FAMILIES = {
    "__consumer_offsets": "group",
    "__transaction_state": "transaction",
    "__share_group_state": "share",
    "__cluster_metadata": "metadata",
    "__remote_log_metadata": "remote",
}
# KRaft's fixed topic id of __cluster_metadata (Uuid.METADATA_TOPIC_ID): Fetch v13+ between
# controllers names the topic by id only
METADATA_TOPIC_ID = "00000000-0000-0000-0000-000000000001"
_METADATA_ID_BYTES = uuid.UUID(METADATA_TOPIC_ID).bytes
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LeaderChangeMessage",
    3: "SnapshotHeaderRecord",
    4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord",
    6: "VotersRecord",
}
# Kafka's names of the control record types (ControlRecordType)
CONTROL_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_PREFIXED = ("group", "transaction", "share")
_FRAMED = ("metadata", "remote")


# the records whose resource types' numbers are an enum (layout.resource_hints)
_RESOURCES = {"ConfigRecord": "config", "AccessControlEntryRecord": "acl"}


@lru_cache(maxsize=1)
def _layouts() -> dict[tuple[str, int], Struct]:
    return {
        (name, version): resource_hints(st, _RESOURCES[name]) if name in _RESOURCES else st
        for (name, _rec, version), st in parse_grammar(BNF).messages.items()
    }


@lru_cache(maxsize=1)
def _early_layouts() -> dict[tuple[str, int], Struct]:
    """Older layouts at the same versions (internal_early.py)."""
    from . import internal_early

    messages = parse_grammar(internal_early.BNF).messages.items()
    return {(name, version): st for (name, _rec, version), st in messages}


def internal_layout(name: str, version: int) -> Struct | None:
    """One generated layout by message name and version (None if unknown)."""
    return _layouts().get((name, version))


@lru_cache(maxsize=1)
def _by_type() -> dict[tuple[str, int, str], str]:
    """(family, record type, "key"/"value"/"record") -> message name."""
    out: dict[tuple[str, int, str], str] = {}
    for name, (family, api_key, _lo, _hi) in MESSAGES.items():
        kind = "key" if name.endswith("Key") else "value" if name.endswith("Value") else "record"
        out[(family, api_key, kind)] = name
    return out


_NAMES = tuple(t.encode() for t in TOPIC_FAMILIES)


# native/src/scan.rs (Needles, below): the same answer in one pass (the searches of
# mentions_internal_topic_py cost a few ms on a MB of JSON values or zero padding)


def mentions_internal_topic(data: bytes, topic_ids: Mapping[str, str] | None = None) -> bool:
    """Whether a Produce/Fetch message may carry an internal topic, by name or by a known
    id (a cheap byte search, before choosing a decoder)."""
    if _Needles is not None:
        # (without ids, the one base search: this check's Python calls were most of
        # its cost a record on message-dense traffic, in the records table)
        # (None where the extension was bound after this module's import: native_ext.refresh)
        search = None if topic_ids else _BASE_SEARCH
        if search is None:
            needles = _needles(topic_ids)
            search = _SEARCHES.get(needles)
            if search is None:
                if len(_SEARCHES) > 64:  # (ids come and go only in hostile captures)
                    _SEARCHES.clear()
                search = _SEARCHES[needles] = _Needles(list(needles)).found_in
        got = search(data)
        if got is not None:  # (None: bytes not contiguous)
            return bool(got)
    return mentions_internal_topic_py(data, topic_ids)


def _needles(topic_ids: Mapping[str, str] | None) -> tuple[bytes, ...]:
    if not topic_ids:
        return _BASE_NEEDLES
    global _LAST_NEEDLES
    ids, needles = _LAST_NEEDLES  # (one read: TUI threads may replace it meanwhile)
    if ids == topic_ids:  # (names learned seldom change: compared in C, not walked)
        return needles
    needles = (
        *_BASE_NEEDLES,
        *(_id_bytes(i) for i, n in topic_ids.items() if n in TOPIC_FAMILIES),
    )
    _LAST_NEEDLES = (dict(topic_ids), needles)
    return needles


_BASE_NEEDLES = (*_NAMES, _METADATA_ID_BYTES)
# the topic names the needles were last made from (a copy: the caller's dict grows) and
# those needles (made per message, they were a twentieth of a cluster's JSON lines)
_LAST_NEEDLES: tuple[dict[str, str], tuple[bytes, ...]] = ({}, _BASE_NEEDLES)
# native/src/scan.rs's needle sets, prepared once per set of needles
_Needles = bind(__name__, "_Needles", "Needles")
_SEARCHES: dict[tuple[bytes, ...], Any] = {}
# the base needles (no ids learned: the records table's every message) and their search
_BASE_SET: Any = _Needles(list(_BASE_NEEDLES)) if _Needles is not None else None
_BASE_SEARCH: Any = _BASE_SET.found_in if _BASE_SET is not None else None


def base_needles() -> Any:
    """The compiled needles ``mentions_internal_topic(data)`` (no topic ids) searches
    ``bytes`` for, for a compiled caller to search itself; None: none bound (then ask
    ``mentions_internal_topic``)."""
    return _BASE_SET if _Needles is not None else None


@lru_cache(maxsize=4096)
def _id_bytes(topic_id: str) -> bytes:
    """A topic id's 16 bytes (parsed once: a UUID made per id per message was a
    twentieth of a cluster capture's JSON lines)."""
    return uuid.UUID(topic_id).bytes


def mentions_internal_topic_py(data: bytes, topic_ids: Mapping[str, str] | None = None) -> bool:
    """``mentions_internal_topic``'s reference, in Python."""
    if b"__" in data and any(n in data for n in _NAMES):
        return True
    # __cluster_metadata's fixed id (KRaft replication): fifteen zero bytes and a one also
    # turn up elsewhere, which only costs those messages the slower located decoder
    if _METADATA_ID_BYTES in data:
        return True
    return topic_ids is not None and any(
        uuid.UUID(i).bytes in data for i, name in topic_ids.items() if name in TOPIC_FAMILIES
    )


def family_of(topic: str | None) -> str | None:
    return TOPIC_FAMILIES.get(topic) if topic else None


def _content(node: Node | None) -> tuple[int, bytes] | None:
    """Where the bytes of a key/value node start, and the bytes; None for null/decoded."""
    if node is None or not isinstance(node.value, (bytes, bytearray)) or node.children:
        return None
    return node.end - len(node.value), bytes(node.value)


def _struct_at(
    name: str, version: int, data: bytes, start: int, ctx: Decoding, holder: Node
) -> None:
    """Decode ``data[start:]`` as ``name`` at ``version`` (the newest known layout for a
    newer version, flagged) into ``holder``'s children, offsets shifted by ``base``."""
    _family, _key, lo, hi = MESSAGES[name]
    used = min(max(version, lo), hi)
    tree, _complete = decode_prefix(data, start, _layouts()[(name, used)], name, ctx, whole=True)
    tree.ktype = "struct"
    tree.note = f"{name} v{version}"
    early = _early_layouts().get((name, version)) if tree.problems() else None
    if early is not None:  # a layout Kafka changed without a new version: its older one?
        old, _ = decode_prefix(data, start, early, name, ctx, whole=True)
        if not old.problems():
            from .internal_early import EARLY_ACCESS

            tree = old
            tree.ktype = "struct"
            tree.note = f"{name} v{version}, read with {EARLY_ACCESS}"
    if used != version:
        tree.problem = (
            f"{name} version {version} is not in kdissect's schemas "
            f"(Kafka {lo}..{hi}); decoded with v{used}"
        )
        tree.code = "assumed_version"
    holder.add(tree)
    if name == "GroupMetadataValue":
        for member in (tree.child("members") or Node("", "array", 0)).children:
            for field, kind in (("subscription", "Subscription"), ("assignment", "Assignment")):
                c = member.child(field)
                if c is not None:
                    decode_consumer_bytes(data, c, kind, ctx)


def _shifted(node: Node, base: int) -> None:
    for n in node.walk():
        n.offset += base


def _decode_into(
    node: Node, family: str, part: str, rtype_hint: int | None, ctx: Decoding
) -> int | None:
    """Decode one key or value node in place; returns the record type it names."""
    found = _content(node)
    if found is None:
        return None
    base, data = found
    holder = Node("", "struct", 0)
    rtype = None
    if family in _PREFIXED:
        if len(data) < 2:
            return None
        (num,) = struct.unpack_from(">h", data)
        holder.add(Node("_record_type" if part == "key" else "_version", "int16", 0, 2, num))
        if part == "key":
            rtype = num
            name = _by_type().get((family, num, "key"))
            version = 0
        else:
            rtype = rtype_hint
            name = _by_type().get((family, rtype, "value")) if rtype is not None else None
            version = num
        if name is None:
            holder.children[
                0
            ].problem = f"{family} record type {rtype} is not in kdissect's schemas"
            holder.children[0].code = "unknown_record_type"
        else:
            _struct_at(name, version, data, 2, ctx, holder)
    elif family in _FRAMED:
        pos, heads = 0, []
        for what in ("_frame_version", "_record_type", "_version"):
            start = pos
            try:
                v, pos = uvarint(data, pos, len(data), 5)
            except (IndexError, VarintTooLong):
                return None
            heads.append(v)
            holder.add(Node(what, "uvarint", start, pos - start, v))
        rtype = heads[1]
        name = _by_type().get((family, rtype, "record"))
        if name is None:
            holder.children[
                1
            ].problem = f"{family} record type {rtype} is not in kdissect's schemas"
            holder.children[1].code = "unknown_record_type"
        else:
            _struct_at(name, heads[2], data, pos, ctx, holder)
    elif family == "control":
        name = CONTROL_TYPES.get(rtype_hint or -1)
        if name not in MESSAGES or len(data) < 2:
            return None
        (version,) = struct.unpack_from(">h", data)
        _struct_at(name, version, data, 0, ctx, holder)
    _shifted(holder, base)
    prefix = Node("_length", "varint", node.offset, base - node.offset, len(data))
    node.children = [prefix, *holder.children]
    main = next((c for c in holder.children if not c.name.startswith("_")), None)
    if main is not None:
        node.note = main.note
        secrets.mark_record(node)
    return rtype


def decode_record(record: Node, family: str, control: bool, ctx: Decoding) -> None:
    """Decode the key and value of one record (a v2 ``record`` or v0/v1 message node) of an
    internal topic of ``family`` in place."""
    key, value = record.child("key"), record.child("value")
    if control:
        k = _content(key)
        if k is None or len(k[1]) < 4:
            return
        ctype = struct.unpack_from(">h", k[1], 2)[0]
        if ctype >= 2:
            _decode_into(value, "control", "value", ctype, ctx) if value else None
        return
    rtype = _decode_into(key, family, "key", None, ctx) if key is not None else None
    if value is not None:
        _decode_into(value, family, "value", rtype, ctx)


def decode_records(holder: Node, family: str | None, ctx: Decoding) -> None:
    """Decode every record under ``holder`` (a records node, a batch, a segment) whose
    batch says control, or which belongs to ``family``."""
    if not ctx.options.embedded:
        return
    for batch in _down_to(holder, "record_batch"):
        if batch.ktype == "record_batch":
            attrs = batch.child("attributes")
            control = (
                attrs is not None and isinstance(attrs.value, int) and bool(attrs.value & 0x20)
            )
            if family is None and not control:
                continue
            for rec in _down_to(batch, "record"):
                if rec.ktype == "record":
                    decode_record(rec, family or "", control, ctx)
        elif batch.ktype.startswith("message_v") and family is not None:
            attrs = batch.child("attributes")
            if attrs is not None and isinstance(attrs.value, int) and attrs.value & 7 == 0:
                decode_record(batch, family, False, ctx)


def _down_to(node: Node, ktype: str) -> Iterator[Node]:
    """``node.walk()`` that does not go below nodes of ``ktype``: a batch's records (and
    what decoding them adds) were walked twice more, a third of a KRaft cluster's JSON
    lines."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if n.ktype != ktype:
            stack.extend(reversed(n.children))


# the messages whose records may be an internal topic's: Produce requests, Fetch
# responses, and FetchSnapshot responses (a KRaft snapshot's bytes: __cluster_metadata)
RECORD_CARRIERS = frozenset(
    {(PRODUCE, "request"), (FETCH, "response"), (FETCH_SNAPSHOT, "response")}
)
_CARRIED = {
    PRODUCE: ("topic_data", "name", "partition_data", "records"),
    FETCH: ("responses", "topic", "partitions", "records"),
    FETCH_SNAPSHOT: ("topics", "name", "partitions", "unaligned_records"),
}


def decode_wire_records(body: Node, api_key: int, ctx: Decoding) -> None:
    """Internal-topic records inside a Produce request (``api_key`` 0), a Fetch response
    (1) or a FetchSnapshot response (59): the topic is named in the message (or, for
    KRaft's Fetch v13+, by its fixed id)."""
    topics_name, name_name, parts_name, records_name = _CARRIED[api_key]
    topics = body.child(topics_name)
    for t in topics.children if topics is not None else ():
        name = t.child(name_name)
        topic = name.value if name is not None else None
        tid = t.child("topic_id")
        if topic is None and tid is not None:
            if tid.value == METADATA_TOPIC_ID:
                topic = "__cluster_metadata"
            elif ctx.topic_ids:
                topic = ctx.topic_ids.get(tid.value)
        family = family_of(topic)
        parts = t.child(parts_name)
        for p in parts.children if parts is not None else ():
            recs = p.child(records_name)
            if recs is not None and recs.children:
                decode_records(recs, family, ctx)


def control_of(record: Node) -> tuple[str, int | None] | None:
    """A control record's type (Kafka's name) and, for transaction markers, the
    coordinator epoch; None when the key is not a control key."""
    key, value = record.child("key"), record.child("value")
    if key is None or not isinstance(key.value, (bytes, bytearray)) or len(key.value) < 4:
        return None
    ctype = struct.unpack_from(">h", key.value, 2)[0]
    epoch = None
    if (
        ctype in (0, 1)
        and value is not None
        and isinstance(value.value, (bytes, bytearray))
        and len(value.value) >= 6
    ):
        epoch = struct.unpack_from(">i", value.value, 2)[0]
    return CONTROL_NAMES.get(ctype, f"type {ctype}"), epoch
