#!/usr/bin/env python3
"""One process, Spark local[N] and a Spark standalone cluster on the same input, each a
cold command as a user runs it (JVM start included):

    single    kdissect pcap FILE... --format parquet -o x.parquet --records-output r.parquet
    local     kdissect spark FILE... --out DIR --records --master local[N]
    cluster   kdissect spark FILE... --out DIR --records --master spark://...  (a master and
              N workers of 1 core each, separate JVMs: tests/support/spark_cluster.py)

The input is FILES copies-of-a-capture files (tests/support/replicate.py; default: 4
files of 40 copies of captures/kafka-broker-killed.pcap, real produce/fetch traffic).
The three alternate, round after round; medians are printed (docs/guide/spark.md, Speed).

    .venv/bin/python benchmarks/spark_speed.py [--files 4] [--copies 40] [--cores 2] [--runs 2]
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

from tests.support.replicate import replicate  # noqa: E402
from tests.support.spark_cluster import standalone  # noqa: E402

KD = [sys.executable, "-m", "kdissect"]


def timed(cmd: list[str], env: dict | None = None) -> float:
    start = time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-1500:]}")
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--capture", default=str(ROOT / "captures/kafka-broker-killed.pcap"))
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = Path(args.capture).read_bytes()
        files = []
        for n in range(args.files):
            files.append(str(work / f"in{n}.pcap"))
            with open(files[-1], "wb") as out:
                replicate(data, args.copies + n, out)  # each file its own connections
        size = sum(os.path.getsize(f) for f in files) / 2**20
        times: dict[str, list[float]] = {"single": [], "local": [], "cluster": []}
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with standalone(
            work, workers=args.cores, cores=1, memory="1g", pythonpath=str(ROOT)
        ) as cluster:
            for r in range(args.runs):
                out = work / f"r{r}"
                times["single"].append(
                    timed(
                        [
                            *KD,
                            "pcap",
                            *files,
                            "--format",
                            "parquet",
                            "-o",
                            f"{out}-one.parquet",
                            "--records-output",
                            f"{out}-records.parquet",
                        ],
                        env,
                    )
                )
                times["local"].append(
                    timed(
                        [
                            *KD,
                            "spark",
                            *files,
                            "--out",
                            f"{out}-local",
                            "--records",
                            "--master",
                            f"local[{args.cores}]",
                        ],
                        env,
                    )
                )
                times["cluster"].append(
                    timed(
                        [
                            *KD,
                            "spark",
                            *files,
                            "--out",
                            f"{out}-cluster",
                            "--records",
                            "--master",
                            cluster.url,
                        ],
                        cluster.env,
                    )
                )
                print(
                    f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
                    flush=True,
                )
        base = statistics.median(times["single"])
        print(
            f"\n{args.files} files, {size:.1f} MiB, --records; {args.cores} cores; "
            f"medians of {args.runs} runs"
        )
        print("| run | seconds | vs single process |\n|---|---|---|")
        for k, v in times.items():
            m = statistics.median(v)
            print(f"| {k} | {m:.1f} | {m / base:.2f}x |")


if __name__ == "__main__":
    main()
