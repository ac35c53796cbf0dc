"""Lean reads (a summary's enrichment, issue 43): bodies read by the compiled values
decoder holding only the fields enrichment, facts and diagnoses read
(``enrich.read_names``; error codes and records always), the rest read for their checks
only. On every message of every capture and on damaged copies, the lean read reads
exactly the messages the whole read reads and holds the whole read's kept fields; every
exchange of every capture gets the same facts, findings and status either way."""

from __future__ import annotations

import random
from pathlib import Path

from kdissect.protocol.values import plain_reader
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream import enrich as enrich_module
from kdissect.stream.engine import Engine
from kdissect.stream.sink import CallbackSink
from tests.fuzz.msgvalues_target import (
    compiled_read,
    damaged,
    lean_read,
    messages,
    pruned,
    run_msgvalues,
    same,
)
from kdissect.protocol import Options
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()
_BATCHES = Options(records="batches")
_NONE = lambda b: None  # noqa: E731

_MESSAGES: list = []


def captured() -> list:
    if not _MESSAGES:
        _MESSAGES.extend(messages(CAPTURES))
    return _MESSAGES


def _check(data: bytes, direction: str, key: int, version: int) -> bool:
    whole = compiled_read(data, direction, key, version, _BATCHES, _NONE)
    lean = lean_read(data, direction, key, version)
    if whole == "no program" or lean == "no program":
        # (enrichment reads those kinds with body_values: embedded structures)
        assert lean == "no program", (key, version, direction)
        assert plain_reader(key, version, direction, _BATCHES) is None
        return False
    assert (lean is None) == (whole is None), (key, version, direction, data.hex())
    if lean is None:
        return False
    want = pruned(whole, key, version, direction)
    assert same(lean, want), (key, version, direction, lean, want)
    return True


def test_names_read_are_found():
    """The names the code reads bodies by are among those kept (a few of each module)."""
    names = enrich_module.read_names()
    for n in ("throttle_time_ms", "api_keys", "min_version", "max_wait_ms"):  # enrich
        assert n in names
    for n in ("topic_id", "partition_index", "topic_name", "record_count"):  # facts
        assert n in names
    for n in ("replica_state", "fetch_offset", "high_watermark", "producer_id"):  # diagnoses
        assert n in names
    for n in ("partition_responses", "topic_data", "log_append_time_ms", "members"):
        assert n in names
    assert "Exception" not in names and "__name__" not in names  # (builtins are not read)


def test_lean_reads_are_the_whole_reads_pruned():
    read = 0
    for data, direction, key, version in captured():
        read += _check(data, direction, key, version)
    assert read > 3000, read


def test_lean_reads_of_damaged_messages():
    """Cut and bit-flipped copies: read (or declined) exactly as the whole read."""
    rng = random.Random(45)
    sample = rng.sample(captured(), min(3000, len(captured())))
    read = 0
    for data, direction, key, version in sample:
        for _ in range(3):
            read += _check(damaged(rng, data), direction, key, version)
    assert read > 1000, read


def test_the_fuzz_target_compares_lean_reads():
    rng = random.Random(7)
    for data, direction, key, version in rng.sample(captured(), 200):
        head = key.to_bytes(2, "big", signed=True) + bytes([version, direction == "response"])
        run_msgvalues(head + data)


def _outcome(capture: Path) -> list:
    got: list = []
    Engine(CaptureFiles([str(capture)]), CallbackSink(got.append)).run()
    return [(ex.status, ex.findings, ex.facts) for ex in got]


def test_every_exchange_is_enriched_alike(monkeypatch):
    """Every capture: the facts, findings and status of each exchange with lean reads are
    those with whole ones."""
    lean = {c: _outcome(c) for c in CAPTURES}
    leaned = []
    real = enrich_module.lean_reader

    def counted(*args):
        got = real(*args)
        leaned.append(got is not None)
        return got

    monkeypatch.setattr(enrich_module, "lean_reader", counted)
    again = {c: _outcome(c) for c in CAPTURES}
    assert again == lean
    assert sum(leaned) > 100, "lean reads were made"
    monkeypatch.setattr(
        enrich_module,
        "lean_reader",
        lambda key, version, d, options, keep: plain_reader(key, version, d, options),
    )
    for capture in CAPTURES:
        assert _outcome(capture) == lean[capture], capture.name
