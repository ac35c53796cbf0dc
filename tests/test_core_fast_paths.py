"""The connection core's one-call paths (issue 43) against the calls they stand for:
``Framer.whole`` and ``Framer.whole_body`` against ``Framer.feed`` (the same frames, the
same framer state after),
``Correlator.first`` against ``Correlator.response`` (the same request finished, the
same state after) and ``Correlator.usual`` against ``Correlator.request``, on random streams: whole messages, pieces, bad sizes, holes, budgets
given up, reused and acks=0 correlation ids."""

from __future__ import annotations

import copy
import random
import struct

import pytest

from kdissect.stream.correlation import Correlator
from kdissect.stream.framing import MAX_MESSAGE, Framer, _Cut


def _state(f: Framer) -> tuple:
    def plain(v):
        if isinstance(v, _Cut):
            return tuple(getattr(v, n) for n in _Cut.__slots__)
        return v

    return tuple(plain(getattr(f, n)) for n in Framer.__slots__ if n != "_boundary") + (
        f.pending,
        f.position(),
    )


def _frames(frames) -> list:
    return [(f.offset, f.data, f.truncated, f.pieces, f.holes, f.budget) for f in frames]


def _chunks(rng: random.Random) -> list:
    """(offset, data or None for a hole of len, len) chunks of a random stream."""
    out, offset = [], 0
    for _ in range(rng.randrange(1, 40)):
        size = rng.choice([0, 1, 7, 20, 300])
        msg = struct.pack(">i", size) + bytes(rng.randrange(256) for _ in range(size))
        roll = rng.random()
        if roll < 0.05:
            msg = struct.pack(">i", -5) + msg[4:]  # a size that cannot be one
        elif roll < 0.08:
            msg = msg[:2]  # less than a size
        if rng.random() < 0.6 or len(msg) < 2:
            pieces = [msg]
        else:
            cut = rng.randrange(1, len(msg))
            pieces = [msg[:cut], msg[cut:]]
        for p in pieces:
            if rng.random() < 0.05:
                out.append((offset, None, rng.randrange(1, 30)))
                offset += out[-1][2]
            out.append((offset, p, len(p)))
            offset += len(p)
        if rng.random() < 0.1:  # a piece joined with the next message's start
            out.append((offset, b"\x00\x00", 2))
            offset += 2
    return out


def _boundary(buf: bytearray, pos: int) -> bool:
    return len(buf) - pos >= 4 and 0 <= struct.unpack_from(">i", buf, pos)[0] <= 300


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_whole_is_feed():
    rng = random.Random(43)
    taken = whole_bodies = 0
    for _ in range(3000):
        # (a small largest message too: sizes of 300 are then over it)
        most = rng.choice([MAX_MESSAGE, MAX_MESSAGE, 100])
        a, b = Framer(_boundary, max_message=most), Framer(_boundary, max_message=most)
        if rng.random() < 0.1:
            a.begun_inside(True)
            b.begun_inside(True)
        for offset, data, n in _chunks(rng):
            if data is None:
                assert _frames(a.gap(offset, n)) == _frames(b.gap(offset, n))
            else:
                # (whole, or whole_body with a whole message's bytes less its size)
                one = len(data) >= 4 and struct.unpack_from(">i", data)[0] == len(data) - 4
                if one and rng.random() < 0.5:
                    probe = copy.copy(a)  # (whole sets only _base and _want)
                    expect = probe.whole(data, offset)
                    took = a.whole_body(data[4:], offset + 4)
                    assert took == (expect is not None)
                    assert _state(a) == _state(probe)
                    whole_bodies += took
                    body = data[4:] if took else None
                else:
                    body = a.whole(data, offset)
                if body is None:
                    got = _frames(a.feed(data, offset))
                else:
                    taken += 1
                    got = [(offset + 4, body, None, None, None, False)]
                assert got == _frames(b.feed(data, offset))
            if rng.random() < 0.05:
                assert _frames([x for x in [a.give_up()] if x]) == _frames(
                    [x for x in [b.give_up()] if x]
                )
            assert _state(a) == _state(b)
        assert _frames(a.close()) == _frames(b.close())
    assert taken > 5000 and whole_bodies > 1000, (taken, whole_bodies)


def _pstate(c: Correlator) -> tuple:
    return (
        [(p.correlation_id, p.seq, p.expected, p.ts) for p in c._order.values()],
        {k: [p.seq for p in v] for k, v in c._by_id.items()},
        [p.seq for p in c._acks0 or ()],
        c._seq,
    )


def test_first_is_response():
    rng = random.Random(45)
    firsts = 0
    for _ in range(2000):
        a, b = Correlator(max_pending=rng.choice([3, 4096])), Correlator()
        b.max_pending = a.max_pending
        ts = 0.0
        for _ in range(rng.randrange(1, 60)):
            ts += rng.random() * 2
            corr = rng.randrange(6)
            if rng.random() < 0.55:
                expected = rng.random() > 0.1
                pa, fa = a.request(corr, corr, expected, ts)
                pb, fb = b.request(corr, corr, expected, ts)
                assert [p.seq for p in fa] == [p.seq for p in fb] and pa.seq == pb.seq
            else:
                p = a.first(corr)
                if p is None:
                    ma, fa = a.response(corr, ts)
                    got = (ma and ma.pending.seq, ma and [q.seq for q in ma.earlier])
                    got_f = [q.seq for q in fa]
                else:
                    firsts += 1
                    got, got_f = (p.seq, []), []
                mb, fb = b.response(corr, ts)
                assert got == (mb and mb.pending.seq, mb and [q.seq for q in mb.earlier])
                assert got_f == [q.seq for q in fb]
            assert _pstate(a) == _pstate(b)
    assert firsts > 1000, firsts


def test_usual_is_request():
    """``Correlator.usual`` adds a request exactly as ``request`` would, or declines."""
    rng = random.Random(46)
    usuals = 0
    for _ in range(2000):
        a, b = Correlator(max_pending=rng.choice([3, 4096])), Correlator()
        b.max_pending = a.max_pending
        ts = 0.0
        for _ in range(rng.randrange(1, 60)):
            ts += rng.random() * 2
            corr = rng.randrange(6)
            if rng.random() < 0.55:
                expected = rng.random() > 0.1
                pa = a.usual(corr, corr, ts) if expected else None
                if pa is None:
                    pa, fa = a.request(corr, corr, expected, ts)
                    ra = pa.reused
                else:
                    usuals += 1
                    fa, ra = [], False
                pb, fb = b.request(corr, corr, expected, ts)
                assert [p.seq for p in fa] == [p.seq for p in fb]
                assert (pa.seq, pa.expected, pa.ts, ra) == (pb.seq, pb.expected, pb.ts, pb.reused)
            else:
                ma, fa = a.response(corr, ts)
                mb, fb = b.response(corr, ts)
                assert (ma and ma.pending.seq, ma and [q.seq for q in ma.earlier]) == (
                    mb and mb.pending.seq,
                    mb and [q.seq for q in mb.earlier],
                )
                assert [q.seq for q in fa] == [q.seq for q in fb]
            assert _pstate(a) == _pstate(b)
    assert usuals > 1000, usuals


def test_at_rest_is_where_whole_body_takes_any_message():
    """``Framer.at_rest`` (the compiled pass takes a connection only there) says where
    ``whole_body`` would take a whole message of any size, and ``passed`` leaves the
    state ``whole_body`` leaves."""
    rng = random.Random(47)
    rests = 0
    for _ in range(600):
        most = rng.choice([MAX_MESSAGE, MAX_MESSAGE, 100])
        a = Framer(_boundary, max_message=most)
        if rng.random() < 0.1:
            a.begun_inside(True)
        for offset, data, n in _chunks(rng):
            if data is None:
                a.gap(offset, n)
            elif (body := a.whole(data, offset)) is None:
                a.feed(data, offset)
            at = a.at_rest()
            if at is None:
                continue
            rests += 1
            for size in (0, 9, 300):
                body = bytes(rng.randrange(256) for _ in range(size))
                probe, moved = copy.copy(a), copy.copy(a)
                assert probe.whole_body(body, at + 4)
                moved.passed(at + 4 + size)
                assert _state(moved) == _state(probe)
    assert rests > 1000, rests


def _items(c: Correlator) -> tuple:
    """A correlator's state by its items (``_pstate`` less the sequence numbers; and
    less ``reused``, read only by the caller of the ``request`` that made it)."""
    return (
        [(p.correlation_id, p.item, p.expected, p.ts) for p in c._order.values()],
        {k: [p.item for p in v] for k, v in c._by_id.items()},
        [p.item for p in c._acks0 or () if p.seq in c._order],
    )


def test_plain_requests_taken_and_pended_again_pair_alike():
    """``Correlator.plain`` (the compiled pass takes a connection's pending requests only
    then): what it returns, closed and pended again by ``usual`` in order (the pass's
    hand-back), pairs every later request and answer as the correlator left alone."""
    rng = random.Random(48)
    taken = 0
    for _ in range(1500):
        a = Correlator(max_pending=rng.choice([3, 4096]))
        item = 0
        ts = 0.0
        for _ in range(rng.randrange(1, 60)):
            ts += rng.random() * 2
            corr = rng.randrange(6)
            if rng.random() < 0.55:
                item += 1
                expected = rng.random() > 0.1
                if a.usual(corr, item, ts) is None:
                    a.request(corr, item, expected, ts)
            else:
                a.response(corr, ts)
            waiting = a.plain()
            if waiting is None:
                continue
            assert waiting == list(a._order.values())
            assert all(p.expected for p in waiting)
            assert len({p.correlation_id for p in waiting}) == len(waiting)
            left = copy.deepcopy(a)
            for p in a.close():
                assert a.usual(p.correlation_id, p.item, p.ts) is not None
            assert _items(a) == _items(left)
            taken += 1
            for _ in range(5):  # the same pairing after
                corr = rng.randrange(6)
                ma, fa = a.response(corr, ts)
                mb, fb = left.response(corr, ts)
                assert (ma and ma.pending.item, ma and [q.item for q in ma.earlier]) == (
                    mb and mb.pending.item,
                    mb and [q.item for q in mb.earlier],
                )
                assert [q.item for q in fa] == [q.item for q in fb]
                assert _items(a) == _items(left)
    assert taken > 1000, taken
