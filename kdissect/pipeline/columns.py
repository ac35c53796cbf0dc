"""The columns of the ``exchanges``, ``records`` and ``captures`` tables: names and kinds,
free of any library, so that ``kdissect pcap --format parquet`` (pipeline/parquet_file.py)
and the Spark job (pipeline/tables.py makes Arrow schemas of them) share one copy.
docs/guide/spark.md says what each column means. Every column and list item is nullable."""

from __future__ import annotations

from dataclasses import dataclass

# scalar kinds: Python values in rows -> Arrow / Parquet types (tables.py, parquet_file.py)
STRING, INT16, INT32, INT64, FLOAT64 = "string", "int16", "int32", "int64", "float64"
TIMESTAMP = "timestamp"  # µs, UTC; rows hold float seconds (``micros`` makes µs)


@dataclass(frozen=True)
class ListOf:
    """A list of scalars (``item`` a kind) or of structs (``item`` their fields)."""

    item: str | tuple[tuple[str, str], ...]


Kind = str | ListOf
Columns = tuple[tuple[str, Kind], ...]

_TOPIC_PARTITION = (("topic", STRING), ("partition", INT32))

EXCHANGES: Columns = (
    ("capture", STRING),
    ("exchange_id", STRING),  # connection_id:seq, what records join on
    ("connection_id", STRING),
    ("seq", INT32),  # index of the exchange on its connection
    ("client_ip", STRING),
    ("client_port", INT32),
    ("broker_ip", STRING),
    ("broker_port", INT32),
    ("api_key", INT16),
    ("api_name", STRING),
    ("api_version", INT16),
    ("correlation_id", INT32),
    ("client_id", STRING),
    ("request_ts", TIMESTAMP),
    ("response_ts", TIMESTAMP),
    ("latency_ms", FLOAT64),
    ("request_size", INT32),
    ("response_size", INT32),
    ("error_code", INT16),
    ("error_name", STRING),
    ("errors", ListOf(_TOPIC_PARTITION + (("code", INT16), ("name", STRING)))),
    ("topics", ListOf(STRING)),
    ("partitions", ListOf(_TOPIC_PARTITION)),
    ("record_count", INT64),
    ("record_bytes", INT64),
    ("status", STRING),
    ("problems", ListOf(STRING)),
    (
        "findings",
        ListOf((("code", STRING), ("severity", STRING), ("where", STRING), ("detail", STRING))),
    ),
)

RECORDS: Columns = (
    ("capture", STRING),
    ("exchange_id", STRING),  # the exchange that carried the record
    ("connection_id", STRING),
    ("client_ip", STRING),
    ("client_port", INT32),
    ("broker_ip", STRING),
    ("broker_port", INT32),
    ("api_name", STRING),  # Produce, Fetch or ShareFetch
    ("direction", STRING),  # produce | fetch
    ("correlation_id", INT32),
    ("message_ts", TIMESTAMP),  # when the carrying message was captured
    ("topic", STRING),
    ("partition", INT32),
    ("offset", INT64),
    ("timestamp", TIMESTAMP),  # the record's own (null: none, or past 9999)
    ("key", STRING),  # text, or 0x-prefixed hex
    ("value_size", INT64),
    ("headers", ListOf((("key", STRING), ("value", STRING)))),
    ("problems", ListOf(STRING)),
    # decoded by schema (--schemas, --registry...: docs/guide/values.md); null otherwise
    ("key_json", STRING),
    ("key_schema", INT32),
    ("value_json", STRING),
    ("value_schema", INT32),
)

# one row per capture file of a run: what was read, and how well
CAPTURES: Columns = (
    ("capture", STRING),
    ("size_bytes", INT64),
    ("packets", INT64),
    ("connections", INT64),
    ("exchanges", INT64),
    ("records", INT64),  # null when records were not decoded
    ("gaps", INT64),  # holes in TCP streams (bytes not captured)
    ("warnings", ListOf(STRING)),  # damage to the file itself, and other notes
    ("status", STRING),  # ok | incomplete | damaged | no kafka | unreadable
)


def names(columns: Columns) -> tuple[str, ...]:
    return tuple(name for name, _kind in columns)


TIME_COLUMNS = tuple(
    name for table in (EXCHANGES, RECORDS) for name, kind in table if kind == TIMESTAMP
)


def micros_row(row: dict) -> dict:
    """``row`` with its times in µs (changed in place)."""
    for col in TIME_COLUMNS:
        ts = row.get(col)
        if isinstance(ts, float):
            row[col] = round(ts * 1_000_000)
    return row
