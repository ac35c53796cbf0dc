"""The ``exchanges`` table in one process, without Spark: ``kdissect pcap --format parquet``."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow.parquet as pq

from .extract import capture_rows
from .tables import EXCHANGES, to_arrow


def write_exchanges(files: list[str], out: str, *, ports, detect: bool,
                    warn: Callable[[str], None], keep=None, packets=None, keys=None) -> int:
    """Write the exchanges of ``files`` to the Parquet file ``out``; returns the row count.
    ``keep(exchange)`` may leave exchanges out (display filters)."""
    rows = capture_rows([(f, f) for f in files], ports, detect, False, warn,
                        packets=packets, keep=keep, keys=keys)
    for w in rows.warnings:
        warn(w)
    # the order the Spark job writes: by capture, then time
    ordered = sorted(rows.exchanges, key=lambda r: (
        r["capture"], r["request_ts"] if r["request_ts"] is not None else r["response_ts"],
        r["client_port"], r["correlation_id"] if r["correlation_id"] is not None else -1,
        r["seq"]))
    table = to_arrow(ordered, EXCHANGES)
    pq.write_table(table, out)
    return table.num_rows
