"""The correlator's and framer's rules, on hand-built inputs (real traffic is in
test_real_clients and test_captures)."""

import struct

from kdissect.protocol import decode_request, peek_request_header
from kdissect.protocol.message import produce_acks
from kdissect.stream.correlation import Correlator
from kdissect.stream.framing import Framer, chain


def test_duplicate_ids_pair_with_latest_unanswered_and_are_flagged():
    c: Correlator[str] = Correlator()
    first, _ = c.request(5, "first")
    second, _ = c.request(5, "second")
    assert not first.reused and second.reused
    got, _ = c.response(5)
    assert got.item == "second" and got.out_of_order  # "first" still waits
    got, _ = c.response(5)
    assert got.item == "first" and not got.out_of_order
    assert c.response(5) == (None, [])


def test_acks_zero_expects_nothing_but_pairs_if_answered():
    c: Correlator[str] = Correlator()
    c.request(7, "produce acks=0", expected=False)
    assert not c.waiting_for(7)
    c.request(7, "metadata")
    got, finished = c.response(7)
    assert got.item == "metadata" and got.expected  # the one expecting an answer wins
    # answered in order: the earlier acks=0 request will get no answer now
    assert [p.item for p in finished] == ["produce acks=0"] and len(c) == 0


def test_acks_zero_answered_is_one_match():
    c: Correlator[str] = Correlator()
    c.request(1, "produce acks=0", expected=False, ts=10.0)
    got, finished = c.response(1, ts=10.001)
    assert got.item == "produce acks=0" and not got.expected and finished == []


def test_acks_zero_requests_are_not_kept_forever():
    c: Correlator[int] = Correlator()
    for i in range(100_000):  # a producer with acks=0, never answered
        _, finished = c.request(i, i, expected=False, ts=i * 0.001)
    assert len(c) <= 5000  # those older than ACKS0_WAIT are finished
    c.request(200_000, -1, ts=100.0)
    assert c.waiting_for(200_000)  # requests expecting answers still pair
    assert c.response(200_000)[0].item == -1


def test_pending_is_bounded():
    c: Correlator[int] = Correlator(max_pending=10)
    pushed = [p.item for i in range(15) for p in c.request(i, i)[1]]
    assert pushed == [0, 1, 2, 3, 4] and len(c) == 10


def produce_request(version: int, acks: int, txn: str | None) -> bytes:
    head = struct.pack(">hhih", 0, version, 1, 1) + b"c"
    if version >= 9:
        head += b"\x00"  # empty tagged fields
        t = b"\x00" if txn is None else bytes([len(txn) + 1]) + txn.encode()
        return head + t + struct.pack(">hi", acks, 1000) + b"\x01\x00"
    t = (
        b""
        if version < 3
        else (struct.pack(">h", -1) if txn is None else struct.pack(">h", len(txn)) + txn.encode())
    )
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
    out = [m for i in range(len(stream)) for m in f.feed(stream[i : i + 1])]
    assert [m.data for m in out] == msgs
    assert [m.offset for m in out] == [4, 8 + len(msgs[0])]
    assert f.pending == 0 and f.error is None
    bad = Framer()
    bad.feed(b"\xff\xff\xff\xff")
    assert "implausible message size" in bad.error
    assert chain(stream) == [(m.offset, m.offset + len(m.data)) for m in out]
    assert chain(stream + b"\x00") is None
