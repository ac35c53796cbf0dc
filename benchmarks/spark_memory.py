#!/usr/bin/env python3
"""Peak memory of a `kdissect spark` task against the size of the file it reads: runs
the command (local[1]: one task at a time, so the biggest Python worker is one task) and
samples the resident memory of every Python worker Spark forks (pyspark.daemon's
children) every 0.1 s; prints the file size, the peak worker RSS, the driver's peak and
the wall time.

    .venv/bin/python benchmarks/spark_memory.py FILE.pcap [--records] [--split] [--copies N...]

--copies N: also N copies of FILE (tests/support/replicate.py), to see the peak against
the size (docs/guide/spark.md, Memory).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.replicate import replicate  # noqa: E402


def rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process under ``root``."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            try:
                cmd = open(f"/proc/{c}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                cmd = ""
            out.append((c, cmd))
            todo.append(c)
    return out


def measure(path: str, records: bool, split: bool) -> tuple[int, int, float]:
    """(peak worker RSS, peak driver RSS, seconds) of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "kdissect",
            "spark",
            path,
            "--out",
            f"{tmp}/t",
            "--master",
            "local[1]",
            "--split" if split else "--no-split",
        ]
        if records:
            cmd.append("--records")
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        worker = driver = 0
        while proc.poll() is None:
            driver = max(driver, rss(proc.pid))
            for pid, line in tree(proc.pid):
                if "python" in line and "java" not in line:
                    worker = max(worker, rss(pid))
            time.sleep(0.1)
        took = time.monotonic() - start
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.read()[-800:]}")
    return worker, driver, took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("--records", action="store_true")
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--copies", type=int, nargs="*", default=[])
    args = ap.parse_args()
    files = [args.capture]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.capture).read_bytes()
        for n in args.copies:
            files.append(f"{tmp}/x{n}.pcap")
            with open(files[-1], "wb") as out:
                replicate(data, n, out)
        print(
            f"{'file MB':>8} {'worker peak MB':>15} {'driver peak MB':>15} {'s':>6}"
            f"   ({'records' if args.records else 'exchanges'}, "
            f"{'split' if args.split else 'whole'})"
        )
        for f in files:
            worker, driver, took = measure(f, args.records, args.split)
            print(
                f"{os.path.getsize(f) / 2**20:8.1f} {worker / 2**20:15.0f} "
                f"{driver / 2**20:15.0f} {took:6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
