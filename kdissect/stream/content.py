"""What the records of an exchange hold (keys, values, headers; compressed batches
decompressed) and where bytes are found in its messages and their decompressed
buffers: for record filters and the TUI's search."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dataclasses import replace

from ..protocol import Options
from ..protocol import secrets
from ..protocol.apis import CARRY_RECORDS
from ..protocol.node import Node
from ..protocol.plain import Frozen
from .model import KafkaMessage

_FULL = Options()


class Record:
    """A record's key, value (text, undecodable bytes replaced) and headers, turned into
    text when asked: a filter on keys does not pay for decoding every value."""

    __slots__ = ("_key", "_value", "_headers")

    def __init__(self, key: Any, value: Any, headers: Any) -> None:
        self._key, self._value, self._headers = key, value, headers

    @property
    def key(self) -> str | None:
        return _text(self._key)

    @property
    def value(self) -> str | None:
        return _text(self._value)

    @property
    def headers(self) -> tuple[tuple[str | None, str | None], ...]:
        return tuple((_text(k), _text(v)) for k, v in self._headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and (self.key, self.value, self.headers) == (
            other.key,
            other.value,
            other.headers,
        )

    def __repr__(self) -> str:
        return f"Record({self.key!r}, {self.value!r}, {self.headers!r})"


def full_tree(
    m: KafkaMessage, options: Options | None = None, topic_ids: Mapping[str, str] | None = None
) -> Node | None:
    """The message's full tree, records decompressed, decoded now and not kept (the
    list holds summaries, not trees); ``topic_ids``: the topic names learned so far."""
    if m is None or m.direction == "sasl":
        return None
    tree: Node | None = m.decoded(options or _FULL, topic_ids).tree
    return tree


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def records(view: Any) -> list[Record]:
    """Every record in the exchange (Produce requests, Fetch responses), with keys and
    values as text (undecodable bytes replaced)."""
    if view.ex.first.api_key not in CARRY_RECORDS:
        return []
    return [
        r
        for m in (view.ex.request, view.ex.response)
        for r in _message_records(m, view.options, view.topic_ids)
    ]


def record_keys(view: Any) -> list[str]:
    """The keys of ``records(view)`` (None left out), read without decoding the values
    and headers of clean batches: a key filter over a big capture stays quick."""
    if view.ex.first.api_key not in CARRY_RECORDS:
        return []
    out: list[str] = []
    for m in (view.ex.request, view.ex.response):
        keys = _clean_keys(m, view.options)
        out += (
            keys
            if keys is not None
            else [
                r.key
                for r in _message_records(m, view.options, view.topic_ids)
                if r.key is not None
            ]
        )
    return out


def has_key(view: Any, key: str) -> bool:
    """Whether a record of the exchange has the key ``key`` (``key in record_keys(view)``,
    quicker): a key is bytes of its batch, so a clean batch whose records' bytes do not
    hold the key's UTF-8 bytes (one C-speed search) is not read record by record."""
    if view.ex.first.api_key not in CARRY_RECORDS:
        return False
    if "\ufffd" in key:  # may stand for bytes that are not UTF-8
        return key in record_keys(view)
    minimal, padded = _key_needles(key.encode())
    for m in (view.ex.request, view.ex.response):
        batches = _clean_batches(m, view.options)
        keys: list[str] = []
        if batches is not None and all(
            (minimal not in data and padded not in data) or _batch_keys(data, count, keys)
            for data, count, _compressed in batches
        ):
            if key in keys:
                return True
        elif any(r.key == key for r in _message_records(m, view.options, view.topic_ids)):
            return True
    return False


def _key_needles(key: bytes) -> tuple[bytes, bytes]:
    """Bytes every v2 record with this key holds: its length (a zigzag varint) then the
    key; or, when the length was written in more bytes than needed (legal, never done
    by clients), a last length byte of 0 then the key."""
    from ..protocol.varint import varint_bytes

    return varint_bytes(len(key)) + key, b"\0" + key


def _message_records(
    m: KafkaMessage, options: Options | None, topic_ids: Mapping[str, str] | None
) -> list[Record]:
    quick = _clean_records(m, options, topic_ids)
    if quick is not None:
        return quick
    out: list[Record] = []
    tree = full_tree(m, options, topic_ids)
    for node in tree.walk() if tree is not None else ():
        if node.ktype != "record" and not node.ktype.startswith("message_v"):
            continue
        key, value = node.child("key"), node.child("value")
        if key is None and value is None:
            continue  # a compressed wrapper: its inner ones count
        headers = node.child("headers")
        pairs = tuple(
            (k.value, v.value)
            for h in (headers.children if headers else ())
            if (k := h.child("key")) is not None and (v := h.child("value")) is not None
        )
        out.append(Record(key.value if key else None, value.value if value else None, pairs))
    return out


def _clean_keys(m: KafkaMessage, options: Options | None) -> list[str] | None:
    """Record keys of a clean message (v2 batches whose CRC holds and whose records
    frame exactly); None when anything is unusual: the caller then reads the records."""
    batches = _clean_batches(m, options)
    if batches is None:
        return None
    keys: list[str] = []
    for data, count, _compressed in batches:
        if not _batch_keys(data, count, keys):
            return None
    return keys


def _clean_batches(
    m: KafkaMessage, options: Options | None
) -> list[tuple[bytes, int, bool]] | None:
    """(records' bytes, decompressed; record count; compressed?) of each v2 batch of a
    clean message, read without decoding its records; None when anything is unusual."""
    if (
        m is None
        or m.direction == "sasl"
        or not m.data
        or m.api_key not in CARRY_RECORDS
        or m.api_key is None
        or m.api_version is None
    ):
        return None
    from ..protocol.values import body_values

    options = options or _FULL
    body = body_values(
        m.data, m.direction, m.api_key, m.api_version, replace(options, records=False), bytes
    )
    if body is None:
        return None
    out: list[tuple[bytes, int, bool]] = []
    budget = [options.max_decompressed]
    for raw in _records_fields(body):
        if raw and not _batches(raw, out, budget):
            return None
    return out


def _records_fields(value: Any) -> Iterator[bytes]:
    """The raw record sets of a values-decoded body (its ``records`` fields)."""
    if isinstance(value, dict):
        for name, item in value.items():
            if name == "records" and isinstance(item, bytes):
                yield item
            else:
                yield from _records_fields(item)
    elif isinstance(value, list):
        for item in value:
            yield from _records_fields(item)


def _batches(raw: bytes, out: list[Any], budget: list[int]) -> bool:
    """Append the v2 batches of ``raw`` to ``out``; False at anything unusual."""
    from ..protocol.batch import FRAME, HEAD_SIZE, LOG_OVERHEAD, Batch, length_at

    pos, end = 0, len(raw)
    while pos < end:
        left = end - pos
        if left < HEAD_SIZE or LOG_OVERHEAD + length_at(raw, pos) > left:
            return left >= FRAME  # a partial batch at the end: no records
        b = Batch(raw, pos)
        got = b.clean(budget[0])
        if got is None:
            return False
        data, start, stop = got
        if b.codec:
            budget[0] -= len(data)
        else:
            data = raw[start:stop]
        out.append((data, b.head[12], bool(b.codec)))
        pos = b.end
    return True


def _batch_keys(data: bytes, count: int, keys: list[str]) -> bool:
    """Append the keys of a batch's ``count`` records; False unless they frame exactly."""
    from ..protocol.batch import BadRecord, record_keys

    try:
        return record_keys(data, 0, len(data), count, keys) == len(data)
    except BadRecord:
        return False


def _clean_records(
    m: KafkaMessage, options: Options | None, topic_ids: Mapping[str, str] | None
) -> list[Record] | None:
    """The records of a clean message from the values-only decoder (no tree: several
    times quicker, the same values); None when the message needs the located decoder."""
    if (
        m is None
        or m.direction == "sasl"
        or not m.data
        or m.api_key is None
        or m.api_version is None
    ):
        return None  # (the values decoder reads known kinds only)
    from ..protocol.values import body_values

    out: list[Record] = []

    def take(batch: list[Any]) -> None:
        out.extend(
            Record(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
            for r in batch
        )

    body = body_values(
        m.data,
        m.direction,
        m.api_key,
        m.api_version,
        options or _FULL,
        bytes,
        take,
        topic_ids=topic_ids,
    )
    return None if body is None else out


def header_values(view: Any, name: str) -> list[str]:
    return [v for r in records(view) for k, v in r.headers if k == name and v is not None]


def throttle(view: Any) -> list[int]:
    """The response's throttle_time_ms (read by enrichment)."""
    ms = view.facts().throttle_ms
    return [] if ms is None else [ms]


class Match(Frozen):
    """Where found bytes are."""

    __slots__ = _fields = ("message", "buffer", "offset")

    def __init__(
        self,
        message: int,  # 0: the exchange's first message, 1: the second
        buffer: int | None,  # which decompressed buffer (in tree order); None: wire
        offset: int,
    ):  # in the message, or in that buffer
        self.message, self.buffer, self.offset = message, buffer, offset


def buffer_nodes(tree: Node) -> list[Node]:
    return [n for n in tree.walk() if n.buffer is not None]


def _find_shown(m: Any, needle: bytes, options: Options | None) -> int:
    """Where ``needle`` is in a message's bytes (-1: nowhere), never inside a secret the
    displays mask (a search must not confirm a password they hide), unless secrets are
    shown."""
    data: bytes = m.data
    at = data.find(needle)
    if at < 0 or (options is not None and options.show_secrets):
        return at
    if m.direction != "sasl" and m.api_key not in secrets.SENSITIVE_APIS:
        return at
    start = 0
    for lo, hi in sorted(secrets.secret_spans(m.decoded(options or Options()).tree)):
        at = data.find(needle, start, lo)
        if at >= 0:
            return at
        start = max(start, hi)
    return data.find(needle, start)


def holds_bytes(messages: list[Any], needle: bytes, options: Options | None = None) -> bool:
    """Whether ``find_bytes`` finds ``needle``, quickly: the compressed batches of clean
    messages are decompressed without decoding a record or building a tree."""
    if any(_find_shown(m, needle, options) >= 0 for m in messages):
        return True
    for m in messages:
        if m.api_key not in CARRY_RECORDS or m.direction == "sasl":
            continue
        batches = _clean_batches(m, options)
        if batches is None:  # not clean: the located decoder says
            if find_bytes([m], needle, options) is not None:
                return True
        elif any(needle in data for data, _count, compressed in batches if compressed):
            return True
    return False


def find_bytes(messages: list[Any], needle: bytes, options: Options | None = None) -> Match | None:
    """The first place ``needle`` occurs: in a message's bytes as on the wire, else in a
    decompressed buffer of its records."""
    for index, m in enumerate(messages):
        at = _find_shown(m, needle, options)
        if at >= 0:
            return Match(index, None, at)
    for index, m in enumerate(messages):
        if m.api_key not in CARRY_RECORDS or m.direction == "sasl":
            continue
        tree = full_tree(m, options)
        for number, node in enumerate(buffer_nodes(tree) if tree is not None else ()):
            at = (node.buffer or b"").find(needle)  # buffer_nodes: buffer is set
            if at >= 0:
                return Match(index, number, at)
    return None
