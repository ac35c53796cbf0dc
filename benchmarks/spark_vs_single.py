#!/usr/bin/env python3
"""The exchanges table from one process against the Spark job, side by side in one run:

    single   kdissect pcap FILE... --format parquet -o x.parquet   (one process, one core)
    warm     run_job() in an already started local[N] session, the file whole and split
    cold     kdissect spark FILE --out DIR --master local[N]        (JVM start included),
             on the capture and on a tiny one (the fixed cost of starting Spark)

on the capture-layer benchmark capture (benchmarks/make_bulk_capture.py), then on 1, 2
and 4 copies of it (--scaling) to show scaling with files. Single and warm runs
alternate, round after round, and the medians are compared.

    .venv/bin/python benchmarks/spark_vs_single.py [CAPTURE] [--cores 2] [--runs 3] [--scaling]
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
KD = [sys.executable, "-m", "kdissect"]


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
    ap.add_argument("--scaling", action="store_true", help="also 2 and 4 copies of it")
    args = ap.parse_args()
    from kdissect.pipeline.session import get_session
    from kdissect.pipeline.spark_job import run_job
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

    def single(files):
        return timed(KD + ["pcap", *files, "--format", "parquet", "-o", str(work / "x.parquet")])

    def cold(files):
        return timed(
            KD
            + [
                "spark",
                *files,
                "--out",
                str(work / "cold"),
                "--master",
                master,
                "--mode",
                "overwrite",
            ]
        )

    print(
        f"capture: {args.capture} ({size / 2**20:.0f} MiB), Spark {master}, "
        f"medians of {args.runs} alternating runs\n"
    )
    colds = [cold(copies[1]) for _ in range(2)]
    tiny = [cold([str(ROOT / "captures/kcat.pcap")]) for _ in range(2)]
    spark = get_session(master, log=str(work / "spark.log"))

    def warm(files, split=None):
        start = time.monotonic()
        run_job(
            spark, files, str(work / "warm"), ports=DEFAULT_PORTS, split=split, mode="overwrite"
        )
        return time.monotonic() - start

    warm(copies[1], False)  # the first Arrow tasks start the workers
    times: dict[str, list[float]] = {"single": [], "whole": [], "split": []}
    for _ in range(args.runs):
        times["single"].append(single(copies[1]))
        times["whole"].append(warm(copies[1], False))
        times["split"].append(warm(copies[1], True))
    one = statistics.median(times["single"])
    print(f"{'run':<46}{'seconds':>9}{'vs single':>11}{'MiB/s':>8}")
    row = lambda name, t: print(f"{name:<46}{t:>9.2f}{t / one:>10.2f}x{size / 2**20 / t:>8.0f}")
    row("single process (pcap --format parquet)", one)
    row("Spark warm, the file whole (the default)", statistics.median(times["whole"]))
    row("Spark warm, the file split into shards", statistics.median(times["split"]))
    row("Spark cold (kdissect spark, JVM start)", statistics.median(colds))
    print(f"{'Spark cold on an 8 KB capture (fixed cost)':<46}{statistics.median(tiny):>9.2f}")
    if args.scaling:
        print()
        print(
            f"{'files':<8}{'single s':>10}{'Spark warm s':>14}{'single MiB/s':>14}"
            f"{'Spark MiB/s':>13}{'speed-up':>10}"
        )
        for n in (2, 4):
            s, w = [], []
            for _ in range(args.runs):
                s.append(single(copies[n]))
                w.append(warm(copies[n]))
            s, w = statistics.median(s), statistics.median(w)
            mib = n * size / 2**20
            print(f"{n:<8}{s:>10.2f}{w:>14.2f}{mib / s:>14.0f}{mib / w:>13.0f}{s / w:>9.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
