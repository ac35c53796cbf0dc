"""The ``exchanges`` (and ``records``) tables in one process, without Spark: ``kdissect
pcap --format parquet`` (``--records-output``), written by pipeline/parquet_file.py."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

from . import columns, manifest
from .extract import capture_rows
from .parquet_file import write_table
from .spill import SortedRows
from ..sources.pcap import steady_gc
from ..stream.record_table import RowShape


def write_exchanges(
    files: list[str],
    out: str,
    *,
    ports,
    detect: bool,
    warn: Callable[[str], None],
    keep=None,
    packets=None,
    keys=None,
    records_out: str | None = None,
    values=None,
) -> tuple[int, int]:
    """Write the exchanges of ``files`` to the Parquet file ``out``; returns the row count
    and the number of inputs that could not be read or held no Kafka traffic (what makes
    the other formats exit 1).
    ``keep(exchange)`` may leave exchanges out (display filters). ``records_out``: also
    write the records table there (``values``: schemas for its key/value columns)."""
    rows = capture_rows(
        [(str(f), f) for f in files],  # (named as given: "-" for standard input)
        ports,
        detect,
        records_out is not None,
        warn,
        packets=packets,
        keep=keep,
        keys=keys,
        values=values,
        collect=lambda table: SortedRows(
            _ORDER[table], shape=_SHAPE.get(table), fast_key=_FAST_ORDER.get(table)
        ),
    )
    meta = manifest.metadata(
        "capture",
        {
            "records": records_out is not None,
            "detect": detect,
            "ports": sorted(ports),
            "filtered": keep is not None,
            "keylog": keys is not None,
            "values": values is not None,
        },
    )
    # the rows held (sorted, merged, transposed) are many long-lived objects: the cyclic
    # collector at its default pace rescanned them about a third of the records table's time
    with steady_gc():
        if records_out is not None:
            write_table(rows.records, columns.RECORDS, records_out, meta)
        for w in rows.warnings:
            warn(w)
        return write_table(rows.exchanges, columns.EXCHANGES, out, meta), rows.errors


# the records table's rows: tuples in its column order
_SHAPE = {"records": RowShape(columns.names(columns.RECORDS))}
_CAPTURE, _MESSAGE_TS = map(_SHAPE["records"].names.index, ("capture", "message_ts"))

# the order the Spark job writes: by capture, then time
_ORDER = {
    "exchanges": lambda r: (
        r["capture"],
        r["request_ts"] if r["request_ts"] is not None else r["response_ts"],
        r["client_port"],
        r["correlation_id"] if r["correlation_id"] is not None else -1,
        r["seq"],
    ),
    "records": lambda r: (r[_CAPTURE], r[_MESSAGE_TS] if r[_MESSAGE_TS] is not None else 0),
}
# the records' order by a key made in C: _ORDER's wherever sorting by it raises nothing
# (a None message_ts, read as 0 there, raises once compared: _ORDER's key then sorts)
_FAST_ORDER = {"records": itemgetter(_CAPTURE, _MESSAGE_TS)}
