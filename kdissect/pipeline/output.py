"""The output directory of ``kdissect spark``: what a run does with the tables an earlier
run left there (``--mode``), and how tables are partitioned (``--partition-by``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import manifest, storage

TABLES = ("exchanges", "records", "captures")
LOG_TABLES = ("batches", "records", "checks")  # kdissect log --spark
MODES = ("error", "overwrite", "append")
PARTITIONS = ("date", "capture", "api")


class OutputError(Exception):
    pass


@dataclass
class Plan:
    """What a run will do in ``out``, once checked (``check``)."""

    out: str
    mode: str
    ours: list[str]  # kdissect's tables found in ``out``
    previous: dict | None  # the manifest they were written with (append)
    captures: list[str]  # what to read: the inputs, each content once
    content: dict[str, str] = field(default_factory=dict)  # capture -> content id
    skipped: list[str] = field(default_factory=list)  # warnings: inputs left out


def _layout(with_records: bool, partition_by: str | None) -> dict:
    return {"records": with_records, "partition_by": partition_by}


def _partition_option(by: str | None) -> str:
    return f"--partition-by {by}" if by else "no --partition-by"


def check(
    out: str,
    mode: str,
    with_records: bool,
    captures: list[str],
    partition_by: str | None = None,
    kind: str = "capture",
) -> Plan:
    """Refuse, before any work is done, what ``mode`` does not allow in ``out``: raises
    OutputError saying what to do instead. An append must match the layout recorded in
    the directory's manifest (records or not, partitioning, schema version) and may not
    add a capture already there, by name or by content. A capture given twice in one
    run (the same content under two names) is read once."""
    try:
        names = storage.listing(out)
    except (storage.StorageError, OSError):  # not listable here: Spark's checks apply
        return Plan(out, mode, [], None, list(captures))
    if names is None:
        raise OutputError(
            f"--out {out} is a file; give a directory (a new one, or one kdissect spark wrote)"
        )
    ours = [t for t in dict.fromkeys(TABLES + LOG_TABLES) if t in names]
    if mode == "error" and names:
        raise OutputError(
            f"--out {out} already exists and is not empty "
            f"({', '.join(sorted(names)[:4])}{', …' if len(names) > 4 else ''}); choose "
            f"a new directory, or pass --mode overwrite to replace its tables or "
            f"--mode append to add to them"
        )
    plan = Plan(out, mode, ours, None, [])
    seen: dict[str, str] = {}
    for c in captures:
        try:
            cid = manifest.content_id(c)
        except OSError as e:
            raise OutputError(f"{c}: {e.strerror or e}") from None
        if cid in seen:
            plan.skipped.append(f"{c}: the same content as {seen[cid]}; read once")
            continue
        seen[cid] = c
        plan.content[c] = cid
        plan.captures.append(c)
    if mode == "append" and ours:
        try:
            plan.previous = found = manifest.read(out)
        except (ValueError, OSError) as e:
            raise OutputError(f"{e}; use another --out") from None
        if found is None:
            raise OutputError(
                f"{out} has tables ({', '.join(ours)}) but no {manifest.NAME}: they were "
                f"written by an older kdissect (or something else), so an append cannot "
                f"be checked against their layout; write to a new --out, or rewrite them "
                f"with --mode overwrite"
            )
        if found.get("kind") != kind or found.get("schema_version") != manifest.SCHEMA_VERSION:
            raise OutputError(
                f"{out} holds {found.get('kind')} tables of schema version "
                f"{found.get('schema_version')}; this kdissect writes {kind} tables of "
                f"version {manifest.SCHEMA_VERSION}, so appending would mix column types; "
                f"write to a new --out, or rewrite it with --mode overwrite"
            )
        layout = found.get("layout", {})
        if layout.get("records") != with_records:
            had = layout.get("records")
            raise OutputError(
                f"{out} {'has' if had else 'has no'} records table, so "
                f"{'without' if had else 'with'} --records an append would "
                f"leave records and exchanges out of step; "
                f"{'add' if had else 'drop'} --records, or use another --out"
            )
        if layout.get("partition_by") != partition_by:
            raise OutputError(
                f"{out} was written with {_partition_option(layout.get('partition_by'))}; "
                f"an append with {_partition_option(partition_by)} would mix directory "
                f"layouts (readers would miss or reject rows); append with "
                f"{_partition_option(layout.get('partition_by'))}, or use another --out"
            )
        names_before = {
            c["capture"]: c["content"]
            for run in found.get("runs", [])
            for c in run.get("captures", [])
        }
        contents_before = {v: k for k, v in names_before.items()}
        for c in plan.captures:
            if c in names_before or plan.content[c] in contents_before:
                same = c if c in names_before else contents_before[plan.content[c]]
                why = "is already" if same == c else f"has the same content as {same}, already"
                raise OutputError(
                    f"{c} {why} in {out}: appending would add its rows twice; leave it "
                    f"out, or use --mode overwrite"
                )
    return plan


def staging(out: str, run_id: str) -> str:
    """Where a run writes its tables before ``commit`` moves them into ``out``."""
    return storage.child(out, f"_staging-{run_id}")


def commit(plan: Plan, staged: str, tables: list[str], record: dict) -> None:
    """Move the tables a run wrote under ``staged`` into ``plan.out`` (replacing
    kdissect's tables there with --mode overwrite), then write the manifest: a run that
    fails before this leaves the tables as they were."""
    if plan.mode == "overwrite":
        for table in plan.ours:
            storage.remove_tree(storage.child(plan.out, table))
    for table in tables:
        storage.move_files(storage.child(staged, table), storage.child(plan.out, table))
    manifest.write(plan.out, record)
    storage.remove_tree(staged)


def abandon(staged: str) -> None:
    """Remove what a failed run staged (best effort: it is never read as a table)."""
    try:
        if storage.exists(staged):
            storage.remove_tree(staged)
    except (OSError, storage.StorageError):
        pass


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
