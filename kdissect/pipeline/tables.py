"""Arrow schemas of the ``exchanges``, ``records`` and ``captures`` tables, and rows ->
Arrow. docs/spark.md says what each column means."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.json as pj

_TS = pa.timestamp("us", tz="UTC")
_TOPIC_PARTITION = pa.struct([("topic", pa.string()), ("partition", pa.int32())])

EXCHANGES = pa.schema([
    ("capture", pa.string()),
    ("exchange_id", pa.string()),          # connection_id:seq, what records join on
    ("connection_id", pa.string()),
    ("seq", pa.int32()),                   # index of the exchange on its connection
    ("client_ip", pa.string()), ("client_port", pa.int32()),
    ("broker_ip", pa.string()), ("broker_port", pa.int32()),
    ("api_key", pa.int16()), ("api_name", pa.string()), ("api_version", pa.int16()),
    ("correlation_id", pa.int32()), ("client_id", pa.string()),
    ("request_ts", _TS), ("response_ts", _TS), ("latency_ms", pa.float64()),
    ("request_size", pa.int32()), ("response_size", pa.int32()),
    ("error_code", pa.int16()), ("error_name", pa.string()),
    ("errors", pa.list_(pa.struct([("topic", pa.string()), ("partition", pa.int32()),
                                   ("code", pa.int16()), ("name", pa.string())]))),
    ("topics", pa.list_(pa.string())),
    ("partitions", pa.list_(_TOPIC_PARTITION)),
    ("record_count", pa.int64()), ("record_bytes", pa.int64()),
    ("status", pa.string()),
    ("problems", pa.list_(pa.string())),
    ("findings", pa.list_(pa.struct([("code", pa.string()), ("severity", pa.string()),
                                     ("where", pa.string()), ("detail", pa.string())]))),
])

RECORDS = pa.schema([
    ("capture", pa.string()),
    ("exchange_id", pa.string()),          # the exchange that carried the record
    ("connection_id", pa.string()),
    ("client_ip", pa.string()), ("client_port", pa.int32()),
    ("broker_ip", pa.string()), ("broker_port", pa.int32()),
    ("api_name", pa.string()),             # Produce, Fetch or ShareFetch
    ("direction", pa.string()),            # produce | fetch
    ("correlation_id", pa.int32()),
    ("message_ts", _TS),                   # when the carrying message was captured
    ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp_ms", pa.int64()),          # the record's own timestamp
    ("key", pa.string()),                  # text, or 0x-prefixed hex
    ("value_size", pa.int64()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))),
    ("problems", pa.list_(pa.string())),
    # decoded by schema (--schemas, --registry...: docs/values.md); null otherwise
    ("key_json", pa.string()), ("key_schema", pa.int32()),
    ("value_json", pa.string()), ("value_schema", pa.int32()),
])

# one row per capture file of a run: what was read, and how well
CAPTURES = pa.schema([
    ("capture", pa.string()),
    ("size_bytes", pa.int64()),
    ("packets", pa.int64()),
    ("connections", pa.int64()),
    ("exchanges", pa.int64()),
    ("records", pa.int64()),               # null when records were not decoded
    ("gaps", pa.int64()),                  # holes in TCP streams (bytes not captured)
    ("warnings", pa.list_(pa.string())),   # damage to the file itself, and other notes
    ("status", pa.string()),               # ok | incomplete | damaged | no kafka | unreadable
])

_TIME_COLUMNS = ("request_ts", "response_ts", "message_ts")


def _micros(row: dict) -> dict:
    for col in _TIME_COLUMNS:
        ts = row.get(col)
        if isinstance(ts, float):
            row[col] = round(ts * 1_000_000)
    return row


def to_arrow(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Rows from ``kdissect.stream.rows`` as an Arrow table (timestamps in µs, UTC).

    Written as JSON lines and read by Arrow's JSON reader: converting Python objects
    (``pa.array``, ``from_pylist``) imports pandas whenever it is installed, 0.4 CPU-s
    (a third of a whole summary of 150 MB); the reader does not. The same values: JSON
    keeps ints, strings and floats exactly, times go as integer µs (int64, then viewed
    as timestamps). Rows the reader cannot take go through ``from_pylist``."""
    rows = [_micros(dict(r)) for r in rows]
    if not rows:
        return pa.Table.from_batches([], schema=schema)   # (empty_table imports pandas)
    read = pa.schema([pa.field(f.name, pa.int64()) if f.name in _TIME_COLUMNS else f
                      for f in schema])
    try:
        text = "\n".join(map(json.dumps, rows)).encode()
        table = pj.read_json(io.BytesIO(text), pj.ReadOptions(
            use_threads=False, block_size=max(len(text) + 1, 1 << 20)), pj.ParseOptions(
            explicit_schema=read, unexpected_field_behavior="error"))
    except (TypeError, ValueError, pa.ArrowException):
        return pa.Table.from_pylist(rows, schema=schema)
    return pa.Table.from_arrays([_timestamps(table.column(f.name), f.type)
                                 if f.name in _TIME_COLUMNS else table.column(f.name)
                                 for f in schema], schema=schema)


def _timestamps(micros: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray:
    """int64 µs as timestamps, the same buffers viewed (``cast`` imports pyarrow.compute:
    0.15 CPU-s, a tenth of a Parquet run of 150 MB)."""
    return pa.chunked_array([c.view(kind) for c in micros.chunks], kind)
