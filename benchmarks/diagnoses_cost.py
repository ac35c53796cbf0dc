"""What the Kafka-level diagnoses (kdissect/stream/diagnoses.py) cost: the repo captures
where they fire, dissected with and without them, alternating, medians of 5 runs; prints
CPU-seconds (user+sys of this process), wall time, the ratio and the load average.

    .venv/bin/python benchmarks/diagnoses_cost.py
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from kdissect.sources.pcap import exchanges_in
from kdissect.stream import diagnoses

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
FILES = [
    str(CAPTURES / f"{n}.pcap")
    for n in ("kafka-broker-killed", "kafka-kraft-cluster", "mtu1500", "kafka-clients")
]


def main(runs: int = 5) -> None:
    observe = diagnoses.Diagnoses.observe
    off = lambda *a, **k: None  # noqa: E731
    got: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    count = 0
    for _ in range(runs):
        for mode in ("with", "without"):
            diagnoses.Diagnoses.observe = observe if mode == "with" else off  # type: ignore
            t, w = os.times(), time.perf_counter()
            count = sum(len(exchanges_in([f]).exchanges) for f in FILES)
            t2 = os.times()
            got[mode].append((t2.user - t.user + t2.system - t.system, time.perf_counter() - w))
    diagnoses.Diagnoses.observe = observe  # type: ignore
    cpu = {m: statistics.median(c for c, _ in v) for m, v in got.items()}
    wall = {m: statistics.median(w for _, w in v) for m, v in got.items()}
    for m in got:
        print(f"{m:8} diagnoses: {cpu[m]:.3f} CPU-s, {wall[m]:.3f} s wall ({count} exchanges)")
    print(
        f"ratio with/without: {cpu['with'] / cpu['without']:.2f} CPU, "
        f"{wall['with'] / wall['without']:.2f} wall; load average "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )


if __name__ == "__main__":
    main()
