"""The compiled Avro reader (native/src/avro.rs, values_schema/avro_text.py) against the
Python one it mirrors (values_schema/avro_fast.py): where the compiled reader answers,
its JSON text is ``json.dumps`` of the Python reader's value, byte for byte, with the
same end and value count; it may decline (then the Python reader runs), never differ.
fastavro writes the values and is the oracle for what they mean."""

from __future__ import annotations

import io
import json
import random

import fastavro
import pytest

from kdissect.protocol.values_schema import json_value
from kdissect.protocol.values_schema.avro_fast import compile_reader
from kdissect.protocol.values_schema.avro_text import compiled_reader, native_class
from kdissect.protocol.values_schema.fast import JsonText, Unfit, dumps, value_json, value_text
from kdissect.schemas_source import parse_schema
from tests.fuzz.harness import mutate
from tests.support.avro_random import WIDE, encoded
from tests.test_values_schema import ORDER, ORDER_VALUE, OneSchema, avro_bytes, framed

# fields whose values the compiled reader may decline by design: decimals that round or
# pass 128 bits, UUIDs not spelled canonically (Python's UUID() takes braces, "urn:"...)
DECLINES = {"dec", "dec0", "decf", "id"}


def readers(schema: dict):
    parsed, named = parse_schema(json.dumps(schema), "avro").parsed
    compiled = compiled_reader(parsed, named)
    assert compiled is not None, "the Rust extension is built by ./scripts/test"
    return compile_reader(parsed, named), compiled


def compare(py, compiled, data: bytes) -> str:
    """'same', 'declined' (Python reads it, the compiled reader does not) or 'neither'."""
    try:
        tally = [0]
        value, end = py(data, 0, tally)
        want = (json.dumps(value), end, tally[0])
    except Exception:
        want = None
    try:
        got = compiled.read(data, 0)
    except ValueError:
        return "declined" if want is not None else "neither"
    assert want is not None, f"only the compiled reader reads {data.hex()}"
    assert got == want, data.hex()
    return "same"


def test_compiled_reader_is_built_and_kdissect_pure_turns_it_off(monkeypatch):
    assert native_class() is not None
    monkeypatch.setenv("KDISSECT_PURE", "1")
    assert native_class() is None


@pytest.mark.parametrize("field", [f["name"] for f in WIDE["fields"]])
def test_each_type_reads_as_the_python_reader_reads_it(field: str):
    f = next(f for f in WIDE["fields"] if f["name"] == field)
    # the other named types the field may use, defined first
    others = [g for g in WIDE["fields"] if g["name"] in ("a", "e") and g is not f]
    schema = {**WIDE, "fields": others + [f]}
    py, compiled = readers(schema)
    rng = random.Random(field)
    seen = {"same": 0, "declined": 0, "neither": 0}
    for _ in range(300):
        seen[compare(py, compiled, encoded(rng, schema))] += 1
    if field not in DECLINES:
        assert seen["declined"] == 0, seen
    assert seen["same"] >= 60, seen


def test_orders_read_alike_and_as_fastavro_reads_them():
    from tests.test_values_real import _orders

    py, compiled = readers(ORDER)
    writer = fastavro.parse_schema(ORDER)
    for value in [ORDER_VALUE, *_orders(100)]:
        data = avro_bytes(ORDER, value)
        assert compare(py, compiled, data) == "same"
        text, end, _ = compiled.read(data, 0)
        oracle = fastavro.schemaless_reader(io.BytesIO(data), writer)
        assert json.loads(text) == json_value(oracle) and end == len(data)


def test_damaged_values_are_declined_or_read_alike():
    py, compiled = readers(WIDE)
    rng = random.Random(28)
    seeds = [encoded(rng, WIDE) for _ in range(40)]
    seen = {"same": 0, "declined": 0, "neither": 0}
    for _ in range(2000):
        seen[compare(py, compiled, mutate(rng, rng.choice(seeds), 4))] += 1
    # 70-bit varints, union and enum indexes out of range, strings past the end...
    for data in (b"\xff" * 9 + b"\x7f", b"\x80" * 11, b"\x02\x00", b"\x0a"):
        for schema in (
            "long",
            ["null", "int"],
            {"type": "enum", "name": "E", "symbols": ["A"]},
            {"type": "map", "values": "null"},
            "string",
            "boolean",
        ):
            p, c = readers(
                {"type": "record", "name": "R", "fields": [{"name": "x", "type": schema}]}
            )
            seen[compare(p, c, data)] += 1
    assert seen["same"] and seen["neither"], seen


def test_json_lines_take_the_text_and_splice_it():
    order = OneSchema(parse_schema(json.dumps(ORDER), "avro"))
    payload = framed(1, avro_bytes(ORDER, ORDER_VALUE))
    text, schema_id = value_text(order, payload, "value")
    assert isinstance(text, JsonText) and schema_id == 1
    value, _ = value_json(order, payload, "value")
    record = {"value": text, "key": "k", "tricky": '"@@kdissect-value-0@@"'}
    assert dumps([record]) == json.dumps([{**record, "value": value}])
    assert value_text(order, payload, "value")[0] is text  # kept: decoded once
    with pytest.raises(Unfit):
        value_text(order, payload + b"\x00", "value")  # trailing bytes


def test_only_a_json_lines_writer_gets_json_text():
    """The filter into values hands body_values a batch_records callback too, and must
    get values it can walk, not JsonText."""
    from kdissect.protocol import Options
    from kdissect.protocol.values import _schema_values, _State
    from kdissect.render.records import json_bytes

    options = Options(values=OneSchema(parse_schema(json.dumps(ORDER), "avro")))
    payload = framed(1, avro_bytes(ORDER, ORDER_VALUE))
    for text_values in (False, True):
        s = _State(json_bytes, options)
        s.batch_records, s.text_values = [].extend, text_values
        records = [{"key": b"k", "value": payload, "headers": []}]
        _schema_values(records, s)
        value = records[0]["value"]
        assert isinstance(value, JsonText) == text_values
        assert (json.loads(value.text) if text_values else value) == json_value(ORDER_VALUE)
