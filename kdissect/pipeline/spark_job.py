"""The PySpark job: capture files -> Parquet tables ``exchanges`` (and ``records``).

Stage 1 reads shards (byte ranges of large pcap files, whole files otherwise) into TCP
segment rows keyed by flow. The shuffle brings each flow's segments together, sorted in
capture order, and stage 2 streams through them: reassembly, framing, pairing and
summaries, exactly as ``kdissect pcap`` does in one process. Only DataFrame operations
(``mapInArrow``, ``repartition``, ``sortWithinPartitions``) are used, so the job also runs
over Spark Connect.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import shlex
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ..capture.shards import plan, splittable
from ..stream.rows import UNRESOLVED, resolve_record_topics, resolve_topics
from ..render.lines import endpoint
from ..stream.model import Gap
from .extract import flow_rows, shard_segments
from .tables import EXCHANGES, RECORDS, _micros

# Stage 1's rows: a chunk of one flow's segments (pickled SEGMENT_COLUMNS tuples: the
# shuffle then moves a few large rows instead of one small row per packet, which
# measured several times faster), or a shard's summary (flow is null).
CHUNKS = pa.schema([
    ("capture", pa.string()), ("flow", pa.string()), ("shard", pa.int32()),
    ("chunk", pa.int64()), ("segments", pa.binary()),
    ("start", pa.int64()), ("end", pa.int64()), ("first", pa.int64()), ("next", pa.int64()),
    ("packets", pa.int64()), ("unsupported", pa.int64()), ("warning", pa.string()),
])
_CHUNK_BYTES = 4 * 1024 * 1024     # flush a flow's chunk at this size...
_HELD_BYTES = 64 * 1024 * 1024     # ...and every chunk when a task holds this much

_GAP = pa.struct([("client", pa.string()), ("broker", pa.string()),
                  ("direction", pa.string()), ("offset", pa.int64()), ("length", pa.int64()),
                  ("frame", pa.int64()), ("ts", pa.float64())])
_SUMMARY = pa.struct([(name, CHUNKS.field(name).type) for name in
                      ("shard", "start", "end", "first", "next", "packets", "unsupported",
                       "warning")])
# stage 2's output: one of exchange, record, summary, gap, topic id, or counts per row
OUT = pa.schema([
    ("capture", pa.string()),
    ("exchange", pa.struct(list(EXCHANGES))),
    ("record", pa.struct(list(RECORDS))),
    ("summary", _SUMMARY),
    ("gap", _GAP),
    ("topic_id", pa.string()), ("topic_name", pa.string()),
    ("exchanges", pa.int64()), ("records", pa.int64()), ("unresolved", pa.int64()),
])
# Stage 2 runs before the shards' packet counts are known, so frames leave it as
# (shard << _SHARD_BITS) + frame within the shard, and the driver numbers them.
_SHARD_BITS = 40

_BATCH = 4096
DEFAULT_SHARD_BYTES = 128 * 1024 * 1024    # as Spark's own spark.sql.files.maxPartitionBytes


@dataclass
class ShardTask:
    capture: str               # the name rows carry (the path as given)
    path: str                  # absolute path, read by the executors
    start: int
    end: int
    whole: bool                # read the file from its start (pcapng, compressed, small)


@dataclass
class JobResult:
    exchanges: int = 0
    records: int = 0
    shards: int = 0
    packets: int = 0
    unresolved: int = 0        # rows whose topics were known only by id when made
    warnings: list[str] = field(default_factory=list)


def expand(inputs: list[str]) -> list[str]:
    """Files, and the capture files inside directories (recursively), sorted."""
    out = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out += sorted(str(f) for f in p.rglob("*") if f.is_file() and
                          f.name.lower().endswith((".pcap", ".pcapng", ".cap", ".gz")))
        else:
            out.append(item)
    return out


def plan_shards(paths: list[str], shard_bytes: int, parallelism: int = 1,
                split: bool | None = None) -> list[ShardTask]:
    """One task per file, unless there are fewer files than cores: then pcap files larger
    than ``shard_bytes`` are split into byte ranges, a multiple of ``parallelism`` of them
    so that no core idles through a last, lone shard. (Split shards cost a shuffle of
    their packets; whole files are decoded where they are read, which measured about
    twice as fast per byte, so splitting only pays when cores would otherwise idle.)
    ``split`` True or False overrides that choice."""
    if split is None:
        split = len(paths) < parallelism
    tasks = []
    for path in paths:
        full = os.path.abspath(path)
        size = os.path.getsize(full)
        if split and size > shard_bytes and splittable(full):
            count = -(-size // shard_bytes)
            count = -(-count // parallelism) * parallelism
            tasks += [ShardTask(path, full, s, e, False)
                      for s, e in plan(size, -(-size // count))]
        else:
            tasks.append(ShardTask(path, full, 0, size, True))
    return tasks


# -- the session ------------------------------------------------------------------------

def _configured_master() -> str | None:
    """A master the user set outside kdissect: MASTER, PYSPARK_SUBMIT_ARGS, or
    spark-defaults.conf."""
    if os.environ.get("MASTER"):
        return os.environ["MASTER"]
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if "--master" in args[:-1]:
        return args[args.index("--master") + 1]
    for conf_dir in (os.environ.get("SPARK_CONF_DIR"),
                     os.path.join(os.environ["SPARK_HOME"], "conf")
                     if os.environ.get("SPARK_HOME") else None):
        conf = Path(conf_dir, "spark-defaults.conf") if conf_dir else None
        if conf is not None and conf.is_file():
            for line in conf.read_text().splitlines():
                parts = line.split(None, 1)
                if len(parts) == 2 and parts[0] == "spark.master":
                    return parts[1].strip()
    return None


def get_session(master: str | None = None, app_name: str = "kdissect",
                log: str | None = None):
    """A Spark session: ``master`` if given, else one the user configured, else embedded
    ``local[*]``. ``sc://...`` (or SPARK_REMOTE) means Spark Connect. Executors run the
    Python that runs kdissect; a local Spark binds to 127.0.0.1 and keeps its UI and
    console progress quiet. With ``log``, the JVM's own output goes to that file."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app_name)
    remote = master if master and master.startswith("sc://") else \
        None if master else os.environ.get("SPARK_REMOTE")
    if remote:
        # a server's settings are its own; "local[N]" remotes start one here
        with _jvm_output_to(log if remote.startswith("local") else None):
            return builder.remote(remote).getOrCreate()
    chosen = master or _configured_master()
    if master:
        builder = builder.master(master)
    elif chosen is None:
        chosen = "local[*]"
        builder = builder.master(chosen)
    if chosen.startswith("local"):
        builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2)))))
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.pyspark.udf.faulthandler.enabled", "true"))
    with _jvm_output_to(log):
        spark = builder.getOrCreate()
    _quiet(spark)
    return spark


class SparkStartError(Exception):
    pass


@contextlib.contextmanager
def _jvm_output_to(log: str | None):
    """Send what the Spark JVM prints at start-up and later (log4j banners, JVM
    warnings) to ``log`` instead of the user's terminal; on failure, raise with the
    lines that say why."""
    if log is None:
        yield
        return
    saved = os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    except Exception as e:
        os.dup2(saved, 2)
        reasons = [line.strip() for line in Path(log).read_text(errors="replace").splitlines()
                   if ("Exception" in line or "Error" in line or "rror:" in line)
                   and not line.lstrip().startswith("at ")]
        raise SparkStartError("; ".join(dict.fromkeys(reasons[-3:])) or str(e)) from e
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _quiet(spark) -> None:
    sc = _context(spark)
    if sc is not None:
        sc.setLogLevel("ERROR")


def _context(spark):
    """The SparkContext of a classic session; None over Spark Connect."""
    try:
        return spark.sparkContext
    except Exception:                                   # Connect has none
        return None


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
        self.ready.append((flow, self.chunks,
                           pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)))

    def flush_all(self) -> None:
        for flow in list(self.flows):
            self.flush(flow)

    def batch(self) -> pa.RecordBatch | None:
        if not self.ready:
            return None
        flows, chunks, blobs = zip(*self.ready)
        self.ready = []
        n = len(flows)
        arrays = [pa.array([self.capture] * n, pa.string()), pa.array(flows, pa.string()),
                  pa.array([self.shard] * n, pa.int32()), pa.array(chunks, pa.int64()),
                  pa.array(blobs, pa.binary())]
        arrays += [pa.nulls(n, f.type) for f in list(CHUNKS)[len(arrays):]]
        return pa.RecordBatch.from_arrays(arrays, schema=CHUNKS)


_DECODED = ""       # the flow of stage-1 rows that carry finished rows (whole files)


def _stage1(tasks: list[ShardTask], ports, detect: bool, with_records: bool) -> Callable:
    def run(batches):
        for batch in batches:
            for shard_id in batch.column("id").to_pylist():
                t = tasks[shard_id]
                summary, rows = shard_segments(t.capture, t.path, shard_id, t.start, t.end,
                                               t.whole)
                if t.whole:
                    # a file read whole is decoded here: only its rows are shuffled
                    done = flow_rows(t.capture, rows, lambda shard: shard << _SHARD_BITS,
                                     ports, detect, with_records)
                    out = _out_rows(t.capture, done)
                    for i in range(0, len(out), _BATCH):
                        blob = pickle.dumps(out[i:i + _BATCH], protocol=pickle.HIGHEST_PROTOCOL)
                        yield pa.RecordBatch.from_pylist(
                            [{"capture": t.capture, "flow": _DECODED, "shard": shard_id,
                              "chunk": i, "segments": blob}], schema=CHUNKS)
                else:
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
    out = [{"capture": capture, "exchange": _micros(r)} for r in rows.exchanges]
    out += ({"capture": capture, "record": _micros(r)} for r in rows.records)
    out += ({"capture": capture, "topic_id": i, "topic_name": n}
            for i, n in rows.topic_ids.items())
    out += ({"capture": capture, "gap": {
        "client": endpoint(client), "broker": endpoint(broker),
        "direction": g.direction, "offset": g.offset, "length": g.length,
        "frame": g.frame, "ts": g.ts}} for g, client, broker in rows.gaps)
    unresolved = sum(1 for r in rows.exchanges if any(t.startswith(UNRESOLVED)
                                                     for t in r["topics"])) + \
        sum(1 for r in rows.records if (r["topic"] or "").startswith(UNRESOLVED))
    out.append({"capture": capture, "exchanges": len(rows.exchanges),
                "records": len(rows.records), "unresolved": unresolved})
    return out


def _stage2(ports, detect: bool, with_records: bool) -> Callable:
    summary_columns = [f.name for f in _SUMMARY]

    def rows_of(batches):
        for batch in batches:
            flows = batch.column("flow")
            if flows.null_count:                # shard summaries
                for row in batch.filter(flows.is_null()).to_pylist():
                    yield (row["capture"], None, {k: row[k] for k in summary_columns})
                batch = batch.filter(flows.is_valid())
            for capture, flow, blob in zip(batch.column("capture").to_pylist(),
                                           batch.column("flow").to_pylist(),
                                           batch.column("segments").to_pylist()):
                if flow == _DECODED:
                    yield from ((capture, flow, r) for r in pickle.loads(blob))
                else:
                    yield from pickle.loads(blob)

    def run(batches):
        out: list[dict] = []
        for (capture, flow), segs in itertools.groupby(rows_of(batches),
                                                       key=lambda r: (r[0], r[1])):
            if flow is None:
                out += ({"capture": capture, "summary": s[2]} for s in segs)
            elif flow == _DECODED:
                out += (s[2] for s in segs)
            else:
                out += _out_rows(capture, flow_rows(capture, segs,
                                                    lambda shard: shard << _SHARD_BITS,
                                                    ports, detect, with_records))
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
            rows = [r for row in batch.to_pylist()
                    for r in resolve([row], ids.get(row["capture"], {}))]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)
    return run


class _Tracker:
    """Reports the tasks of each stage of the jobs run inside it to ``update(stage_number,
    done, total)``, stages numbered from 0 in the order they appear: from the status
    tracker of a classic session, or from Spark Connect's progress messages."""

    def __init__(self, spark, update: Callable[[int, int, int], None]):
        self.spark, self.sc, self.update = spark, _context(spark), update
        self.group = f"kdissect-{id(self)}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.connect = self.sc is None and hasattr(spark, "registerProgressHandler")

    def __enter__(self):
        if self.sc is not None:
            self.sc.setJobGroup(self.group, "kdissect")
            self.thread.start()
        elif self.connect:
            self.spark.registerProgressHandler(self._connect_progress)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.sc is not None:
            self.thread.join()
        elif self.connect:
            self.spark.removeProgressHandler(self._connect_progress)

    def _report(self, stages) -> None:
        for number, (done, total) in enumerate(stages):
            if total:
                self.update(number, done, total)

    def _connect_progress(self, stages=None, inflight_tasks=0, operation_id=None,
                          done=False) -> None:
        self._report((s.num_completed_tasks, s.num_tasks)
                     for s in sorted(stages or [], key=lambda s: s.stage_id))

    def _poll(self):
        tracker = self.sc.statusTracker()
        while not self.stop.wait(0.2):
            ids = sorted({stage for job in tracker.getJobIdsForGroup(self.group)
                          for stage in (getattr(tracker.getJobInfo(job), "stageIds", None)
                                        or [])})
            infos = [tracker.getStageInfo(i) for i in ids]
            self._report((i.numCompletedTasks, i.numTasks) for i in infos if i is not None)


def run_job(spark, inputs: list[str], out: str, *, ports, detect: bool = True,
            with_records: bool = False, shard_bytes: int = DEFAULT_SHARD_BYTES,
            split: bool | None = None,
            progress: Callable[[str, int, int], None] | None = None) -> JobResult:
    """Write ``out``/exchanges (and ``out``/records) as Parquet: one file per capture,
    rows in time order. ``progress(phase, done, total)`` hears about shards read
    ("shards") and connections decoded ("connections")."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    progress = progress or (lambda phase, done, total: None)
    # timestamps as Parquet's microsecond UTC type (Spark's default, INT96, is legacy)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    result = JobResult()
    paths = expand(inputs)
    if not paths:
        raise ValueError("no capture files found in " + ", ".join(inputs))
    parallelism = _parallelism(spark)
    tasks = plan_shards(paths, shard_bytes, parallelism, split)
    result.shards = len(tasks)
    ports = frozenset(ports)

    # one job: shards -> segments (stage 1), each flow's segments together in capture
    # order -> rows (stage 2); the small rows are kept for the writes that follow
    decoded = (spark.range(0, len(tasks), 1, len(tasks))
               .mapInArrow(_stage1(tasks, ports, detect, with_records), from_arrow_schema(CHUNKS))
               # several partitions a core: connections differ in size, so few
               # partitions would leave cores idle behind one busy with a big one
               .repartition(4 * parallelism, "capture", "flow")
               .sortWithinPartitions("capture", "flow", "shard", "chunk")
               .mapInArrow(_stage2(ports, detect, with_records), from_arrow_schema(OUT))
               .persist(StorageLevel.MEMORY_AND_DISK))
    phases = ("shards", "connections")
    progress("shards", 0, len(tasks))
    with _Tracker(spark, lambda n, d, t: n < 2 and progress(phases[n], d, t)):
        side = decoded.where(F.col("exchange").isNull() & F.col("record").isNull()).collect()
    ids = _digest(side, result)
    if not result.unresolved:
        ids = {}                                # nothing to name: skip that pass

    exchanges = decoded.where(F.col("exchange").isNotNull()).select("exchange.*")
    if ids:
        exchanges = exchanges.mapInArrow(_resolver(ids, EXCHANGES, False),
                                         from_arrow_schema(EXCHANGES))
    (exchanges.repartition("capture")
     .sortWithinPartitions("capture", F.coalesce("request_ts", "response_ts"),
                           "client_port", "correlation_id")
     .write.mode("overwrite").parquet(os.path.join(out, "exchanges")))
    if with_records:
        records = decoded.where(F.col("record").isNotNull()).select("record.*")
        if ids:
            records = records.mapInArrow(_resolver(ids, RECORDS, True),
                                         from_arrow_schema(RECORDS))
        (records.repartition("capture")
         .sortWithinPartitions("capture", "message_ts", "topic", "partition", "offset")
         .write.mode("overwrite").parquet(os.path.join(out, "records")))
    decoded.unpersist()
    return result


def _parallelism(spark) -> int:
    sc = _context(spark)
    try:
        return sc.defaultParallelism if sc is not None else 1
    except Exception:
        return 1


def _digest(side, result: JobResult) -> dict[str, dict[str, str]]:
    """Shard summaries, gaps, learned topic ids and counts from stage 2's side rows into
    ``result``; returns the topic ids per capture."""
    summaries = sorted((r["summary"].asDict() | {"capture": r["capture"]}
                        for r in side if r["summary"] is not None), key=lambda s: s["shard"])
    frame_base, before = {}, {}
    for s in summaries:
        frame_base[s["shard"]] = before.get(s["capture"], 0)
        before[s["capture"]] = before.get(s["capture"], 0) + s["packets"]
        result.packets += s["packets"]
        if s["warning"]:
            result.warnings += s["warning"].split("\n")
        if s["unsupported"]:
            result.warnings.append(f"{s['capture']}: skipped {s['unsupported']} packets of "
                                   f"unsupported link types")
    result.warnings += _seam_problems(summaries)
    ids: dict[str, dict[str, str]] = {}
    gaps = []
    for r in side:
        if r["topic_id"]:
            ids.setdefault(r["capture"], {})[r["topic_id"]] = r["topic_name"]
        elif r["gap"] is not None:
            g = r["gap"]
            shard, local = g["frame"] >> _SHARD_BITS, g["frame"] & ((1 << _SHARD_BITS) - 1)
            gap = Gap(0, g["direction"], g["offset"], g["length"],
                      frame_base.get(shard, 0) + local, g["ts"])
            where = f"{g['client']} → {g['broker']}"
            gaps.append((r["capture"], gap.frame, f"{r['capture']}: {gap.describe(where)}"))
        elif r["exchanges"] is not None:
            result.exchanges += r["exchanges"]
            result.records += r["records"]
            result.unresolved += r["unresolved"]
    result.warnings += [text for *_, text in sorted(gaps)]
    return ids


def _seam_problems(summaries) -> list[str]:
    """Each shard must start where the one before it stopped reading."""
    problems = []
    for prev, cur in zip(summaries, summaries[1:]):
        if prev["capture"] != cur["capture"] or cur["start"] == 0:
            continue
        if prev["next"] != cur["first"]:
            problems.append(
                f"{cur['capture']}: shards do not meet at byte {cur['start']}: one stopped "
                f"at {prev['next']}, the next began at {cur['first']}; packets near there "
                f"may be missing or doubled (rerun with a larger --shard-size)")
    return problems
