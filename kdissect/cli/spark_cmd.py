"""`kdissect spark`: captures to Parquet tables on Spark."""

from __future__ import annotations

import os

import click
from rich.console import Console

from .common import _first_line, _need_spark_extra, _ports, _print_warnings, _size, port_options
from .group import main


SPARK_HELP = """Turn many and/or huge captures into Parquet tables, on Apache Spark.

CAPTURE_OR_DIR are capture files (pcap, pcapng, .gz) or directories searched for them.
Writes OUT/exchanges (one row per request/response exchange: connection, API, version,
correlation id, client id, times, latency, sizes, error codes with names, topics and
partitions, record counts and bytes, status, problems) and, with --records,
OUT/records (topic, partition, offset, timestamp, key, value size, headers).

Each file is one task, decoded where it is read. With fewer files than cores, pcap
files larger than --shard-size are split into byte ranges read in parallel, and their
connections are then reassembled and decoded in parallel (pcapng and compressed files
are never split; --split/--no-split overrides the choice). Needs the spark extra (pip install 'kdissect[spark]') and Java 17+.

\b
Where it runs (--master, else a master set in MASTER / PYSPARK_SUBMIT_ARGS /
spark-defaults.conf / SPARK_REMOTE, else embedded local[*] on 127.0.0.1):
  local[4]            this machine, 4 cores
  spark://host:7077   a standalone cluster      yarn, k8s://https://...  those clusters
  sc://host:15002     Spark Connect (needs pyspark[connect] on this side)
On a cluster, executors must see the capture paths and have kdissect installed
(docs/spark.md shows how to ship it).

\b
Examples:
  kdissect spark captures/ --out tables/
  kdissect spark big.pcap --out tables/ --records --shard-size 128M
  kdissect spark /nfs/caps --out /nfs/tables --master spark://head:7077
Then query, e.g. with Spark SQL or DuckDB:
  SELECT api_name, percentile(latency_ms, 0.99) FROM exchanges GROUP BY api_name
"""


@main.command(help=SPARK_HELP)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True),
                metavar="CAPTURE_OR_DIR...")
@click.option("--out", required=True, metavar="DIR", help="Directory for the tables.")
@port_options
@click.option("--master", metavar="URL", help="Spark master (default: see above).")
@click.option("--records", "with_records", is_flag=True,
              help="Also write the records table (decodes every record batch).")
@click.option("--shard-size", default="128M", show_default=True, metavar="SIZE",
              help="Split pcap files larger than this into byte ranges of about this size.")
@click.option("--split/--no-split", default=None,
              help="Force splitting large pcap files, or reading every file whole.")
def spark(inputs, out, ports, no_detect, master, with_records, shard_size, split):
    _need_spark_extra("kdissect spark", "pyspark")
    _need_spark_extra("kdissect spark", "pyarrow")
    import time
    from ..pipeline.spark_job import expand, get_session, run_job
    from ..sources.pcap import DEFAULT_PORTS

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if not expand(list(inputs)):
        raise click.UsageError("no capture files (.pcap, .pcapng, .cap, .gz) in "
                               + ", ".join(inputs))
    started = time.monotonic()
    import tempfile
    log = os.path.join(tempfile.gettempdir(), f"kdissect-spark-{os.getpid()}.log")
    try:
        with err.status("starting Spark…"):
            session = get_session(master, log=log)
    except Exception as e:                      # Java missing, bad master URL...
        raise click.ClickException(
            f"Spark did not start: {_first_line(e)}\n  Check `java -version` (Java 17+), "
            f"JAVA_HOME and the --master URL; Spark's own output is in {log}") from None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    phases = {"shards": "reading shards", "connections": "decoding connections"}
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=not err.is_terminal, disable=not err.is_terminal) as bar:
        tasks = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                for t in tasks.values():            # the phase before is over
                    bar.update(t, completed=bar.tasks[t].total)
                tasks[phase] = bar.add_task(phases[phase], total=total)
            bar.update(tasks[phase], completed=done, total=total)

        try:
            result = run_job(session, list(inputs), out, ports=DEFAULT_PORTS | _ports(ports),
                             detect=not no_detect, with_records=with_records,
                             shard_bytes=_size(shard_size), split=split,
                             progress=progress)
        except Exception as e:
            raise click.ClickException(f"the Spark job failed: {_first_line(e)}") from None
        for t in tasks.values():                   # the last poll may predate the end
            bar.update(t, completed=bar.tasks[t].total)
    _print_warnings(err, result.warnings)
    tables = f"{out}/exchanges" + (f" and {out}/records" if with_records else "")
    err.print(f"wrote {result.exchanges} exchanges"
              + (f" and {result.records} records" if with_records else "")
              + f" to {tables} ({result.shards} shard{'s' if result.shards != 1 else ''}, "
              f"{result.packets} packets, {time.monotonic() - started:.1f} s)", style="green")


