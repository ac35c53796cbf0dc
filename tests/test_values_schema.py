"""Record values by schema (kdissect/protocol/values_schema): Avro, Protobuf, JSON, text,
the Confluent framing and the guesser, each value located; fastavro, protobuf and json
are the oracles (what their deserializers return must equal what kdissect decodes)."""

from __future__ import annotations

import io
import json
import struct
import time
import uuid
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest
from google.protobuf import message_factory

from kdissect.protocol.context import Budget
from kdissect.protocol.node import Node
from kdissect.protocol.values_schema import decode_one, decoded_of, json_value, plain_value
from kdissect.schemas_source import SchemaError, Schemas, compile_proto, load_file, parse_schema

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {
            "name": "total",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {
            "name": "price",
            "type": {
                "type": "fixed",
                "name": "Money",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 4,
            },
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {
            "name": "status",
            "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]},
        },
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "id", "type": "string"},
                    {"name": "vip", "type": "boolean"},
                    {
                        "name": "address",
                        "type": [
                            "null",
                            {
                                "type": "record",
                                "name": "Address",
                                "fields": [{"name": "city", "type": "string"}],
                            },
                        ],
                    },
                ],
            },
        },
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "n", "type": "long"},
                        {"name": "weight", "type": ["null", "float", "double"]},
                    ],
                },
            },
        },
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "digest", "type": {"type": "fixed", "name": "MD5", "size": 4}},
        {"name": "blob", "type": "bytes"},
        {"name": "back", "type": ["null", "Address"]},
    ],
}

ORDER_VALUE = {
    "id": "o-1",
    "qty": -3,
    "total": Decimal("1234.56"),
    "price": Decimal("-9.9900"),
    "at": datetime(2026, 11, 24, 4, 50, 1, 123000, tzinfo=timezone.utc),
    "at_us": datetime(2026, 11, 24, 4, 50, 1, 123456, tzinfo=timezone.utc),
    "day": date(2026, 11, 24),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "status": "PAID",
    "customer": {"id": "c-3", "vip": True, "address": {"city": "Zürich"}},
    "lines": [{"sku": "a", "n": 1, "weight": 1.5}, {"sku": "b", "n": 1 << 40, "weight": None}],
    "tags": {"k": "v", "ü": "x"},
    "note": None,
    "digest": b"\x00\x01\x02\x03",
    "blob": b"\xff" * 3,
    "back": {"city": "Bern"},
}

SHOP_PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; int64 n = 2; repeated Note notes = 3; }
  string id = 1;
  int32 qty = 2;
  sint64 delta = 3;
  repeated Line lines = 4;
  repeated int32 packed = 5;
  map<string, Line> by_sku = 6;
  Status status = 7;
  double price = 8;
  bytes blob = 9;
  google.protobuf.Timestamp at = 10;
  common.Customer customer = 11;
  fixed32 f32 = 12;
  sfixed64 sf64 = 13;
  bool ok = 14;
  uint64 big = 15;
  map<int32, string> names = 16;
  float ratio = 17;
  message Note { string text = 1; }
}
message Other { string x = 1; }
"""
COMMON_PROTO = """
syntax = "proto3";
package common;
message Customer { string id = 1; repeated string emails = 2; }
"""


def field_node(data: bytes, at: int = 7) -> Node:
    """A record value node as the record decoder makes it (1-byte length prefix)."""
    return Node("value", "bytes", at, len(data) + 1, data)


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def avro_bytes(schema: dict, value: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


@pytest.fixture()
def schema_dir(tmp_path: Path) -> Path:
    (tmp_path / "2.avsc").write_text(json.dumps(ORDER))
    (tmp_path / "3.proto").write_text(SHOP_PROTO)
    (tmp_path / "common.proto").write_text(COMMON_PROTO)
    (tmp_path / "4.json").write_text(json.dumps({"title": "Event", "type": "object"}))
    return tmp_path


def decode(
    data: bytes, source, topic: str = "t", role: str = "value", budget: Budget | None = None
) -> Node:
    node = field_node(data)
    decode_one(node, topic, role, source, budget or Budget(1 << 20, 100_000))
    return node


def test_avro_framed_equals_fastavro_and_is_located(schema_dir: Path):
    payload = avro_bytes(ORDER, ORDER_VALUE)
    data = framed(2, payload)
    node = decode(data, Schemas(schema_dir))
    oracle = fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(ORDER))
    decoded = decoded_of(node)
    assert decoded is not None and plain_value(decoded) == oracle == ORDER_VALUE
    assert node.findings() == []
    base = node.end - len(data)
    assert [(c.name, c.offset - base, c.length) for c in node.children[:2]] == [
        ("magic", 0, 1),
        ("schema_id", 1, 4),
    ]
    assert node.child("schema_id").value == 2 and "shop.Order" in node.note
    # every leaf's bytes are the Avro encoding of its value, at its place in the value
    city = decoded.child("customer").child("address").child("city")
    assert data[city.offset - base : city.end - base] == b"\x0eZ\xc3\xbcrich"
    assert decoded.child("customer").child("address").note.startswith("union branch 1")
    assert data[decoded.offset - base : decoded.end - base] == payload
    leaves = [n for n in decoded.walk() if not n.children]
    ends = [base + 5]
    for leaf in sorted(leaves, key=lambda n: n.offset):
        assert leaf.offset >= ends[-1] - 1 and leaf.end <= node.end
        ends.append(leaf.end)
    assert json_value(plain_value(decoded))["total"] == "1234.56"


def test_avro_hostile_values_cannot_amplify():
    schema = {"type": "array", "items": "null"}
    src = Schemas(overrides={("t", "value"): parse_schema(json.dumps(schema), "avro")})
    # a block of 2^40 nulls in 7 bytes: the node budget stops it at once
    data = b"\x80\x80\x80\x80\x80\x80\x40\x00"
    budget = Budget(1 << 20, 5_000)
    # this thread's CPU seconds: a busy machine's wall clock says more about the
    # neighbours, and the process's counts threads earlier tests left running
    t = time.thread_time()
    node = decode(data, src, budget=budget)
    assert time.thread_time() - t < 1
    assert ("value._rest", "node_budget") in [(p, c) for p, c, _ in node.findings()]
    assert sum(1 for _ in node.walk()) <= 5_100
    # a recursive type nested beyond the limit: a mismatch that says so, no recursion error
    linked = {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}
    src = Schemas(overrides={("t", "value"): parse_schema(json.dumps(linked), "avro")})
    node = decode(b"\x02" * 100_000 + b"\x00", src)
    ((path, code, why),) = node.findings()
    assert code == "value_schema_mismatch" and "nested more than" in why


def test_findings_on_crafted_bad_values(schema_dir: Path):
    src = Schemas(schema_dir)
    payload = avro_bytes(ORDER, ORDER_VALUE)
    codes = {}
    for name, data in {
        "magic": b"\x01" + payload,  # not the magic byte
        "unknown_id": framed(99, payload),  # no such schema
        "truncated": framed(2, payload[:20]),  # stops inside the record
        "trailing": framed(2, payload + b"\x01\x02"),  # bytes after the value
    }.items():
        node = decode(data, src)
        codes[name] = [(p, c) for p, c, _ in node.findings()]
    assert codes["magic"] == [("value.magic", "value_unknown_magic")]
    assert codes["unknown_id"] == [("value.schema_id", "value_schema_unknown")]
    assert codes["truncated"] == [("value._rest", "value_schema_mismatch")]
    assert codes["trailing"] == [("value._rest", "value_trailing_bytes")]
    node = decode(framed(2, payload[:20]), src)
    rest = node.child("_rest")
    assert "does not match its avro schema at byte" in rest.problem
    assert rest.end == node.end  # the rest of the value is kept, raw
    # an enum index the schema does not have: says where it stopped
    bad = {"type": "enum", "name": "E", "symbols": ["A"]}
    src2 = Schemas(overrides={("t", "value"): parse_schema(json.dumps(bad), "avro")})
    ((_, code, why),) = decode(b"\x04", src2).findings()
    assert code == "value_schema_mismatch" and "enum E has no symbol 2" in why


def proto_plain(msg) -> dict:
    """The protobuf library's reading as plain values (the oracle)."""
    out = {}
    for fd, value in msg.ListFields():
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {
                str(k): proto_plain(v) if vd.message_type else v for k, v in value.items()
            }
        elif fd.is_repeated:
            out[fd.name] = [proto_plain(v) if fd.message_type else v for v in value]
        elif fd.message_type is not None:
            out[fd.name] = proto_plain(value)
        elif fd.enum_type is not None:
            out[fd.name] = fd.enum_type.values_by_number[value].name
        else:
            out[fd.name] = value
    return out


def test_protobuf_framed_equals_protobuf_library(schema_dir: Path):
    fds = compile_proto(SHOP_PROTO, {"common.proto": COMMON_PROTO}, "shop")
    classes = message_factory.GetMessages(fds.file)
    Order = classes["shop.Order"]
    msg = Order(
        id="o-1",
        qty=-5,
        delta=-77,
        packed=[1, -2, 300],
        status=Order.SHIPPED,
        price=2.5,
        blob=b"\x00\xff",
        f32=7,
        sf64=-8,
        ok=True,
        big=1 << 63,
        ratio=0.5,
    )
    line = msg.lines.add(sku="a", n=1 << 40)
    line.notes.add(text="n1")
    line.notes.add(text="n2")
    msg.lines.add(sku="b")
    msg.by_sku["a"].sku = "a"
    msg.by_sku["z"].n = 3
    msg.names[5] = "five"
    msg.at.seconds, msg.at.nanos = 1_764_000_000, 5
    msg.customer.id = "c-3"
    msg.customer.emails.extend(["a@x", "b@x"])
    payload = msg.SerializeToString()
    src = Schemas(schema_dir)
    for wire in (b"\x00", b"\x02\x00"):  # the [0] index: shortcut and explicit
        node = decode(framed(3, wire + payload), src)
        assert node.findings() == []
        assert node.child("message_indexes").value == 1
        assert plain_value(decoded_of(node)) == proto_plain(Order.FromString(payload))
    # nested message type by index path [0, 0] (Order.Line); [1]: Other
    line_bytes = line.SerializeToString()
    node = decode(framed(3, b"\x04\x00\x00" + line_bytes), src)
    assert plain_value(decoded_of(node)) == proto_plain(Order.Line.FromString(line_bytes))
    node = decode(framed(3, b"\x02\x02" + b"\x0a\x01y"), src)
    assert plain_value(decoded_of(node)) == {"x": "y"}
    # located: the customer field spans its tag, length and message
    node = decode(framed(3, b"\x00" + payload), src)
    base = node.end - len(node.value)
    cust = decoded_of(node).child("customer")
    raw = node.value[cust.offset - base : cust.end - base]
    assert (
        raw[0] == (11 << 3 | 2) and classes["common.Customer"].FromString(raw[2:]) == msg.customer
    )
    packed = decoded_of(node).child("packed")
    assert [c.value for c in packed.children] == [1, -2, 300]
    # a bad index path and a wrong wire type are mismatches
    ((_, code, _),) = decode(framed(3, b"\x02\x08" + payload), src).findings()
    assert code == "value_schema_mismatch"
    ((_, code, why),) = decode(framed(3, b"\x00\x0d\x00\x00\x00\x00"), src).findings()
    assert code == "value_schema_mismatch" and "wire type 5" in why


def test_later_occurrences_win_as_the_libraries_read_them(schema_dir: Path):
    """A singular field or map key given again replaces the earlier one (the protobuf
    library's and json.loads's reading), in the earlier one's place."""
    fds = compile_proto(SHOP_PROTO, {"common.proto": COMMON_PROTO}, "shop")
    Order = message_factory.GetMessages(fds.file)["shop.Order"]
    parts = [
        Order(id="first", qty=1),
        Order(names={5: "five", 6: "six"}),
        Order(id="last", names={5: "FIVE"}),
        Order(qty=2),
    ]
    payload = b"".join(p.SerializeToString() for p in parts)
    decoded = decoded_of(decode(framed(3, b"\x00" + payload), Schemas(schema_dir)))
    assert plain_value(decoded) == proto_plain(Order.FromString(payload))
    assert sorted(c.name for c in decoded.child("names").children) == ["5", "6"]
    text = b'{"a": 1, "b": 2, "a": {"c": 3}, "b": null, "a": 4}'
    decoded = decoded_of(decode(framed(4, text), Schemas(schema_dir)))
    assert plain_value(decoded) == json.loads(text)
    assert [c.name for c in decoded.children] == list(json.loads(text))


def test_json_and_text(schema_dir: Path):
    doc = {"customer": {"id": "c-3", "name": "Zoë"}, "n": [1, 2.5, None, True], "e": {}}
    text = json.dumps(doc, ensure_ascii=False).encode()
    node = decode(framed(4, text), Schemas(schema_dir))
    decoded = decoded_of(node)
    assert plain_value(decoded) == json.loads(text) and node.findings() == []
    name = decoded.child("customer").child("name")
    base = node.end - len(node.value)
    assert node.value[name.offset - base : name.end - base] == '"Zoë"'.encode()
    ((_, code, _),) = decode(framed(4, b'{"a": 1,}'), Schemas(schema_dir)).findings()
    assert code == "value_schema_mismatch"


def test_guesses_without_schema():
    assert decode(b'{"a": [1, 2]}', None).note == "looks like JSON (certain; no schema)"
    assert decode("héllo world".encode(), None).note == "looks like UTF-8 text (certain; no schema)"
    pb = b"\x0a\x03abc\x10\x96\x01\x1d\x00\x00\x80\x3f"
    node = decode(pb, None)
    assert node.note == "looks like Protobuf wire format (likely; no schema)"
    assert [c.name for c in node.child("guessed").children] == ["#1", "#2", "#3"]
    assert decode(b"\xff\xfe\x00\x01\x02", None).note == "binary, format unknown (no schema)"
    assert decoded_of(decode(b'{"a": 1}', None)) is None  # a guess is not a decoding


def test_schema_files_and_errors(tmp_path: Path):
    (tmp_path / "bad.avsc").write_text(
        '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nosuch"}]}'
    )
    with pytest.raises(SchemaError, match="not a valid Avro schema"):
        load_file(tmp_path / "bad.avsc")
    (tmp_path / "bad.proto").write_text('syntax = "proto3"; message X { strin a = 1; }')
    with pytest.raises(SchemaError, match="protoc cannot compile"):
        load_file(tmp_path / "bad.proto")
    # a .desc FileDescriptorSet works as a .proto does
    fds = compile_proto(COMMON_PROTO, {}, "common")
    (tmp_path / "9.desc").write_bytes(fds.SerializeToString())
    cls = message_factory.GetMessages(fds.file)["common.Customer"]
    payload = cls(id="c-9", emails=["x"]).SerializeToString()
    node = decode(framed(9, b"\x00" + payload), Schemas(tmp_path))
    assert plain_value(decoded_of(node)) == {"id": "c-9", "emails": ["x"]}


def test_registry_client_auth_cache_and_offline(tmp_path: Path):
    """The registry client against an HTTP server on loopback speaking the Confluent
    API's /schemas/ids/ID (the real-registry evidence is in test_values_real.py's note)."""
    import base64
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from kdissect.schemas_source import Registry

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"u:p").decode():
                self.send_response(401)
                self.end_headers()
                return
            if self.path != "/schemas/ids/5":
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"schema": json.dumps(ORDER)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    cache = tmp_path / "cache"
    payload = framed(5, avro_bytes(ORDER, ORDER_VALUE))
    try:
        with pytest.raises(SchemaError, match="refused.*401.*--registry-user"):
            Registry(url, cache).schema(5)
        node = decode(payload, Schemas(registry=Registry(url, cache, "u", "p")))
        assert plain_value(decoded_of(node)) == ORDER_VALUE
        assert Schemas(registry=Registry(url, cache, "u", "p")).by_id(6) is None
    finally:
        server.shutdown()
        server.server_close()
    # offline: the cache answers; what it lacks is said clearly, once
    offline = Schemas(registry=Registry(url, cache))
    assert plain_value(decoded_of(decode(payload, offline))) == ORDER_VALUE
    node = decode(framed(7, b"\x00"), offline)
    assert [c for _, c, _ in node.findings()] == ["value_schema_unknown"]
    assert "is unreachable" in offline.problems[0] and "cached" in offline.problems[0]
    assert seen.count("/schemas/ids/5") == 2  # the 401, then once: cached after


class OneSchema:
    """A schema source knowing one schema, under every id."""

    framed = True

    def __init__(self, schema):
        self.schema = schema

    def by_id(self, _):
        return self.schema


def test_values_only_path_only_for_schemas_that_cannot_amplify():
    from kdissect.protocol.values_schema.fast import Unfit, value_json
    from kdissect.schemas_source import parse_schema as parse

    Source = OneSchema
    order = Source(parse(json.dumps(ORDER), "avro"))
    payload = framed(1, avro_bytes(ORDER, ORDER_VALUE))
    assert value_json(order, payload, "value") == (json_value(ORDER_VALUE), 1)
    for schema, data in (
        ({"type": "array", "items": "null"}, b"\x80\x80\x80\x80\x80\x80\x40\x00"),
        (
            {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]},
            b"\x02" * 9 + b"\x00",
        ),
    ):
        with pytest.raises(Unfit):
            value_json(Source(parse(json.dumps(schema), "avro")), framed(1, data), "value")
    with pytest.raises(Unfit):  # trailing bytes: the located path says so
        value_json(order, payload + b"\x00", "value")


def test_json_values_charge_at_least_the_values_they_hold_and_not_a_node_a_byte():
    from kdissect.protocol.values_schema.fast import value_json

    source = OneSchema(parse_schema(json.dumps({"type": "object"}), "json"))

    def values(x) -> int:
        inner = x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()
        return 1 + sum(values(v) for v in inner)

    for doc in (
        {
            "customer": {"id": "c-1", "vip": True},
            "lines": [{"sku": "a", "n": 1}],
            "n": [1, 2.5, None, [], {}],
            "text": "a, b: [c]",
        },
        [],
        7,
        "x",
        [[[[1]]]],
    ):
        raw = framed(9, json.dumps(doc).encode())
        tally = [0]
        assert value_json(source, raw, "value", tally)[0] == doc
        assert values(doc) <= tally[0] < len(raw)
