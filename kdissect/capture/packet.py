"""Link layer -> IP -> TCP, with struct on bytes (measured: scapy is far slower for
this; see benchmarks/capture_read.py)."""

from __future__ import annotations

import struct
from ..protocol.plain import Compared

LINKTYPE_NAMES = {
    0: "BSD loopback",
    1: "Ethernet",
    12: "raw IP",
    101: "raw IP",
    108: "OpenBSD loopback",
    113: "Linux cooked (SLL)",
    228: "raw IPv4",
    229: "raw IPv6",
    276: "Linux cooked (SLL2)",
}
SUPPORTED = frozenset(LINKTYPE_NAMES)
_ETH_IPV4, _ETH_IPV6, _VLAN_TAGS = 0x0800, 0x86DD, (0x8100, 0x88A8, 0x9100)


class Segment(Compared):
    """A TCP segment's addresses, numbers, flags and payload."""

    __slots__ = _fields = (
        "src",
        "sport",
        "dst",
        "dport",
        "seq",
        "ack",
        "flags",
        "payload",
        "missing",
    )

    def __init__(
        self,
        src: str,
        sport: int,
        dst: str,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        missing: int,
    ):  # payload bytes on the wire that the capture cut off (snaplen)
        self.src, self.sport, self.dst, self.dport = src, sport, dst, dport
        self.seq, self.ack, self.flags, self.payload, self.missing = (
            seq,
            ack,
            flags,
            payload,
            missing,
        )


FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
# version/IHL, total length, flags/fragment offset, protocol, addresses
_IPV4 = struct.Struct(">BxHxxHxBxx4s4s")
_TCP = struct.Struct(">HHIIH")


def _ip_of(linktype: int, data: bytes) -> tuple[int, int] | None:
    """(ethertype-like IP version marker, offset of the IP header)."""
    if linktype == 1:
        if len(data) < 14:
            return None
        etype, off = struct.unpack_from(">H", data, 12)[0], 14
        while etype in _VLAN_TAGS and len(data) >= off + 4:
            etype, off = struct.unpack_from(">H", data, off + 2)[0], off + 4
        return etype, off
    if linktype == 113:
        if len(data) < 16:
            return None
        return struct.unpack_from(">H", data, 14)[0], 16
    if linktype == 276:
        if len(data) < 20:
            return None
        return struct.unpack_from(">H", data, 0)[0], 20
    if linktype in (0, 108):
        if len(data) < 4:
            return None
        family = struct.unpack_from("<I", data)[0]
        if family > 0xFFFF:
            family = struct.unpack_from(">I", data)[0]
        return (_ETH_IPV4 if family == 2 else _ETH_IPV6 if family in (10, 24, 28, 30) else -1), 4
    if linktype in (12, 101, 228, 229):
        if not data:
            return None
        return (_ETH_IPV4 if data[0] >> 4 == 4 else _ETH_IPV6), 0
    return None


def tcp_segment(linktype: int, data: bytes, orig_len: int) -> Segment | None:
    """The TCP segment in a captured frame, or None (not IP/TCP, or too short)."""
    if linktype == 1 and len(data) >= 34 and data[12] == 8 and data[13] == 0:
        etype, off = _ETH_IPV4, 14  # most captures: Ethernet, IPv4, no VLAN
    else:
        found = _ip_of(linktype, data)
        if found is None:
            return None
        etype, off = found
    if etype == _ETH_IPV4:
        if len(data) < off + 20:
            return None
        vihl, total, frag, proto, src, dst = _IPV4.unpack_from(data, off)
        ihl = (vihl & 0x0F) * 4
        if proto != 6 or frag & 0x1FFF or ihl < 20:
            return None
        ip_end = off + total if total else len(data)
        tcp = off + ihl
    elif etype == _ETH_IPV6:
        if len(data) < off + 40:
            return None
        plen, nxt = struct.unpack_from(">HB", data, off + 4)
        src, dst = data[off + 8 : off + 24], data[off + 24 : off + 40]
        tcp = off + 40
        while nxt in (0, 43, 60) and len(data) >= tcp + 8:  # hop-by-hop, routing, dest opts
            nxt, hlen = data[tcp], (data[tcp + 1] + 1) * 8
            tcp += hlen
        if nxt != 6:
            return None
        ip_end = off + 40 + plen
    else:
        return None
    if len(data) < tcp + 20:
        return None
    sport, dport, seq, ack, doff_flags = _TCP.unpack_from(data, tcp)
    start = tcp + ((doff_flags >> 12) * 4)
    have_end = min(ip_end, len(data))
    payload = data[start:have_end] if start < have_end else b""
    missing = max(0, ip_end - max(have_end, start))
    cache = _ADDR_CACHE
    return Segment(
        cache.get(src) or _addr(src),
        sport,
        cache.get(dst) or _addr(dst),
        dport,
        seq,
        ack,
        doff_flags & 0x3F,
        payload,
        missing,
    )


_ADDR_CACHE: dict[bytes, str] = {}


def _addr(raw: bytes) -> str:
    s = _ADDR_CACHE.get(raw)
    if s is None:
        import ipaddress  # only for a new address: not at start-up

        s = str(ipaddress.ip_address(raw))
        if len(_ADDR_CACHE) < 65536:
            _ADDR_CACHE[raw] = s
    return s
