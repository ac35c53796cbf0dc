#!/usr/bin/env python3
"""kdissect pcap against tshark on the same capture, side by side in one run:

    tshark -T fields -e kafka.api_key   vs  kdissect pcap (one summary line per exchange)
    tshark -T json                      vs  kdissect pcap --format jsonl (every field)

Prints wall time, peak memory (max RSS) and the ratios. The capture comes from
benchmarks/make_bulk_capture.py (default benchmarks/data/bulk.pcap).

    .venv/bin/python benchmarks/pcap_vs_tshark.py [CAPTURE]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KDISSECT = [sys.executable, "-m", "kdissect", "pcap"]


def measure(cmd: list[str]) -> tuple[float, float, int]:
    """(seconds, peak MiB, output bytes) via GNU time."""
    out = subprocess.run(["/usr/bin/time", "-f", "@@ %e %M", *cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    m = re.search(rb"@@ ([\d.]+) (\d+)", out.stderr)
    if out.returncode != 0 or not m:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr[-500:].decode()}")
    return float(m[1]), int(m[2]) / 1024, len(out.stdout)


def main() -> None:
    capture = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "benchmarks/data/bulk.pcap")
    size = os.path.getsize(capture) / 2**20
    tshark = ["tshark", "-r", capture, "-d", "tcp.port==9092,kafka"]
    runs = [
        ("summary", "tshark -T fields -e kafka.api_key", tshark + ["-T", "fields", "-e", "kafka.api_key"],
         "kdissect pcap", KDISSECT + [capture]),
        ("full decode", "tshark -T json", tshark + ["-T", "json"],
         "kdissect pcap --format jsonl", KDISSECT + [capture, "--format", "jsonl"]),
    ]
    print(f"capture: {capture} ({size:.0f} MiB)\n")
    print(f"{'':12} {'peer':36} {'s':>7} {'MiB':>6}   {'kdissect':30} {'s':>7} {'MiB':>6}"
          f"   {'speed ×':>7} {'memory ×':>8}")
    for label, peer_name, peer_cmd, ours_name, ours_cmd in runs:
        ps, pm, _ = measure(peer_cmd)
        ks, km, _ = measure(ours_cmd)
        print(f"{label:12} {peer_name:36} {ps:7.2f} {pm:6.0f}   {ours_name:30} {ks:7.2f} {km:6.0f}"
              f"   {ps / ks:7.2f} {pm / km:8.2f}", flush=True)
    print("\nspeed ×: peer time / kdissect time (above 1: kdissect is faster); "
          "memory ×: peer peak / kdissect peak.")


if __name__ == "__main__":
    main()
