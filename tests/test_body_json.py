"""JSON lines' body text written compiled (native/src/body_json.rs through
``protocol.values.body_json``) against its reference, the generated readers' values
encoded by ``json`` as the lines encode them: on every message of every capture under
captures/ and on damaged copies, the same text or None (never a text where the readers
hand the message over), and the record carriers of real traffic written this way."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from kdissect.protocol import Options
from kdissect.protocol.apis import FETCH, PRODUCE
from kdissect.protocol.internal import mentions_internal_topic
from tests.fuzz.msgvalues_target import messages, reference_json, written_json

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("**/*.pcap")) + sorted(
    (ROOT / "captures").glob("**/*.pcapng")
)
_MESSAGES: list = []


def captured() -> list:
    if not _MESSAGES:
        _MESSAGES.extend(messages(CAPTURES))
    return _MESSAGES


def test_every_captured_body_is_written_as_the_reference_writes_it():
    written: Counter = Counter()
    carriers: Counter = Counter()
    internal = 0  # written with internal topics' records decoded by schema
    for data, direction, key, version in captured():
        got = written_json(data, direction, key, version)
        want = reference_json(data, direction, key, version)
        if got is not None:
            assert got == want, (key, version, direction)
            written[key] += 1
            internal += mentions_internal_topic(data) and '_decoded": ' in got
        carrier = (key, direction) in ((PRODUCE, "request"), (FETCH, "response"))
        if carrier and want:
            carriers[key] += got is not None
            carriers[-key - 1] += 1  # (how many the reference reads)
    assert sum(written.values()) > 3000 and len(written) > 40, written
    # the record carriers (most of a JSON line's cost) are written here, not handed over
    # (but compressed batches), those that may carry internal topics' records too
    for key in (PRODUCE, FETCH):
        assert carriers[key] > 0.9 * carriers[-key - 1] > 300, (key, carriers)
    assert internal > 300, internal


def test_damaged_bodies_are_written_as_the_reference_writes_them_or_not_at_all():
    rng = random.Random(4343)
    pool = captured()
    carriers = [m for m in pool if (m[2], m[1]) in ((PRODUCE, "request"), (FETCH, "response"))]
    sample = rng.sample(pool, min(1500, len(pool))) + rng.sample(carriers, min(1500, len(carriers)))
    written = 0
    for data, direction, key, version in sample:
        for _ in range(3):
            b = bytearray(data)
            if rng.random() < 0.3:
                b = b[: rng.randrange(len(b))]
            elif b:
                for _ in range(rng.randint(1, 3)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            d = bytes(b)
            got = written_json(d, direction, key, version)
            if got is not None:
                assert got == reference_json(d, direction, key, version), (key, d.hex())
                written += 1
    assert written > 1000, written


def test_what_it_leaves_to_the_reference():
    """Options it does not write for: records raw or as heads, schemas for values."""
    data, direction, key, version = next(
        m for m in captured() if m[2] == PRODUCE and m[1] == "request"
    )
    assert written_json(data, direction, key, version) is not None
    for options in (Options(records="batches"), Options(records=False)):
        assert written_json(data, direction, key, version, options) is None


def test_internal_records_need_the_located_reading():
    """A message that may carry an internal topic's records is written only with the
    located reading of its records fields (``json_view.internal_records_json``)."""
    from kdissect.protocol.values import body_json

    data, direction, key, version = next(
        m
        for m in captured()
        if m[2] == FETCH
        and m[1] == "response"
        and mentions_internal_topic(m[0])
        and (written_json(*m) or "").count('_decoded": ')
    )
    assert body_json(data, direction, key, version, Options()) is None
