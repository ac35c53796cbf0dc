#!/usr/bin/env python3
"""kdissect pcap against tshark on the same capture, side by side in one run:

    summary      tshark -T fields -e kafka.api_key   vs  kdissect pcap
    full decode  tshark -T json                      vs  kdissect pcap --format jsonl (-j 1, -j N)

Each pair runs alternately (peer, ours, peer, ours...) --runs times; the table gives
medians of wall time and of peak memory, and the ratios (peer / ours: above 1, kdissect
is faster or smaller). Peak memory is the largest sum of RSS over the process and all its
children (kdissect's -j workers count), sampled every 20 ms. Output goes to /dev/null.
The capture comes from benchmarks/make_bulk_capture.py.

    .venv/bin/python benchmarks/pcap_vs_tshark.py CAPTURE [--runs 3] [--jobs 2]
        [--only summary|jsonl] [--no-peer] [--port 9092]

--no-peer runs kdissect alone (e.g. the memory of --format jsonl on a 1.5 GB capture,
where tshark -T json would need far more memory than this machine has).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KDISSECT = [sys.executable, "-m", "kdissect", "pcap"]
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def tree_rss(pid: int) -> int:
    """Bytes resident in ``pid`` and its descendants."""
    kids, total, todo = _children(), 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm", "rb") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            pass
        todo += kids.get(p, [])
    return total


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak MiB of the process tree)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.02)
    seconds = time.monotonic() - start
    err = proc.stderr.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-500:].decode()}")
    return seconds, peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="-j of the parallel kdissect run (default: the cores)")
    ap.add_argument("--only", choices=["summary", "jsonl"])
    ap.add_argument("--no-peer", action="store_true", help="kdissect alone")
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    cap = args.capture
    tshark = ["tshark", "-r", cap, "-d", f"tcp.port=={args.port},kafka"]
    ours = KDISSECT + [cap, "-p", str(args.port)]
    rows = [
        ("summary", "tshark -T fields -e kafka.api_key",
         tshark + ["-T", "fields", "-e", "kafka.api_key"],
         [("kdissect pcap", ours)]),
        ("full decode", "tshark -T json", tshark + ["-T", "json"],
         [("kdissect pcap --format jsonl -j 1", ours + ["--format", "jsonl", "-j", "1"])]
         + ([(f"kdissect pcap --format jsonl -j {args.jobs}",
              ours + ["--format", "jsonl", "-j", str(args.jobs)])] if args.jobs > 1 else [])),
    ]
    if args.only:
        rows = [r for r in rows if (r[0] == "summary") == (args.only == "summary")]
    size = os.path.getsize(cap) / 2**20
    print(f"capture: {cap} ({size:.0f} MiB); {args.runs} alternating runs, medians; "
          f"load average at start {os.getloadavg()[0]:.1f}\n", flush=True)
    print(f"{'run':48} {'s':>8} {'MiB':>7} {'speed ×':>8} {'memory ×':>9}")
    for label, peer_name, peer_cmd, variants in rows:
        times: dict[str, list[float]] = {}
        mems: dict[str, list[float]] = {}
        cmds = ([] if args.no_peer else [(peer_name, peer_cmd)]) + variants
        for _ in range(args.runs):
            for name, cmd in cmds:
                s, m = measure(cmd)
                times.setdefault(name, []).append(s)
                mems.setdefault(name, []).append(m)
        peer_s = statistics.median(times[peer_name]) if not args.no_peer else None
        peer_m = statistics.median(mems[peer_name]) if not args.no_peer else None
        for name, _cmd in cmds:
            s, m = statistics.median(times[name]), statistics.median(mems[name])
            ratio = f"{peer_s / s:8.2f} {peer_m / m:9.2f}" if peer_s and name != peer_name \
                else f"{'':8} {'':9}"
            runs = "/".join(f"{t:.1f}" for t in times[name])
            print(f"{label + ': ' + name:48} {s:8.2f} {m:7.0f} {ratio}   ({runs} s)",
                  flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; speed ×: peer time / "
          f"kdissect time; memory ×: peer peak / kdissect peak")


if __name__ == "__main__":
    main()
