"""`kdissect spark`: captures to Parquet tables on Spark."""

from __future__ import annotations

import os

import click
from rich.console import Console

from .common import (
    _need_spark_extra,
    _ports,
    _print_warnings,
    _size,
    keylog_option,
    memory_budget,
    memory_option,
    port_options,
)
from ..pipeline import output, storage
from .group import SUMMARIES, main
from .values_opts import value_options, values_source


SPARK_HELP = (
    SUMMARIES["spark"]
    + """

CAPTURE_OR_DIR are capture files (pcap, pcapng, .gz) or directories searched for them:
local paths, or URLs the executors can read (file://, s3a:// or s3://, hdfs://, gs://;
through fsspec, with that filesystem's usual credentials, e.g. AWS_ENDPOINT_URL for an
S3-compatible server). Writes under OUT:

\b
  exchanges  one row per request/response exchange: exchange_id, connection,
             API, version, correlation id, client id, times, latency, sizes,
             errors, topics and partitions, record counts and bytes, status,
             problems
  records    (with --records) one row per record, with the exchange_id of
             the exchange that carried it: topic, partition, offset, key,
             value size...
  captures   one row per capture file: size, packets, connections,
             exchanges, gaps, warnings and a status (ok, incomplete,
             damaged, no kafka, unreadable)

An existing OUT is refused unless --mode says what to do with its tables.
docs/guide/spark.md describes every column and has example queries (Spark SQL,
DuckDB).

Each file is one task, decoded where it is read. With at least 4 cores per file, pcap
files larger than --shard-size are split into byte ranges read in parallel (pcapng and
compressed files are never split; --split/--no-split overrides the choice).
Needs the spark extra (pip install 'kdissect[spark]') and Java 17+. Spark costs
tens of seconds to start: for a few local files `kdissect pcap F... --format parquet
-o X` writes the same exchanges in one process.

\b
Where it runs (--master, else a master set in MASTER / PYSPARK_SUBMIT_ARGS /
spark-defaults.conf / SPARK_REMOTE, else embedded local[*] on 127.0.0.1):
  local[4]            this machine, 4 cores
  spark://host:7077   a standalone cluster
  yarn, k8s://...     those clusters
  sc://host:15002     Spark Connect (needs pyspark[connect] on this side)
On a cluster, executors must reach the capture paths and have kdissect
installed (docs/guide/spark.md shows how to ship it).

\b
Examples:
  kdissect spark captures/ --out tables/
  kdissect spark big.pcap --out tables/ --records --mode overwrite
  kdissect spark s3a://bucket/caps/ --out /data/tables --partition-by date
  kdissect spark /nfs/caps --out /nfs/tables --master spark://head:7077 \\
                 --mode append
Then query, e.g. with Spark SQL or DuckDB:
  SELECT api_name, count(*) FROM exchanges GROUP BY api_name
"""
)

SMALL_INPUT = 256 * 1024 * 1024  # below this, one process beats Spark's start-up


@main.command(help=SPARK_HELP)
@click.argument("inputs", nargs=-1, required=True, metavar="CAPTURE_OR_DIR...")
@click.option(
    "--out",
    required=True,
    metavar="DIR",
    help="Directory (or URL) for the tables; a local path is made absolute here.",
)
@click.option(
    "--mode",
    type=click.Choice(output.MODES),
    default="error",
    show_default=True,
    help="If OUT exists: refuse, replace its tables (every one, so none is left "
    "from an earlier run), or add this run's rows to them.",
)
@click.option(
    "--partition-by",
    type=click.Choice(output.PARTITIONS),
    help="Partition the exchanges and records tables by UTC day (a `date` "
    "column), by capture file, or by API (api_name).",
)
@port_options
@click.option("--master", metavar="URL", help="Spark master (default: see above).")
@click.option(
    "--records",
    "with_records",
    is_flag=True,
    help="Also write the records table (decodes every record batch; with "
    "--schemas/--registry, keys and values as JSON: docs/guide/values.md).",
)
@click.option(
    "--shard-size",
    default="128M",
    show_default=True,
    metavar="SIZE",
    help="Split pcap files larger than this into byte ranges of about this size.",
)
@click.option(
    "--split/--no-split",
    default=None,
    help="Force splitting large pcap files, or reading every file whole.",
)
@click.option(
    "--keep-log",
    is_flag=True,
    help="Keep Spark's own log after a successful run (it is always kept, and "
    "named, when a run fails).",
)
@keylog_option
@memory_option
@value_options
def spark(
    inputs,
    out,
    mode,
    partition_by,
    ports,
    no_detect,
    master,
    with_records,
    shard_size,
    split,
    keep_log,
    keylog,
):
    _need_spark_extra("kdissect spark", "pyspark")
    _need_spark_extra("kdissect spark", "pyarrow")
    import tempfile
    import time
    from ..pipeline.session import SparkStartError, chosen_master, explain, get_session
    from ..sources.pcap import DEFAULT_PORTS

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        files = storage.expand(list(inputs))
        if not files:
            raise click.UsageError(
                "no capture files (.pcap, .pcapng, .cap, .gz) in " + ", ".join(inputs)
            )
        output.check(storage.absolute(out), mode, with_records, files, partition_by)
    except (storage.StorageError, output.OutputError) as e:
        raise click.UsageError(str(e)) from None
    if chosen_master(master).startswith("local") and not any(map(storage.is_url, files)):
        total = sum(os.path.getsize(f) for f in files)
        if total < SMALL_INPUT:
            err.print(
                f"hint: {total / 2**20:.1f} MiB is quicker in one process, without "
                f"Spark's start-up: kdissect pcap FILE... --format parquet -o "
                f"exchanges.parquet",
                style="dim",
            )
    started = time.monotonic()
    log = os.path.join(tempfile.gettempdir(), f"kdissect-spark-{os.getpid()}.log")
    try:
        with err.status("starting Spark…"):
            session = get_session(master, log=log)
    except SparkStartError as e:
        raise click.ClickException(f"Spark did not start: {e}") from None
    except Exception as e:  # a bad master URL...
        raise click.ClickException(
            f"Spark did not start: {explain(e)}\n  Check the --master URL; Spark's own "
            f"output is in {log}"
        ) from None
    job = dict(
        ports=DEFAULT_PORTS | _ports(ports),
        detect=not no_detect,
        with_records=with_records,
        shard_bytes=_size(shard_size),
        split=split,
        mode=mode,
        partition_by=partition_by,
        keys=keylog,
        max_memory=memory_budget().limit,
        values=values_source(click.get_current_context()),
    )
    try:
        result = _run_with_progress(err, session, files, out, job)
    except output.OutputError as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:
        raise click.ClickException(
            f"the Spark job failed: {explain(e)}\n  Spark's own output is in {log}"
        ) from None
    if not keep_log and os.path.exists(log):
        os.remove(log)
    _print_warnings(err, result.warnings)
    tables = ", ".join(t for t in output.TABLES if t != "records" or with_records)
    err.print(
        f"wrote {result.exchanges} exchanges"
        + (f" and {result.records} records" if with_records else "")
        + f" to {storage.absolute(out)} ({tables}; {result.shards} "
        f"shard{'s' if result.shards != 1 else ''}, {result.packets} packets, "
        f"{time.monotonic() - started:.1f} s)",
        style="green",
    )
    unclean = [c["capture"] for c in result.captures if c["status"] not in ("ok", "incomplete")]
    if unclean:
        err.print(
            f"{len(unclean)} capture(s) not read cleanly: see the status and "
            f"warnings columns of the captures table",
            style="yellow",
        )
    # an input with no packet read exits 1, as `kdissect pcap` does in every format
    # ("no kafka" does not: it is also what TLS without its keys is called here)
    if any(c["status"] in ("unreadable", "empty") for c in result.captures):
        raise SystemExit(1)


def _run_with_progress(err: Console, session, files: list[str], out: str, job: dict):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TimeElapsedColumn
    from ..pipeline.spark_job import run_job

    phases = {"shards": "reading shards", "connections": "decoding connections"}
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=not err.is_terminal,
        disable=not err.is_terminal,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                for t in tasks.values():  # the phase before is over
                    bar.update(t, completed=bar.tasks[t].total)
                tasks[phase] = bar.add_task(phases[phase], total=total)
            bar.update(tasks[phase], completed=done, total=total)

        def stalled(seconds: float) -> None:
            err.print(
                f"no Spark task has started after {seconds:.0f} s: the cluster has not "
                f'given this job any executor (Spark: "Initial job has not accepted '
                f'any resources"). Check that workers are up with free cores and '
                f"memory; still waiting (Ctrl-C to stop)",
                style="yellow",
            )

        result = run_job(session, files, out, progress=progress, on_stall=stalled, **job)
        for t in tasks.values():  # the last poll may predate the end
            bar.update(t, completed=bar.tasks[t].total)
    return result
