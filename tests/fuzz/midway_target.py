"""The fuzzer's target for connections seen without their start (issue 36): two byte
streams made of real Kafka messages (requests one way, answers the other), cut at a
random point and damaged, through the client-side decision, the TLS record-chain
search, the framer begun inside a message and the orphan guesser. Nothing may escape,
no message found at an unconfirmed start may exceed what a broker accepts, and a
record chain found must be two chained record headers. The requests also come after a
hole and noise, in chunks cut where the noise says: the framer searches, and may take
a false start and refute it; its messages and the stretches it passed over must follow
each other in order, without overlap, inside the stream. Kept apart from harness.py so
targets added by others merge cleanly."""

from __future__ import annotations

import random
import struct
from functools import lru_cache

from . import harness as h


@lru_cache(maxsize=1)
def seeds() -> list[bytes]:
    by_kind: dict[str, list[bytes]] = {"request": [], "response": []}
    for data, direction, _, _ in h.seed_messages():
        if direction in by_kind and len(data) < 4096:
            by_kind[direction].append(struct.pack(">i", len(data)) + data)
    rng = random.Random(36)
    out = []
    for _ in range(20):
        reqs = b"".join(rng.sample(by_kind["request"], 4))
        resps = b"".join(rng.sample(by_kind["response"], 4))
        out.append(struct.pack(">I", len(reqs)) + reqs + resps)
    return out


def midway_input(rng: random.Random) -> bytes:
    data = h.mutate(rng, rng.choice(seeds()), 4)
    if len(data) > 8 and rng.random() < 0.7:  # begun inside the first message
        cut = rng.randint(0, min(64, len(data) - 8))
        data = data[:4] + data[4 + cut :]
    return data


def _after_noise(requests: bytes) -> None:
    """``requests`` after a hole and noise made from their own bytes (the noise's last
    four bytes often a size: the false start this checks), fed in chunks."""
    from kdissect.stream.connection import plausible_request
    from kdissect.stream.framing import Framer

    rng = random.Random(requests[-64:])
    noise = rng.randbytes(rng.choice((0, 10, 300, 3000)))
    if noise and rng.random() < 0.5:
        noise = noise[:-4] + struct.pack(">i", rng.choice((8, 100, 1000, 10**7)))
    stream = noise + requests
    framer = Framer(plausible_request)
    framer.gap(0, 10)
    frames, pos = [], 10
    while pos < 10 + len(stream):
        n = rng.choice((1, 13, 100, 1400, 1 << 20))
        frames += framer.feed(stream[pos - 10 : pos - 10 + n], pos)
        pos += n
    frames += framer.close()
    spans = [
        (f.offset - 4, f.offset + max([len(f.data)] + [at + len(p) for at, p in f.pieces or ()]))
        for f in frames
    ]
    spans += [(o, o + n) for o, n in framer.unread]
    end = 10
    for a, b in sorted(spans):
        assert a >= end, f"{a}-{b} overlaps what came before (to {end})"
        end = b
    assert end <= 10 + len(stream)


def run_midway(data: bytes) -> None:
    from kdissect.capture.tls.handshake import record_chain, record_header
    from kdissect.stream import direction, orphans
    from kdissect.stream.connection import plausible_request
    from kdissect.stream.framing import UNSURE_MAX, Framer

    n = struct.unpack_from(">I", data)[0] if len(data) >= 4 else 0
    client, server = data[4 : 4 + n], data[4 + n :]
    for ending in (False, True):
        direction.decide(
            ("10.0.0.1", 40000),
            ("10.0.0.2", 19092),
            [client[:256], server[:256]],
            syn=False,
            hello=None,
            ports=frozenset(),
            listeners=set(),
            servers=set(),
            detect=True,
            held=len(data),
            ending=ending,
        )
    for side in (client, server):
        at = record_chain(side)
        if at is not None:
            head = record_header(side, at)
            assert head is not None and record_header(side, at + 5 + head[2]) is not None
    guesser = orphans.Orphans()
    for side, stream in enumerate((client, server)):
        framer = Framer(plausible_request if side == 0 else (lambda buf, pos: False))
        framer.begun_inside(check=side == 0)
        frames = framer.feed(stream, 0)
        for i, f in enumerate(frames + framer.close()):
            assert len(f.data) <= UNSURE_MAX
            if side == 1 and i < 3:
                guesser.guess(1, f.data)
    _after_noise(client)
