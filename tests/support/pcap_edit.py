"""Edits of real captures for the tests of how connections are read: without their TCP
handshakes (a capture begun after the connections opened), one direction only, a request
version rewritten in place (a client newer than kdissect's tables), a port moved."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from pathlib import Path


def rewrite(src: Path, dst: Path, change: Callable[[list], Iterable]) -> Path:
    import scapy.layers.inet  # noqa: F401 - registers Ethernet/IP/TCP for the reader
    import scapy.layers.l2  # noqa: F401
    from scapy.utils import PcapReader, PcapWriter

    packets = list(PcapReader(str(src)))
    with PcapWriter(str(dst), linktype=1, sync=True) as w:  # (the captures' Ethernet)
        for p in change(packets):
            w.write(p)
    return dst


def _tcp(p):
    from scapy.layers.inet import TCP

    return p[TCP] if TCP in p else None


def without_handshakes(packets: list) -> list:
    """The capture as if begun after every connection opened: no SYN, no SYN-ACK."""
    return [p for p in packets if _tcp(p) is None or not _tcp(p).flags & 0x02]


def one_way(packets: list, sender_port: int) -> list:
    """Only the packets sent from ``sender_port`` (a broker's answers, say)."""
    return [p for p in packets if _tcp(p) is not None and _tcp(p).sport == sender_port]


def moved(packets: list, old: int, new: int) -> list:
    for p in packets:
        t = _tcp(p)
        if t is not None and old in (t.sport, t.dport):
            t.sport = new if t.sport == old else t.sport
            t.dport = new if t.dport == old else t.dport
            del t.chksum
    return packets


def first_requests_as(
    packets: list, broker_port: int, version: int, api_key: int | None = None
) -> tuple[list, int]:
    """Each connection's first request (to ``broker_port``) rewritten in place to
    ``version`` (of ``api_key`` requests only, if given): what a client newer than the
    tables sends. Returns the packets and how many requests were rewritten."""
    from scapy.packet import Raw

    seen: set[int] = set()
    changed = 0
    for p in packets:
        t = _tcp(p)
        if t is None or t.dport != broker_port or t.sport in seen or Raw not in p:
            continue
        seen.add(t.sport)
        data = bytes(p[Raw].load)
        if len(data) < 8 or (
            api_key is not None and struct.unpack_from(">h", data, 4)[0] != api_key
        ):
            continue
        p[Raw].load = data[:6] + struct.pack(">h", version) + data[8:]
        del t.chksum
        changed += 1
    return packets, changed


def begun_later(packets: list, skip: int, cut: int) -> list:
    """The capture as if begun ``skip`` data packets into every connection, ``cut``
    bytes into the next packet of each direction (inside whatever it carries: a TLS
    record, a Kafka message)."""
    from scapy.packet import Raw

    out, data_seen, trimmed = [], {}, set()
    for p in without_handshakes(packets):
        t = _tcp(p)
        if t is None or Raw not in p:
            if t is not None and t.flags & 0x05:  # FIN/RST: keep the ending
                out.append(p)
            continue
        conn = frozenset([(t.sport, t.dport)])
        key = (t.sport, t.dport)
        n = data_seen[conn] = data_seen.get(conn, 0) + 1 if conn in data_seen else 1
        if n <= skip:
            continue
        if key not in trimmed:
            trimmed.add(key)
            load = bytes(p[Raw].load)
            if len(load) <= cut:
                continue
            p[Raw].load = load[cut:]
            t.seq = (t.seq + cut) & 0xFFFFFFFF
            del t.chksum
            if hasattr(p.payload, "len"):
                del p.payload.len
                del p.payload.chksum
        out.append(p)
    return out


def reordered(packets: list, seed: int, share: float = 0.1) -> tuple[list, int]:
    """The packets locally out of order, timestamps kept (what several capture queues
    or a merge give): about ``share`` of them each moved 1-4 places later, by a seeded
    draw. Returns the packets and how many moved."""
    import random

    rng, out, moved, i = random.Random(seed), list(packets), 0, 0
    while i < len(out) - 1:
        if rng.random() < share:
            j = min(i + rng.randint(1, 4), len(out) - 1)
            out.insert(j, out.pop(i))
            moved, i = moved + 1, j + 1
        else:
            i += 1
    return out, moved


def copies_swapped(packets: list) -> tuple[list, int]:
    """Each retransmitted segment's later copy moved just before its first copy (a
    retransmission read first): returns the packets and how many were moved."""
    out, first, moved = list(packets), {}, 0
    for p in list(out):
        t = _tcp(p)
        if t is None or not len(t.payload):
            continue
        key = (t.sport, t.dport, t.seq, len(t.payload))
        if key not in first:
            first[key] = p
        elif p.time > first[key].time:
            out.remove(p)
            out.insert(out.index(first[key]), p)
            moved += 1
    return out, moved


def ended_inside_first_request(packets: list, broker_port: int, keep: int) -> tuple[list, int]:
    """The capture as if it ended ``keep`` bytes into the first request to
    ``broker_port`` (a client that reset mid-request, or tcpdump stopped): the packets
    before it, then its first ``keep`` bytes. Returns the packets and the cut packet's
    number (1-based, as tshark counts)."""
    from scapy.packet import Raw

    for n, p in enumerate(packets):
        t = _tcp(p)
        if t is not None and t.dport == broker_port and Raw in p:
            p[Raw].load = bytes(p[Raw].load)[:keep]
            del t.chksum
            if hasattr(p.payload, "len"):
                del p.payload.len
                del p.payload.chksum
            return packets[: n + 1], n + 1
    raise ValueError(f"no request to port {broker_port}")
