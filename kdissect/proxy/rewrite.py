"""A response re-encoded with other broker addresses.

Only the address fields change: the message is spliced at the byte ranges the
skip-scanner found (the host string with its length prefix, the port), and the size of
every tagged field around them follows; every other byte stays as the broker sent it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..protocol.varint import uvarint_bytes as uvarint
from .skipscan import EndpointSpan, Tagged


def _string(value: str, compact: bool) -> bytes:
    raw = value.encode()
    return (uvarint(len(raw) + 1) if compact else len(raw).to_bytes(2, "big")) + raw


def rewrite(
    data: bytes, spans: list[EndpointSpan], new_address: Callable[[EndpointSpan], tuple[str, int]]
) -> bytes | None:
    """``data`` (a response without its size prefix) with each endpoint's host and port
    replaced by ``new_address(span)``; None if nothing changes."""
    edits: list[tuple[int, int, bytes]] = []
    regions = {}  # tagged fields holding an edit
    for sp in spans:
        host, port = new_address(sp)
        if (host, port) == (sp.host, sp.port):
            continue
        edits.append((sp.host_start, sp.host_end, _string(host, sp.host_compact)))
        edits.append((sp.port_start, sp.port_start + 4, port.to_bytes(4, "big", signed=True)))
        for depth, t in enumerate(sp.tagged):
            regions[t.size_start] = (depth, t)
    if not edits:
        return None
    # innermost first: a tagged field's new size prefix is itself an edit inside the
    # tagged field around it
    for _depth, t in sorted(regions.values(), key=lambda d: -d[0]):
        grown = sum(
            len(new) - (end - start)
            for start, end, new in edits
            if t.size_end <= start and end <= t.end
        )
        edits.append((t.size_start, t.size_end, uvarint(t.size + grown)))
    # edits never overlap (a tagged field's size comes before its value): the message
    # is joined from the pieces between them in one pass (splicing a bytearray edit by
    # edit moves the tail each time: 100,000 endpoints took seconds)
    pieces, at = [], 0
    for start, end, new in sorted(edits, key=lambda e: e[0]):
        pieces.append(data[at:start])
        pieces.append(new)
        at = end
    pieces.append(data[at:])
    return b"".join(pieces)


def rewrite_same_size(
    data: bytes, spans: list[EndpointSpan], new_address: Callable[[EndpointSpan], tuple[str, int]]
) -> tuple[bytes, int] | None:
    """``data`` changed without changing its size, for a response whose first bytes are
    already on their way to the client (a large Fetch answer streamed as it comes):
    ``(new data, offset of the first changed byte)``, the data itself when nothing
    changes, or None when it cannot be done.

    An endpoint whose new host has the length of the old one is rewritten in place.
    Otherwise the tagged field holding it (Fetch's ``node_endpoints``, KIP-951 leader
    hints) is renumbered to a tag this version does not define: clients skip unknown
    tags, so they lose the hints (and refresh Metadata, which the proxy rewrites) and
    never use a broker's own address: its bytes stay in the answer, under a tag no client
    reads. An endpoint outside any tagged field: None."""
    edits: list[tuple[int, bytes]] = []  # (offset, same-size replacement)
    hidden: dict[int, Tagged] = {}
    for sp in spans:
        host, port = new_address(sp)
        if (host, port) == (sp.host, sp.port):
            continue
        raw = host.encode()
        old = data[sp.host_start : sp.host_end]
        if (
            len(raw) <= len(old)
            and old.endswith(sp.host.encode())
            and len(raw) == len(sp.host.encode())
        ):
            edits.append((sp.host_end - len(raw), raw))
            edits.append((sp.port_start, port.to_bytes(4, "big", signed=True)))
        elif sp.tagged and sp.tagged[0].tag_start >= 0:
            t = sp.tagged[0]
            hidden[t.tag_start] = t
        else:
            return None
    for t in hidden.values():
        width = t.size_start - t.tag_start
        unknown = _unknown_tag(width, t.known_tags)
        if unknown is None:
            return None
        edits.append((t.tag_start, uvarint(unknown)))
    if not edits:
        return data, len(data)
    out = bytearray(data)
    for at, new in edits:
        out[at : at + len(new)] = new
    return bytes(out), min(at for at, _ in edits)


def _unknown_tag(width: int, known: tuple[int, ...]) -> int | None:
    """A tag number of ``width`` uvarint bytes that the struct does not define."""
    top = (1 << (7 * width)) - 1
    for tag in range(top, top - 64, -1):
        if tag not in known and len(uvarint(tag)) == width:
            return tag
    return None
