"""native/src/produce.rs's produce_quiet against its reference, ``Diagnoses._produce``:
where it says a Produce is quiet, ``_produce`` adds no finding and keeps nothing (on every
Produce of every repo capture and on random bodies); and it does say so of the usual
Produce (else it saves nothing)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from kdissect.protocol import native_ext
from kdissect.protocol.native_ext import compiled
from kdissect.protocol.values import BatchHeads
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream import diagnoses as diagnoses_module
from kdissect.stream.diagnoses import SKEW_S, Diagnoses
from kdissect.stream.engine import Engine
from kdissect.stream.enrich import read_names
from kdissect.stream.model import Exchange, KafkaMessage
from kdissect.stream.sink import CallbackSink

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap")) + sorted((ROOT / "captures").glob("*.pcapng"))
QUIET = compiled("produce_quiet")
pytestmark = pytest.mark.skipif(QUIET is None, reason="no compiled extension")


def _state(d: Diagnoses) -> Any:
    """Everything the diagnoses keep (every attribute, in order), as text: a finding or
    a state _produce gains later is compared without this test changing."""
    return repr(sorted((k, repr(v)) for k, v in vars(d).items()))


def _says_nothing(d: Diagnoses, ex: Exchange, body: Any, answer: Any) -> bool:
    """Whether ``_produce`` adds no finding and keeps nothing of this Produce."""
    before, out = _state(d), []
    d._produce(ex, body, answer, {}, out)
    return not out and _state(d) == before


def test_quiet_produces_of_the_captures_say_nothing(monkeypatch):
    """Every Produce of every capture: quiet only where _produce says nothing (run with
    the state the capture built so far: the sequences it follows)."""
    quiet = loud = 0
    real = Diagnoses._produce

    def check(self, ex, body, answer, topic_ids, out):
        nonlocal quiet, loud
        assert ex.request is not None
        said, before, found = QUIET(body, answer, ex.request.ts, SKEW_S), _state(self), len(out)
        real(self, ex, body, answer, topic_ids, out)
        if said:
            assert len(out) == found and _state(self) == before, (body, answer)
            quiet += 1
        else:
            loud += 1

    # (the names lean reads keep, found in _produce's code: before it is replaced)
    read_names()
    monkeypatch.setattr(Diagnoses, "_produce", check)
    # every Produce reaches _produce (the reference), asked beside it
    # (and not bound again as a run starts: native_ext.refresh)
    monkeypatch.setattr(diagnoses_module, "_PRODUCE_QUIET", None)
    monkeypatch.setattr(
        native_ext, "_BOUND", [b for b in native_ext._BOUND if b[1] != "_PRODUCE_QUIET"]
    )
    for capture in CAPTURES:
        Engine(CaptureFiles([str(capture)]), CallbackSink(lambda ex: None)).run()
    assert quiet >= 10 and loud >= 100, (quiet, loud)


_ODD: list[Any] = [None, True, False, 2.0, "2", -1, 0, 2, 8, 9, 2**63, -(2**63) - 1, [], {}]


def _value(rng: random.Random, usual: Any) -> Any:
    return usual if rng.random() < 0.6 else rng.choice([*_ODD, usual + 1, usual - 1])


def _body(rng: random.Random, ts_ms: int) -> Any:
    batches = []
    for _ in range(rng.randint(0, 3)):
        b: dict[str, Any] = {
            "magic": _value(rng, 2),
            "attributes": _value(rng, rng.choice([0, 8, 1])),
            "max_timestamp": _value(
                rng, ts_ms + rng.choice([0, 299_999, 300_001, -300_001, 10**12])
            ),
            "producer_id": _value(rng, rng.choice([-1, -1, 0, 7])),
            "producer_epoch": _value(rng, 0),
            "base_sequence": _value(rng, rng.choice([-1, 0, 5])),
            "record_count": _value(rng, 1),
        }
        for k in list(b):
            if rng.random() < 0.05:
                del b[k]
        batches.append(b if rng.random() < 0.95 else rng.choice(_ODD))
    records: Any = BatchHeads(batches, 100) if rng.random() < 0.7 else batches
    if rng.random() < 0.05:
        records = tuple(batches)
    part: Any = {"index": _value(rng, 0), "records": records}
    topic: Any = {"name": rng.choice(["t", None, 3]), "partition_data": [part]}
    if rng.random() < 0.05:
        topic = rng.choice(_ODD)
    body: Any = {"topic_data": [topic] if rng.random() < 0.95 else rng.choice(_ODD)}
    return body if rng.random() < 0.95 else rng.choice(_ODD)


def _answer(rng: random.Random, ts_ms: int) -> Any:
    part: Any = {
        "index": 0,
        "error_code": _value(rng, 0),
        "log_append_time_ms": _value(rng, rng.choice([-1, -1, ts_ms, ts_ms + 10**9])),
    }
    topic: Any = {"name": rng.choice(["t", None]), "partition_responses": [part]}
    answer: Any = {"responses": [topic] if rng.random() < 0.95 else rng.choice(_ODD)}
    return answer if rng.random() < 0.9 else rng.choice(_ODD)


def test_quiet_random_produces_say_nothing():
    rng = random.Random(43)
    ts = 1_700_000_000.123456
    quiet = 0
    for _ in range(20_000):
        d = Diagnoses()
        req = KafkaMessage(0, 1, "request", ts, 1, 4, b"", 0, 9, 1, "c")
        resp = KafkaMessage(1, 1, "response", ts + 0.001, 2, 4, b"", 0, 9, 1)
        ex = Exchange(req, resp, ("10.0.0.1", 5000), ("10.0.0.2", 9092), 1)
        ts_ms = int(ts * 1000)
        body, answer = _body(rng, ts_ms), _answer(rng, ts_ms)
        if rng.random() < 0.1:
            answer = None
        try:
            said = QUIET(body, answer, ts, SKEW_S)
        except Exception as e:  # it never raises: it says False
            raise AssertionError((body, answer)) from e
        if said:
            quiet += 1
            assert _says_nothing(d, ex, body, answer), (body, answer)
    assert quiet > 2000, quiet


def test_a_list_that_iterates_otherwise_is_left_to_produce():
    """A list subclass whose iteration is its own (not values.BatchHeads) may yield other
    batches than it holds: not quiet, whatever it holds."""
    ts = 1_700_000_000.0
    loud = {"magic": 2, "attributes": 0, "max_timestamp": 0, "producer_id": 5}

    class Other(list):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            return iter([loud])

    def body(records: Any) -> Any:
        return {"topic_data": [{"name": "t", "partition_data": [{"records": records}]}]}

    quiet = {"magic": 2, "attributes": 0, "max_timestamp": int(ts * 1000), "producer_id": -1}
    assert QUIET(body(BatchHeads([quiet], 10)), None, ts, SKEW_S)
    assert not QUIET(body(Other()), None, ts, SKEW_S)
    assert not QUIET(body(Other([quiet])), None, ts, SKEW_S)
