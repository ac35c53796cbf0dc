"""Arrow schemas of the ``exchanges``, ``records`` and ``captures`` tables (for the Spark
job), made from their columns in pipeline/columns.py. docs/guide/spark.md says what each column
means."""

from __future__ import annotations

import pyarrow as pa

from . import columns as c
from .columns import micros_row as _micros  # noqa: F401  (the Spark job's name for it)

_ARROW = {
    c.STRING: pa.string(),
    c.INT16: pa.int16(),
    c.INT32: pa.int32(),
    c.INT64: pa.int64(),
    c.FLOAT64: pa.float64(),
    c.TIMESTAMP: pa.timestamp("us", tz="UTC"),
}


def arrow_type(kind: c.Kind) -> pa.DataType:
    if isinstance(kind, str):
        return _ARROW[kind]
    if isinstance(kind.item, str):
        return pa.list_(_ARROW[kind.item])
    return pa.list_(pa.struct([(name, _ARROW[k]) for name, k in kind.item]))


def arrow_schema(cols: c.Columns) -> pa.Schema:
    return pa.schema([(name, arrow_type(kind)) for name, kind in cols])


EXCHANGES = arrow_schema(c.EXCHANGES)
RECORDS = arrow_schema(c.RECORDS)
CAPTURES = arrow_schema(c.CAPTURES)
