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
    .venv/bin/python benchmarks/tui_responsiveness.py --jobs [CAPTURE] [RUNS] [NICE...]

(--jobs: the workers' priorities to compare, alternating; default +0, as shipped)
"""

from __future__ import annotations

import asyncio
import os
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
    async with app.run_test(size=(160, 45)):
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
            app.simulate_key("down")  # as a terminal would send it: no waiting
            while table.cursor_row == before:
                await asyncio.sleep(0.001)
            keys.append(time.monotonic() - t)
            await asyncio.sleep(0.15)  # a person's pace: the detail follows
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
TSHARK_KEY_FILTER = 'kafka.message_key == "k42"'  # tshark 4.0 names it so
ABSENT = "no such bytes anywhere"


def cpu_seconds(who: int | None = None) -> float:
    """User + system CPU seconds of this process (RUSAGE_SELF), of its finished
    children (RUSAGE_CHILDREN: the scan workers, tshark), or both (None)."""
    whos = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) if who is None else (who,)
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(w) for w in whos))


def tshark_filter(capture: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of tshark's key filter over the file."""
    start, cpu = time.monotonic(), cpu_seconds()
    subprocess.run(
        ["tshark", "-r", capture, "-d", "tcp.port==9092,kafka", "-Y", TSHARK_KEY_FILTER],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.monotonic() - start, cpu_seconds() - cpu


async def _job(app, pilot, start_job) -> tuple[float, list[float], tuple[float, float]]:
    """(seconds until the job is done, latencies of ↓ pressed every 150 ms meanwhile,
    (CPU seconds of the workers, of the UI process: its share is mostly the detail
    decoding the exchange each ↓ lands on)."""
    table = app.table
    table.move_cursor(0)
    t0 = time.monotonic()
    ui, workers = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
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
    return (
        time.monotonic() - t0,
        keys,
        (cpu_seconds(resource.RUSAGE_CHILDREN) - workers, cpu_seconds(resource.RUSAGE_SELF) - ui),
    )


async def measure_jobs(capture: str) -> dict:
    """A record-key filter and a byte search over the loaded capture."""
    from kdissect.sources.pcap import capture_loader
    from kdissect.tui.app import KdissectApp, parse_needle

    app = KdissectApp(capture_loader([capture]), title="bench")
    out: dict = {}
    async with app.run_test(size=(160, 45)) as pilot:
        while not app.loaded:
            await asyncio.sleep(0.05)
        out["filter"], out["filter_keys"], out["filter_cpu"] = await _job(
            app, pilot, lambda: app.apply_filter(KEY_FILTER)
        )
        out["matched"] = len(app.shown)
        app.apply_filter("")
        app.needle, app.needle_text = parse_needle(ABSENT), ABSENT
        out["search"], out["search_keys"], out["search_cpu"] = await _job(
            app, pilot, app.action_search_next
        )
    return out


def jobs_main(capture: str, runs: int, nices: list[int]) -> None:
    """Alternating runs: kdissect's filter and search (with each priority of the workers
    in ``nices``), then tshark's key filter."""
    from kdissect.tui import work

    rows: dict[int, list[dict]] = {n: [] for n in nices}
    tshark: list[tuple[float, float]] = []
    for _ in range(runs):
        for nice in nices:
            work._NICER = nice
            r = asyncio.run(measure_jobs(capture))
            r["load"] = os.getloadavg()[0]
            rows[nice].append(r)
            print(
                f"nice +{nice}: filter {r['filter']:.2f} s (CPU-s workers "
                f"{r['filter_cpu'][0]:.1f}, UI {r['filter_cpu'][1]:.1f}; {r['matched']} "
                f"exchanges), search {r['search']:.2f} s (CPU-s workers "
                f"{r['search_cpu'][0]:.1f}, UI {r['search_cpu'][1]:.1f}); load "
                f"{r['load']:.1f}; key medians "
                f"{statistics.median(r['filter_keys'] or [0]) * 1000:.0f} / "
                f"{statistics.median(r['search_keys'] or [0]) * 1000:.0f} ms "
                f"({len(r['filter_keys'])} / {len(r['search_keys'])} keys)",
                flush=True,
            )
        tshark.append(tshark_filter(capture))
        print(
            f"tshark key filter {tshark[-1][0]:.2f} s ({tshark[-1][1]:.1f} CPU-s); load "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    t_wall = statistics.median(t[0] for t in tshark)
    t_cpu = statistics.median(t[1] for t in tshark)
    print(f"\nmedians of {runs}; tshark key filter {t_wall:.2f} s, {t_cpu:.1f} CPU-s")
    for nice, got in rows.items():
        med = {k: statistics.median(r[k] for r in got) for k in ("filter", "search")}
        cpu = {k: statistics.median(r[f"{k}_cpu"][0] for r in got) for k in ("filter", "search")}
        keys = [k for r in got for k in r["filter_keys"] + r["search_keys"]]
        print(
            f"nice +{nice}: record filter {med['filter']:.2f} s ({cpu['filter']:.1f} "
            f"CPU-s in workers), byte search {med['search']:.2f} s ({cpu['search']:.1f}); "
            f"tshark / kdissect: filter {t_wall / med['filter']:.2f}x, search "
            f"{t_wall / med['search']:.2f}x (CPU: {t_cpu / cpu['filter']:.1f}x, "
            f"{t_cpu / cpu['search']:.1f}x); load {min(r['load'] for r in got):.1f}-"
            f"{max(r['load'] for r in got):.1f}; keys meanwhile: median "
            f"{statistics.median(keys or [0]) * 1000:.0f} ms, worst "
            f"{max(keys or [0]) * 1000:.0f} ms ({len(keys)} keys)"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--jobs":
        jobs_main(
            sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "benchmarks/data/bulk.pcap"),
            int(sys.argv[3]) if len(sys.argv) > 3 else 3,
            [int(n) for n in sys.argv[4:]] or [0],
        )
        return
    capture = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "benchmarks/data/bulk.pcap")
    size = Path(capture).stat().st_size / 2**20
    r = asyncio.run(measure(capture))  # before tshark runs: the children's peak
    alone = asyncio.run(measure(capture, quiet=True))  # memory is then the loader's
    t_first, t_all = tshark_first_line(capture)
    keys = sorted(r["keys"])
    print(f"capture: {capture} ({size:.0f} MiB), {r['rows']} exchanges\n")
    print(f"{'':<28}{'kdissect TUI':>14}{'tshark':>10}{'ratio':>8}")
    print(
        f"{'first row (s)':<28}{r['first_row']:>14.2f}{t_first:>10.2f}"
        f"{t_first / r['first_row']:>7.1f}x"
    )
    print(
        f"{'everything loaded (s)':<28}{alone['loaded']:>14.2f}{t_all:>10.2f}"
        f"{t_all / alone['loaded']:>7.1f}x"
    )
    print(f"{'  ... while browsing (s)':<28}{r['loaded']:>14.2f}")
    print(
        f"{'key latency while loading':<28}{'median %.0f ms, worst %.0f ms' % (statistics.median(keys) * 1000, keys[-1] * 1000):>32}"
        f"  ({len(keys)} keys, {'still loading' if r['keys_while_loading'] else 'load ended'})"
    )
    print(f"{'peak memory (MiB)':<28}{r['rss_mib']:>14.0f}  UI; loader {r['loader_mib']:.0f}")


if __name__ == "__main__":
    main()
