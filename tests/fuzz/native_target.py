"""The fuzz target of issue 28: mutated captures (pcap, pcapng with secrets and odd time
resolutions, gzip) through both packet paths, the compiled one and the pure-Python
reference; any difference in what they hand the engine, or in what the engine makes of
it after TCP reassembly (Rust or Python; under a random memory budget, often one small
enough that the compiled reassembler hands its state over), is a failure
(tests/support/native_check.py)."""

from __future__ import annotations

import gzip
import os
import random
import tempfile
from functools import lru_cache

from tests.support.native_check import divergence, engine_divergence, to_pcapng

from . import harness as h

_FILE: str | None = None


@lru_cache(maxsize=1)
def seeds() -> list[bytes]:
    out = []
    for data in h.seed_captures():
        out += [
            data,
            to_pcapng(data, b"CLIENT_RANDOM aa bb\n"),
            to_pcapng(data, big_endian=True, tsresol=0x86),
        ]
    return out


def native_input(rng: random.Random) -> bytes:
    data = h.mutate(rng, rng.choice(seeds()), 12)
    if rng.random() < 0.1:  # compressed, sometimes cut or damaged
        data = (
            h.mutate(rng, gzip.compress(data, 1), 2)
            if rng.random() < 0.5
            else gzip.compress(data, 1)
        )
    return data


def run_native(data: bytes) -> None:
    global _FILE
    if _FILE is None:
        fd, _FILE = tempfile.mkstemp(
            prefix="kdissect-native-",
            suffix=".pcap",
            dir="/dev/shm" if os.path.isdir("/dev/shm") else None,
        )
        os.close(fd)
    with open(_FILE, "wb") as f:
        f.write(data)
    differs = divergence(_FILE)
    assert differs is None, f"the packet paths differ: {differs}"
    budget = random.Random(data).choice([None, 1 << 20, 100_000, 20_000, 4_000])
    differs = engine_divergence(_FILE, budget)
    assert differs is None, f"the reassembly paths differ (budget {budget}): {differs}"
