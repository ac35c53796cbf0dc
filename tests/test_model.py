"""KafkaMessage's hand-written ``__init__`` against the dataclass it stands for."""

from __future__ import annotations

import dataclasses
import inspect

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
