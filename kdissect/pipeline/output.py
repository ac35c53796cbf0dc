"""The output directory of ``kdissect spark``: what a run does with the tables an earlier
run left there (``--mode``), and how tables are partitioned (``--partition-by``)."""

from __future__ import annotations

from . import storage

TABLES = ("exchanges", "records", "captures")
MODES = ("error", "overwrite", "append")
PARTITIONS = ("date", "capture", "api")
_SPARK_MODE = {"error": "error", "overwrite": "overwrite", "append": "append"}


class OutputError(Exception):
    pass


def check(out: str, mode: str, with_records: bool, captures: list[str]) -> list[str] | None:
    """Refuse, before any work is done, what ``mode`` does not allow in ``out``: raises
    OutputError saying what to do instead. Returns kdissect's tables found in ``out``
    (None: ``out`` cannot be listed from here, and Spark's own checks apply)."""
    try:
        names = storage.listing(out)
    except (storage.StorageError, OSError):
        return None
    if names is None:
        raise OutputError(f"--out {out} is a file; give a directory (a new one, or one "
                          f"kdissect spark wrote)")
    ours = [t for t in TABLES if t in names]
    if mode == "error" and names:
        raise OutputError(
            f"--out {out} already exists and is not empty "
            f"({', '.join(sorted(names)[:4])}{', …' if len(names) > 4 else ''}); choose "
            f"a new directory, or pass --mode overwrite to replace its tables or "
            f"--mode append to add to them")
    if mode == "append" and "exchanges" in ours:
        if ("records" in ours) != with_records:
            raise OutputError(
                f"{out} {'has' if 'records' in ours else 'has no'} records table, so "
                f"{'without' if 'records' in ours else 'with'} --records an append would "
                f"leave records and exchanges out of step; "
                f"{'add' if 'records' in ours else 'drop'} --records, or use another --out")
        if "captures" in ours:
            again = sorted(_captures_in(storage.child(out, "captures")) & set(captures))
            if again:
                raise OutputError(
                    f"{again[0]}{f' (and {len(again) - 1} more)' if len(again) > 1 else ''} "
                    f"is already in {out}: appending would add its rows twice; leave it "
                    f"out, or use --mode overwrite")
    return ours


def _captures_in(table: str) -> set[str]:
    import pyarrow.dataset as ds
    if storage.is_url(table):
        fs, path = storage.filesystem(table)
        found = ds.dataset(path, filesystem=fs, format="parquet")
    else:
        found = ds.dataset(table, format="parquet")
    return set(found.to_table(columns=["capture"]).column("capture").to_pylist())


def prepare(out: str, mode: str, with_records: bool, captures: list[str]) -> str:
    """``check``, then clear what an overwrite replaces: every table of kdissect's, so
    none from an earlier run survives beside new ones (anything else in ``out`` stays).
    Returns the Spark write mode for the tables."""
    ours = check(out, mode, with_records, captures)
    if mode == "overwrite":
        for table in ours or ():
            storage.remove_tree(storage.child(out, table))
    return _SPARK_MODE[mode]


def partitioned(df, table: str, by: str | None):
    """``df`` with the column ``by`` names (``date`` is added: the UTC day of the
    exchange or of the message carrying the record), and that column's name."""
    if by is None:
        return df, None
    if by == "capture":
        return df, "capture"
    if by == "api":
        return df, "api_name"
    from pyspark.sql import functions as F
    ts = F.col("message_ts") if table == "records" else F.coalesce("request_ts", "response_ts")
    # the UTC day, whatever the session's time zone
    day = F.date_from_unix_date(F.floor(F.unix_micros(ts) / 86_400_000_000).cast("int"))
    return df.withColumn("date", day), "date"


def write(df, path: str, mode: str, by: str | None = None) -> None:
    writer = df.write.mode(mode)
    if by is not None:
        writer = writer.partitionBy(by)
    writer.parquet(path)
