"""How a record's values become cells of the Parquet/Spark tables: shared by the located
tree's rows (rows.py), the compiled rows' reference (record_table.py) and the log
tables (pipeline/log_tables.py)."""

from __future__ import annotations

from typing import Any

from ..protocol.times import LAST_MS

# the fields naming a record's topic and partition in the messages that carry records
# (Produce, Fetch, ShareFetch), as both row readers find them
TOPIC_FIELDS = frozenset(("topic", "name", "topic_name"))
PARTITION_FIELDS = frozenset(("partition_index", "partition", "index"))

# a record's own timestamp (ms) as the tables' TIMESTAMP (int µs): -1 (none) and values
# past 9999-12-31 (damage) are null there; JSON lines keep the number as it was sent
MAX_TIMESTAMP_MS = LAST_MS


def ms_micros(ms: Any) -> int | None:
    """A Kafka timestamp (ms) as a table's TIMESTAMP (µs), or None (see above)."""
    return ms * 1000 if type(ms) is int and 0 <= ms <= MAX_TIMESTAMP_MS else None


def text_or_hex(value: Any) -> str | None:
    """Bytes as text when they are UTF-8 and every character printable, else 0x + hex."""
    if value is None:
        return None
    b = bytes(value)
    try:
        text = b.decode("utf-8")
        if all(ch.isprintable() for ch in text):
            return text
    except UnicodeDecodeError:
        pass
    return "0x" + b.hex()
