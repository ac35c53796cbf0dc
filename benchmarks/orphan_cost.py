#!/usr/bin/env python3
"""What responses whose requests were not captured cost: a one-way capture (the
broker's answers only, as a capture filtered on one direction or begun mid-connection
has them) against the two-way capture it was cut from. Each answer of the one-way
capture is an orphan whose API kdissect must guess.

    .venv/bin/python benchmarks/orphan_cost.py [--capture captures/kafka-clients.pcap]
        [--responses 5000] [--runs 3]

The two-way capture is a real one (default: kafka-clients.pcap, five client libraries
against Apache Kafka) copied one after another until it holds ``--responses`` answers
(replicate_capture.py: every copy's connections are new ones); the one-way capture is
the same file without the clients' packets. Both are read with ``-p`` on the broker's
port (a lone broker side is Kafka only by its port). CPU medians of alternating runs;
the goal is one-way <= 2x two-way. ``--before DIR``: also run the kdissect of another
checkout (e.g. a worktree of the commit before the change) on the same files.

Measured (load 12-20 on 2 cores): before (each orphan guessed in full; 1 run) two-way
2.20 CPU-s, one-way 66.4 CPU-s (x30.2, 12.5 ms more per orphan); after (3 runs) two-way
1.99, one-way 1.88 (x0.95: the one-way capture has no requests to decode; its guessing
costs about 55 us per orphan, most of it the 25 full guesses of the kinds first seen).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOAL = 2.0


def cpu(args: list[str], checkout: Path = ROOT) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "kdissect", *args],
        cwd=checkout,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def answers(path: Path) -> tuple[int, int]:
    """(responses, broker port) of a capture."""
    from kdissect.sources.pcap import exchanges_in

    got = exchanges_in([str(path)])
    ports = {ex.broker[1] for ex in got.exchanges}
    if len(ports) != 1:
        raise SystemExit(f"{path}: want a capture of one broker port, found {sorted(ports)}")
    return sum(ex.response is not None for ex in got.exchanges), ports.pop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", default=str(ROOT / "captures" / "kafka-clients.pcap"))
    ap.add_argument("--responses", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", help="another kdissect checkout to run on the same files")
    args = ap.parse_args()
    checkouts = {"": ROOT}
    if args.before:
        checkouts["before "] = Path(args.before).resolve()
    from tests.support.pcap_edit import one_way, rewrite

    src = Path(args.capture)
    per_copy, port = answers(src)
    copies = -(-args.responses // per_copy)
    with tempfile.TemporaryDirectory() as tmp:
        two = Path(tmp) / "two-way.pcap"
        one = Path(tmp) / "one-way.pcap"
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "replicate_capture.py"),
                str(src),
                str(two),
                "--copies",
                str(copies),
            ],
            check=True,
        )
        rewrite(two, one, lambda packets: one_way(packets, port))
        runs: dict[str, list[float]] = {
            f"{who}{way}": [] for who in checkouts for way in ("two-way", "one-way")
        }
        for _ in range(args.runs):
            for who, checkout in checkouts.items():
                for way, path in (("two-way", two), ("one-way", one)):  # alternating
                    runs[f"{who}{way}"].append(
                        cpu(["pcap", "--no-tui", str(path), "-p", str(port)], checkout)
                    )
    med = {name: statistics.median(v) for name, v in runs.items()}
    orphans = per_copy * copies
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{src.name} x{copies}: {orphans} responses; CPU medians of {args.runs} runs"
    )
    for name, v in med.items():
        print(f"  {name:15} {v:7.2f} CPU-s")
    for who in checkouts:
        ratio = med[f"{who}one-way"] / med[f"{who}two-way"]
        extra = (med[f"{who}one-way"] - med[f"{who}two-way"]) / orphans * 1e6
        print(
            f"  {who}one-way / two-way: x{ratio:.2f} (goal <= x{GOAL:.0f}); "
            f"{extra:.0f} us more per orphan response"
        )


if __name__ == "__main__":
    main()
