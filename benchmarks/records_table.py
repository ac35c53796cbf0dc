#!/usr/bin/env python3
"""The records table's cost per record (issue 43): ``kdissect pcap FILE --format parquet``
with and without ``--records-output``, each a cold command as a user runs it, in CPU
seconds (user + system: the machine is shared, wall time says more about the neighbours),
alternating round after round; medians are printed, with the peak RSS of each.

    exchanges  kdissect pcap FILE --format parquet -o x.parquet
    records    kdissect pcap FILE --format parquet -o x.parquet --records-output r.parquet

µs per record = (records − exchanges) / records written: what the records table adds.
``--against DIR`` runs the same two commands with another checkout's kdissect as well
(e.g. main before a change) and prints the ratio. The default input is 40 copies of
captures/kafka-broker-killed.pcap (tests/support/replicate.py); the issue's figure is
on a record-dense capture of every codec (benchmarks/make_bulk_capture.py, as root):

    .venv/bin/python benchmarks/records_table.py [--capture FILE [--keylog KEYS]]
        [--runs 3] [--against /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.replicate import replicate  # noqa: E402


def run(tree: Path, args: list[str]) -> tuple[float, int]:
    """(CPU seconds, peak RSS in KiB) of one cold ``kdissect`` command from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kdissect", *args],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        sys.exit(f"kdissect {' '.join(args)} failed ({proc.returncode}): {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def rows_in(path: str) -> int:
    """The rows of a Parquet file, read in another process (a child's peak RSS starts
    at its parent's: this one stays small without pyarrow)."""
    code = "import sys, pyarrow.parquet as pq; print(pq.read_metadata(sys.argv[1]).num_rows)"
    got = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True)
    return int(got.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", help="the capture (default: copies of a repo capture)")
    ap.add_argument("--keylog", help="TLS keys of --capture (an SSLKEYLOGFILE)")
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", help="another checkout of kdissect, run alternately")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        capture = a.capture
        if capture is None:
            capture = os.path.join(tmp, "copies.pcap")
            data = (ROOT / "captures" / "kafka-broker-killed.pcap").read_bytes()
            with open(capture, "wb") as f:
                replicate(data, a.copies, f)
        x, r = os.path.join(tmp, "x.parquet"), os.path.join(tmp, "r.parquet")
        base = ["pcap", os.path.abspath(capture), "--format", "parquet", "-o", x]
        if a.keylog:
            base += ["--keylog", os.path.abspath(a.keylog)]
        trees = {"this": ROOT} | ({"against": Path(a.against)} if a.against else {})
        kinds = {"exchanges": base, "records": base + ["--records-output", r]}
        times: dict[tuple[str, str], list[float]] = {}
        rss: dict[tuple[str, str], int] = {}
        counts: dict[str, int] = {}
        for _ in range(a.runs):
            for tree_name, tree in trees.items():
                for kind, args in kinds.items():
                    cpu, peak = run(tree, args)
                    times.setdefault((tree_name, kind), []).append(cpu)
                    rss[(tree_name, kind)] = max(rss.get((tree_name, kind), 0), peak)
                    if kind == "records":
                        counts[tree_name] = rows_in(r)
        print(f"{capture}: {os.path.getsize(capture) / 1e6:.1f} MB, medians of {a.runs} runs")
        per: dict[str, float] = {}
        for tree_name in trees:
            n = counts[tree_name]
            ex = statistics.median(times[(tree_name, "exchanges")])
            rec = statistics.median(times[(tree_name, "records")])
            per[tree_name] = (rec - ex) / n * 1e6 if n else float("nan")
            print(
                f"  {tree_name:8} exchanges {ex:6.2f} CPU-s ({rss[(tree_name, 'exchanges')] // 1024} MiB)"
                f" | records {rec:6.2f} CPU-s ({rss[(tree_name, 'records')] // 1024} MiB),"
                f" {n} records: {per[tree_name]:.1f} µs a record,"
                f" {n / (rec - ex) if rec > ex else float('nan'):,.0f} records/s"
            )
        if a.against:
            print(f"  per record: this is {per['against'] / per['this']:.1f}x the other's speed")


if __name__ == "__main__":
    main()
