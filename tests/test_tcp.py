"""TCP reassembly rules on hand-built segments (the real-capture versions of these cases
are in test_captures: reordering, drops, snaplen, mid-stream starts, wrap-around)."""

from __future__ import annotations

from kdissect.capture.packet import ACK, FIN, SYN, Segment
from kdissect.capture.tcp import Reassembler

CLIENT, BROKER = ("10.0.0.1", 50000), ("10.0.0.2", 9092)


class Sink:
    def __init__(self):
        self.events = []

    def data(self, conn, direction, offset, payload, ts, frame):
        self.events.append(("data", conn.index, direction, offset, payload))

    def gap(self, conn, direction, offset, length, ts, frame):
        self.events.append(("gap", conn.index, direction, offset, length))

    def closed(self, conn):
        self.events.append(("closed", conn.index))

    def stream(self, conn=1, direction=0) -> bytes:
        return b"".join(
            e[4] for e in self.events if e[0] == "data" and e[1] == conn and e[2] == direction
        )


def seg(
    seq: int, payload: bytes = b"", flags: int = ACK, src=CLIENT, dst=BROKER, missing: int = 0
) -> Segment:
    return Segment(src[0], src[1], dst[0], dst[1], seq & 0xFFFFFFFF, 0, flags, payload, missing)


def feed(segments) -> Sink:
    sink = Sink()
    r = Reassembler(sink, client_hint=lambda s, d: d[1] == 9092)
    for i, s in enumerate(segments):
        r.segment(s, float(i), i + 1)
    r.flush()
    return sink


def test_retransmission_overlap_and_reordering():
    isn = 1000
    sink = feed(
        [
            seg(isn, flags=SYN),
            seg(isn + 1, b"abcd"),
            seg(isn + 9, b"ijkl"),
            seg(isn + 1, b"abcd"),
            seg(isn + 3, b"cdefgh"),
            seg(isn + 13, b"mn"),
        ]
    )
    assert sink.stream() == b"abcdefghijklmn"
    assert not [e for e in sink.events if e[0] == "gap"]


def test_sequence_wrap_around():
    isn = 2**32 - 3
    sink = feed(
        [seg(isn, flags=SYN), seg(isn + 1, b"ab"), seg(isn + 3, b"cdef"), seg(isn + 7, b"gh")]
    )
    assert sink.stream() == b"abcdefgh"


def test_mid_stream_start_and_gap_at_the_end():
    sink = feed([seg(5000, b"hello"), seg(5010, b"world")])  # no SYN; 5 bytes never seen
    assert sink.events[:2] == [("data", 1, 0, 0, b"hello"), ("gap", 1, 0, 5, 5)]
    assert sink.stream() == b"helloworld"


def test_snaplen_cut_is_a_known_size_hole():
    sink = feed([seg(0, flags=SYN), seg(1, b"abc", missing=7), seg(11, b"z")])
    assert ("gap", 1, 0, 3, 7) in sink.events and sink.stream() == b"abcz"


def test_port_reuse_starts_a_new_connection():
    first = [
        seg(100, flags=SYN),
        seg(101, b"one"),
        seg(104, flags=FIN | ACK),
        seg(7000, flags=FIN | ACK, src=BROKER, dst=CLIENT),
    ]
    second = [seg(900000, flags=SYN), seg(900001, b"two")]
    sink = feed(first + second)
    assert sink.stream(1) == b"one" and sink.stream(2) == b"two"
    assert ("closed", 1) in sink.events


def test_client_side_from_syn_and_from_port():
    sink = feed([seg(1, flags=SYN, src=BROKER, dst=CLIENT)])  # odd, but SYN decides
    r = Reassembler(Sink(), client_hint=lambda s, d: d[1] == 9092)
    r.segment(seg(1, b"x", src=BROKER, dst=CLIENT), 0.0, 1)  # no SYN: the port decides
    conn = next(iter(r.conns.values()))
    assert conn.a == CLIENT and conn.b == BROKER
    assert sink.events == [("closed", 1)]
