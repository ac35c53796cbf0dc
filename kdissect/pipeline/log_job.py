"""`kdissect log --format parquet --spark`: the ``batches``, ``records`` and ``checks``
tables of many log directories (a whole cluster's ``log.dirs``, or a bucket holding
copies of them) built on Spark. Each task reads one unit (a partition directory, or a
log dir's own files: sources/logunits.py) exactly as ``kdissect log`` does in one
process, so the rows are the same; only DataFrame operations (``mapInArrow``) are used,
so the job also runs over Spark Connect."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

from ..protocol.context import Options
from . import manifest, output, storage
from .log_tables import BATCHES, CHECKS, RECORDS, ROW_GROUP, table_rows

TABLES = {"batches": BATCHES, "records": RECORDS, "checks": CHECKS}
_ROW = {"batches": "batch", "records": "record", "checks": "check"}


def _spark_schema(schema: pa.Schema) -> pa.Schema:
    """Spark has no unsigned integers: the CRC is an int64 there (same values)."""
    return pa.schema([pa.field(f.name, pa.int64()) if f.type == pa.uint32() else f for f in schema])


OUT = pa.schema(
    [(_ROW[name], pa.struct(list(_spark_schema(schema)))) for name, schema in TABLES.items()]
)


def _task(units: list, max_decompressed: int) -> Callable:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ..render.log_json import item_json
        from ..render.records import json_bytes
        from ..sources.logunits import items

        options = Options(max_decompressed=max_decompressed)
        for ids in batches:
            for i in ids.column(0).to_pylist():
                rows: list[dict] = []
                objects = (
                    o
                    for item in items(units[i], options, json_bytes)
                    for o in item_json(item, True)
                )
                for table, row in table_rows(objects):
                    rows.append({_ROW[table]: {f.name: row.get(f.name) for f in TABLES[table]}})
                    if len(rows) >= ROW_GROUP:
                        yield pa.RecordBatch.from_pylist(rows, OUT)
                        rows = []
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, OUT)

    return run


def run_log_job(
    spark,
    inputs: list[str],
    out: str,
    *,
    mode: str = "error",
    max_decompressed: int = Options.max_decompressed,
) -> dict[str, int]:
    """Write ``out``/batches, ``out``/records and ``out``/checks (Parquet directories) for
    the log dirs, partition directories or files ``inputs`` (paths or URLs); returns
    each table's row count."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from ..sources.logunits import plan

    # timestamps as Parquet's microsecond UTC type (Spark's default, INT96, is legacy and
    # reads back without its time zone), as the capture tables and the one-process run
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    out = storage.absolute(out)
    units = plan([storage.absolute(i) for i in inputs])
    checked = output.check(out, mode, True, [], kind="log")
    run_id = manifest.new_run_id()
    started = manifest.now()
    staged = output.staging(out, run_id)
    try:
        decoded = (
            spark.range(0, len(units), 1, max(1, len(units)))
            .mapInArrow(_task(units, max_decompressed), from_arrow_schema(OUT))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        counts = {}
        for table, column in _ROW.items():
            rows = decoded.where(F.col(column).isNotNull()).select(f"{column}.*")
            output.write(
                rows.sortWithinPartitions("file", "position"), storage.child(staged, table), "error"
            )
            counts[table] = rows.count()
        decoded.unpersist()
        record = manifest.recorded(
            checked.previous,
            kind="log",
            tables=list(TABLES),
            layout={},
            run={
                "run_id": run_id,
                "started": started,
                "finished": manifest.now(),
                "options": {"max_decompressed": max_decompressed},
                "inputs": list(inputs),
            },
        )
        output.commit(checked, staged, list(TABLES), record)
    except BaseException:
        output.abandon(staged)
        raise
    return counts
