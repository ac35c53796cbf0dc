"""`kdissect log`: Kafka's files on disk as byte-located trees, with recovery's checks."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.text import Text

from ..filters import Filter, FilterError, parse_filter
from ..protocol.internal import control_of
from ..render.log_lines import encode as _encode, prefixed
from ..render.records import json_bytes, plain_json, record_json
from ..render.text import tree_of
from ..protocol.ondisk import BATCH_FIELDS
from ..sources.logdir import LogDir, LogError, LogItem, walk
from ..stream.engine import Engine
from ..stream.sink import ItemSink
from .common import budget, format_choices, on_terminal
from .group import main
from .values_opts import value_options

LOG_HELP = """Decode Kafka's files on disk: segments, indexes, snapshots, checkpoints.

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
  kdissect log /var/lib/kafka/data -Y 'finding'             # only what is wrong
  kdissect log 00000000000000000000.log -V                  # every field, byte by byte
  kdissect log __consumer_offsets-7 --format jsonl --records
  kdissect log orders-0 -Y 'record.key == "order-42"' --records
  kdissect log orders-0 -Y 'producer_id == 7 and finding == sequence_gap'
  kdissect log orders-0 --schemas schemas/ --records -Y 'record.value.customer.id == "c-3"'

JSON lines: one object per file and per batch (--records: per record too); docs/log.md.
On a terminal (and without -V, --records or --format), the files and batches open in the
terminal UI: a list, the selected batch's byte tree beside its bytes, with the keys of the
capture screens: / filter, ctrl+f search (compressed batches too), o sort, s statistics,
e/E export (JSON lines; the batches as segments Kafka reads), ? all keys (docs/tui.md).
Tiered storage's copies (LocalTieredStorage's `<offset>-<segment id>.log`...) read too.

Exit status: 0 decoded (damage is reported as findings), 1 no such path or not a Kafka
file, 2 a wrong command line.
"""


@main.command(help=LOG_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-V", "--verbose", is_flag=True, help="Print every field of every batch as a tree.")
@click.option("--format", "fmt", type=click.Choice(format_choices(log=True)), default="text",
              show_default=True, help="Lines for people, JSON lines, or Parquet tables "
                                      "(batches, records, checks in the -o directory; "
                                      "docs/log.md).")
@click.option("-o", "--output", metavar="DIR", help="Where --format parquet writes its tables.")
@click.option("--records", is_flag=True,
              help="Also one line (or JSON object) per record.")
@click.option("-Y", "--filter", "filter_text", metavar="FILTER",
              help="Show only the items that match: finding == crc_mismatch, producer_id == 7, "
                   "record.key == \"k\", base_offset >= 100 (docs/filters.md).")
@click.option("--max-decompressed", default="64M", show_default=True, metavar="SIZE",
              help="Decompressed bytes one batch may produce.")
@value_options
@click.option("--spark", "on_spark", is_flag=True,
              help="With --format parquet: build the tables on Spark, a task per partition "
                   "directory (many log dirs, a whole cluster's, or s3:// copies); -o is "
                   "then a directory of Parquet directories (docs/log.md).")
@click.option("--master", metavar="URL", help="With --spark: the Spark master (default: as "
                                                "for kdissect spark).")
@click.option("--tui", is_flag=True, help="Open the terminal UI even when stdout is not a "
                                          "terminal.")
@click.option("--no-tui", is_flag=True, help="Print instead of opening the terminal UI.")
def log(paths: tuple[str, ...], verbose: bool, fmt: str, output: str | None, records: bool,
        filter_text: str | None, max_decompressed: str, on_spark: bool,
        master: str | None, tui: bool, no_tui: bool) -> None:
    err = Console(stderr=True)
    if fmt == "parquet" and not output:
        raise click.UsageError("--format parquet needs -o DIR (the tables' directory)")
    if on_spark:
        if fmt != "parquet" or filter_text or output is None:
            raise click.UsageError("--spark builds the Parquet tables: use it with "
                                   "--format parquet -o DIR, without -Y")
        _on_spark(list(paths), output, budget(max_decompressed).max_decompressed, master, err)
        return
    try:
        flt = parse_filter(filter_text) if filter_text else None
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
        LogApp(list(paths), options, filter_text or "").run()
        return
    if fmt == "parquet" and output:             # (checked above: parquet has -o)
        from ..pipeline.log_tables import write_log_tables

        def objects():
            for item in walk(list(paths), options, values=flt is None):
                if flt is None or flt(item):
                    yield from item_json(item, True)
        try:
            counts = write_log_tables(objects(), output)
        except LogError as e:
            click.echo(f"kdissect log: {e}", err=True)
            sys.exit(1)
        err.print(", ".join(f"{n} {name}" for name, n in counts.items()) + f" -> {output}")
        return
    printer = LogPrinter(fmt, verbose, records, flt)
    try:
        bulk = fmt == "jsonl" and flt is None      # no trees needed: records as text
        Engine(LogDir(list(paths), options, lines=bulk), printer).run()
    except LogError as e:
        click.echo(f"kdissect log: {e}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    if printer.shown == 0 and fmt == "text":
        err.print("nothing matched" if flt is not None else "no Kafka files found")


class LogPrinter(ItemSink):
    """The sink of ``kdissect log``: the display filter, then a line (-V: the tree;
    --records: the records) or JSON objects per item."""

    def __init__(self, fmt: str, verbose: bool, records: bool, flt: Filter | None):
        self.fmt, self.verbose, self.records, self.filter = fmt, verbose, records, flt
        self.out = Console(highlight=False, soft_wrap=True)
        self.shown = 0

    def item(self, item: LogItem) -> None:
        if self.filter is not None and not self.filter(item):
            return
        self.shown += 1
        if self.fmt == "jsonl":
            out = getattr(sys.stdout, "buffer", None)      # bytes: no encoding pass
            for chunk in item_chunks(item, self.records):
                if out is not None:
                    out.write(chunk)
                else:
                    sys.stdout.write(chunk.decode())
            return
        self.out.print(item_line(item))
        if self.verbose and item.tree is not None:
            self.out.print(tree_of(item.tree))
        elif self.records and item.tree is not None:
            for rec in _records(item):
                self.out.print(Text(f"    {_record_text(rec)}"))


def _on_spark(paths: list[str], out: str, max_decompressed: int, master: str | None,
              err: Console) -> None:
    from .common import _need_spark_extra
    _need_spark_extra("kdissect log --spark", "pyspark")
    import os
    import tempfile

    from ..pipeline.log_job import run_log_job
    from ..pipeline.output import OutputError
    from ..pipeline.session import SparkStartError, explain, get_session
    log = os.path.join(tempfile.gettempdir(), f"kdissect-spark-{os.getpid()}.log")
    try:
        session = get_session(master, log=log)      # the JVM's own output: in that file
    except SparkStartError as e:
        raise click.ClickException(f"Spark did not start: {e}") from None
    except Exception as e:                          # a bad master URL...
        raise click.ClickException(f"Spark did not start: {explain(e)}; Spark's own "
                                   f"output is in {log}") from None
    try:
        counts = run_log_job(session, paths, out, max_decompressed=max_decompressed)
    except LogError as e:
        click.echo(f"kdissect log: {e}", err=True)
        sys.exit(1)
    except OutputError:
        raise click.ClickException(f"-o {out} already exists and is not empty; choose a "
                                   f"new directory for the tables") from None
    except Exception as e:              # Spark's own errors: said in a line, not a trace
        raise click.ClickException(f"the Spark job failed: {explain(e)}; Spark's own "
                                   f"output is in {log}") from None
    finally:
        session.stop()
    if os.path.exists(log):
        os.remove(log)
    err.print(", ".join(f"{n} {name}" for name, n in counts.items()) + f" -> {out}")


# -- what an item says -----------------------------------------------------------------

def _v(item: LogItem, name: str):
    c = item.tree.child(name) if item.tree is not None else None
    return c.value if c is not None else None


def item_line(item: LogItem) -> Text:
    t = Text()
    where = item.path.name if item.kind in ("batch", "message") else item.file
    t.append(f"{where}", style="bold" if item.kind not in ("batch", "message") else "dim")
    tree = item.tree
    if item.kind == "batch" and tree is not None:
        t.append(f"  @{tree.offset}+{tree.length}", style="dim")
        if tree.note:
            t.append(f"  {tree.note}")
        pid = _v(item, "producer_id")
        if isinstance(pid, int) and pid >= 0:
            t.append(f"  producer {pid} epoch {_v(item, 'producer_epoch')} "
                     f"seq {_v(item, 'base_sequence')}")
        epoch = _v(item, "partition_leader_epoch")
        if isinstance(epoch, int):
            t.append(f"  leader epoch {epoch}")
    elif tree is not None:
        t.append(f"  {item.kind}")
        if tree.note:
            t.append(f"  {tree.note}")
        if isinstance(tree.value, int):
            t.append(f"  {tree.value} entries")
    else:
        t.append(f"  {item.kind}")
    for f in item.all_findings():
        t.append(f"  ✗ {f.text()}", style="red" if f.severity == "error" else "yellow")
    return t


def _records(item: LogItem) -> list:
    """The records of a batch item: a v2 batch's (in its decompressed buffer if any), a
    compressed v0/v1 wrapper's inner messages, or the v0/v1 message itself."""
    tree = item.tree
    assert tree is not None, "batch items have a tree"
    if tree.ktype == "record_batch":
        holder = tree.child("records")
        kids = holder.children if holder is not None and holder.buffer is not None \
            else tree.children
        return [n for n in kids if n.ktype == "record"]
    if tree.ktype.startswith("message_v"):
        return [n for n in tree.walk() if n.ktype.startswith("message_v") and
                (_child_value(n, "attributes") or 0) & 7 == 0]
    return []


def _child_value(n, name):
    c = n.child(name)
    return c.value if c is not None else None


def _record_text(n) -> str:
    r = record_json(n)
    text = f"offset {r['offset']}  key {json.dumps(r['key'], default=str)}  " \
           f"value {json.dumps(r['value'], default=str)[:120]}"
    for part in ("key", "value"):
        c = n.child(part)
        if c is not None and c.note:
            text += f"  {part}: {c.note}"
    return text


_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _values_batch_json(item: LogItem) -> dict:
    """``batch_json`` of a batch the bulk path read as values or lines (a clean v2 batch)."""
    got = item.values or item.lines
    assert got is not None
    h = got[0]
    attrs = h["attributes"]
    return {"type": "batch", "file": item.file, "topic": item.topic,
            "partition": item.partition, "position": h["position"],
            "size": 12 + h["batch_length"], **{n: h[n] for n in BATCH_FIELDS},
            "last_offset": h["base_offset"] + h["last_offset_delta"],
            "codec": _CODECS[attrs & 7] if attrs & 7 < 5 else attrs & 7,
            "transactional": bool(attrs & 0x10), "control": bool(attrs & 0x20),
            "crc_valid": True, "findings": [f.to_json() for f in item.findings]}


def batch_json(item: LogItem) -> dict:
    """One batch (or v0/v1 message set entry, or damage) as a JSON object (docs/log.md)."""
    if item.values is not None or item.lines is not None:
        return _values_batch_json(item)
    tree = item.tree
    assert tree is not None, "batch items have a tree or values"
    out: dict = {"type": "batch", "file": item.file, "topic": item.topic,
                 "partition": item.partition, "position": tree.offset, "size": tree.length}
    if tree.ktype == "record_batch":
        for name in BATCH_FIELDS:
            out[name] = _v(item, name)
        attrs = out["attributes"] or 0
        out["last_offset"] = (out["base_offset"] + out["last_offset_delta"]
                              if isinstance(out["base_offset"], int) and
                              isinstance(out["last_offset_delta"], int) else None)
        out["codec"] = ("none", "gzip", "snappy", "lz4", "zstd").__getitem__(attrs & 7) \
            if attrs & 7 < 5 else attrs & 7
        out["transactional"] = bool(attrs & 0x10)
        out["control"] = bool(attrs & 0x20)
    elif tree.ktype.startswith("message_v"):
        for name in ("offset", "magic", "crc", "attributes", "timestamp"):
            out[name] = _v(item, name)
        attrs = out["attributes"] or 0
        out["codec"] = ("none", "gzip", "snappy", "lz4", "zstd")[attrs & 7] \
            if attrs & 7 < 5 else attrs & 7
    crc = tree.child("crc")
    if crc is not None:
        out["crc_valid"] = crc.problem is None
    out["findings"] = [f.to_json() for f in item.all_findings()]
    return out


def _record_obj(item: LogItem, n) -> dict:
    r = record_json(n)          # with key_decoded/value_decoded for internal topics
    assert item.tree is not None, "records come from batch items"
    obj = {**_record_head(item, item.tree.offset), "position": n.offset, **r}
    attrs = item.tree.child("attributes")
    if n.ktype == "record" and attrs is not None and isinstance(attrs.value, int) \
            and attrs.value & 0x20:
        found = control_of(n)
        if found is not None:
            obj["control_type"] = found[0]
            if found[1] is not None:
                obj["coordinator_epoch"] = found[1]
    return obj


def _record_head(item: LogItem, batch_position: int) -> dict:
    return {"type": "record", "file": item.file, "topic": item.topic,
            "partition": item.partition, "batch_position": batch_position}


def _record_prefix(item: LogItem, batch_position: int) -> str:
    """What every record line of a batch starts with, up to its position's value."""
    return _encode(_record_head(item, batch_position))[:-1] + ', "position": '


def item_chunks(item: LogItem, records: bool) -> list[bytes]:
    """``item_lines`` as UTF-8 (ASCII: the JSON is written with ``ensure_ascii``) in
    pieces: a batch of the JSON lines path is its batch line and its record lines, which
    are prefixed straight into bytes (render/log_lines.py)."""
    if item.lines is None:
        return [item_lines(item, records).encode()]
    h, body = item.lines
    text = (_encode(_values_batch_json(item)) + "\n").encode()
    return [text, prefixed(_record_prefix(item, h["position"]), body)] if records else [text]


def item_lines(item: LogItem, records: bool) -> str:
    """``item_json``'s objects as JSON lines. A batch the bulk path read as values or
    lines is encoded without building its objects: what every record line shares is
    encoded once (render/log_lines.py)."""
    if item.lines is not None:
        return b"".join(item_chunks(item, records)).decode()
    if item.values is None:
        return "".join(_encode(obj) + "\n" for obj in item_json(item, records))
    text = _encode(_values_batch_json(item)) + "\n"
    if not records:
        return text
    h, starts, recs = item.values
    prefix = _record_prefix(item, h["position"])
    enc = _encode
    return text + "".join([f"{prefix}{p}, {enc(r)[1:]}\n" for p, r in zip(starts, recs)])


def item_json(item: LogItem, records: bool) -> list[dict]:
    if item.lines is not None:          # (the JSON lines path's items: parsed back)
        return [json.loads(line) for line in item_lines(item, records).splitlines()]
    if item.values is not None:
        h, starts, recs = item.values
        head = _record_head(item, h["position"])
        return [_values_batch_json(item)] + \
            ([{**head, "position": p, **r} for p, r in zip(starts, recs)] if records else [])
    if item.kind in ("batch", "message") and item.tree is not None:
        objs = [batch_json(item)]
        if records:
            objs += [_record_obj(item, n) for n in _records(item)]
        return objs
    obj: dict = {"type": item.kind, "file": item.file, "topic": item.topic,
                 "partition": item.partition}
    if item.tree is not None:
        obj["content"] = plain_json(item.tree)
    obj["findings"] = [f.to_json() for f in item.all_findings()]
    return [obj]


__all__ = ["log", "item_json", "json_bytes"]
