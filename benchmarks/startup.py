#!/usr/bin/env python3
"""Start-up of every kdissect command against tshark's, side by side in one run.

Each command runs on a tiny input (the repo's captures/acks0.pcap: 14 packets, 7
exchanges; a one-message blob; a one-batch log segment written here), so what is
measured is what a command costs before and around its first byte: imports, tables,
process exit. The peer is `tshark -r tiny.pcap` on the same capture (tshark's own
start-up: dissector registration, preferences). `python -c pass` shows the floor the
interpreter itself sets.

Runs alternate (every command once, then again...) --runs times; the table gives the
median CPU time (user + system of the process and its children, from
getrusage(RUSAGE_CHILDREN)) and wall time, and the ratio of tshark's CPU time to each
command's (above 1: kdissect starts faster). The load average is printed with them: on
a shared machine CPU time moves much less than wall time, but it still moves.

kdissect runs as installed users run it: its bytecode cached (a warm-up run writes it,
even where PYTHONDONTWRITEBYTECODE is set, as on the development machines, where
compiling would add ~0.15 s to every start). --baseline DIR also runs the kdissect
source tree in DIR (e.g. `git worktree add /tmp/base main`, with the compiled
extension copied in) with the same interpreter, in the same alternation: before/after
in one run.

    .venv/bin/python benchmarks/startup.py [--runs 5] [--baseline DIR] [--no-peer]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "captures" / "acks0.pcap"
TLS, KEYS = ROOT / "captures" / "tls13.pcap", ROOT / "captures" / "tls13.keys"
# an ApiVersions v3 request (client id and software name "kcat", version "1")
BLOB = "00000017001200030000000100046b63617400056b636174023100"


def segment(path: Path) -> Path:
    """A log segment with one record batch of three records (kafka-python's builder)."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        b.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    b.close()
    path.write_bytes(bytes(b.buffer()))
    return path


def commands(work: Path) -> dict[str, list[str]]:
    log = segment(work / "00000000000000000000.log")
    return {
        "--help": ["--help"],
        "pcap (text)": ["pcap", "--no-tui", str(TINY)],
        "pcap --format jsonl": ["pcap", "--format", "jsonl", str(TINY)],
        "pcap --stats": ["pcap", "--stats", str(TINY)],
        "pcap --keylog (TLS 1.3)": ["pcap", "--no-tui", "--keylog", str(KEYS), str(TLS)],
        "blob": ["blob", BLOB],
        "log": ["log", str(log)],
    }


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run, output to /dev/null. It runs in the
    temporary directory: `python -m` puts its working directory first on sys.path, before
    PYTHONPATH's tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir()
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="another kdissect source tree to run alongside (before/after)",
    )
    ap.add_argument("--no-peer", action="store_true", help="without tshark")
    args = ap.parse_args()

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "SSLKEYLOGFILE", "FORCE_COLOR")
    }
    trees = {"kdissect": str(ROOT)}
    if args.baseline:
        trees["baseline"] = str(Path(args.baseline).resolve())
    peer = None if args.no_peer else shutil.which("tshark")
    if not args.no_peer and peer is None:
        sys.exit("tshark is not installed (apt-get install tshark), or give --no-peer")

    with tempfile.TemporaryDirectory() as tmp:
        jobs: dict[str, tuple[list[str], dict[str, str]]] = {}
        names: list[str] = []
        if peer:
            jobs["tshark -r tiny.pcap"] = ([peer, "-r", str(TINY)], env)
        jobs["python -c pass"] = ([sys.executable, "-c", "pass"], env)
        for tree, path in trees.items():
            tree_env = {**env, "PYTHONPATH": path}
            for name, argv in commands(Path(tmp)).items():
                names.append(name) if tree == "kdissect" else None
                jobs[f"{tree} {name}"] = ([sys.executable, "-m", "kdissect", *argv], tree_env)
        for argv, job_env in jobs.values():  # warm-up: bytecode written, files cached
            measure(argv, job_env)
        cpu: dict[str, list[float]] = {name: [] for name in jobs}
        wall: dict[str, list[float]] = {name: [] for name in jobs}
        for _ in range(args.runs):
            for name, (argv, job_env) in jobs.items():
                c, w = measure(argv, job_env)
                cpu[name].append(c)
                wall[name].append(w)

    load = os.getloadavg()
    print(
        f"median of {args.runs} alternating runs; load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores"
    )
    base = statistics.median(cpu["tshark -r tiny.pcap"]) if peer else None
    print(f"{'command':44} {'CPU s':>7} {'wall s':>7} {'tshark CPU / this':>18}")
    for name in jobs:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        ratio = f"{base / c:17.2f}x" if base else ""
        print(f"{name:44} {c:7.3f} {w:7.3f} {ratio}")
    if args.baseline:
        print("\nbaseline CPU / kdissect CPU (above 1: faster now)")
        for name in names:
            b = statistics.median(cpu[f"baseline {name}"])
            k = statistics.median(cpu[f"kdissect {name}"])
            print(f"  {name:42} {b / k:5.2f}x")


if __name__ == "__main__":
    main()
