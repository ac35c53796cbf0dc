"""How fast `kdissect blob` answers a paste it must guess: the seed blog post's Erlang
paste of a 319-byte Metadata v0 response (captures/blobs/metadata-v0-response.erl),
no hints, the whole command (Python start, imports, reading the paste, ranking every
API and version, printing the tree).

    .venv/bin/python benchmarks/blob_guess.py [--runs 5]

Peers in the same run, alternating with it: the same paste with its hints (--api
Metadata --version 0 --response: nothing to guess), a real tester log whose text holds
three candidate regions (each decoded and ranked) and `kdissect blob --help` (the
floor: start-up and imports only). Wall-clock medians; the goal is 0.3 s for the
guessed paste."""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PASTE = ROOT / "captures" / "blobs" / "metadata-v0-response.erl"
GOAL = 0.3

SEVERAL = ROOT / "tests" / "data" / "real_pastes" / "tester-log-request-and-response.txt"

COMMANDS = {
    "guessed (no hints)": ["blob", str(PASTE)],
    # a real paste whose text holds 3 regions that can be bytes: all decoded, ranked
    "3 candidate regions": ["blob", str(SEVERAL)],
    "hinted": ["blob", str(PASTE), "--api", "Metadata", "--version", "0", "--response"],
    "start-up only (--help)": ["blob", "--help"],
}


def once(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one command; CPU time (user + system) is what the command
    would take on an idle machine, when other work shares the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kdissect", *args],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "100"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    once(COMMANDS["guessed (no hints)"])  # warm the file cache
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, args in COMMANDS.items():  # alternating
            times[name].append(once(args))
    wall = {name: statistics.median(w for w, _ in t) for name, t in times.items()}
    cpu = {name: statistics.median(c for _, c in t) for name, t in times.items()}
    floor = wall["start-up only (--help)"]
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"medians of {runs} alternating runs"
    )
    for name in COMMANDS:
        print(
            f"  {name:24} wall {wall[name]:6.3f} s  CPU {cpu[name]:6.3f} s  "
            f"{wall[name] / floor:4.2f}x start-up  "
            f"(wall: {', '.join(f'{w:.3f}' for w, _ in times[name])})"
        )
    guessed = wall["guessed (no hints)"]
    print(
        f"guessing costs {guessed - wall['hinted']:+.3f} s wall, "
        f"{cpu['guessed (no hints)'] - cpu['hinted']:+.3f} s CPU over the hinted run; "
        f"goal {GOAL} s wall: {'met' if guessed <= GOAL else 'NOT met'} ({guessed:.3f} s; "
        f"CPU {cpu['guessed (no hints)']:.3f} s)"
    )


if __name__ == "__main__":
    main()
