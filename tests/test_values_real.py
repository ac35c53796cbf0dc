"""Record values through the real Apache Kafka broker: Avro, Protobuf and JSON values with
Schema Registry framing produced by confluent-kafka (plain and lz4-compressed), captured
with tcpdump, then decoded by `kdissect pcap --schemas DIR` (JSON lines, -V, display
filters into values) and into the records table (one process and `kdissect spark`).
Oracle: for every record in every Produce request and Fetch response, kdissect's value
equals what fastavro / protobuf / json read from the same bytes (consumed back from the
broker).

No Schema Registry server runs here (Apicurio Registry 3.x and 2.6.13.Final do not
resolve from Maven Central: its parent POM or some of its modules are missing there,
docs/guide/values.md says which; Confluent's are not on Maven Central), so the test writes the
framing itself, as
Confluent's serializers do: magic 0, the schema id, (Protobuf) the message indexes, the
encoded value."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Consumer, Producer
from google.protobuf import message_factory

from kdissect.protocol.values_schema import json_value
from kdissect.schemas_source import compile_proto
from tests.support.capture import Tcpdump
from tests.test_values_schema import (
    COMMON_PROTO,
    ORDER,
    ORDER_VALUE,
    SHOP_PROTO,
    avro_bytes,
    framed,
    proto_plain,
)

pytestmark = pytest.mark.slow


def _orders(n: int) -> list[dict]:
    out = []
    for i in range(n):
        v = dict(
            ORDER_VALUE,
            id=f"o-{i}",
            qty=i,
            status=["NEW", "PAID", "SHIPPED"][i % 3],
            customer={
                "id": f"c-{i}",
                "vip": i % 2 == 0,
                "address": None if i % 4 else {"city": f"city {i}"},
            },
            lines=[
                {"sku": f"s{j}", "n": j, "weight": j / 2 if j % 2 else None} for j in range(i % 3)
            ],
            tags={f"k{j}": str(j) for j in range(i % 4)},
            note=None if i % 2 else "n",
        )
        out.append(v)
    return out


def _consume(conf: dict, topics: list[str], n: int) -> list[tuple[str, bytes]]:
    consumer = Consumer({**conf, "group.id": "values-oracle", "auto.offset.reset": "earliest"})
    consumer.subscribe(topics)
    got: list[tuple[str, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            got.append((msg.topic(), msg.value()))
    consumer.close()
    return got


def test_framed_values_from_the_real_broker_decode_as_the_libraries_read_them(
    apache_kafka, spark, tmp_path: Path
):
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "21.avsc").write_text(json.dumps(ORDER))
    (schemas / "22.proto").write_text(SHOP_PROTO)
    (schemas / "common.proto").write_text(COMMON_PROTO)
    (schemas / "23.json").write_text(json.dumps({"title": "Event", "type": "object"}))
    classes = message_factory.GetMessages(
        compile_proto(SHOP_PROTO, {"common.proto": COMMON_PROTO}, "t").file
    )
    Order = classes["shop.Order"]

    values: list[tuple[str, bytes]] = []
    for i, v in enumerate(_orders(12)):
        values.append(("v-avro", framed(21, avro_bytes(ORDER, v))))
        m = Order(id=f"o-{i}", qty=i, packed=list(range(i)), status=i % 3)
        m.lines.add(sku="a", n=i).notes.add(text=f"note {i}")
        m.by_sku[f"s{i}"].n = i
        m.customer.id = f"c-{i}"
        values.append(("v-proto", framed(22, b"\x00" + m.SerializeToString())))
        doc = {"customer": {"id": f"c-{i}"}, "n": [i, i / 4, None], "ok": i % 2 == 0}
        values.append(("v-json", framed(23, json.dumps(doc).encode())))
    conf = {"bootstrap.servers": apache_kafka.bootstrap("PLAINTEXT")}
    pcap = tmp_path / "values.pcap"
    with Tcpdump(pcap, apache_kafka.ports("PLAINTEXT")):
        for codec in ("none", "lz4"):
            producer = Producer({**conf, "compression.type": codec, "linger.ms": 20})
            for topic, value in values:
                producer.produce(f"{topic}-{codec}", value=value, key=f"k-{topic}")
            assert producer.flush(30) == 0
        topics = [f"{t}-{c}" for t in ("v-avro", "v-proto", "v-json") for c in ("none", "lz4")]
        consumed = _consume(conf, topics, 2 * len(values))
    assert sorted(consumed) == sorted((f"{t}-{c}", v) for t, v in values for c in ("none", "lz4"))

    def oracle(value: bytes):
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id == 21:
            return fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(ORDER))
        if schema_id == 22:
            return proto_plain(Order.FromString(value[6:]))
        return json.loads(value[5:])

    expected = {v: json_value(oracle(v)) for _, v in consumed}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "pcap",
            str(pcap),
            "--no-tui",
            "--format",
            "jsonl",
            "-j",
            "1",
            "--schemas",
            str(schemas),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    seen = {"Produce": 0, "Fetch": 0}
    found: dict[str, set[str]] = {"Produce": set(), "Fetch": set()}
    raw_by_decoded = {json.dumps(x, sort_keys=True): v for v, x in expected.items()}
    for line in run.stdout.splitlines():
        m = json.loads(line)
        assert not [f for f in m["findings"] if f["code"].startswith("value_")], m["findings"]
        if m["api_name"] not in seen:
            continue
        for batch in _batches(m["body"]):
            for rec in batch["records"]:
                assert rec["value_schema"] in (21, 22, 23)
                text = json.dumps(rec["value"], sort_keys=True)
                assert text in raw_by_decoded
                seen[m["api_name"]] += 1
                found[m["api_name"]].add(text)
    # every value in both directions (a loaded machine may make the producer retry)
    assert found["Produce"] == found["Fetch"] == set(raw_by_decoded)
    assert seen["Produce"] >= 2 * len(values) and seen["Fetch"] >= 2 * len(values)
    # the located decoders give the same JSON lines (a per-topic override sends every
    # message with records down the located path)
    located = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "pcap",
            str(pcap),
            "--no-tui",
            "--format",
            "jsonl",
            "-j",
            "1",
            "--schemas",
            str(schemas),
            "--value-schema",
            f"no-such-topic={schemas / '21.avsc'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert located.returncode == 0 and located.stdout == run.stdout
    # and so does the pure-Python Avro reader (the compiled one wrote the lines above)
    pure = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "pcap",
            str(pcap),
            "--no-tui",
            "--format",
            "jsonl",
            "-j",
            "1",
            "--schemas",
            str(schemas),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KDISSECT_PURE": "1"},
    )
    assert pure.returncode == 0 and pure.stdout == run.stdout
    # the trees: every decoded field located, in plain and lz4-decompressed batches
    tree = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "pcap",
            str(pcap),
            "--no-tui",
            "-V",
            "-Y",
            "api == Produce",
            "--schemas",
            str(schemas),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "schema_id  int32" in tree and "decoded  struct" in tree
    assert "customer  struct" in tree and "message_indexes  array" in tree
    assert "value_schema_mismatch" not in tree and "✗" not in tree

    # display filters into the decoded values select the same exchanges on both paths
    def selected(flt: str, *extra: str) -> list[dict]:
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "kdissect",
                "pcap",
                str(pcap),
                "--no-tui",
                "--format",
                "jsonl",
                "-j",
                "1",
                "--schemas",
                str(schemas),
                "-Y",
                flt,
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        return [json.loads(line) for line in res.stdout.splitlines()]

    def values_of(lines: list[dict]) -> list:
        return [r["value"] for m in lines for b in _batches(m["body"]) for r in b["records"]]

    hit = selected('record.value.customer.id == "c-7"')
    assert hit and {m["api_name"] for m in hit} == {"Produce", "Fetch"}
    assert any(isinstance(v, dict) and v["customer"]["id"] == "c-7" for v in values_of(hit))
    # Avro (21), Protobuf (22) and JSON (23) values all name c-7; the lz4 batches too
    assert {r["value_schema"] for m in hit for b in _batches(m["body"]) for r in b["records"]} == {
        21,
        22,
        23,
    }
    assert (
        selected(
            'record.value.customer.id == "c-7"',
            "--value-schema",
            f"no-such-topic={schemas / '21.avsc'}",
        )
        == hit
    )
    assert selected("record.value_schema == 22 and api == Produce")
    assert not selected('record.value.customer.id == "c-99"')
    by_lines = selected('record.value.lines.notes.text == "note 5"')  # Protobuf
    carried = [
        {r["value_schema"] for b in _batches(m["body"]) for r in b["records"]} for m in by_lines
    ]
    assert by_lines and all(22 in ids for ids in carried if ids)  # Produce answers carry none

    # the records table's value columns, in one process and on Spark
    import pyarrow.parquet as pq

    one = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "pcap",
            str(pcap),
            "--format",
            "parquet",
            "-o",
            str(tmp_path / "x.parquet"),
            "--records-output",
            str(tmp_path / "r.parquet"),
            "--schemas",
            str(schemas),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert one.returncode == 0, one.stderr
    records = pq.read_table(tmp_path / "r.parquet").to_pylist()
    assert records and all(r["value_schema"] in (21, 22, 23) for r in records)
    assert {json.dumps(json.loads(r["value_json"]), sort_keys=True) for r in records} == set(
        raw_by_decoded
    )
    assert all(r["key_json"] is None and r["key_schema"] is None for r in records)
    # `kdissect spark` in this process: its session is the suite's (the spark fixture:
    # get_session finds it), not a JVM of its own for a capture of a few KB
    from click.testing import CliRunner

    from kdissect.cli import main

    on_spark = CliRunner().invoke(
        main,
        [
            "spark",
            str(pcap),
            "--out",
            str(tmp_path / "t"),
            "--records",
            "--master",
            spark.sparkContext.master,
            "--schemas",
            str(schemas),
        ],
    )
    assert on_spark.exit_code == 0, (on_spark.output, on_spark.exception)
    table = pq.read_table(tmp_path / "t" / "records").to_pylist()
    assert len(table) == len(records)
    assert sorted((r["value_schema"], r["value_json"]) for r in table) == sorted(
        (r["value_schema"], r["value_json"]) for r in records
    )


def _batches(body) -> list[dict]:
    """Every record batch in a Produce request / Fetch response body (JSON lines)."""
    out: list[dict] = []
    stack = [body]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "records" in x and isinstance(x["records"], list) and "base_offset" in x:
                out.append(x)
            else:
                stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out
