"""`kdissect log`: Kafka's files on disk as byte-located trees, with recovery's checks."""

from __future__ import annotations

import json
import sys
from functools import partial

from typing import TYPE_CHECKING

import click

from ..render.console import console, output_console, print_parts
from ..render.log_json import batch_records, field_value, item_chunks, item_json, item_lines
from ..render.records import json_bytes, record_json
from ..render.kafka_forms import readable
from ..render.log_lines import encode
from ..render.marks import MARKS
from ..sources.logdir import LogError, LogItem, end_marker
from ..sources.logunits import LogDir, walk
from ..stream.engine import Engine
from ..stream.filter_values import OneRecord, asks_records
from ..stream.sink import ItemSink
from .common import budget, check_views, format_choices, need_terminal_for_tui, on_terminal
from .group import SUMMARIES, main
from .values_opts import value_options

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from ..filters import Filter

LOG_HELP = (
    SUMMARIES["log"]
    + """

PATH is a segment (.log), any other file Kafka writes in a partition directory (.index,
.timeindex, .txnindex, producer .snapshot, leader-epoch-checkpoint, partition.metadata,
quorum-state, KRaft .checkpoint snapshots), a partition directory (`orders-0`), a whole
log directory (what `log.dirs` names, with meta.properties and the offset checkpoints),
or a 0.7 `.kafka` log. Files are read in place, one batch at a time.

Every batch and record is decoded (magic 0, 1 and 2, every codec, transactional and
control batches); the internal topics (__consumer_offsets, __transaction_state,
__cluster_metadata and KRaft snapshots, __share_group_state, __remote_log_metadata) by
their own schemas. What broker recovery and kafka-dump-log's index checks would say
becomes findings: CRC mismatches, a batch running past the end of the file, nonsense or
zero bytes at the end, index entries that point nowhere, offsets going backwards,
leader epochs against leader-epoch-checkpoint, producer sequences against the .snapshot,
aborted transactions against the .txnindex, batches past the high watermark.

\b
Examples:
  kdissect log /var/lib/kafka/data/orders-0
  kdissect log /var/lib/kafka/data -Y 'finding'     # only what is wrong
  kdissect log 00000000000000000000.log -V          # every field, to the byte
  kdissect log __consumer_offsets-7 --format jsonl --records
  kdissect log orders-0 -Y 'record.key == "order-42"' --records
  kdissect log orders-0 -Y 'producer_id == 7 and finding == sequence_gap'
  kdissect log orders-0 --schemas schemas/ --records \\
               -Y 'record.value.customer.id == "c-3"'

JSON lines: one object per file and per batch (--records: per record too);
docs/guide/log.md. On a terminal (and without -V, --records or --format), the files and
batches open in the terminal UI: a list, the selected batch's byte tree beside its bytes,
with the keys of the capture screens: / filter, ctrl+f search (compressed batches too),
o sort, s statistics, e/E export (JSON lines; the batches as segments Kafka reads), ? all
keys (docs/guide/tui.md).
Tiered storage's copies (LocalTieredStorage's `<offset>-<segment id>.log`...) read too.

Exit status: 0 decoded (damage is reported as findings), 1 no such path or not a Kafka
file, 2 a wrong command line.
"""
)


@main.command(help=LOG_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-V", "--verbose", is_flag=True, help="Print every field of every batch as a tree.")
@click.option(
    "--format",
    "fmt",
    type=format_choices(log=True),
    default="text",
    show_default=True,
    help="Lines for people, JSON lines, or Parquet tables "
    "(batches, records, checks in the -o directory; "
    "docs/guide/log.md).",
)
@click.option("-o", "--output", metavar="DIR", help="Where --format parquet writes its tables.")
@click.option("--records", is_flag=True, help="Also one line (or JSON object) per record.")
@click.option(
    "-Y",
    "--filter",
    "filter_text",
    metavar="FILTER",
    help="Show only the items that match: finding == crc_mismatch, producer_id == 7, "
    'record.key == "k", base_offset >= 100 (docs/guide/filters.md).',
)
@click.option(
    "--max-decompressed",
    default="64M",
    show_default=True,
    metavar="SIZE",
    help="Decompressed bytes one batch may produce.",
)
@value_options
@click.option(
    "--spark",
    "on_spark",
    is_flag=True,
    help="With --format parquet: build the tables on Spark, a task per partition "
    "directory (many log dirs, a whole cluster's, or s3:// copies); -o is "
    "then a directory of Parquet directories (docs/guide/log.md). Whole tables: "
    "no -Y.",
)
@click.option(
    "--master",
    metavar="URL",
    help="With --spark: the Spark master (default: as for kdissect spark).",
)
@click.option(
    "--tui", is_flag=True, help="Open the terminal UI even when stdout is not a terminal."
)
@click.option("--no-tui", is_flag=True, help="Print instead of opening the terminal UI.")
def log(
    paths: tuple[str, ...],
    verbose: bool,
    fmt: str,
    output: str | None,
    records: bool,
    filter_text: str | None,
    max_decompressed: str,
    on_spark: bool,
    master: str | None,
    tui: bool,
    no_tui: bool,
) -> None:
    err = console(stderr=True)  # rich itself only if something is said through it
    if fmt == "parquet" and not output:
        raise click.UsageError("--format parquet needs -o DIR (the tables' directory)")
    if output and fmt != "parquet":
        raise click.UsageError(
            f"-o/--output is for --format parquet; {fmt} goes to stdout (redirect it)"
        )
    check_views(fmt, verbose)
    if on_spark:
        if fmt != "parquet" or filter_text or output is None:
            raise click.UsageError(
                "--spark builds the Parquet tables: use it with --format parquet -o DIR, without -Y"
            )
        _no_kafka_files(list(paths), budget(max_decompressed))
        _on_spark(list(paths), output, budget(max_decompressed).max_decompressed, master, err)
        return
    flt = None
    if filter_text:
        from ..filters import FilterError, parse_filter  # only with -Y
        from ..stream.fields import LOG_NAMES

        try:
            flt = parse_filter(filter_text, list(LOG_NAMES))
        except FilterError as e:
            raise click.UsageError(f"bad filter: {e}") from None
    options = budget(max_decompressed)
    if (tui or on_terminal(fmt, verbose or records)) and not no_tui:
        from pathlib import Path

        from ..tui.log_app import LogApp

        missing = [p for p in paths if not Path(p).exists()]
        if missing:
            click.echo(f"kdissect log: {missing[0]}: no such file or directory", err=True)
            sys.exit(1)
        need_terminal_for_tui()
        LogApp(list(paths), options, filter_text or "").run()
        return
    _say_read_beside(paths)
    if fmt == "parquet" and output:  # (checked above: parquet has -o)
        from ..pipeline.log_tables import write_log_tables

        def objects():
            for item in walk(list(paths), options, values=flt is None):
                if flt is None or flt(item):
                    yield from item_json(item, True)

        _no_kafka_files(list(paths), options)
        try:
            counts = write_log_tables(
                objects(),
                output,
                {"max_decompressed": options.max_decompressed, "filter": filter_text},
            )
        except LogError as e:
            click.echo(f"kdissect log: {e}", err=True)
            sys.exit(1)
        err.print(", ".join(f"{n} {name}" for name, n in counts.items()) + f" -> {output}")
        return
    printer = LogPrinter(fmt, verbose, records, flt)
    try:
        bulk = fmt == "jsonl" and flt is None  # no trees needed: records as text
        from ..render.log_lines import record_lines_for

        Engine(
            LogDir(list(paths), options, lines=record_lines_for() if bulk else None), printer
        ).run()
    except LogError as e:
        click.echo(f"kdissect log: {e}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    if printer.shown == 0 and flt is not None:
        err.print("nothing matched the filter")  # (stderr: not a silent empty output)
    elif printer.shown == 0 and flt is None:
        if _holds_kafka_files(list(paths)):
            err.print("the Kafka files hold nothing to show (empty segments)")
            return  # an empty segment (a new partition's) is no error
        click.echo(
            f"kdissect log: no Kafka files found in {', '.join(paths)} (expected "
            f"segments, indexes, checkpoints, a partition directory or a log dir)",
            err=True,
        )
        sys.exit(1)


class LogPrinter(ItemSink):
    """The sink of ``kdissect log``: the display filter, then a line (-V: the tree;
    --records: the records) or JSON objects per item."""

    def __init__(self, fmt: str, verbose: bool, records: bool, flt: Filter | None):
        self.fmt, self.verbose, self.records, self.filter = fmt, verbose, records, flt
        self.out = output_console()  # (as pcap's: trees wrap at 160 columns to a pipe)
        self.shown = 0
        # --records with a record filter: the records that pass it, each asked alone
        self.per_record = records and flt is not None and asks_records(flt.fields)

    def item(self, item: LogItem) -> None:
        picked: list | None = None  # what to list of a batch (None: as it is)
        if self.per_record and item.kind in ("batch", "message"):
            picked = self._passing(item)
            if picked is None:
                return
        elif self.filter is not None and not self.filter(item):
            return
        self.shown += 1
        if self.fmt == "jsonl":
            out = getattr(sys.stdout, "buffer", None)  # bytes: no encoding pass
            chunks = (
                item_chunks(item, self.records)
                if picked is None
                else [(encode(o) + "\n").encode() for o in picked]
            )
            for chunk in chunks:
                if out is not None:
                    out.write(chunk)
                else:
                    sys.stdout.write(chunk.decode())
            return
        print_parts(self.out, item_parts(item))
        if self.verbose and item.tree is not None:
            from ..render.text import print_tree  # trees: only with -V

            print_tree(self.out, item.tree)
        elif self.records and item.tree is not None:
            for rec in batch_records(item) if picked is None else picked:
                print_parts(self.out, [(f"    {_record_text(rec)}", None)])

    def _passing(self, item: LogItem) -> list | None:
        """With a record filter and --records: the batch's records that pass it, each
        asked alone (its record fields that record's, the others the batch's) -- record
        nodes, or for JSON lines the batch's object and theirs; None when none passes
        (the batch is not shown). A batch of which no record was read (damaged, not
        decompressed) is asked as a batch. (Asked of a whole batch, a filter passes it
        when any record has the key, and every record was listed.)"""
        flt = self.filter
        assert flt is not None, "only with a filter"
        if self.fmt == "jsonl":
            head, *recs = item_json(item, True)
            if not recs:
                return [head] if flt(item) else None
            kept = [r for r in recs if flt(OneRecord(item.values_of, r))]
            return [head, *kept] if kept else None
        nodes = batch_records(item) if item.tree is not None else []
        if not nodes:
            return [] if flt(item) else None
        kept = [n for n in nodes if flt(OneRecord(item.values_of, partial(record_json, n)))]
        return kept or None


def _say_read_beside(paths: tuple[str, ...]) -> None:
    """Name the partition's files a segment given alone is read with (stderr: the output
    stays the segment's)."""
    from pathlib import Path

    from ..sources.logdir import file_kind, read_beside

    for text in paths:
        path = Path(text)
        if path.is_file() and file_kind(path) == "segment":
            beside = read_beside(path)
            if beside:
                what = ", ".join(f"{p.name} ({_BESIDE_GIVES.get(p.suffix, '')})" for p in beside)
                click.echo(
                    f"kdissect log: {path.name} read with its partition's {what}; give "
                    f"the partition's directory ({path.parent}) to read and check its "
                    f"other files too",
                    err=True,
                )


# what each file read beside a segment tells of it (``read_beside``'s: the .txnindex
# files, and leader-epoch-checkpoint, which has no suffix)
_BESIDE_GIVES = {"": "leader epochs, the log start offset", ".txnindex": "aborted transactions"}


def _holds_kafka_files(paths: list[str]) -> bool:
    """Whether ``paths`` name a file Kafka writes, or a directory holding one (at the
    depth of a log dir's partitions): an empty segment yields no item but is one."""
    from pathlib import Path

    from ..sources.logdir import file_kind

    for text in paths:
        path = Path(text)
        if path.is_file() and file_kind(path) is not None:
            return True
        if path.is_dir():
            for p in path.glob("*"):
                if file_kind(p) is not None or (
                    p.is_dir() and any(file_kind(q) for q in p.glob("*"))
                ):
                    return True
    return False


def _no_kafka_files(paths: list[str], options) -> None:
    """Exit 1, before any table is written, when ``paths`` hold no file Kafka writes
    (empty tables would say the log was read and found empty)."""
    try:
        if next(walk(paths, options), None) is None:
            click.echo(
                f"kdissect log: no Kafka log files in {', '.join(paths)} (give log "
                f"dirs, partition directories or segment files); no tables written",
                err=True,
            )
            sys.exit(1)
    except LogError as e:
        click.echo(f"kdissect log: {e}", err=True)
        sys.exit(1)


def _on_spark(
    paths: list[str], out: str, max_decompressed: int, master: str | None, err: Console
) -> None:
    from .common import _need_spark_extra

    _need_spark_extra("kdissect log --spark", "pyspark")
    import os
    import tempfile

    from ..pipeline.log_job import run_log_job
    from ..pipeline.output import OutputError
    from ..pipeline.session import SparkStartError, explain, get_session

    log = os.path.join(tempfile.gettempdir(), f"kdissect-spark-{os.getpid()}.log")
    try:
        session = get_session(master, log=log)  # the JVM's own output: in that file
    except SparkStartError as e:
        raise click.ClickException(f"Spark did not start: {e}") from None
    except Exception as e:  # a bad master URL...
        raise click.ClickException(
            f"Spark did not start: {explain(e)}; Spark's own output is in {log}"
        ) from None
    try:
        counts = run_log_job(session, paths, out, max_decompressed=max_decompressed)
    except LogError as e:
        click.echo(f"kdissect log: {e}", err=True)
        sys.exit(1)
    except OutputError as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:  # Spark's own errors: said in a line, not a trace
        raise click.ClickException(
            f"the Spark job failed: {explain(e)}; Spark's own output is in {log}"
        ) from None
    finally:
        session.stop()
    if os.path.exists(log):
        os.remove(log)
    err.print(", ".join(f"{n} {name}" for name, n in counts.items()) + f" -> {out}")


# -- what an item says -----------------------------------------------------------------


def item_line(item: LogItem) -> Text:
    """An item's line as a rich Text (what a terminal shows)."""
    from rich.text import Text

    t = Text()
    for text, style in item_parts(item):
        t.append(text, style=style)
    return t


def item_parts(item: LogItem) -> list[tuple[str, str | None]]:
    """An item's line as (text, style) parts: a rich Text on a terminal, plain text on a
    pipe (render/console.print_parts)."""
    where = item.file
    if item.kind in ("batch", "message"):  # the segment, by its partition: lines grep whole
        where = item.path.name
        if item.topic is not None:
            where = f"{item.path.parent.name}/{where}"
    parts: list[tuple[str, str | None]] = [
        (f"{where}", "bold" if item.kind not in ("batch", "message") else "dim")
    ]
    tree = item.tree
    if item.kind == "batch" and tree is not None:
        parts.append((f"  @{tree.offset}+{tree.length}", "dim"))
        if tree.note:
            parts.append((f"  {tree.note}", None))
        pid = field_value(item, "producer_id")
        if isinstance(pid, int) and pid >= 0:
            parts.append(
                (
                    f"  producer {pid} epoch {field_value(item, 'producer_epoch')} "
                    f"seq {field_value(item, 'base_sequence')}",
                    None,
                )
            )
        epoch = field_value(item, "partition_leader_epoch")
        if isinstance(epoch, int):
            parts.append((f"  leader epoch {epoch}", None))
        parts += marks(item)
    elif tree is not None:
        parts.append((f"  {item.kind}", None))
        if tree.note:
            parts.append((f"  {tree.note}", None))
        if isinstance(tree.value, int):
            parts.append((f"  {tree.value} entries", None))
        else:  # a snapshot's producers, a checkpoint's entries: how many (-V lists them)
            listed = next((c for c in tree.children if c.ktype == "array"), None)
            if listed is not None:
                count = sum(1 for c in listed.children if c.name.startswith("["))
                parts.append((f"  {count} {listed.name.replace('_', ' ')}", None))
    else:
        parts.append((f"  {item.kind}", None))
    shown: dict[str, int] = {}  # code -> findings of it on the item
    for f in item.all_findings():
        shown[f.code] = n = shown.get(f.code, 0) + 1
        if n <= SHOWN_PER_CODE:
            mark, style = MARKS[f.severity]
            parts.append((f"  {mark} {f.text()}", style))
    for code, n in shown.items():
        if n > SHOWN_PER_CODE:  # (-V and the JSON lines list every one)
            parts.append((f"  … {n - SHOWN_PER_CODE} more [{code}]", "dim"))
    return parts


# findings of one code listed on an item's line: a damaged index can have one per entry
SHOWN_PER_CODE = 3


def marks(item: LogItem) -> list[tuple[str, str | None]]:
    """What an operator asks of a batch: which end of a transaction a control batch is
    (COMMIT, ABORT), whether its transaction was aborted, whether it is below the log
    start offset (deleted, still on disk)."""
    out: list[tuple[str, str | None]] = []
    tree = item.tree
    attrs = item.attributes()
    if tree is not None and attrs is not None and attrs & 0x20:
        marker = end_marker(tree)
        if marker is not None:
            out.append((f"  {marker}", "bold"))
    if item.aborted:
        out.append(
            ("  ABORTED (its transaction was aborted: read_committed consumers skip it)", "yellow")
        )
    if item.deleted is not None:
        out.append(
            (
                f"  deleted: {'all' if item.deleted else 'part'} of it below the log start "
                f"offset {item.log_start} (still on disk)",
                "yellow",
            )
        )
    return out


def _record_text(n) -> str:
    r = record_json(n)
    # an internal topic's record: its decoded key and value, as Kafka's formatters show them
    shown = [
        readable(r[f"{part}_decoded"]) if f"{part}_decoded" in r else r[part]
        for part in ("key", "value")
    ]
    text = (
        f"offset {r['offset']}  key {json.dumps(shown[0], default=str)}  "
        f"value {json.dumps(shown[1], default=str)}"
    )
    if len(text) > 2000:
        text = text[:2000] + "…"
    for part in ("key", "value"):
        c = n.child(part)
        if c is not None and c.note:
            text += f"  {part}: {c.note}"
    return text


__all__ = ["log", "item_json", "item_lines", "item_line", "item_parts", "json_bytes"]
