#!/usr/bin/env python3
"""How the TUI feels on a big capture, with tshark side by side:

    first row      time from start until the first exchange row is in the list
                   (peer: tshark's first output line, `tshark -r FILE | head -1`)
    key latency    while loading continues: time for a key (↓) to move the cursor,
                   median and worst of 40 presses
    loaded         time until the whole file is in the list (peer: tshark's full pass)
    memory         peak RSS of the UI process after loading, and of the loader (the
                   forked child that reads and decodes the capture)
    record filter  once loaded: `record.key == "k42"` over every exchange (in workers on
                   all cores), with ↓ pressed every 150 ms meanwhile (key latency)
                   (peer: `tshark -Y 'kafka.record_key == "k42"'` over the file)
    byte search    ctrl+f for bytes that are nowhere (every message and decompressed
                   batch is searched), keys as above (peer: the same tshark filter)

The app runs headless (Textual's test driver) on benchmarks/data/bulk.pcap by default.

    .venv/bin/python benchmarks/tui_responsiveness.py [CAPTURE]
    .venv/bin/python benchmarks/tui_responsiveness.py --jobs [CAPTURE] [RUNS]
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


KEY_FILTER = 'record.key == "k42"'
TSHARK_KEY_FILTER = 'kafka.message_key == "k42"'   # tshark 4.0 names it so
ABSENT = "no such bytes anywhere"


def tshark_filter(capture: str) -> float:
    start = time.monotonic()
    subprocess.run(["tshark", "-r", capture, "-d", "tcp.port==9092,kafka", "-Y",
                    TSHARK_KEY_FILTER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.monotonic() - start


async def _job(app, pilot, start_job) -> tuple[float, list[float]]:
    """(seconds until the job is done, latencies of ↓ pressed every 150 ms meanwhile)."""
    table = app.table
    table.move_cursor(0)
    t0 = time.monotonic()
    start_job()
    keys = []
    while app._job is not None:
        before = table.cursor_row
        if before + 1 < table.row_count:
            t = time.monotonic()
            app.simulate_key("down")
            while table.cursor_row == before and time.monotonic() - t < 10:
                await asyncio.sleep(0.001)
            keys.append(time.monotonic() - t)
        await asyncio.sleep(0.15)
    return time.monotonic() - t0, keys


async def measure_jobs(capture: str) -> dict:
    """A record-key filter and a byte search over the loaded capture."""
    from kdissect.sources.pcap import capture_loader
    from kdissect.tui.app import KdissectApp, parse_needle

    app = KdissectApp(capture_loader([capture]), title="bench")
    out: dict = {}
    async with app.run_test(size=(160, 45)) as pilot:
        while not app.loaded:
            await asyncio.sleep(0.05)
        out["filter"], out["filter_keys"] = await _job(
            app, pilot, lambda: app.apply_filter(KEY_FILTER))
        out["matched"] = len(app.shown)
        app.apply_filter("")
        app.needle, app.needle_text = parse_needle(ABSENT), ABSENT
        out["search"], out["search_keys"] = await _job(app, pilot, app.action_search_next)
    return out


def jobs_main(capture: str, runs: int) -> None:
    """Alternating runs: kdissect's filter and search, tshark's key filter."""
    rows = []
    for _ in range(runs):
        r = asyncio.run(measure_jobs(capture))
        r["tshark"] = tshark_filter(capture)
        rows.append(r)
        print(f"filter {r['filter']:.2f} s ({r['matched']} exchanges), search "
              f"{r['search']:.2f} s, tshark {r['tshark']:.2f} s; key medians "
              f"{statistics.median(r['filter_keys'] or [0]) * 1000:.0f} / "
              f"{statistics.median(r['search_keys'] or [0]) * 1000:.0f} ms "
              f"({len(r['filter_keys'])} / {len(r['search_keys'])} keys)", flush=True)
    med = {k: statistics.median(r[k] for r in rows) for k in ("filter", "search", "tshark")}
    keys = [k for r in rows for k in r["filter_keys"] + r["search_keys"]]
    print(f"\nmedians of {runs}: record filter {med['filter']:.2f} s, byte search "
          f"{med['search']:.2f} s, tshark key filter {med['tshark']:.2f} s "
          f"(tshark / kdissect: filter {med['tshark'] / med['filter']:.2f}x, search "
          f"{med['tshark'] / med['search']:.2f}x); keys meanwhile: median "
          f"{statistics.median(keys or [0]) * 1000:.0f} ms, worst "
          f"{max(keys or [0]) * 1000:.0f} ms ({len(keys)} keys)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--jobs":
        jobs_main(sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "benchmarks/data/bulk.pcap"),
                  int(sys.argv[3]) if len(sys.argv) > 3 else 3)
        return
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
