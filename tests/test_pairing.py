"""The correlator's rules, on hand-built messages (real traffic is in test_real_clients)."""

import struct

from kdissect.stream.framing import Framer
from kdissect.stream.pairing import Correlator


def metadata_v0_request(corr: int) -> bytes:
    return struct.pack(">hhih", 3, 0, corr, 1) + b"c" + struct.pack(">i", 0)


def metadata_v0_response(corr: int) -> bytes:
    return struct.pack(">iii", corr, 0, 0)


def produce_v3_request(corr: int, acks: int) -> bytes:
    return struct.pack(">hhih", 0, 3, corr, 1) + b"c" + struct.pack(">hhii", -1, acks, 1000, 0)


def test_duplicate_ids_pair_with_latest_unanswered():
    c = Correlator()
    c.request(metadata_v0_request(5), 0)
    c.request(metadata_v0_request(5), 1)
    _, first = c.response(metadata_v0_response(5))
    _, second = c.response(metadata_v0_response(5))
    assert (first.index, second.index) == (1, 0)
    assert c.response(metadata_v0_response(5)) == (None, None)


def test_acks_zero_expects_nothing_but_pairs_if_answered():
    c = Correlator()
    msg = c.request(produce_v3_request(7, acks=0), 0)
    assert msg.problems == [] and c.unanswered() == []
    c.request(metadata_v0_request(7), 1)
    _, got = c.response(metadata_v0_response(7))
    assert got.index == 1 and got.expected        # the request that expects an answer wins
    resp, got = c.response(struct.pack(">ii", 7, 0))
    assert got.index == 0 and not got.expected


def test_framer_spans_arbitrary_chunks():
    stream = b"".join(struct.pack(">i", len(m)) + m
                      for m in (metadata_v0_request(1), metadata_v0_request(2)))
    f = Framer()
    out = [m for i in range(len(stream)) for m in f.feed(stream[i:i + 1])]
    assert [o for o, _ in out] == [4, 4 + len(metadata_v0_request(1)) + 4]
    assert f.pending == 0 and f.error is None
    bad = Framer()
    list(bad.feed(b"\xff\xff\xff\xff"))
    assert "implausible message size" in bad.error
