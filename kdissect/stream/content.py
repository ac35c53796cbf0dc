"""What the records of an exchange hold (keys, values, headers; compressed batches
decompressed) and where bytes are found in its messages and their decompressed
buffers: for record filters and the TUI's search."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import Options
from ..protocol.node import Node

_CARRY_RECORDS = {0, 1, 78}        # Produce, Fetch, ShareFetch
_FULL = Options()


@dataclass(frozen=True)
class Record:
    key: str | None
    value: str | None
    headers: tuple[tuple[str, str | None], ...]


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
            pairs = tuple((_text(h.child("key").value), _text(h.child("value").value))
                          for h in (headers.children if headers else ())
                          if h.child("key") is not None and h.child("value") is not None)
            out.append(Record(_text(key.value) if key else None,
                              _text(value.value) if value else None, pairs))
    return out


def _clean_records(m, options: Options | None) -> list[Record] | None:
    """The records of a clean message from the values-only decoder (no tree: several
    times quicker, the same values); None when the message needs the located decoder."""
    if m is None or m.direction == "sasl" or not m.data:
        return None
    from ..protocol.values import body_values
    out: list[Record] = []

    def take(batch: list) -> None:
        out.extend(Record(_text(r["key"]), _text(r["value"]),
                          tuple((h["key"], _text(h["value"])) for h in r["headers"]))
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
