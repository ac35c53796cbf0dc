#!/usr/bin/env python3
"""Many connections of one exchange each (issue 22's hostile case: 200,000 by default),
kdissect against tshark in the same run:

    .venv/bin/python benchmarks/many_connections.py [--connections 200000] [--runs 3]
        [--out /tmp/kdissect-connections.pcap] [--only stats|jsonl]... [--no-peer]

It writes the capture with scripts/make_hostile.py's maker (the one tests/test_hostile.py
runs), unless it is already there, then runs benchmarks/pcap_vs_tshark.py on it: `--stats`
against `tshark -T fields -e kafka.api_key`, and `--format jsonl` (-j 1 and one worker
per core) against `tshark -T json`, alternately, medians of CPU seconds (workers
included), PSS and the largest process's peak RSS. The hostile test's bounds are 30
CPU-s and 1 GiB of RSS per run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import make_hostile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="/tmp/kdissect-connections.pcap")
    ap.add_argument("--only", choices=["stats", "jsonl"], action="append")
    ap.add_argument("--no-peer", action="store_true", help="kdissect alone")
    args = ap.parse_args()
    out = Path(args.out)
    if not out.exists():
        print(f"writing {out}: {args.connections} connections", flush=True)
        make_hostile.many_connections(out, args.connections)
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "pcap_vs_tshark.py"),
        str(out),
        "--runs",
        str(args.runs),
        "--paths",
        "compiled",
    ]
    for only in args.only or ["stats", "jsonl"]:
        cmd += ["--only", only]
    if args.no_peer:
        cmd.append("--no-peer")
    sys.exit(subprocess.run(cmd).returncode)


if __name__ == "__main__":
    main()
