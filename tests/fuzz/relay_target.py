"""The fuzzer's target for the thread forwarder's relay (issue 44: native/src/relay.rs,
``_native.Relay``), over real loopback sockets, as the proxy uses it: a client's
requests one way, a broker's answers the other, each written in pieces cut anywhere,
with messages of every size around the relay's thresholds (64 KiB: read in place and
lent to Python; the size cap; past 1 MiB: a body grown as its bytes come), answers held
whole to be rewritten (Metadata) or but their tail (Fetch v16), small display budgets,
recordings, and damage: a size no broker sends, a stream that ends inside a message, a
TLS handshake, a client that leaves.

What must hold (``check``):

- the bytes forwarded each way are the start of what was sent, unchanged (the rewrite
  here gives every answer back as it was), all of it when nothing was damaged;
- before a bad size every byte passes (a request's size prefix may have gone already),
  and the relay says where it was and what it said (REFUSED);
- every message queued for Python starts where a message starts and holds its bytes;
  every whole message forwarded was queued; a stream's unfinished message is queued
  as PARTIAL (with a recording) with the bytes that came;
- each connection ends, once (ENDED, after its two directions), within seconds, and
  gives back all the budget room its messages took.

An input is a seed: the case is drawn from it, so a saved failure replays exactly.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from kdissect.proxy import threaded
from kdissect.proxy.threaded import (
    DIRECTION_ENDED,
    ENDED,
    HOLD,
    MESSAGE,
    NOT_KAFKA_TLS,
    PARTIAL,
    REFUSED,
    TAIL,
)

ENDS_WITHIN = 20.0  # seconds a case may take to end (wall: threads and sockets)
LARGE = 64 << 10  # relay.rs IN_PLACE_AT and LENT_AT
METADATA, FETCH, API_VERSIONS, LIST_GROUPS = (3, 12), (1, 16), (18, 3), (16, 4)
TLS_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"


def relay_input(rng: random.Random) -> bytes:
    return rng.getrandbits(64).to_bytes(8, "big")


@dataclass
class Stream:
    """One direction's bytes: its messages' (start, size) and where it was damaged."""

    data: bytearray = field(default_factory=bytearray)
    starts: list[tuple[int, int]] = field(default_factory=list)
    bad: tuple[int, int] | None = None  # (offset, size) of a size the relay refuses
    truncated: int | None = None  # start of the message the stream ends inside (or at)

    def message(self, body: bytes) -> None:
        self.starts.append((len(self.data), len(body)))
        self.data += struct.pack(">i", len(body)) + body


@dataclass
class Case:
    requests: Stream
    answers: Stream
    up_cuts: list[int]
    down_cuts: list[int]
    budget: int
    lossless: bool
    tail: int
    max_message: int
    rewrite_fails: bool
    checked: bool  # the relay looks for broker addresses itself (threaded.checks)
    client_leaves: int | None  # the client closes after reading this many bytes
    tls: bool


def _size(rng: random.Random, cap: int) -> int:
    pick = rng.random()
    if pick < 0.1:
        return rng.randrange(0, 9)  # (a correlation id alone, or not even that)
    if pick < 0.4:
        return rng.randrange(0, 300)
    if pick < 0.6:
        return rng.randrange(LARGE - 16, LARGE + 16)
    if pick < 0.85:
        return rng.randrange(LARGE, 400_000)
    # the cap itself when it is 1 MiB (just under and at it); under a larger cap, beyond
    # the 1 MiB a body collected without room starts at (it grows as its bytes come)
    near = cap if cap <= 1 << 20 else (2 << 20) + 3
    return rng.randrange(near - 8, near + 1)


def _damage(rng: random.Random, s: Stream, max_message: int) -> None:
    """At most one of: a bad size appended, or the stream cut inside its last message."""
    pick = rng.random()
    if pick < 0.15:
        size = rng.choice((-1, -2, -(1 << 31), max_message + 1, (1 << 31) - 1))
        s.bad = (len(s.data), size)
        s.data += struct.pack(">i", size) + rng.randbytes(rng.randrange(0, 40))
    elif pick < 0.3 and s.starts:
        start, size = s.starts[-1]
        s.truncated = start  # (perhaps before its first byte: the peer closed instead)
        del s.data[start + rng.randrange(0, 4 + size) :]
        s.starts.pop()


def _cuts(rng: random.Random, length: int) -> list[int]:
    """Where the writes end: anywhere, and just around the large thresholds."""
    cuts = {rng.randrange(0, length + 1) for _ in range(rng.randrange(0, 12))}
    cuts |= {min(length, max(0, LARGE + rng.randrange(-6, 7))) for _ in range(rng.randrange(0, 3))}
    return sorted(cuts | {length})


def make_case(seed: bytes) -> Case:
    rng = random.Random(seed)
    max_message = rng.choice((1 << 20, 100 << 20))
    requests, answers = Stream(), Stream()
    for _ in range(rng.randrange(1, 7)):
        key, version = rng.choice((METADATA, FETCH, API_VERSIONS, LIST_GROUPS))
        corr = rng.randrange(0, 5) if rng.random() < 0.2 else rng.getrandbits(31)
        head = struct.pack(">hhih", key, version, corr, -1)
        size = rng.randrange(0, 300) if rng.random() < 0.7 else _size(rng, max_message)
        requests.message((head + rng.randbytes(max(0, size - len(head))))[:size])
        # its answer, in order (or one that answers nothing: another correlation id)
        answer_corr = corr if rng.random() < 0.9 else rng.getrandbits(31)
        size = _size(rng, max_message)
        answers.message((struct.pack(">i", answer_corr) + rng.randbytes(max(0, size - 4)))[:size])
    tls = rng.random() < 0.03
    if tls:
        requests.data[:0] = TLS_HELLO
        requests.starts = []
    _damage(rng, requests, max_message)
    _damage(rng, answers, max_message)
    up_cuts = _cuts(rng, len(requests.data))
    if tls:  # (its first read holds the record's start: the relay looks there)
        up_cuts = [c for c in up_cuts if c >= len(TLS_HELLO)]
    return Case(
        requests,
        answers,
        up_cuts,
        _cuts(rng, len(answers.data)),
        budget=rng.choice((4096, 100_000, 1 << 20, 8 << 20)),
        lossless=rng.random() < 0.3,
        tail=rng.choice((3, 8, 64, 2000, 64 << 10)),  # (64 KiB: the proxy's STREAM_TAIL)
        max_message=max_message,
        rewrite_fails=rng.random() < 0.1,
        checked=rng.random() < 0.5,
        client_leaves=rng.randrange(0, len(answers.data) + 1) if rng.random() < 0.15 else None,
        tls=tls,
    )


_listeners: list[socket.socket] = []


def _pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a loopback TCP connection (the relay needs TCP sockets)."""
    if not _listeners:
        _listeners.append(socket.create_server(("127.0.0.1", 0), backlog=16))
    server = _listeners[0]
    a = socket.create_connection(server.getsockname())
    b, _ = server.accept()
    return a, b


def _write(sock: socket.socket, data: bytes, cuts: list[int], before=lambda end: True) -> None:
    """``data`` in pieces ending at ``cuts``; ``before(end)``: may the piece up to ``end``
    go now (False: stop writing)."""
    at = 0
    try:
        for cut in cuts:
            if cut > at:
                if not before(cut):
                    return
                sock.sendall(data[at:cut])
                at = cut
    except OSError:
        pass  # (the relay closed the connection: what it took is checked)


def _shut(sock: socket.socket, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:  # (the relay closed the connection first)
        pass


def _read_all(sock: socket.socket, into: bytearray, leave_after: int | None = None) -> None:
    try:
        while leave_after is None or len(into) < leave_after:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return
            into += chunk
    except OSError:
        pass


def run_relay(seed: bytes) -> None:
    from kdissect.protocol.native_ext import compiled

    Relay = compiled("Relay")
    if Relay is None:
        raise RuntimeError("the relay target needs the compiled extension (native/)")
    case = make_case(seed)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)

    def rewrite(conn, key, version, body, sent):
        return None if case.rewrite_fails else bytes(body)

    modes = [(*METADATA, HOLD), (*FETCH, TAIL)]
    checks = threaded.checks([METADATA, FETCH]) if case.checked else []
    relay = Relay(
        wake_w, case.budget, case.lossless, modes, checks, rewrite, case.tail, 0.3, case.max_message
    )
    client, relay_client = _pair()
    relay_broker, broker = _pair()
    events: list[tuple] = []
    to_broker, to_client = bytearray(), bytearray()
    try:
        relay.start(1, relay_client.detach(), relay_broker.detach())
        # the broker answers once the requests before an answer have reached it (so that
        # the relay pairs them) or the requests stopped coming
        requests_done = threading.Event()

        def broker_reads() -> None:
            _read_all(broker, to_broker)
            requests_done.set()

        def answered_after(end: int) -> bool:
            need = _requests_before(case, end)
            while len(to_broker) < need and not requests_done.wait(0.002):
                pass
            return True

        def broker_writes() -> None:
            _write(broker, bytes(case.answers.data), case.down_cuts, answered_after)
            _shut(broker, socket.SHUT_WR)  # the broker's answers end

        def client_leaves() -> None:
            _read_all(client, to_client, case.client_leaves)
            if case.client_leaves is not None:
                _shut(client, socket.SHUT_RDWR)  # (wakes a write blocked on it)

        def client_writes() -> None:
            _write(client, bytes(case.requests.data), case.up_cuts)
            if case.requests.truncated is not None:
                _shut(client, socket.SHUT_WR)  # a client gone inside a request

        # (the events are taken from the start: with a recording, a thread waits for
        # Python to take them before it reads on, and writes to it would wait too)
        workers = [
            threading.Thread(target=f, daemon=True)
            for f in (broker_reads, broker_writes, client_leaves, client_writes)
        ]
        for w in workers:
            w.start()
        deadline = time.monotonic() + ENDS_WITHIN
        while not any(e[1] == ENDED for e in events):
            if time.monotonic() > deadline:
                raise AssertionError(f"the relay's connection did not end in {ENDS_WITHIN} s")
            time.sleep(0.002)
            events += relay.take()
            relay.display_holds(0)  # (what Python took is not held: the display is instant)
            _drain(wake_r)
        for w in workers:
            w.join(ENDS_WITHIN)
        assert relay.wait(ENDS_WITHIN) and relay.connections == 0
        events += relay.take()
        assert relay.reserved == 0, f"{relay.reserved} bytes of room never given back"
    finally:
        relay.stop()
        for s in (client, broker):
            s.close()
        # (a thread still running would write its wake-up to whatever took the fd next)
        if relay.wait(ENDS_WITHIN):
            os.close(wake_r)
            os.close(wake_w)
    check(case, bytes(to_broker), bytes(to_client), events)


def _requests_before(case: Case, end: int) -> int:
    """Bytes of the requests the broker must have before writing its answers up to
    ``end`` (or until the relay closes): every request whose answer begins there."""
    if case.tls:  # (nothing: the broker answers once the relay has refused the client)
        return 1 << 62
    begun = sum(1 for start, _ in case.answers.starts if start < end)
    whole = [start + 4 + size for start, size in case.requests.starts]
    return whole[min(begun, len(whole)) - 1] if begun and whole else 0


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _whole_in(s: Stream, passed: int) -> set[int]:
    """Body offsets of the messages wholly inside the first ``passed`` bytes."""
    return {start + 4 for start, size in s.starts if start + 4 + size <= passed}


def check(case: Case, to_broker: bytes, to_client: bytes, events: list[tuple]) -> None:
    ups, downs = case.requests, case.answers
    assert to_broker == ups.data[: len(to_broker)], "requests forwarded changed"
    assert to_client == downs.data[: len(to_client)], "answers forwarded changed"
    whole_run = (
        case.client_leaves is None
        and not case.tls
        and ups.bad is None
        and ups.truncated is None
        and downs.bad is None
        and downs.truncated is None
        and not case.rewrite_fails  # (an answer held to be rewritten closes it)
    )
    if whole_run:
        assert len(to_broker) == len(ups.data), f"{len(to_broker)} of {len(ups.data)} requests"
        assert len(to_client) == len(downs.data), f"{len(to_client)} of {len(downs.data)} answers"
    if downs.bad is not None:
        assert len(to_client) <= downs.bad[0]
    if ups.bad is not None:
        # every byte before it (its own first bytes may have gone with an earlier piece)
        assert len(to_broker) <= ups.bad[0] + 3
        if whole_answers(case) and downs.bad is None and downs.truncated is None:
            assert len(to_broker) >= ups.bad[0], f"{len(to_broker)} before {ups.bad}"
    if downs.bad is not None and whole_answers(case) and ups.bad is None and ups.truncated is None:
        assert len(to_client) == downs.bad[0], f"{len(to_client)} before {downs.bad}"
    if case.tls:
        assert to_broker == b""
    mine = [e for e in events if e[0] == 1]
    refused = {e[2]: (e[5], e[8]) for e in mine if e[1] == REFUSED}
    partial = {e[2]: (e[5], bytes(e[6])) for e in mine if e[1] == PARTIAL}
    intact_requests = ups.bad is None and ups.truncated is None
    if downs.bad is not None and whole_answers(case) and intact_requests:
        assert refused.get(1) == downs.bad, f"answers: refused {refused.get(1)}, not {downs.bad}"
    if ups.bad is not None and whole_answers(case) and not downs.bad and downs.truncated is None:
        assert refused.get(0) == ups.bad, f"requests: refused {refused.get(0)}, not {ups.bad}"
    if case.tls:
        # (nothing may have come to refuse: a client that leaves at once may shut its
        # socket before its hello is written, and a broker that ends at once ends the
        # connection, perhaps before the relay read the hello)
        told = refused.get(0)
        raced = case.client_leaves == 0 or not downs.data
        assert told == (0, NOT_KAFKA_TLS) or (raced and told is None), told
    cut = downs.truncated
    if case.lossless and cut is not None and whole_answers(case) and intact_requests:
        if 0 < len(downs.data) - cut < 8:  # (its first bytes only: certainly not read on)
            assert partial.get(1) == (cut, bytes(downs.data[cut:])), f"partial {partial.get(1)}"
    assert [e[1] for e in mine].count(ENDED) == 1 and mine[-1][1] == ENDED, "one ENDED, last"
    assert [e[1] for e in mine].count(DIRECTION_ENDED) == 1
    for side, s, passed in ((0, ups, len(to_broker)), (1, downs, len(to_client))):
        _check_side([e for e in mine if e[2] == side], case, s, passed, side)


def whole_answers(case: Case) -> bool:
    """Nothing ends the connection early on the answers' side."""
    return case.client_leaves is None and not case.rewrite_fails and not case.tls


def _check_side(events: list[tuple], case: Case, s: Stream, passed: int, side: int) -> None:
    starts = {start + 4: size for start, size in s.starts}
    queued = set()
    for _, kind, _, _, _, offset, data, _, size in events:
        data = bytes(data)
        if kind == MESSAGE:
            assert starts.get(offset) == size, f"side {side}: a message at {offset}"
            assert data == s.data[offset : offset + len(data)] and len(data) <= size
            queued.add(offset)
        elif kind == PARTIAL:
            # (a bad size's first bytes, cut off before the relay saw it whole, too)
            begun = {start for start, _ in s.starts} | {s.truncated, s.bad and s.bad[0]}
            assert case.lossless and offset in begun, f"side {side}: partial at {offset}"
            assert data == s.data[offset : offset + len(data)]
        elif kind == REFUSED:
            if size == NOT_KAFKA_TLS:
                assert case.tls and side == 0
            else:
                assert (offset, size) == s.bad, f"side {side}: refused {size} at {offset}"
    # every message forwarded whole was queued (answers: their last byte goes after)
    missing = _whole_in(s, passed) - queued
    assert not missing, f"side {side}: forwarded, not queued: {sorted(missing)[:5]}"
