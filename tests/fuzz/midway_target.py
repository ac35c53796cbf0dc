"""The fuzzer's target for connections seen without their start (issue 36): two byte
streams made of real Kafka messages (requests one way, answers the other), cut at a
random point and damaged, through the client-side decision, the TLS record-chain
search, the framer begun inside a message and the orphan guesser. Nothing may escape,
no message found at an unconfirmed start may exceed what a broker accepts, and a
record chain found must be two chained record headers. Kept apart from harness.py so
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
        last = framer.close()
        for i, f in enumerate(frames + ([last] if last is not None else [])):
            assert len(f.data) <= UNSURE_MAX
            if side == 1 and i < 3:
                guesser.guess(1, f.data)
