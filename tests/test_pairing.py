"""The correlator's and framer's rules, on hand-built inputs (real traffic is in
test_real_clients and test_captures)."""

import struct

from kdissect.protocol import decode_request, peek_request_header
from kdissect.stream.framing import Framer
from kdissect.stream.pairing import Correlator, produce_acks


def test_duplicate_ids_pair_with_latest_unanswered():
    c: Correlator[str] = Correlator()
    c.request(5, "first")
    c.request(5, "second")
    assert c.response(5).item == "second"
    assert c.response(5).item == "first"
    assert c.response(5) is None


def test_acks_zero_expects_nothing_but_pairs_if_answered():
    c: Correlator[str] = Correlator()
    c.request(7, "produce acks=0", expected=False)
    assert c.unanswered() == [] and not c.waiting_for(7)
    c.request(7, "metadata")
    got = c.response(7)
    assert got.item == "metadata" and got.expected      # the one expecting an answer wins
    late = c.response(7)
    assert late.item == "produce acks=0" and not late.expected


def produce_request(version: int, acks: int, txn: str | None) -> bytes:
    head = struct.pack(">hhih", 0, version, 1, 1) + b"c"
    if version >= 9:
        head += b"\x00"                                  # empty tagged fields
        t = b"\x00" if txn is None else bytes([len(txn) + 1]) + txn.encode()
        return head + t + struct.pack(">hi", acks, 1000) + b"\x01\x00"
    t = b"" if version < 3 else (struct.pack(">h", -1) if txn is None
                                 else struct.pack(">h", len(txn)) + txn.encode())
    return head + t + struct.pack(">hii", acks, 1000, 0)


def test_produce_acks_without_decoding():
    for version in (0, 3, 8, 9, 11):
        for txn in (None, "tx-1"):
            for acks in (0, 1, -1):
                data = produce_request(version, acks, txn if version >= 3 else None)
                head = peek_request_header(data)
                assert produce_acks(data, head.size, version) == acks
                assert decode_request(data).body.child("acks").value == acks


def test_framer_spans_arbitrary_chunks():
    msgs = [produce_request(3, 1, None), produce_request(9, 0, "t")]
    stream = b"".join(struct.pack(">i", len(m)) + m for m in msgs)
    f = Framer()
    out = [m for i in range(len(stream)) for m in f.feed(stream[i:i + 1])]
    assert [d for _, d in out] == msgs
    assert f.pending == 0 and f.error is None
    bad = Framer()
    list(bad.feed(b"\xff\xff\xff\xff"))
    assert "implausible message size" in bad.error
