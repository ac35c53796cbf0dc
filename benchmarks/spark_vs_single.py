#!/usr/bin/env python3
"""The exchanges table from one process against the Spark job, side by side in one run:

    single   kdissect pcap FILE... --format parquet -o x.parquet   (one process, one core)
    cold     kdissect spark FILE... --out DIR --master local[N]     (JVM start included)
    warm     run_job() again in an already started local[N] session

on the capture-layer benchmark capture (benchmarks/make_bulk_capture.py), split into
shards and left whole, then on 1, 2 and 4 copies of it (the job's own choice: split
only when there are fewer files than cores) to show scaling with files.

    .venv/bin/python benchmarks/spark_vs_single.py [CAPTURE] [--cores 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(cmd: list[str]) -> float:
    start = time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-800:]}")
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", nargs="?", default=str(ROOT / "benchmarks/data/bulk.pcap"))
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from kdissect.pipeline.spark_job import get_session, run_job
    from kdissect.sources.pcap import DEFAULT_PORTS

    size = os.path.getsize(args.capture)
    work = Path(tempfile.mkdtemp(prefix="kdissect-bench-"))
    copies = {}
    for n in (1, 2, 4):
        files = []
        for i in range(n):
            link = work / f"copy{n}-{i}.pcap"
            link.symlink_to(os.path.abspath(args.capture))
            files.append(str(link))
        copies[n] = files
    master = f"local[{args.cores}]"
    kd = [sys.executable, "-m", "kdissect"]

    def single(files):
        return statistics.median(timed(kd + ["pcap", *files, "--format", "parquet", "-o",
                                              str(work / "x.parquet")])
                                 for _ in range(args.runs))

    print(f"capture: {args.capture} ({size / 2**20:.0f} MiB), Spark {master}, "
          f"median of {args.runs} runs\n")
    one = single(copies[1])
    cold = timed(kd + ["spark", args.capture, "--out", str(work / "cold"), "--master", master])
    spark = get_session(master, log=str(work / "spark.log"))

    def warm(files, split=None):
        run_job(spark, files, str(work / "warm"), ports=DEFAULT_PORTS, split=split)
        times = []
        for _ in range(args.runs):
            start = time.monotonic()
            run_job(spark, files, str(work / "warm"), ports=DEFAULT_PORTS, split=split)
            times.append(time.monotonic() - start)
        return statistics.median(times)

    split = warm(copies[1], True)
    whole = warm(copies[1], False)
    print(f"{'run':<40}{'seconds':>9}{'vs single':>11}{'MiB/s':>8}")
    row = lambda name, t, base: print(f"{name:<40}{t:>9.2f}{t / base:>10.2f}x"
                                      f"{size / 2**20 / t:>8.0f}")
    row("single process (pcap --format parquet)", one, one)
    row("Spark cold (kdissect spark, JVM start)", cold, one)
    row("Spark warm, split into shards", split, one)
    row("Spark warm, file whole", whole, one)
    print()
    print(f"{'files':<8}{'single s':>10}{'Spark warm s':>14}{'single MiB/s':>14}"
          f"{'Spark MiB/s':>13}{'speed-up':>10}")
    for n in (1, 2, 4):
        s = one if n == 1 else single(copies[n])
        w = warm(copies[n])
        mib = n * size / 2**20
        print(f"{n:<8}{s:>10.2f}{w:>14.2f}{mib / s:>14.0f}{mib / w:>13.0f}{s / w:>9.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
