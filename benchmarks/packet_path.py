#!/usr/bin/env python3
"""The packet path alone, compiled against pure Python: a capture's records read and
their link/IP/TCP headers parsed into the segments the reassembler takes (what
tests/support/native_check.py compares), without reassembly or decoding. Alternating
runs in this process, medians of CPU seconds (process time) and wall seconds.

    .venv/bin/python benchmarks/packet_path.py CAPTURE [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.native_check import native_scan, python_scan  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    got: dict[str, list[tuple[float, float]]] = {"pure Python": [], "compiled": []}
    count = 0
    for _ in range(args.runs):
        for name, scan in (("pure Python", python_scan), ("compiled", native_scan)):
            wall, cpu = time.perf_counter(), time.process_time()
            result = scan(args.capture)
            got[name].append((time.process_time() - cpu, time.perf_counter() - wall))
            count = len(result.events)
            del result
    print(
        f"{args.capture}: {count} segments; {args.runs} alternating runs, medians; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    med = {
        n: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
        for n, v in got.items()
    }
    for name, (cpu, wall) in med.items():
        print(f"  {name:12} {cpu:7.2f} CPU s {wall:7.2f} wall s")
    print(f"  compiled is {med['pure Python'][0] / med['compiled'][0]:.1f}x cheaper in CPU")


if __name__ == "__main__":
    main()
