"""The fuzz target of issue 27's compiled Avro reader (native/src/avro.rs): random and
mutated Avro values of a wide schema, read by it and by the Python reader it mirrors
(values_schema/avro_fast.py); where the compiled reader answers, it must answer exactly
as ``json.dumps`` of the Python reader's value, with the same end and value count."""

from __future__ import annotations

import json
import random
from functools import lru_cache

from tests.support.avro_random import WIDE, encoded

from . import harness as h


@lru_cache(maxsize=1)
def readers() -> tuple:
    from kdissect.protocol.values_schema.avro_fast import compile_reader
    from kdissect.protocol.values_schema.avro_text import compiled_reader
    from kdissect.schemas_source import parse_schema

    parsed, named = parse_schema(json.dumps(WIDE), "avro").parsed
    compiled = compiled_reader(parsed, named)
    assert compiled is not None, "the Rust extension is not built"
    return compile_reader(parsed, named), compiled


@lru_cache(maxsize=1)
def seeds() -> list[bytes]:
    rng = random.Random(27)
    return [encoded(rng, WIDE) for _ in range(64)]


def avro_input(rng: random.Random) -> bytes:
    if rng.random() < 0.2:
        return encoded(rng, WIDE)
    return h.mutate(rng, rng.choice(seeds()), 6)


def run_avro(data: bytes) -> None:
    py, compiled = readers()
    try:
        got = compiled.read(data, 0)
    except ValueError:
        return  # declined: the Python reader decides
    tally = [0]
    value, end = py(data, 0, tally)  # raises if only the compiled reader reads it
    assert got == (json.dumps(value), end, tally[0]), "the Avro readers differ"
