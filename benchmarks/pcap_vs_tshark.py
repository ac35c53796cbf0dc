#!/usr/bin/env python3
"""kdissect pcap against tshark on the same capture, side by side in one run:

    summary      tshark -T fields -e kafka.api_key   vs  kdissect pcap
    stats        tshark -T fields -e kafka.api_key   vs  kdissect pcap --stats
    parquet      tshark -T fields -e kafka.api_key   vs  kdissect pcap --format parquet
    (--peer summary: stats and parquet against kdissect pcap's summary instead)
    full decode  tshark -T json                      vs  kdissect pcap --format jsonl (-j 1, -j N)

kdissect runs on its compiled packet path and, with --paths both (the default), on the
pure-Python one too (KDISSECT_PURE=1), so the two compare in the same run; --paths all
adds the compiled scanner with TCP reassembly in Python (KDISSECT_PY_REASM=1, the
compiled path before issue 28's reassembly step).

Each pair runs alternately (peer, ours, peer, ours...) --runs times; the table gives
medians of wall time, CPU time (user + system, workers included) and peak memory, and
the ratios (peer / ours: above 1, kdissect is faster or smaller). On a machine others
share, wall time depends on their load; CPU time much less. Peak memory is the largest
sum of PSS (proportional set size: pages a forked worker shares with its parent count
once) over the process and all its children, sampled every 20 ms; "RSS" is the peak
resident set of the largest single process (what tests/test_hostile.py bounds). Output
goes to /dev/null. The capture comes from benchmarks/make_bulk_capture.py (or
benchmarks/many_connections.py).

kdissect runs as installed users run it: with its bytecode cached (a warm-up run writes
it, even where PYTHONDONTWRITEBYTECODE is set, as on the development machines, where it
would add about 0.15 s of compiling to every start), and --python picks the
interpreter of a plain `pip install kdissect` (the test virtualenv's kio also imports
hypothesis at start-up).

    .venv/bin/python benchmarks/pcap_vs_tshark.py CAPTURE [--runs 3] [--jobs 2]
        [--only summary|stats|parquet|jsonl]... [--no-peer] [--peer tshark|summary]
        [--port 9092]
        [--paths both|all|compiled|pure] [--python PLAIN_VENV/bin/python] [--baseline DIR]

--baseline DIR adds, to every kdissect run, the same run of the kdissect source tree in DIR
(e.g. a `git worktree add /tmp/base main`; with PYTHONPATH=DIR, the compiled extension
copied into DIR/kdissect), alternating with the others: before/after in the same run.

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
# compiled modules are written and reused, as on a user's machine
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def tree_pss(pid: int) -> int:
    """Bytes of memory ``pid`` and its descendants use (PSS)."""
    kids, total, todo = _children(), 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup", "rb") as f:
                for line in f:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
        todo += kids.get(p, [])
    return total


PURE = "(pure Python)"  # in a run's name: KDISSECT_PURE=1
BASELINE = "(baseline)"  # in a run's name: PYTHONPATH=--baseline
PY_REASM = "(TCP in Python)"  # in a run's name: KDISSECT_PY_REASM=1
_PATH_ENV = {PURE: "KDISSECT_PURE", PY_REASM: "KDISSECT_PY_REASM"}


def measure(
    cmd: list[str], path: str = "", baseline: str | None = None
) -> tuple[float, float, float, float]:
    """(wall seconds, CPU seconds, peak MiB (PSS), peak RSS MiB) of the process tree;
    ``path``: PURE, PY_REASM or "" (the compiled path); ``baseline``: a source tree to
    run instead (PYTHONPATH)."""
    start = time.monotonic()
    env = {k: v for k, v in ENV.items() if k not in _PATH_ENV.values()}
    if path:
        env[_PATH_ENV[path]] = "1"
    if baseline:
        env["PYTHONPATH"] = baseline
    # run in the tree: `python -m` puts the working directory before PYTHONPATH
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=baseline or ROOT, env=env
    )
    peak = 0
    while True:
        done, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if done:
            break
        peak = max(peak, tree_pss(proc.pid))
        time.sleep(0.02)
    seconds = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}); run it alone to see why")
    # the child's usage includes the children it waited for (kdissect's workers)
    return seconds, usage.ru_utime + usage.ru_stime, peak / 2**20, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="-j of the parallel kdissect run (default: the cores)",
    )
    ap.add_argument(
        "--only",
        choices=["summary", "stats", "parquet", "jsonl"],
        action="append",
        help="these runs only (may repeat)",
    )
    ap.add_argument(
        "--paths",
        choices=["both", "all", "compiled", "pure"],
        default="both",
        help="kdissect's packet paths to run (default: both, alternating)",
    )
    ap.add_argument(
        "--parquet-out",
        default="/tmp/kdissect-bench.parquet",
        help="where the parquet runs write (overwritten)",
    )
    ap.add_argument("--no-peer", action="store_true", help="kdissect alone")
    ap.add_argument(
        "--peer",
        choices=["tshark", "summary"],
        default="tshark",
        help="the peer of the stats and parquet runs: tshark -T fields, or "
        "kdissect's own summary (compiled path), which issue 28 asks them "
        "to be as fast as",
    )
    ap.add_argument("--port", type=int, default=9092)
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter kdissect is installed for (default: this one)",
    )
    ap.add_argument(
        "--baseline", metavar="DIR", help="also run the kdissect source tree in DIR (before/after)"
    )
    args = ap.parse_args()
    cap = os.path.abspath(args.capture)  # the baseline runs in its own directory
    tshark = ["tshark", "-r", cap, "-d", f"tcp.port=={args.port},kafka"]
    kdissect = [args.python, "-m", "kdissect", "pcap"]
    ours = kdissect + [cap, "-p", str(args.port)]
    for fmt in ("text", "jsonl"):  # warm-up: writes the bytecode
        subprocess.run(
            kdissect + [str(ROOT / "captures" / "acks0.pcap"), "--format", fmt],
            capture_output=True,
            env=ENV,
            check=True,
        )
    fields = tshark + ["-T", "fields", "-e", "kafka.api_key"]
    # the peer of --stats and Parquet
    light = (
        ("tshark -T fields -e kafka.api_key", fields)
        if args.peer == "tshark"
        else ("kdissect pcap (summary)", ours)
    )
    rows = [
        ("summary", "tshark -T fields -e kafka.api_key", fields, [("kdissect pcap", ours)]),
        ("stats", *light, [("kdissect pcap --stats", ours + ["--stats"])]),
        (
            "parquet",
            *light,
            [
                (
                    "kdissect pcap --format parquet",
                    ours + ["--format", "parquet", "-o", args.parquet_out],
                )
            ],
        ),
        (
            "full decode",
            "tshark -T json",
            tshark + ["-T", "json"],
            [("kdissect pcap --format jsonl -j 1", ours + ["--format", "jsonl", "-j", "1"])]
            + (
                [
                    (
                        f"kdissect pcap --format jsonl -j {args.jobs}",
                        ours + ["--format", "jsonl", "-j", str(args.jobs)],
                    )
                ]
                if args.jobs > 1
                else []
            ),
        ),
    ]
    if args.only:
        rows = [r for r in rows if r[0] in {o.replace("jsonl", "full decode") for o in args.only}]
    paths = {"both": ["", PURE], "all": ["", PY_REASM, PURE], "compiled": [""], "pure": [PURE]}[
        args.paths
    ]
    rows = [
        (
            label,
            peer_name,
            peer_cmd,
            [(f"{name} {path}".strip(), cmd) for name, cmd in variants for path in paths],
        )
        for label, peer_name, peer_cmd, variants in rows
    ]
    if args.baseline:
        rows = [
            (
                label,
                peer_name,
                peer_cmd,
                variants
                + [
                    (f"{name} {BASELINE}", cmd)
                    for name, cmd in (
                        [(peer_name, peer_cmd)] if peer_name.startswith("kdissect") else []
                    )
                    + variants
                ],
            )
            for label, peer_name, peer_cmd, variants in rows
        ]
    size = os.path.getsize(cap) / 2**20
    print(
        f"capture: {cap} ({size:.0f} MiB); {args.runs} alternating runs, medians; "
        f"load average at start {os.getloadavg()[0]:.1f}\n",
        flush=True,
    )
    print(
        f"{'run':60} {'wall s':>7} {'CPU s':>7} {'MiB':>6} {'RSS':>6} {'wall ×':>7} "
        f"{'CPU ×':>6} {'mem ×':>6}"
    )
    for label, peer_name, peer_cmd, variants in rows:
        got: dict[str, list[tuple[float, float, float, float]]] = {}
        cmds = ([] if args.no_peer else [(peer_name, peer_cmd)]) + variants
        for _ in range(args.runs):
            for name, cmd in cmds:
                path = next((p for p in _PATH_ENV if p in name), "")
                base = args.baseline if name.endswith(BASELINE) else None
                got.setdefault(name, []).append(measure(cmd, path, base))
        med = {
            name: tuple(statistics.median(r[i] for r in runs) for i in range(4))
            for name, runs in got.items()
        }
        peer = med.get(peer_name)
        for name, _cmd in cmds:
            wall, cpu, mem, rss = med[name]
            ratio = (
                f"{peer[0] / wall:7.2f} {peer[1] / cpu:6.2f} {peer[2] / mem:6.2f}"
                if peer and name != peer_name
                else f"{'':7} {'':6} {'':6}"
            )
            runs = "/".join(f"{r[0]:.1f}" for r in got[name])
            cpus = "/".join(f"{r[1]:.2f}" for r in got[name])
            print(
                f"{label + ': ' + name:60} {wall:7.2f} {cpu:7.2f} {mem:6.0f} {rss:6.0f} "
                f"{ratio}   (wall {runs}; CPU {cpus}; load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    print(
        f"\nload average at the end {os.getloadavg()[0]:.1f}; ×: peer / kdissect (above 1: "
        f"kdissect is faster or smaller)"
    )


if __name__ == "__main__":
    main()
