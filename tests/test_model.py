"""KafkaMessage's and Facts' hand-written ``__init__`` against the dataclasses they stand
for."""

from __future__ import annotations

import dataclasses
import inspect

from kdissect.stream.facts import Facts
from kdissect.stream.model import KafkaMessage


def test_init_takes_the_fields_in_order_with_their_defaults():
    fields = dataclasses.fields(KafkaMessage)
    params = list(inspect.signature(KafkaMessage.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields):
        assert p.default == (
            inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        )


def test_init_sets_every_field_and_the_size():
    m = KafkaMessage(*range(6), b"abcd")
    assert m.size == 4 and m.status == "ok" and m.values is None
    args = list(range(6)) + [b"ab"] + [object() for _ in range(12)]
    args[14] = 9  # size, given
    m = KafkaMessage(*args)
    assert [getattr(m, f.name) for f in dataclasses.fields(KafkaMessage)] == args
    assert m == KafkaMessage(*args) and "KafkaMessage(index=0" in repr(m)


def test_facts_init_takes_the_fields_in_order_with_their_defaults():
    fields = dataclasses.fields(Facts)
    params = list(inspect.signature(Facts.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields):
        if f.default_factory is not dataclasses.MISSING:  # (None: a new one made)
            assert p.default is None and f.default is dataclasses.MISSING
            made = [getattr(Facts(), f.name) for _ in range(2)]
            assert made[0] == f.default_factory() and made[0] is not made[1]
        else:
            assert p.default == f.default


def test_facts_init_sets_every_field():
    args = [object() for _ in dataclasses.fields(Facts)]
    f = Facts(*args)
    assert [getattr(f, g.name) for g in dataclasses.fields(Facts)] == args
    assert f == Facts(*args) and "Facts(topics=" in repr(f)
    assert Facts() == Facts({}, 0, [], [], 0, None, None, None, None, False)
