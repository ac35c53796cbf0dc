"""The compiled read of message values (native/src/values.rs through
kdissect/protocol/values_native.py) against the generated Python readers, its reference:
on every message of every capture under captures/ and on damaged copies of them, the
compiled read gives the same dict (same keys in the same order, same types: a bool is not
an int) or None, never a value where the Python readers bail."""

from __future__ import annotations

import random

import pytest

from kdissect.protocol import Options
from kdissect.protocol.values import BatchHeads, _records
from kdissect.protocol.values_native import program
from tests.fuzz.msgvalues_target import compiled_read, damaged, messages, python_read, same
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()


def test_the_compiled_read_is_built():
    """./scripts/test builds the extension (cargo): without it the tests below would
    compare nothing."""
    assert program(3, 12, "request", _records, BatchHeads) is not None


_MESSAGES: list = []


def captured() -> list:
    if not _MESSAGES:
        _MESSAGES.extend(messages(CAPTURES))
    return _MESSAGES


OPTIONS = {
    "batches": Options(records="batches"),
    "records": Options(records=True),
    "raw": Options(records=False),
}
CONVS = {"none": lambda b: None, "hex": bytes.hex}


@pytest.mark.parametrize("records", list(OPTIONS))
@pytest.mark.parametrize("conv", list(CONVS))
def test_every_captured_message_reads_alike(records, conv):
    options, convert = OPTIONS[records], CONVS[conv]
    compiled = 0
    kinds = set()
    for data, direction, key, version in captured():
        want = python_read(data, direction, key, version, options, convert)
        got = compiled_read(data, direction, key, version, options, convert)
        assert got != "no program", (key, version, direction)
        compiled += got is not None
        kinds.add((key, version, direction))
        # the compiled read may leave a message to the Python readers, never differ
        assert got is None or same(got, want), (key, version, direction, got, want)
        assert want is None or got is not None, ("compiled gave up", key, version, direction)
    assert compiled > 3000 and len(kinds) > 150, (compiled, len(kinds))


def test_damaged_messages_read_as_python_reads_them():
    """Cut and bit-flipped copies of real messages: the compiled read returns exactly what
    the Python readers return, None included."""
    rng = random.Random(43)
    options = OPTIONS["batches"]
    sample = rng.sample(captured(), min(3000, len(captured())))
    both = 0
    for data, direction, key, version in sample:
        for _ in range(3):
            d = damaged(rng, data)
            want = python_read(d, direction, key, version, options, bytes.hex)
            got = compiled_read(d, direction, key, version, options, bytes.hex)
            assert got is None or same(got, want), (key, version, direction, d.hex())
            assert (got is None) == (want is None), (key, version, direction, d.hex())
            both += got is not None
    assert both > 1000, both  # (some damage leaves a readable message)


def test_same_tells_types_and_orders_apart():
    assert not same({"a": True}, {"a": 1}) and not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})


def test_pure_env_leaves_the_python_readers(monkeypatch):
    """KDISSECT_PURE=1: no compiled program (what the pure-Python reference runs)."""
    from kdissect.protocol import values_native

    from kdissect.protocol import native_ext

    monkeypatch.setenv("KDISSECT_PURE", "1")
    native_ext.refresh()  # as a run starts
    assert values_native.program(1, 16, "response", _records, BatchHeads) is None
