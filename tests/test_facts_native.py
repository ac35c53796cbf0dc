"""The compiled facts walk (native/src/facts.rs, ``facts.compiled_plan``) against its
reference, ``facts._collect_planned``: on the body of every message of every capture under
captures/ (as the values decoder reads it for a summary and for JSON lines) and on damaged
copies of those bodies (values of the wrong type, bools for ints, str subclasses, huge
ints, odd batch heads), the same Facts -- topics in the same order, partitions, errors and
where, records, bytes -- the same topic ids learned, and the same exception if any."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from kdissect.protocol import Options, native_ext
from kdissect.protocol.values import BatchHeads, body_values, plain_reader
from kdissect.stream import facts as facts_module
from kdissect.stream.facts import Facts, _collect_planned, compiled_plan, python_plan
from tests.fuzz.msgvalues_target import messages
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()

_BODIES: list = []


def bodies() -> list[tuple[Any, Any, dict[Any, Any]]]:
    """(python plan, compiled plan, body) of every planned message of the captures."""
    if not _BODIES:
        plans: dict = {}
        for data, direction, key, version in messages(CAPTURES):
            kind = (key, version, direction)
            if kind not in plans:
                py = python_plan(*kind)
                plans[kind] = (py, compiled_plan(py))
            py, fast = plans[kind]
            if fast is None:
                continue
            for options, conv in (
                (Options(records="batches"), lambda b: None),
                (Options(records=True), bytes.hex),
            ):
                body = body_values(data, direction, key, version, options, conv)
                if body is not None:
                    _BODIES.append((py, fast, body))
    return _BODIES


def shape(f: Facts) -> tuple:
    """Everything of a Facts, the topics' order and the values' types included."""
    return (
        [(t, sorted(ps), [type(p) for p in ps]) for t, ps in f.topics.items()],
        f.records,
        type(f.records),
        f.errors,
        f.error_sites,
        f.record_bytes,
        type(f.record_bytes),
    )


def both(py: Any, fast: Any, body: Any, ids: dict[str, str]) -> tuple:
    """(outcome of the reference, outcome of the compiled walk): facts and ids, or the
    exception's type."""
    out = []
    for walk in (
        lambda f, i: _collect_planned(body, py, f, None, i),
        lambda f, i: fast.walk(body, f, i),
    ):
        f, i = Facts(), dict(ids)
        try:
            walk(f, i)
        except Exception as e:  # compared: the same failure on both sides
            out.append(type(e))
            continue
        out.append((shape(f), list(i.items())))
    return out[0], out[1]


def test_the_compiled_walk_is_built():
    """./scripts/test builds the extension: without it the tests below compare nothing."""
    assert isinstance(
        facts_module.body_plan(1, 18, "request"), type(compiled_plan(python_plan(1, 18, "request")))
    )
    assert compiled_plan(python_plan(1, 18, "request")) is not None


@pytest.mark.parametrize("known", [False, True])
def test_every_captured_body_walks_alike(known):
    """``known``: topic ids already learned (a capture's later messages), else none."""
    ids: dict[str, str] = {}
    if known:  # every id the captures teach, some of them named "" (a falsy name)
        for py, _, body in bodies():
            _collect_planned(body, py, Facts(), None, ids)
        for n, k in enumerate(list(ids)):
            if n % 3 == 0:
                ids[k] = ""
    walked = with_facts = 0
    for py, fast, body in bodies():
        want, got = both(py, fast, body, ids)
        assert got == want, body
        walked += 1
        with_facts += bool(want[0][0] or want[0][3])
    assert walked > 5000 and with_facts > 1000, (walked, with_facts)


class _Str(str):
    pass


_ODD = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2**70,
    -(2**70),
    1.5,
    "",
    "x",
    _Str("sub"),
    b"x",
    [],
    [{}],
    {},
    {"partition": 1},
    (1,),
    "00000000-0000-0000-0000-000000000000",
    "AAAAAAAAAAAAAAAAAAAAAQ",
    BatchHeads([], 0),
]


def _mutate(node: Any, rng: random.Random) -> Any:
    """A copy of ``node`` with some values swapped for ones of other types."""
    if isinstance(node, BatchHeads):
        heads = [_mutate(h, rng) for h in node]
        if rng.random() < 0.2:
            heads.append(rng.choice([{"record_count": rng.choice(_ODD)}, {}, 7, None]))
        return BatchHeads(heads, rng.choice([node.size, node.size, 2**70, "9", -5]))
    if type(node) is dict:
        out = {}
        for k, v in node.items():
            out[k] = rng.choice(_ODD) if rng.random() < 0.15 else _mutate(v, rng)
        return out
    if type(node) is list:
        return [rng.choice(_ODD) if rng.random() < 0.1 else _mutate(v, rng) for v in node]
    return node


def test_damaged_bodies_walk_alike():
    rng = random.Random(43)
    sample = bodies()[:: max(1, len(bodies()) // 1500)]
    ids = {"AAAAAAAAAAAAAAAAAAAAAQ": "known", "00000000-0000-0000-0000-000000000001": ""}
    differ = 0
    for py, fast, body in sample:
        for _ in range(4):
            damaged = _mutate(copy.deepcopy(body), rng)
            want, got = both(py, fast, damaged, ids)
            assert got == want, damaged
            differ += want != both(py, fast, body, ids)[0]
    assert differ > 100, differ  # the damage reached what the facts read


def test_kdissect_pure_set_in_a_running_process_reaches_the_plans_at_the_next_run(monkeypatch):
    """The plans kept per message kind are made again when a run starts with the other
    choice (they were kept from the first, so a test's KDISSECT_PURE outlived it)."""
    kind = (1, 18, "request")
    batches = Options(records="batches", embedded=False)
    monkeypatch.setenv(native_ext.PURE_ENV, "1")
    native_ext.refresh()
    assert type(facts_module.body_plan(*kind)) is tuple
    assert plain_reader(*kind, batches) is None  # the values readers too
    assert facts_module._COMPILED_PLAN is facts_module._NotCompiled
    monkeypatch.delenv(native_ext.PURE_ENV)
    native_ext.refresh()
    compiled = facts_module.body_plan(*kind)
    assert type(compiled) is not tuple and type(compiled) is facts_module._COMPILED_PLAN
    assert plain_reader(*kind, batches) is not None
    native_ext.refresh()  # the same choice again: what was made is kept
    assert facts_module.body_plan(*kind) is compiled


def test_pairs_walk_alike():
    """``walk_pair`` (an exchange's two bodies in one call, ``pair_facts``) against the
    reference walking one body, then the other, on the same Facts and ids: pairs of
    captured bodies (topics met again, ids learned by the first and read by the second)
    and damaged copies."""
    rng = random.Random(7)
    every = bodies()
    ids0 = {"AAAAAAAAAAAAAAAAAAAAAQ": "known"}
    for n in range(6000):
        (py0, fast0, b0), (py1, fast1, b1) = rng.choice(every), rng.choice(every)
        if n % 2:
            b0, b1 = _mutate(copy.deepcopy(b0), rng), _mutate(copy.deepcopy(b1), rng)
        out = []
        for walk in (
            lambda f, i: (
                _collect_planned(b0, py0, f, None, i),
                _collect_planned(b1, py1, f, None, i),
            ),
            lambda f, i: fast0.walk_pair(b0, fast1, b1, f, i),
        ):
            f, i = Facts(), dict(ids0)
            try:
                walk(f, i)
            except Exception as e:
                out.append((type(e), shape(f), list(i.items())))
                continue
            out.append((shape(f), list(i.items())))
        assert out[0] == out[1], (b0, b1)
