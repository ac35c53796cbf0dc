"""Avro schema references: a schema naming types that other schemas define, resolved
through a registry's references (Confluent's /subjects/S/versions/V) and, with
`--schemas DIR`, from the directory's other .avsc files. fastavro, given the same named
types, is the oracle."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fastavro
import pytest

from kdissect.protocol.values_schema import decoded_of, json_value, plain_value
from kdissect.schemas_source import Registry, SchemaError, Schemas
from tests.test_values_schema import decode, framed

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "shop",
    "fields": [{"name": "city", "type": "string"}],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "home", "type": ["null", "shop.Address"]},
    ],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "customer", "type": "shop.Customer"},
        {"name": "ship_to", "type": "shop.Address"},
    ],
}
VALUE = {
    "id": "o-1",
    "customer": {"id": "c-3", "home": {"city": "Bern"}},
    "ship_to": {"city": "Zürich"},
}


def encoded() -> bytes:
    named: dict = {}
    for doc in (ADDRESS, CUSTOMER):
        fastavro.parse_schema(doc, named_schemas=named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER, named_schemas=named), VALUE)
    return framed(9, out.getvalue())


def test_references_from_a_registry(tmp_path: Path):
    docs = {
        "/schemas/ids/9": {
            "schema": json.dumps(ORDER),
            "references": [{"name": "shop.Customer", "subject": "customer", "version": 1}],
        },
        # Customer refers to Address in turn (resolved after it: any order works)
        "/subjects/customer/versions/1": {
            "schema": json.dumps(CUSTOMER),
            "references": [{"name": "shop.Address", "subject": "address", "version": 2}],
        },
        "/subjects/address/versions/2": {"schema": json.dumps(ADDRESS)},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            doc = docs.get(self.path)
            self.send_response(200 if doc else 404)
            self.end_headers()
            if doc:
                self.wfile.write(json.dumps(doc).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        source = Schemas(registry=Registry(f"http://127.0.0.1:{server.server_address[1]}", None))
        node = decode(encoded(), source)
    finally:
        server.shutdown()
        server.server_close()
    assert not node.findings(), node.findings()
    assert json_value(plain_value(decoded_of(node))) == VALUE


def test_references_from_the_schema_directory(tmp_path: Path):
    (tmp_path / "9.avsc").write_text(json.dumps(ORDER))
    (tmp_path / "customer.avsc").write_text(json.dumps(CUSTOMER))
    (tmp_path / "address.avsc").write_text(json.dumps(ADDRESS))
    node = decode(encoded(), Schemas(tmp_path))
    assert json_value(plain_value(decoded_of(node))) == VALUE
    (tmp_path / "address.avsc").unlink()  # a type no file defines: said clearly
    with pytest.raises(SchemaError, match=r"unknown type shop\.Customer"):
        from kdissect.schemas_source import load_file

        load_file(tmp_path / "9.avsc")
