#!/usr/bin/env python3
"""How kdissect log's TUI feels on a big log dir, with Kafka's kafka-dump-log side by side:

    first row      time from start until the first row is in the list
    keys           while the files are read: time for a key (↓) to move the cursor,
                   pressed every 150 ms (a person's pace), median and worst
    loaded         time until every file is in the list, and the CPU seconds of the
                   process (the reading runs in a thread of the UI process)
    record filter  once loaded: `record.key == "key-42"` over every batch (forked workers
                   on all cores), ↓ pressed every 150 ms meanwhile
    byte search    ctrl+f for bytes that are nowhere (every batch, decompressed), keys too
    peer           kafka-dump-log --deep-iteration --print-data-log over the same segments
                   (what an operator runs, and greps, to find a key), with the JVM options
                   of its script: wall and CPU seconds

Runs alternate (ours, the peer) --runs times; medians, the ratios (peer / ours: above 1,
kdissect is quicker) and the load average. The partition directory defaults to the one
benchmarks/log_vs_dump_log.py makes with the real broker (made when missing).

    .venv/bin/python benchmarks/log_tui_responsiveness.py [--dir DIR] [--size-mb 512] [--runs 3]

``--loading-only S`` measures the keys during the first S seconds of reading only (then
quits: no filter, search or peer), to compare versions of the reading quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tui_responsiveness import cpu_seconds  # noqa: E402

KEY_FILTER = 'record.key == "key-42"'
ABSENT = "no such bytes anywhere"


async def _keys_while(app, busy) -> list[float]:
    """Latencies of ↓ pressed every 150 ms while ``busy()``."""
    table, keys = app.table, []
    while busy():
        before = table.cursor_row
        if before + 1 < table.row_count:
            t = time.monotonic()
            app.simulate_key("down")  # as a terminal would send it: no waiting
            while table.cursor_row == before and time.monotonic() - t < 30:
                await asyncio.sleep(0.001)
            keys.append(time.monotonic() - t)
        await asyncio.sleep(0.15)
    return keys


def p95(values: list[float]) -> float:
    values = sorted(values or [0])
    return values[min(len(values) - 1, int(len(values) * 0.95))]


async def measure(directory: str, loading_only: float = 0) -> dict:
    from kdissect.protocol import Options
    from kdissect.tui.log_app import LogApp

    out: dict = {}
    start, cpu0 = time.monotonic(), cpu_seconds()
    app = LogApp([directory], Options())
    async with app.run_test(size=(160, 45)):
        while app.table.row_count == 0:
            await asyncio.sleep(0.005)
        out["first_row"] = time.monotonic() - start
        out["keys"] = await _keys_while(
            app,
            lambda: (
                not app.loaded and (not loading_only or time.monotonic() - start < loading_only)
            ),
        )
        out["loaded"] = time.monotonic() - start
        # the UI process and its reader (a forked child, once it has ended)
        out["load_cpu"] = cpu_seconds() - cpu0
        out["items"] = len(app.items)
        if loading_only:
            app.stop.set()
        else:
            await _jobs(app, out)
    # the reader counts once it is reaped (it ended with the list, or with the app)
    out["load_cpu"] = out["load_cpu"] if not loading_only else cpu_seconds() - cpu0
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


async def _jobs(app, out: dict) -> None:
    """The record filter, then the byte search, ↓ pressed meanwhile."""
    from kdissect.tui.app import parse_needle

    for name, start_job in (
        ("filter", lambda: app.apply_filter(KEY_FILTER)),
        ("search", app.action_search_next),
    ):
        if name == "search":
            app.apply_filter("")
            app.needle, app.needle_text = parse_needle(ABSENT), ABSENT
        app.table.move_cursor(0)
        t, workers = time.monotonic(), cpu_seconds(resource.RUSAGE_CHILDREN)
        start_job()
        out[f"{name}_keys"] = await _keys_while(app, lambda: app._job is not None)
        out[name] = time.monotonic() - t
        out[f"{name}_cpu"] = cpu_seconds(resource.RUSAGE_CHILDREN) - workers
        if name == "filter":
            out["matched"] = len(app.shown)


def main() -> None:
    from log_vs_dump_log import PEER_JVM, make_segments
    from pcap_vs_tshark import measure as measure_cmd

    from tests.support.apache_kafka import DUMP_LOG, classpath, java

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--dir",
        default="/tmp/kdissect-bench-log/tui/bench-0",
        help="the partition directory (made by the broker when missing)",
    )
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--loading-only",
        type=float,
        default=0,
        metavar="S",
        help="only the keys during the first S seconds of reading",
    )
    args = ap.parse_args()
    part = Path(args.dir)
    if not part.exists():
        make_segments(part, args.size_mb)
    segments = sorted(part.glob("*.log"))
    size = sum(s.stat().st_size for s in segments) / 2**20
    peer_cmd = [
        java(),
        *PEER_JVM,
        "-cp",
        classpath(),
        DUMP_LOG,
        "--deep-iteration",
        "--print-data-log",
        "--files",
        ",".join(map(str, segments)),
    ]
    print(
        f"{part}: {len(segments)} segments, {size:.0f} MiB; {args.runs} alternating runs; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    ours, peer = [], []
    if args.loading_only:
        for _ in range(args.runs):
            r = asyncio.run(measure(str(part), args.loading_only))
            keys = r["keys"] or [0]
            print(
                f"kdissect TUI, first {r['loaded']:.0f} s of reading: first row "
                f"{r['first_row']:.2f} s, {r['items']} items, {r['load_cpu']:.1f} CPU-s; keys "
                f"median {statistics.median(keys) * 1000:.0f} ms p95 {p95(keys) * 1000:.0f} ms "
                f"worst {max(keys) * 1000:.0f} ms ({len(r['keys'])}); load "
                f"{os.getloadavg()[0]:.1f}",
                flush=True,
            )
            ours += r["keys"]
        print(
            f"all runs: keys median {statistics.median(ours or [0]) * 1000:.0f} ms, p95 "
            f"{p95(ours) * 1000:.0f} ms ({len(ours)})"
        )
        return
    for _ in range(args.runs):
        r = asyncio.run(measure(str(part)))
        r["load"] = os.getloadavg()[0]
        ours.append(r)
        keys = r["keys"] or [0]
        print(
            f"kdissect TUI: first row {r['first_row']:.2f} s, loaded {r['loaded']:.1f} s "
            f"({r['load_cpu']:.1f} CPU-s, {r['items']} items), keys while loading median "
            f"{statistics.median(keys) * 1000:.0f} ms worst {max(keys) * 1000:.0f} ms "
            f"({len(r['keys'])}); filter {r['filter']:.1f} s ({r['filter_cpu']:.1f} CPU-s "
            f"in workers, {r['matched']} items), search {r['search']:.1f} s "
            f"({r['search_cpu']:.1f} CPU-s); keys meanwhile median "
            f"{statistics.median(r['filter_keys'] + r['search_keys'] or [0]) * 1000:.0f} ms; "
            f"peak RSS {r['rss_mib']:.0f} MiB; load {r['load']:.1f}",
            flush=True,
        )
        wall, cpu, mib = measure_cmd(peer_cmd)[:3]
        peer.append((wall, cpu, mib, os.getloadavg()[0]))
        print(
            f"kafka-dump-log: {wall:.1f} s ({cpu:.1f} CPU-s, {mib:.0f} MiB); load "
            f"{peer[-1][3]:.1f}",
            flush=True,
        )

    def med(key: str) -> float:
        return statistics.median(r[key] for r in ours)

    p_wall = statistics.median(p[0] for p in peer)
    p_cpu = statistics.median(p[1] for p in peer)
    keys = [k for r in ours for k in r["keys"]]
    busy = [k for r in ours for k in r["filter_keys"] + r["search_keys"]]
    loads = [r["load"] for r in ours] + [p[3] for p in peer]
    print(f"\nmedians of {args.runs} (load average {min(loads):.1f}-{max(loads):.1f}):")
    print(
        f"  first row {med('first_row'):.2f} s; all loaded {med('loaded'):.1f} s "
        f"({med('load_cpu'):.1f} CPU-s); kafka-dump-log {p_wall:.1f} s ({p_cpu:.1f} CPU-s): "
        f"peer / ours {p_wall / med('loaded'):.2f}x wall, {p_cpu / med('load_cpu'):.2f}x CPU"
    )
    print(
        f"  record filter {med('filter'):.1f} s ({med('filter_cpu'):.1f} CPU-s), byte "
        f"search {med('search'):.1f} s ({med('search_cpu'):.1f} CPU-s): peer / ours "
        f"{p_wall / med('filter'):.2f}x and {p_wall / med('search'):.2f}x wall, "
        f"{p_cpu / med('filter_cpu'):.2f}x and {p_cpu / med('search_cpu'):.2f}x CPU"
    )
    print(
        f"  keys (↓) while loading: median {statistics.median(keys or [0]) * 1000:.0f} ms, "
        f"p95 {p95(keys) * 1000:.0f} ms, worst {max(keys or [0]) * 1000:.0f} ms ({len(keys)}); during filter and search: "
        f"median {statistics.median(busy or [0]) * 1000:.0f} ms, worst "
        f"{max(busy or [0]) * 1000:.0f} ms ({len(busy)}); peak RSS "
        f"{statistics.median(r['rss_mib'] for r in ours):.0f} MiB"
    )


if __name__ == "__main__":
    main()
