"""A response re-encoded with other broker addresses.

Only the address fields change: the message is spliced at the byte ranges the
skip-scanner found (the host string with its length prefix, the port), and the size of
every tagged field around them follows; every other byte stays as the broker sent it.
"""

from __future__ import annotations

from collections.abc import Callable

from .skipscan import EndpointSpan


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(value: str, compact: bool) -> bytes:
    raw = value.encode()
    return (uvarint(len(raw) + 1) if compact else len(raw).to_bytes(2, "big")) + raw


def rewrite(data: bytes, spans: list[EndpointSpan],
            new_address: Callable[[EndpointSpan], tuple[str, int]]) -> bytes | None:
    """``data`` (a response without its size prefix) with each endpoint's host and port
    replaced by ``new_address(span)``; None if nothing changes."""
    edits: list[tuple[int, int, bytes]] = []
    regions = {}                                   # tagged fields holding an edit
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
        grown = sum(len(new) - (end - start) for start, end, new in edits
                    if t.size_end <= start and end <= t.end)
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
