"""Display filters into decoded record values (kdissect/stream/filter_values.py): paths into
Avro values framed as Confluent's serializers frame them, schema ids, keys, plain JSON
text; in `kdissect log -Y` over a segment written by kafka-python's record encoder (the
pcap and TUI filters share the same fields: tests/test_values_real.py runs them on a
capture from the real broker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdissect.stream.filter_values import of_records
from kdissect.filters import FilterError, parse_filter
from tests.test_log import batch, run_log
from tests.test_log import jsonl as log_jsonl
from tests.test_values_real import _orders
from tests.test_values_schema import ORDER, avro_bytes, framed


@pytest.fixture()
def orders(tmp_path: Path) -> tuple[Path, Path]:
    """A partition of 6 one-record batches: Avro orders under schema 2 (keys JSON text),
    then a plain JSON value and an unframed text value."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "2.avsc").write_text(json.dumps(ORDER))
    part = tmp_path / "orders-0"
    part.mkdir()
    data = b""
    for i, v in enumerate(_orders(4)):
        data += batch(2, 0, i, [(json.dumps({"id": i}).encode(), framed(2, avro_bytes(ORDER, v)))])
    data += batch(2, 0, 4, [(b"k", b'{"customer": {"id": "c-3"}, "n": [1, 2.5]}')])
    data += batch(2, 0, 5, [(b"k", b"plain text")])
    (part / "00000000000000000000.log").write_bytes(data)
    return part, schemas


def offsets(part: Path, schemas: Path | None, flt: str) -> list[int]:
    args = ["-Y", flt, *(["--schemas", str(schemas)] if schemas else [])]
    return [o["offset"] for o in log_jsonl(str(part), *args) if o["type"] == "record"]


@pytest.mark.parametrize(
    "flt,expected",
    [
        ('record.value.customer.id == "c-3"', [3, 4]),  # Avro, and the plain JSON text
        ("record.value_schema == 2", [0, 1, 2, 3]),
        ("record.value_schema != 2", [4, 5]),
        ("record.value.qty >= 2", [2, 3]),
        ("record.value.customer.vip == true", [0, 2]),
        ('record.value.lines.sku == "s1"', [2]),  # any element of an array
        ('record.value.lines.1.sku == "s1"', [2]),  # one element, by index
        ('record.value.lines.0.sku == "s1"', []),
        ("record.value.status in {PAID, SHIPPED}", [1, 2]),  # enums by name
        ('record.value.total == "1234.56"', [0, 1, 2, 3]),  # decimals as JSON lines show them
        ('record.value.customer.address.city ~ "^city"', [0]),
        ("record.value.n == 2.5", [4]),  # an array of scalars: any
        ("record.key.id == 1", [1]),  # keys: JSON text
        ("record.value.customer", []),  # a record is no scalar
        ("record.value.no.such.field", []),
    ],
)
def test_log_filters_into_values(orders, flt: str, expected: list[int]):
    part, schemas = orders
    assert offsets(part, schemas, flt) == expected


def test_without_schemas_only_json_text_is_read(orders):
    part, _schemas = orders
    assert offsets(part, None, 'record.value.customer.id == "c-3"') == [4]
    assert offsets(part, None, "record.value_schema == 2") == []


def test_log_parquet_holds_decoded_values(orders, tmp_path: Path):
    import pyarrow.parquet as pq

    part, schemas = orders
    code, out = run_log(
        str(part), "--schemas", str(schemas), "--format", "parquet", "-o", str(tmp_path / "t")
    )
    assert code == 0, out
    records = pq.read_table(tmp_path / "t" / "records.parquet").to_pylist()
    assert [r["value_schema"] for r in records] == ["2"] * 4 + [None, None]
    assert json.loads(records[3]["value"])["customer"]["id"] == "c-3"


def test_value_field_syntax():
    f = parse_filter('record.value.a.b == "x" and record.key_schema == 3')
    assert f.needs_decoding
    assert not parse_filter("record.key_schema >= 0 or api == Produce").fields & {"api_x"}
    for bad, says in [
        ('record.value.qty > "a"', "compares numbers"),
        ("record.value.", "unknown field"),
        ("record.value_schema == x", "whole number"),
        ("record.value.t == 5ms", "number or a quoted string"),
    ]:
        with pytest.raises(FilterError, match=says):
            parse_filter(bad)


def test_paths_are_bounded_and_leaves_only():
    deep: object = 1
    for _ in range(10_000):  # no recursion on deep values
        deep = {"a": deep}
    recs = [
        {"value": deep, "value_schema": 1},
        {"value": "[" * 100_000, "key": None},  # not JSON: nothing
        {"value": {"a": [{"b": 1}, {"b": [2, 3]}, 4, None]}, "value_schema": 1},
    ]
    assert of_records(recs, "record.value." + ".".join(["a"] * 10_000)) == [1]
    assert of_records(recs, "record.value.a.b") == [1, 2, 3]
    assert of_records(recs, "record.value.a") == [4]
    assert of_records(recs, "record.value_schema") == [1, 1]


def test_schema_ids_in_apicurio_headers(tmp_path: Path):
    """Apicurio's serializers can leave the value unframed and put the schema's id in a
    header (8 bytes, big-endian): contentId, else globalId."""
    import struct

    from kdissect.protocol.context import Options
    from kdissect.protocol.values import Bail, _schema_values, _State
    from kdissect.schemas_source import Schemas

    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "12.avsc").write_text(json.dumps(ORDER))
    value = dict(_orders(1)[0], id="")  # plain Avro starting with byte 0
    raw = avro_bytes(ORDER, value)
    assert raw[0] == 0
    part = tmp_path / "orders-0"
    part.mkdir()
    head = [
        ("apicurio.value.globalId", struct.pack(">q", 99)),
        ("apicurio.value.contentId", struct.pack(">q", 12)),
    ]
    from kafka.record.memory_records import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(2, 0, 1 << 20)
    b.append(1700000000000, b"k", raw, head)
    b.append(1700000000001, b"k", raw, head[:1])  # globalId 99: no such schema
    b.close()
    (part / "00000000000000000000.log").write_bytes(bytes(b.buffer()))
    code, out = run_log(str(part), "--schemas", str(schemas), "--format", "jsonl", "--records")
    assert code == 0, out
    recs = [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]
    assert recs[0]["value_schema"] == 12 and recs[0]["value"]["customer"]["id"] == "c-0"
    assert recs[1]["value_schema"] == 99 and recs[1]["value"] == {"hex": raw.hex()}
    batch_obj = next(o for o in map(json.loads, out.splitlines()) if o["type"] == "batch")
    assert [f["code"] for f in batch_obj["findings"]] == ["value_schema_unknown"]
    # the record that has it, not its batch-mate (with --records, asked record by record)
    assert offsets(part, schemas, 'record.value.customer.id == "c-0"') == [0]
    assert offsets(part, schemas, "record.value_schema == 99") == [1]
    assert offsets(part, schemas, 'record.value.customer.id == "c-1"') == []
    # the values-only path leaves such records to the located decoder
    state = _State(bytes, Options(values=Schemas(schemas)))
    with pytest.raises(Bail):
        _schema_values(
            [{"key": b"k", "value": raw, "headers": [{"key": k, "value": v} for k, v in head]}],
            state,
        )
