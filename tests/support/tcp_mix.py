"""Seeded captures of several Kafka-framed connections with the faults a capture has:
segments of every size, some reordered, retransmitted or lost, connections seen without
their SYN, cut streams, a bad size now and then, FIN or RST. The bytes are made up (an
ApiVersions header and noise); what they exercise is reassembly and framing, compared
between the compiled path and the pure-Python one (tests/test_native.py)."""

from __future__ import annotations

import random
import struct

_SIZES = (1, 2, 3, 4, 5, 7, 50, 500, 1448, 1448, 1448, 4000, 20000)
_BODIES = (0, 1, 3, 5, 20, 100, 700, 3000, 9000, 40000)
SYN, FIN, RST, PSH_ACK = 0x02, 0x11, 0x14, 0x18


def _packet(src: tuple, dst: tuple, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack(
        ">HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0
    )
    ip = struct.pack(
        ">BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, bytes(src[0]), bytes(dst[0])
    )
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


def _message(rng: random.Random, corr: int) -> bytes:
    n = rng.choice(_BODIES)
    body = struct.pack(">hhi", 18, 0, corr) + rng.randbytes(n - 8) if n >= 8 else bytes(n)
    size = -5 if rng.random() < 0.02 else len(body)  # a size no message has, now and then
    return struct.pack(">i", size) + body


def mixed_capture(seed: int) -> bytes:
    """A pcap (Ethernet, microseconds) of 1-5 connections to port 9092."""
    rng = random.Random(seed)
    conns = []
    for c in range(rng.randint(1, 5)):
        ends = (([10, 0, 0, 1 + c], 40000 + c), ([10, 0, 0, 100], 9092))
        sides = []
        for _ in range(2):
            data = b"".join(_message(rng, i) for i in range(rng.randint(1, 8)))
            if rng.random() < 0.2:
                data = data[: rng.randrange(len(data) + 1)]  # the stream is cut
            pieces, pos = [], 0
            while pos < len(data):
                n = rng.choice(_SIZES)
                pieces.append((pos, data[pos : pos + n]))
                pos += n
            sides.append((rng.randrange(1 << 32), len(data), pieces))
        steps = [(0, "syn"), (1, "synack")] if rng.random() < 0.8 else []
        steps += [(d, piece) for d in (0, 1) for piece in sides[d][2]]
        steps += [(0, "fin" if rng.random() < 0.8 else "rst"), (1, "fin")]
        conns.append((ends, sides, steps))
    order = []
    waiting = {c: list(conn[2]) for c, conn in enumerate(conns)}
    while waiting:
        c = rng.choice(list(waiting))
        steps = waiting[c]
        if len(steps) > 1 and rng.random() < 0.1:
            steps[0], steps[1] = steps[1], steps[0]  # reordered
        order.append((c, *steps.pop(0)))
        if rng.random() < 0.05 and not isinstance(order[-1][2], str):
            order.append(order[-1])  # retransmitted
        if not steps:
            del waiting[c]
    ts, records = 1000.0, []
    for c, d, what in order:
        ends, sides = conns[c][0], conns[c][1]
        src, dst = ends[d], ends[1 - d]
        isn, length, _ = sides[d]
        other = sides[1 - d][0]
        ts += rng.random() * 0.001
        if what == "syn":
            p = _packet(src, dst, isn - 1, 0, SYN, b"")
        elif what == "synack":
            p = _packet(src, dst, isn - 1, other, SYN | 0x10, b"")
        elif what in ("fin", "rst"):
            p = _packet(src, dst, isn + length, other, FIN if what == "fin" else RST, b"")
        elif rng.random() < 0.03:
            continue  # lost
        else:
            p = _packet(src, dst, isn + what[0], other, PSH_ACK, what[1])
        records.append(struct.pack("<IIII", int(ts), int(ts % 1 * 1e6), len(p), len(p)) + p)
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1) + b"".join(records)


def handed_mid_batch(pad: int) -> bytes:
    """A pcap (Ethernet, microseconds) for the compiled reassembler's headroom test: one
    connection whose request and response (50,000 bytes each, announced) arrive 500
    bytes at a time, each pair in a read block of its own (4096 bytes: ACKs fill them; a
    new connection's SYN makes each block's events); then a request segment the snap
    length cut, the data after the hole (so the bytes tracked for the request go to
    Python), 3000 more request bytes, and another connection's whole request. ``pad``
    ACKs before the cut segment move where the read blocks fall."""
    client, broker, other = ([10, 0, 0, 1], 40000), ([10, 0, 0, 100], 9092), [10, 0, 0, 7]
    c, s = 1000, 5_000_000
    records: list[bytes] = []

    def add(src: tuple, dst: tuple, seq: int, ack: int, flags: int, payload: bytes, cut: int = 0):
        p = _packet(src, dst, seq, ack, flags, payload)
        if cut:  # the IP length says ``cut`` bytes more than were captured
            p = p[:16] + struct.pack(">H", 40 + len(payload) + cut) + p[18:]
        ts = 1000.0 + len(records) * 0.0001
        records.append(struct.pack("<IIII", int(ts), int(ts % 1 * 1e6), len(p), len(p) + cut) + p)

    add(client, broker, c - 1, 0, SYN, b"")
    add(broker, client, s - 1, c, SYN | 0x10, b"")
    add(client, broker, c, s, PSH_ACK, struct.pack(">ihhi", 50000, 18, 0, 1) + bytes(88))
    add(broker, client, s, c + 100, PSH_ACK, struct.pack(">ii", 50000, 1) + bytes(92))
    c, s = c + 100, s + 100
    for i in range(6):
        add(client, broker, c, s, PSH_ACK, bytes(500))
        add(broker, client, s, c + 500, PSH_ACK, bytes(500))
        c, s = c + 500, s + 500
        for _ in range(60):
            add(client, broker, c, s, 0x10, b"")
        add((other, 50000 + i), ([10, 0, 0, 8], 9999), 77, 0, SYN, b"")
    for _ in range(pad):
        add(client, broker, c, s, 0x10, b"")
    add(client, broker, c, s, PSH_ACK, bytes(10), cut=100)
    add(client, broker, c + 110, s, PSH_ACK, bytes(10))
    add(client, broker, c + 120, s, PSH_ACK, bytes(3000))
    add(client, broker, c + 3120, s, PSH_ACK, bytes(100))
    second = ([10, 0, 0, 2], 40001)
    add(second, broker, 99, 0, SYN, b"")
    add(second, broker, 100, 0, PSH_ACK, struct.pack(">ihhi", 8, 18, 0, 7))
    for _ in range(30):  # (the scanner hands packets on 16 behind: its time-order window)
        add(client, broker, c + 3220, s, 0x10, b"")
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1) + b"".join(records)


def answer_begun_then_bad_request(pad: int) -> bytes:
    """A pcap (Ethernet, microseconds) for the compiled pass's hand-back where a first
    piece waits: one connection on the Kafka port whose first exchange (a Metadata v1
    request and its answer) comes in a read block of its own (4096 bytes: ACKs fill
    them), so the pass takes it; then a second request, the first 10 bytes of its
    answer, and from the client a size no message has (the pass hands back there); ACKs
    end the block before the answer is whole, so its first piece's place is filled when
    the events are taken: the hand-back there comes before the other. ``pad`` ACKs
    before the bad size move where the read blocks fall."""
    client, broker = ([10, 0, 0, 1], 40000), ([10, 0, 0, 100], 9092)
    c, s = 1000, 5_000_000
    records: list[bytes] = []

    def add(src: tuple, dst: tuple, seq: int, ack: int, flags: int, payload: bytes) -> None:
        p = _packet(src, dst, seq, ack, flags, payload)
        ts = 1000.0 + len(records) * 0.0001
        records.append(struct.pack("<IIII", int(ts), int(ts % 1 * 1e6), len(p), len(p)) + p)

    def acks(n: int) -> None:
        for _ in range(n):
            add(client, broker, c, s, 0x10, b"")

    def request(corr: int) -> bytes:
        body = struct.pack(">hhih", 3, 1, corr, 1) + b"c" + struct.pack(">i", -1)
        return struct.pack(">i", len(body)) + body

    def answer(corr: int) -> bytes:
        body = struct.pack(">i", corr) + bytes(40)
        return struct.pack(">i", len(body)) + body

    add(client, broker, c - 1, 0, SYN, b"")
    add(broker, client, s - 1, c, SYN | 0x10, b"")
    for corr in (1, 2):
        m = request(corr)
        add(client, broker, c, s, PSH_ACK, m)
        c += len(m)
        a = answer(corr)
        add(broker, client, s, c, PSH_ACK, a)
        s += len(a)
        acks(90)
    m = request(3)
    add(client, broker, c, s, PSH_ACK, m)
    c += len(m)
    a = answer(3)
    add(broker, client, s, c, PSH_ACK, a[:10])
    acks(pad)
    add(client, broker, c, s + 10, PSH_ACK, struct.pack(">i", -5) + bytes(4))
    c += 8
    acks(90)
    add(broker, client, s + 10, c, PSH_ACK, a[10:])
    s += len(a)
    acks(40)
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1) + b"".join(records)


def unanswered_requests(connections: int, requests: int) -> bytes:
    """A pcap (Ethernet, microseconds) of ``connections`` connections on the Kafka port,
    each opened (SYN, SYN-ACK) and then sending ``requests`` Metadata v1 requests in
    turns, none answered (a capture of one direction only): the pending requests of
    every connection grow past what the compiled pass takes."""
    broker = ([10, 0, 0, 100], 9092)
    records: list[bytes] = []

    def add(src: tuple, dst: tuple, seq: int, ack: int, flags: int, payload: bytes) -> None:
        p = _packet(src, dst, seq, ack, flags, payload)
        ts = 1000.0 + len(records) * 0.0001
        records.append(struct.pack("<IIII", int(ts), int(ts % 1 * 1e6), len(p), len(p)) + p)

    clients = [([10, 0, 1, 1], 40000 + i) for i in range(connections)]
    for client in clients:
        add(client, broker, 999, 0, SYN, b"")
        add(broker, client, 4999, 1000, SYN | 0x10, b"")
    sent = [1000] * connections
    for corr in range(1, requests + 1):
        body = struct.pack(">hhih", 3, 1, corr, 1) + b"c" + struct.pack(">i", -1)
        m = struct.pack(">i", len(body)) + body
        for i, client in enumerate(clients):
            add(client, broker, sent[i], 5000, PSH_ACK, m)
            sent[i] += len(m)
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1) + b"".join(records)
