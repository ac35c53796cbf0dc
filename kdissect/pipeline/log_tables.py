"""`kdissect log --format parquet -o DIR`: Kafka's files on disk as three Parquet tables,
written as the items stream by (memory bounded by one row group):

- ``batches.parquet``: one row per batch (or v0/v1 message-set entry, or damaged region)
- ``records.parquet``: one row per record, joined to its batch by (file, batch_position)
- ``checks.parquet``: one row per finding of any file or batch

Columns are the JSON lines' fields (docs/guide/log.md)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..stream.cells import ms_micros

# Kafka's ms timestamps as TIMESTAMP (µs, UTC: the capture tables' type, and the unit
# Spark's Arrow reader takes); none (-1) and damage past year 9999 are null
_TS = pa.timestamp("us", tz="UTC")
_WHERE = [("file", pa.string()), ("topic", pa.string()), ("partition", pa.int32())]
BATCHES = pa.schema(
    _WHERE
    + [
        ("position", pa.int64()),
        ("size", pa.int64()),
        ("magic", pa.int8()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("record_count", pa.int32()),
        ("codec", pa.string()),
        ("transactional", pa.bool_()),
        ("control", pa.bool_()),
        ("crc", pa.uint32()),
        ("crc_valid", pa.bool_()),
        ("aborted", pa.bool_()),
        ("deleted", pa.string()),
        ("log_start_offset", pa.int64()),
        ("partition_leader_epoch", pa.int32()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("base_sequence", pa.int32()),
        ("base_timestamp", _TS),
        ("max_timestamp", _TS),
        ("findings", pa.list_(pa.string())),
    ]
)
RECORDS = pa.schema(
    _WHERE
    + [
        ("batch_position", pa.int64()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", _TS),
        ("key", pa.string()),
        ("value", pa.string()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))),
        ("control_type", pa.string()),
        ("key_schema", pa.string()),
        ("value_schema", pa.string()),
        ("key_decoded", pa.string()),
        ("value_decoded", pa.string()),
    ]
)
CHECKS = pa.schema(
    _WHERE
    + [
        ("kind", pa.string()),
        ("position", pa.int64()),
        ("code", pa.string()),
        ("severity", pa.string()),
        ("group", pa.string()),
        ("where", pa.string()),
        ("detail", pa.string()),
    ]
)
ROW_GROUP = 50_000


def _text(v) -> str | None:
    """Keys, values and decoded structures as text: JSON for anything not a string."""
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, default=str)


class _Table:
    def __init__(self, path: Path, schema: pa.Schema, metadata: dict[str, str]):
        self.schema = schema
        self.writer = pq.ParquetWriter(str(path), schema.with_metadata(metadata))
        self.rows: list[dict] = []
        self.count = 0

    def add(self, row: dict) -> None:
        self.rows.append({f.name: row.get(f.name) for f in self.schema})
        if len(self.rows) >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, self.schema))
            self.count += len(self.rows)
            self.rows = []

    def close(self) -> int:
        self.flush()
        self.writer.close()
        return self.count


def table_rows(objects: Iterable[dict]) -> Iterator[tuple[str, dict]]:
    """(table name, row) for the JSON-lines objects of ``kdissect log`` (``item_json``)."""
    for obj in objects:
        kind = obj["type"]
        if kind == "record":
            row = dict(obj)
            for name in (
                "key",
                "value",
                "key_decoded",
                "value_decoded",
                "key_schema",
                "value_schema",
            ):  # a schema id (docs/guide/values.md) as text
                row[name] = _text(obj.get(name))
            row["headers"] = [
                {"key": h["key"], "value": _text(h["value"])} for h in obj.get("headers", [])
            ]
            row["timestamp"] = ms_micros(obj.get("timestamp"))
            yield "records", row
            continue
        if kind == "batch":
            yield (
                "batches",
                {
                    **obj,
                    "findings": [f["code"] for f in obj["findings"]],
                    "base_timestamp": ms_micros(obj.get("base_timestamp")),
                    "max_timestamp": ms_micros(obj.get("max_timestamp")),
                },
            )
        for f in obj.get("findings", []):
            yield (
                "checks",
                {
                    **f,
                    "file": obj["file"],
                    "topic": obj["topic"],
                    "partition": obj["partition"],
                    "kind": kind,
                    "position": obj.get("position"),
                },
            )


def write_log_tables(
    objects: Iterable[dict], out: str, options: dict | None = None
) -> dict[str, int]:
    """Write the JSON-lines objects of ``kdissect log`` (``item_json``) as the three tables
    under the directory ``out`` (``options``, what the run was asked, in their key-value
    metadata); returns the row count of each."""
    from .manifest import metadata

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    meta = metadata("log", options or {})
    tables = {
        "batches": _Table(root / "batches.parquet", BATCHES, meta),
        "records": _Table(root / "records.parquet", RECORDS, meta),
        "checks": _Table(root / "checks.parquet", CHECKS, meta),
    }
    for name, row in table_rows(objects):
        tables[name].add(row)
    return {name: t.close() for name, t in tables.items()}
