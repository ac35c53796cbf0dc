"""What the records of an exchange hold (keys, values, headers; compressed batches
decompressed) and where bytes are found in its messages and their decompressed
buffers: for record filters and the TUI's search."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import Options
from ..protocol.node import Node

_CARRY_RECORDS = {0, 1, 78}        # Produce, Fetch, ShareFetch
_FULL = Options()


class Record:
    """A record's key, value (text, undecodable bytes replaced) and headers, turned into
    text when asked: a filter on keys does not pay for decoding every value."""
    __slots__ = ("_key", "_value", "_headers")

    def __init__(self, key, value, headers) -> None:
        self._key, self._value, self._headers = key, value, headers

    @property
    def key(self) -> str | None:
        return _text(self._key)

    @property
    def value(self) -> str | None:
        return _text(self._value)

    @property
    def headers(self) -> tuple[tuple[str, str | None], ...]:
        return tuple((_text(k), _text(v)) for k, v in self._headers)

    def __eq__(self, other) -> bool:
        return isinstance(other, Record) and (self.key, self.value, self.headers) == \
            (other.key, other.value, other.headers)

    def __repr__(self) -> str:
        return f"Record({self.key!r}, {self.value!r}, {self.headers!r})"


def full_tree(m, options: Options | None = None) -> Node | None:
    """The message's full tree, records decompressed, decoded now and not kept (the
    list holds summaries, not trees)."""
    if m is None or m.direction == "sasl":
        return None
    return m.decoded(options or _FULL).tree


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def records(view) -> list[Record]:
    """Every record in the exchange (Produce requests, Fetch responses), with keys and
    values as text (undecodable bytes replaced)."""
    if view.ex.first.api_key not in _CARRY_RECORDS:
        return []
    out = []
    for m in (view.ex.request, view.ex.response):
        quick = _clean_records(m, view.options)
        if quick is not None:
            out += quick
            continue
        tree = full_tree(m, view.options)
        if tree is None:
            continue
        for node in tree.walk():
            if node.ktype != "record" and not node.ktype.startswith("message_v"):
                continue
            key, value = node.child("key"), node.child("value")
            if key is None and value is None:
                continue                         # a compressed wrapper: its inner ones count
            headers = node.child("headers")
            pairs = tuple((h.child("key").value, h.child("value").value)
                          for h in (headers.children if headers else ())
                          if h.child("key") is not None and h.child("value") is not None)
            out.append(Record(key.value if key else None, value.value if value else None,
                              pairs))
    return out


def _clean_records(m, options: Options | None) -> list[Record] | None:
    """The records of a clean message from the values-only decoder (no tree: several
    times quicker, the same values); None when the message needs the located decoder."""
    if m is None or m.direction == "sasl" or not m.data:
        return None
    from ..protocol.values import body_values
    out: list[Record] = []

    def take(batch: list) -> None:
        out.extend(Record(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
                   for r in batch)

    body = body_values(m.data, m.direction, m.api_key, m.api_version, options or _FULL,
                       bytes, take)
    return None if body is None else out


def header_values(view, name: str) -> list[str]:
    return [v for r in records(view) for k, v in r.headers if k == name and v is not None]


def throttle(view) -> list[int]:
    """The response's throttle_time_ms (read by enrichment)."""
    ms = view.facts().throttle_ms
    return [] if ms is None else [ms]


@dataclass(frozen=True)
class Match:
    message: int                   # 0: the exchange's first message, 1: the second
    buffer: int | None             # which decompressed buffer (in tree order); None: wire
    offset: int                    # in the message, or in that buffer


def buffer_nodes(tree: Node) -> list[Node]:
    return [n for n in tree.walk() if n.buffer is not None]


def holds_bytes(messages: list, needle: bytes, options: Options | None = None) -> bool:
    """Whether ``find_bytes`` finds ``needle``, quickly: clean messages have their
    batches decompressed by the values-only decoder, without building a tree."""
    if any(needle in m.data for m in messages):
        return True
    for m in messages:
        if m.api_key not in _CARRY_RECORDS or m.direction == "sasl":
            continue
        seen: list[bool] = []
        from ..protocol.values import body_values
        body = body_values(m.data, m.direction, m.api_key, m.api_version,
                           options or _FULL, bytes, lambda batch: None,
                           lambda data: seen.append(needle in data))
        if body is None:                   # not clean: the located decoder says
            if find_bytes([m], needle, options) is not None:
                return True
        elif any(seen):
            return True
    return False


def find_bytes(messages: list, needle: bytes, options: Options | None = None) -> Match | None:
    """The first place ``needle`` occurs: in a message's bytes as on the wire, else in a
    decompressed buffer of its records."""
    for index, m in enumerate(messages):
        at = m.data.find(needle)
        if at >= 0:
            return Match(index, None, at)
    for index, m in enumerate(messages):
        if m.api_key not in _CARRY_RECORDS or m.direction == "sasl":
            continue
        tree = full_tree(m, options)
        for number, node in enumerate(buffer_nodes(tree) if tree is not None else ()):
            at = node.buffer.find(needle)
            if at >= 0:
                return Match(index, number, at)
    return None
