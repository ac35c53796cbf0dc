"""Broker addresses in responses, and the response re-encoded with other addresses.

Only the address fields change: the message is spliced at their byte ranges (with the
string length prefix, and the size of any tagged field around them, updated); every
other byte stays as the broker sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.node import Node

# responses that carry broker addresses: Produce and Fetch (KIP-951 leader hints),
# Metadata, FindCoordinator, DescribeCluster, ShareFetch, ShareAcknowledge
REWRITES = frozenset({0, 1, 3, 10, 60, 78, 79})
_ID_NAMES = ("node_id", "broker_id")


@dataclass
class Endpoint:
    node_id: int
    host: str
    port: int
    host_node: Node
    port_node: Node


def endpoints(tree: Node) -> list[Endpoint]:
    """Every (node id, host, port) in a decoded response."""
    found = []
    for node in tree.walk():
        host = node.child("host")
        port = node.child("port")
        ident = next((c for c in node.children if c.name in _ID_NAMES), None)
        if host is None or port is None or ident is None:
            continue
        if host.ktype != "string" or port.ktype != "int32" or not isinstance(host.value, str) \
                or not isinstance(ident.value, int) or not isinstance(port.value, int):
            continue
        if host.problem or port.problem:
            continue
        found.append(Endpoint(ident.value, host.value, port.value, host, port))
    return found


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(data: bytes, node: Node, value: str) -> bytes:
    """``value`` encoded as ``node``'s string was (INT16 or compact length prefix)."""
    raw = value.encode()
    old = node.value.encode()
    if node.length == 2 + len(old) and int.from_bytes(data[node.offset:node.offset + 2],
                                                      "big") == len(old):
        return len(raw).to_bytes(2, "big") + raw
    return _uvarint(len(raw) + 1) + raw


def rewrite(data: bytes, tree: Node, new_address: Callable[[Endpoint], tuple[str, int]]
            ) -> bytes | None:
    """``data`` (a response, without its size prefix, decoded as ``tree``) with each
    endpoint's host and port replaced by ``new_address(endpoint)``; None if nothing
    changes."""
    edits: list[tuple[int, int, bytes]] = []
    tagged: dict[int, Node] = {}
    for ep in endpoints(tree):
        host, port = new_address(ep)
        if (host, port) == (ep.host, ep.port):
            continue
        edits.append((ep.host_node.offset, ep.host_node.end, _string(data, ep.host_node, host)))
        edits.append((ep.port_node.offset, ep.port_node.end, port.to_bytes(4, "big", signed=True)))
        for t in tree.path_to(ep.host_node) or []:
            if t.ktype == "tagged":
                tagged[id(t)] = t
    if not edits:
        return None
    for t in tagged.values():                 # a tagged field's size covers its value
        size = t.child("_size")
        grown = sum(len(new) - (end - start) for start, end, new in edits
                    if size.end <= start and end <= t.end)
        edits.append((size.offset, size.end, _uvarint(size.value + grown)))
    out = bytearray(data)
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        out[start:end] = new
    return bytes(out)
