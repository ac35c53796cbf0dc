"""What the compiled values decoder (native/src/values.rs) holds from one read to the
next: a records field's batch heads read for a summary are each made from a copy of the
last one its program made, the values that differ set (``batch_heads``), and a string
field whose bytes are the last short string's is that str (``string``). Held to the
generated readers (the reference) on every message of every capture read in a shuffled
order (other producers, topics and batches between), whole and lean, each head handed
out then damaged by its caller (cleared, its values replaced): no head shares anything a
caller can change with another."""

from __future__ import annotations

import random

from kdissect.protocol import Options
from kdissect.protocol.values import BatchHeads
from tests.fuzz.msgvalues_target import (
    compiled_read,
    lean_read,
    messages,
    pruned,
    python_read,
    same,
)
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()
_BATCHES = Options(records="batches")
_NONE = lambda b: None  # noqa: E731


def _heads(body) -> list:
    """Every BatchHeads of a body."""
    found: list = []
    stack = [body]
    while stack:
        v = stack.pop()
        if isinstance(v, BatchHeads):
            found.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def _damage(body, rng: random.Random) -> None:
    for heads in _heads(body):
        for h in heads:
            if rng.random() < 0.5:
                h.clear()
            else:
                for k in list(h):
                    h[k] = rng.choice([None, -7, 2**70, "x", []])
                if isinstance(h.get("records"), list):
                    h["records"].append("kept?")


def test_heads_made_from_the_last_are_the_reference():
    """(the count asserted last fails without the extension: no program reads them)"""
    batched = [
        m
        for m in messages(CAPTURES)
        if b"\x02" in m[0] and m[2] in (0, 1)  # Produce, Fetch: the kinds with batches
    ]
    rng = random.Random(11)
    order = batched * 2
    rng.shuffle(order)
    compared = with_heads = 0
    for data, direction, key, version in order:
        want = python_read(data, direction, key, version, _BATCHES, _NONE)
        got = compiled_read(data, direction, key, version, _BATCHES, _NONE)
        if got == "no program" or want is None or got is None:
            continue
        assert same(got, want), (key, version, direction)
        lean = lean_read(data, direction, key, version)
        assert same(lean, pruned(want, key, version, direction)), (key, version, direction)
        compared += 1
        with_heads += any(len(h) for h in _heads(got))
        _damage(got, rng)
        _damage(lean, rng)
    assert compared > 500 and with_heads > 300, (compared, with_heads)


def test_every_message_read_in_a_shuffled_order():
    """Strings (topic names, ids, hosts...) of every kind, read after others' strings."""
    rng = random.Random(12)
    order = messages(CAPTURES)
    rng.shuffle(order)
    compared = 0
    for data, direction, key, version in order:
        want = python_read(data, direction, key, version, _BATCHES, _NONE)
        got = compiled_read(data, direction, key, version, _BATCHES, _NONE)
        if got == "no program" or want is None:
            continue
        assert got is not None and same(got, want), (key, version, direction)
        compared += 1
    assert compared > 5000, compared
