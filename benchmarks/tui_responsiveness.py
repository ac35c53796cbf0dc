#!/usr/bin/env python3
"""How the TUI feels on a big capture, with tshark side by side:

    first row      time from start until the first exchange row is in the list
                   (peer: tshark's first output line, `tshark -r FILE | head -1`)
    key latency    while loading continues: time for a key (↓) to move the cursor,
                   median and worst of 40 presses
    loaded         time until the whole file is in the list (peer: tshark's full pass)
    memory         peak RSS of the UI process after loading, and of the loader (the
                   forked child that reads and decodes the capture)

The app runs headless (Textual's test driver) on benchmarks/data/bulk.pcap by default.

    .venv/bin/python benchmarks/tui_responsiveness.py [CAPTURE]
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tshark_first_line(capture: str) -> tuple[float, float]:
    """(seconds to tshark's first line, seconds for its whole pass)."""
    cmd = ["tshark", "-r", capture, "-d", "tcp.port==9092,kafka", "-Y", "kafka"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdout.readline()
    first = time.monotonic() - start
    proc.stdout.read()
    proc.wait()
    return first, time.monotonic() - start


async def measure(capture: str, quiet: bool = False) -> dict:
    """``quiet``: press no keys (the load alone)."""
    from kdissect.sources.pcap import capture_loader
    from kdissect.tui.app import KdissectApp

    start = time.monotonic()
    app = KdissectApp(capture_loader([capture]), title="bench")
    out: dict = {}
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.table
        while table.row_count == 0:
            await asyncio.sleep(0.005)
        out["first_row"] = time.monotonic() - start
        keys = []
        for _ in range(40 if not quiet else 0):
            if app.loaded:
                break
            before = table.cursor_row
            if table.row_count <= before + 1:
                await asyncio.sleep(0.05)
                continue
            t = time.monotonic()
            app.simulate_key("down")        # as a terminal would send it: no waiting
            while table.cursor_row == before:
                await asyncio.sleep(0.001)
            keys.append(time.monotonic() - t)
            await asyncio.sleep(0.15)       # a person's pace: the detail follows
        out["keys"] = keys
        out["keys_while_loading"] = not app.loaded
        while not app.loaded:
            await asyncio.sleep(0.02)
        out["loaded"] = time.monotonic() - start
        out["rows"] = table.row_count
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["loader_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def main() -> None:
    capture = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "benchmarks/data/bulk.pcap")
    size = Path(capture).stat().st_size / 2**20
    r = asyncio.run(measure(capture))        # before tshark runs: the children's peak
    alone = asyncio.run(measure(capture, quiet=True))   # memory is then the loader's
    t_first, t_all = tshark_first_line(capture)
    keys = sorted(r["keys"])
    print(f"capture: {capture} ({size:.0f} MiB), {r['rows']} exchanges\n")
    print(f"{'':<28}{'kdissect TUI':>14}{'tshark':>10}{'ratio':>8}")
    print(f"{'first row (s)':<28}{r['first_row']:>14.2f}{t_first:>10.2f}"
          f"{t_first / r['first_row']:>7.1f}x")
    print(f"{'everything loaded (s)':<28}{alone['loaded']:>14.2f}{t_all:>10.2f}"
          f"{t_all / alone['loaded']:>7.1f}x")
    print(f"{'  ... while browsing (s)':<28}{r['loaded']:>14.2f}")
    print(f"{'key latency while loading':<28}{'median %.0f ms, worst %.0f ms' % (statistics.median(keys) * 1000, keys[-1] * 1000):>32}"
          f"  ({len(keys)} keys, {'still loading' if r['keys_while_loading'] else 'load ended'})")
    print(f"{'peak memory (MiB)':<28}{r['rss_mib']:>14.0f}  UI; loader "
          f"{r['loader_mib']:.0f}")


if __name__ == "__main__":
    main()
