"""The PySpark job: capture files -> Parquet tables ``exchanges``, ``records`` (with
``--records``) and ``captures``.

Stage 1 reads shards (byte ranges of large pcap files, whole files otherwise) into TCP
segment rows keyed by flow. The shuffle brings each flow's segments together, sorted in
capture order, and stage 2 streams through them: reassembly, framing, pairing and
summaries, exactly as ``kdissect pcap`` does in one process. Only DataFrame operations
(``mapInArrow``, ``repartition``, ``sortWithinPartitions``) are used, so the job also runs
over Spark Connect. Files are read through ``storage`` (local paths, or URLs such as
``s3a://`` that the executors open themselves).
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..capture.shards import HEADER, plan, splittable
from ..render.lines import endpoint
from ..stream.model import Gap
from ..stream.facts import UNRESOLVED
from ..stream.rows import resolve_record_topics, resolve_topics
from . import manifest, output, storage
from .extract import TaskSettings, flow_row_chunks, shard_segments
from .session import MEMORY_ADVICE, get_session, parallelism  # noqa: F401  (get_session: the API's entry)
from .tables import CAPTURES, EXCHANGES, RECORDS, _micros
from .tracker import Tracker

# Stage 1's rows: a chunk of one flow's segments (pickled SEGMENT_COLUMNS tuples: the
# shuffle then moves a few large rows instead of one small row per packet, which
# measured several times faster), or a shard's summary (flow is null).
_WARNINGS = pa.list_(pa.struct([("frame", pa.int64()), ("text", pa.string())]))
CHUNKS = pa.schema(
    [
        ("capture", pa.string()),
        ("flow", pa.string()),
        ("shard", pa.int32()),
        ("chunk", pa.int64()),
        ("segments", pa.binary()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("first", pa.int64()),
        ("next", pa.int64()),
        ("packets", pa.int64()),
        ("unsupported", pa.int64()),
        ("warnings", _WARNINGS),
    ]
)
_CHUNK_BYTES = 4 * 1024 * 1024  # flush a flow's chunk at this size...
_HELD_BYTES = 64 * 1024 * 1024  # ...and every chunk when a task holds this much

_GAP = pa.struct(
    [
        ("client", pa.string()),
        ("broker", pa.string()),
        ("direction", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("frame", pa.int64()),
        ("ts", pa.float64()),
        ("unread", pa.bool_()),
    ]
)
_SUMMARY = pa.struct(
    [
        (name, CHUNKS.field(name).type)
        for name in ("shard", "start", "end", "first", "next", "packets", "unsupported", "warnings")
    ]
)
_SUMMARY_COLUMNS = [f.name for f in _SUMMARY]
# stage 2's output: one of exchange, record, summary, gap, topic id, or counts per row
OUT = pa.schema(
    [
        ("capture", pa.string()),
        ("exchange", pa.struct(list(EXCHANGES))),
        ("record", pa.struct(list(RECORDS))),
        ("summary", _SUMMARY),
        ("gap", _GAP),
        ("topic_id", pa.string()),
        ("topic_name", pa.string()),
        ("exchanges", pa.int64()),
        ("records", pa.int64()),
        ("unresolved", pa.int64()),
        ("connections", pa.int64()),
    ]
)
# Stage 2 runs before the shards' packet counts are known, so frames leave it as
# (shard << _SHARD_BITS) + frame within the shard, and the driver numbers them.
_SHARD_BITS = 40

_BATCH = 4096
DEFAULT_SHARD_BYTES = 128 * 1024 * 1024  # as Spark's own spark.sql.files.maxPartitionBytes
# Split files only with this many cores per file: on 2 cores a split file measured
# slower than the same file read whole (docs/guide/spark.md, Speed); --split forces it.
AUTO_SPLIT_CORES = 4


@dataclass
class ShardTask:
    capture: str  # the name rows carry (the path as given)
    path: str  # absolute path or URL, opened by the executors
    start: int
    end: int
    whole: bool  # the whole file, decoded where it is read
    plain: bool = True  # a plain pcap file (read by byte range, past damage)


@dataclass
class JobResult:
    exchanges: int = 0
    records: int = 0
    shards: int = 0
    packets: int = 0
    unresolved: int = 0  # rows whose topics were known only by id when made
    warnings: list[str] = field(default_factory=list)
    captures: list[dict] = field(default_factory=list)  # the captures table's rows
    run_id: str = ""  # this run's id in the output's manifest


def expand(inputs: list[str]) -> list[str]:
    """Files, and the capture files inside directories (recursively), sorted."""
    return storage.expand(inputs)


def plan_shards(
    paths: list[str], shard_bytes: int, parallelism: int = 1, split: bool | None = None
) -> list[ShardTask]:
    """One task per file, unless there are at least AUTO_SPLIT_CORES cores per file:
    then pcap files larger than ``shard_bytes`` are split into byte ranges, a multiple
    of ``parallelism`` of them so that no core idles through a last, lone shard. (Split
    shards cost a shuffle of their packets; whole files are decoded where they are read,
    which measured faster per byte, so splitting only pays with cores to spare.)
    ``split`` True or False overrides that choice."""
    if split is None:
        split = parallelism >= AUTO_SPLIT_CORES * len(paths)
    tasks = []
    for path in paths:
        full = storage.absolute(path)
        size = storage.size(full)
        plain = splittable(full, storage.open_input)
        if split and size > shard_bytes and plain:
            count = -(-size // shard_bytes)
            count = -(-count // parallelism) * parallelism
            tasks += [ShardTask(path, full, s, e, False) for s, e in plan(size, -(-size // count))]
        else:
            tasks.append(ShardTask(path, full, HEADER if plain else 0, size, True, plain))
    return tasks


# -- stages -----------------------------------------------------------------------------


class _Chunker:
    """Groups one shard's segment rows by flow into pickled chunks, in order."""

    def __init__(self, capture: str, shard: int):
        self.capture, self.shard = capture, shard
        self.flows: dict[str, list[tuple]] = {}
        self.sizes: dict[str, int] = {}
        self.held = 0
        self.chunks = 0
        self.ready: list[tuple] = []

    def add(self, row: tuple) -> None:
        flow = row[1]
        self.flows.setdefault(flow, []).append(row)
        size = len(row[13]) + 100
        self.sizes[flow] = self.sizes.get(flow, 0) + size
        self.held += size
        if self.sizes[flow] >= _CHUNK_BYTES:
            self.flush(flow)
        elif self.held >= _HELD_BYTES:
            self.flush_all()

    def flush(self, flow: str) -> None:
        rows = self.flows.pop(flow)
        self.held -= self.sizes.pop(flow)
        self.chunks += 1
        self.ready.append((flow, self.chunks, pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)))

    def flush_all(self) -> None:
        for flow in list(self.flows):
            self.flush(flow)

    def batch(self) -> pa.RecordBatch | None:
        if not self.ready:
            return None
        flows, chunks, blobs = zip(*self.ready)
        self.ready = []
        n = len(flows)
        arrays = [
            pa.array([self.capture] * n, pa.string()),
            pa.array(flows, pa.string()),
            pa.array([self.shard] * n, pa.int32()),
            pa.array(chunks, pa.int64()),
            pa.array(blobs, pa.binary()),
        ]
        arrays += [pa.nulls(n, f.type) for f in list(CHUNKS)[len(arrays) :]]
        return pa.RecordBatch.from_arrays(arrays, schema=CHUNKS)


_DECODED = ""  # the flow of stage-1 rows that carry finished rows (whole files)


def _stage1(tasks: list[ShardTask], settings: TaskSettings) -> Callable:
    def run(batches):
        for batch in batches:
            for shard_id in batch.column("id").to_pylist():
                t = tasks[shard_id]
                if t.whole:
                    # a file read whole is decoded here: only its rows are shuffled
                    for i, out in enumerate(_decode_file(t, shard_id, settings)):
                        blob = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
                        yield pa.RecordBatch.from_pylist(
                            [
                                {
                                    "capture": t.capture,
                                    "flow": _DECODED,
                                    "shard": shard_id,
                                    "chunk": i,
                                    "segments": blob,
                                }
                            ],
                            schema=CHUNKS,
                        )
                    continue
                summary, rows = shard_segments(
                    t.capture, t.path, shard_id, t.start, t.end, t.plain, storage.open_input
                )
                chunker = _Chunker(t.capture, shard_id)
                for row in rows:
                    chunker.add(row)
                    if chunker.ready:
                        yield chunker.batch()
                chunker.flush_all()
                if chunker.ready:
                    yield chunker.batch()
                yield pa.RecordBatch.from_pylist([summary.row()], schema=CHUNKS)

    return run


def _out_rows(capture: str, rows) -> list[dict]:
    """A flow's (or file's) rows as stage 2's output rows."""
    out: list[dict[str, Any]] = [
        {"capture": capture, "exchange": _micros(r)} for r in rows.exchanges
    ]
    out += ({"capture": capture, "record": _micros(r)} for r in rows.records)
    out += ({"capture": capture, "topic_id": i, "topic_name": n} for i, n in rows.topic_ids.items())
    out += (
        {
            "capture": capture,
            "gap": {
                "client": endpoint(client),
                "broker": endpoint(broker),
                "direction": g.direction,
                "offset": g.offset,
                "length": g.length,
                "frame": g.frame,
                "ts": g.ts,
                "unread": g.unread,
            },
        }
        for g, client, broker in rows.gaps
    )
    unresolved = sum(
        1 for r in rows.exchanges if any(t.startswith(UNRESOLVED) for t in r["topics"])
    ) + sum(1 for r in rows.records if (r["topic"] or "").startswith(UNRESOLVED))
    out.append(
        {
            "capture": capture,
            "exchanges": len(rows.exchanges),
            "records": len(rows.records),
            "unresolved": unresolved,
            "connections": rows.connections,
        }
    )
    return out


def _decode_file(t: ShardTask, shard_id: int, settings: TaskSettings) -> Iterator[list[dict]]:
    """A whole file read and decoded in one task: stage 2's output rows, a list of about
    _BATCH at a time as they are made (a task's memory does not grow with the file), its
    shard summary last."""
    summary, rows = shard_segments(
        t.capture, t.path, shard_id, t.start, t.end, t.plain, storage.open_input
    )
    with _memory_said():
        for chunk in flow_row_chunks(
            t.capture, rows, lambda shard: shard << _SHARD_BITS, settings, chunk_rows=_BATCH
        ):
            yield _out_rows(t.capture, chunk)
    row = summary.row()
    yield [{"capture": t.capture, "summary": {k: row[k] for k in _SUMMARY_COLUMNS}}]


class TaskMemoryError(MemoryError):
    pass


@contextlib.contextmanager
def _memory_said():
    """A MemoryError in a task said with what to do (Spark would otherwise report the
    worker's death as an EOFException, the cause only in the executor's log)."""
    try:
        yield
    except MemoryError as e:
        if isinstance(e, TaskMemoryError):
            raise
        raise TaskMemoryError(MEMORY_ADVICE) from None


def _whole_files(tasks: list[ShardTask], settings: TaskSettings) -> Callable:
    """When no file is split: stage 2's output rows straight from each task."""

    def run(batches):
        for batch in batches:
            for shard_id in batch.column("id").to_pylist():
                for out in _decode_file(tasks[shard_id], shard_id, settings):
                    yield pa.RecordBatch.from_pylist(out, schema=OUT)

    return run


def _stage2(settings: TaskSettings) -> Callable:
    def rows_of(batches):
        for batch in batches:
            flows = batch.column("flow")
            if flows.null_count:  # shard summaries
                for row in batch.filter(flows.is_null()).to_pylist():
                    yield (row["capture"], None, {k: row[k] for k in _SUMMARY_COLUMNS})
                batch = batch.filter(flows.is_valid())
            for capture, flow, blob in zip(
                batch.column("capture").to_pylist(),
                batch.column("flow").to_pylist(),
                batch.column("segments").to_pylist(),
            ):
                if flow == _DECODED:
                    yield from ((capture, flow, r) for r in pickle.loads(blob))
                else:
                    yield from pickle.loads(blob)

    def made(batches) -> Iterator[list[dict]]:
        """Output rows, a few at a time, as the sorted input is read."""
        for (capture, flow), segs in itertools.groupby(
            rows_of(batches), key=lambda r: (r[0], r[1])
        ):
            if flow is None:
                yield [{"capture": capture, "summary": s[2]} for s in segs]
            elif flow == _DECODED:
                yield from ([s[2]] for s in segs)
            else:
                with _memory_said():
                    for chunk in flow_row_chunks(
                        capture,
                        segs,
                        lambda shard: shard << _SHARD_BITS,
                        settings,
                        chunk_rows=_BATCH,
                    ):
                        yield _out_rows(capture, chunk)

    def run(batches):
        out: list[dict] = []
        for rows in made(batches):
            out += rows
            if len(out) >= _BATCH:
                yield pa.RecordBatch.from_pylist(out, schema=OUT)
                out = []
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=OUT)

    return run


def _resolver(ids: dict[str, dict[str, str]], schema: pa.Schema, records: bool) -> Callable:
    """Names topics known only by id, from what any connection of the capture taught."""
    resolve = resolve_record_topics if records else resolve_topics

    def run(batches):
        for batch in batches:
            rows = [
                r for row in batch.to_pylist() for r in resolve([row], ids.get(row["capture"], {}))
            ]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return run


def run_job(
    spark,
    inputs: list[str],
    out: str,
    *,
    ports,
    detect: bool = True,
    with_records: bool = False,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    split: bool | None = None,
    mode: str = "error",
    partition_by: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    on_stall: Callable[[float], None] | None = None,
    keys=None,
    max_memory: int | None = None,
    values=None,
) -> JobResult:
    """Write ``out``/exchanges, ``out``/captures (and ``out``/records) as Parquet: rows
    in time order, one file per capture (per partition with ``partition_by``: date,
    capture or api). ``mode`` (error, overwrite, append) says what to do with the tables
    of an earlier run in ``out`` (output.check): a run that fails leaves them as they
    were (its tables are written aside, then moved in). ``progress(phase, done, total)``
    hears about shards read ("shards") and connections decoded ("connections");
    ``on_stall(seconds)`` that no task has run yet (the cluster has no free cores).
    ``keys``: a capture.tls.KeyLog that decrypts TLS connections (sent to the tasks);
    ``max_memory``: each task's memory budget in bytes (--max-memory; stream.budget);
    ``values``: a values_schema.SchemaSource for the records' value columns (likewise)."""
    progress = progress or (lambda phase, done, total: None)
    # timestamps as Parquet's microsecond UTC type (Spark's default, INT96, is legacy)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    result = JobResult()
    out = storage.absolute(out)  # not the Connect server's working directory
    paths = expand(inputs)
    if not paths:
        raise ValueError("no capture files found in " + ", ".join(inputs))
    plan = output.check(out, mode, with_records, paths, partition_by)
    paths = plan.captures
    result.warnings += plan.skipped
    run_id = manifest.new_run_id()
    started = manifest.now()
    staged = output.staging(out, run_id)
    try:
        _decode_and_write(
            spark,
            result,
            paths,
            staged,
            TaskSettings(frozenset(ports), detect, with_records, keys, max_memory, values),
            shard_bytes=shard_bytes,
            split=split,
            partition_by=partition_by,
            progress=progress,
            on_stall=on_stall,
        )
        options = {
            "records": with_records,
            "partition_by": partition_by,
            "ports": sorted(ports),
            "detect": detect,
            "split": split,
            "shard_bytes": shard_bytes,
            "max_memory": max_memory,
            "keylog": keys is not None,
            "values": values is not None,
        }
        tables = [t for t in output.TABLES if t != "records" or with_records]
        record = manifest.recorded(
            plan.previous,
            kind="capture",
            tables=tables,
            layout={"records": with_records, "partition_by": partition_by},
            run={
                "run_id": run_id,
                "started": started,
                "finished": manifest.now(),
                "options": options,
                "captures": [{"capture": c, "content": plan.content.get(c)} for c in paths],
            },
        )
        output.commit(plan, staged, tables, record)
    except BaseException:
        output.abandon(staged)  # all or nothing: the tables stay as they were
        raise
    result.run_id = run_id
    return result


def _decode_and_write(
    spark,
    result: JobResult,
    paths: list[str],
    out: str,
    settings: TaskSettings,
    *,
    shard_bytes: int,
    split: bool | None,
    partition_by: str | None,
    progress: Callable[[str, int, int], None],
    on_stall,
) -> None:
    """The job proper: the tables of ``paths`` written as new directories under ``out``
    (the run's staging directory)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    write_mode = "error"
    cores = parallelism(spark)
    tasks = plan_shards(paths, shard_bytes, cores, split)
    result.shards = len(tasks)
    sizes = {t.capture: t.end for t in tasks}  # the last shard of a file ends it

    # one job: shards -> segments (stage 1), each flow's segments together in capture
    # order -> rows (stage 2); the small rows are kept for the writes that follow. With
    # no file split, each file is decoded where it is read: one stage, no shuffle.
    files = spark.range(0, len(tasks), 1, len(tasks))
    if all(t.whole for t in tasks):
        decoded = files.mapInArrow(
            _whole_files(tasks, settings),
            from_arrow_schema(OUT),
        )
    else:
        decoded = (
            files.mapInArrow(
                _stage1(tasks, settings),
                from_arrow_schema(CHUNKS),
            )
            # several partitions a core: connections differ in size, so few
            # partitions would leave cores idle behind one busy with a big one
            .repartition(4 * cores, "capture", "flow")
            .sortWithinPartitions("capture", "flow", "shard", "chunk")
            .mapInArrow(
                _stage2(settings),
                from_arrow_schema(OUT),
            )
        )
    decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
    phases = ("shards", "connections")
    progress("shards", 0, len(tasks))

    def shown(n: int, done: int, total: int) -> None:  # the first two phases
        if n < 2:
            progress(phases[n], done, total)

    with Tracker(spark, shown, on_stall):
        side = decoded.where(F.col("exchange").isNull() & F.col("record").isNull()).collect()
    ids = _digest(side, result, paths, sizes, settings.with_records)
    if not result.unresolved:
        ids = {}  # nothing to name: skip that pass

    exchanges = decoded.where(F.col("exchange").isNotNull()).select("exchange.*")
    if ids:
        exchanges = exchanges.mapInArrow(
            _resolver(ids, EXCHANGES, False), from_arrow_schema(EXCHANGES)
        )
    exchanges, by = output.partitioned(exchanges, "exchanges", partition_by)
    output.write(
        exchanges.repartition("capture", *[by] if by else []).sortWithinPartitions(
            "capture",
            F.coalesce("request_ts", "response_ts"),
            "client_port",
            "correlation_id",
            "seq",
        ),
        storage.child(out, "exchanges"),
        write_mode,
        by,
    )
    if settings.with_records:
        records = decoded.where(F.col("record").isNotNull()).select("record.*")
        if ids:
            records = records.mapInArrow(_resolver(ids, RECORDS, True), from_arrow_schema(RECORDS))
        records, by = output.partitioned(records, "records", partition_by)
        output.write(
            records.repartition("capture", *[by] if by else []).sortWithinPartitions(
                "capture", "message_ts", "topic", "partition", "offset"
            ),
            storage.child(out, "records"),
            write_mode,
            by,
        )
    decoded.unpersist()
    output.write(
        spark.createDataFrame(pa.Table.from_pylist(result.captures, CAPTURES)).coalesce(1),
        storage.child(out, "captures"),
        write_mode,
    )


def _digest(
    side, result: JobResult, paths: list[str], sizes: dict[str, int], with_records: bool
) -> dict[str, dict[str, str]]:
    """Shard summaries, gaps, learned topic ids and counts from stage 2's side rows into
    ``result`` (warnings with frames numbered as in the file, and the captures table);
    returns the topic ids per capture."""
    summaries = sorted(
        (
            r["summary"].asDict() | {"capture": r["capture"]}
            for r in side
            if r["summary"] is not None
        ),
        key=lambda s: s["shard"],
    )
    stats: dict[str, dict[str, Any]] = {
        p: {
            "capture": p,
            "size_bytes": sizes.get(p),
            "packets": 0,
            "connections": 0,
            "exchanges": 0,
            "records": 0 if with_records else None,
            "gaps": 0,
            "warnings": [],
        }
        for p in paths
    }
    frame_base: dict[int, int] = {}
    before: dict[str, int] = {}
    for s in summaries:
        c = s["capture"]
        frame_base[s["shard"]] = base = before.get(c, 0)
        before[c] = base + s["packets"]
        stats[c]["packets"] += s["packets"]
        for w in s["warnings"] or []:
            w = w.asDict() if hasattr(w, "asDict") else w
            frame = w["frame"]
            where = (
                ""
                if frame is None
                else f"after frame {base + frame}, "
                if base + frame
                else "before frame 1, "
            )
            stats[c]["warnings"].append(f"{where}{w['text']}")
        if s["unsupported"]:
            stats[c]["warnings"].append(
                f"skipped {s['unsupported']} packets of unsupported link types"
            )
    for c, text in _seam_problems(summaries):
        stats[c]["warnings"].append(text)
    ids: dict[str, dict[str, str]] = {}
    gaps = []
    for r in side:
        c = r["capture"]
        if r["topic_id"]:
            ids.setdefault(c, {})[r["topic_id"]] = r["topic_name"]
        elif r["gap"] is not None:
            g = r["gap"]
            shard, local = g["frame"] >> _SHARD_BITS, g["frame"] & ((1 << _SHARD_BITS) - 1)
            gap = Gap(
                0,
                g["direction"],
                g["offset"],
                g["length"],
                frame_base.get(shard, 0) + local if local else 0,
                g["ts"],
                g["unread"],
            )
            where = f"{g['client']} → {g['broker']}"
            gaps.append((c, gap.frame, f"{c}: {gap.describe(where)}"))
            stats[c]["gaps"] += 1
        elif r["exchanges"] is not None:
            result.exchanges += r["exchanges"]
            result.records += r["records"]
            result.unresolved += r["unresolved"]
            stats[c]["exchanges"] += r["exchanges"]
            stats[c]["connections"] += r["connections"]
            if with_records:
                stats[c]["records"] += r["records"]
    for p in paths:
        st = stats[p]
        st["status"] = _status(st)
        result.packets += st["packets"]
        result.warnings += [f"{p}: {w}" for w in st["warnings"]]
    result.warnings += [text for *_, text in sorted(gaps)]
    result.captures = [stats[p] for p in paths]
    return ids


def _status(st: dict) -> str:
    if not st["packets"]:
        return "unreadable" if st["warnings"] else "empty"
    if st["warnings"]:
        return "damaged"
    if not st["connections"]:
        return "no kafka"
    return "incomplete" if st["gaps"] else "ok"


def _seam_problems(summaries) -> list[tuple[str, str]]:
    """Each shard that owns records must start where the one before it stopped reading
    (a shard inside one long record owns none); bytes between them that no shard could
    read are damage, unless the shard before already said so."""
    problems = []
    owning = [s for s in summaries if s["first"] is not None]
    for prev, cur in zip(owning, owning[1:]):
        if prev["capture"] != cur["capture"] or prev["next"] == cur["first"]:
            continue
        if prev["next"] > cur["first"]:
            problems.append(
                (
                    cur["capture"],
                    f"shards overlap at byte {cur['first']} (one read on to "
                    f"{prev['next']}): packets there may be doubled",
                )
            )
        elif not any("nothing readable follows" in w["text"] for w in prev["warnings"] or []):
            problems.append(
                (
                    cur["capture"],
                    f"bytes {prev['next']}-{cur['first']} hold no pcap record (damaged); skipped",
                )
            )
    return problems
