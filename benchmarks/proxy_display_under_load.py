#!/usr/bin/env python3
"""The proxy's display on a machine whose cores are all busy with other work: one
CPU burner per core at normal priority (``python -c 'while 1: pass'``) beside the Tansu
broker, `kdissect proxy --no-tui --format jsonl` and a client. Reports, for --runs runs:

    first line   seconds from the first request to the first JSON line written
    lag          the display's own figure: at most how far behind the traffic it decoded
    shown        requests decoded / exchanges left out (sampled while > 5 s behind) /
                 shed by the forwarder
    exit         seconds from SIGTERM to the proxy's exit
    latency      ApiVersions round trips on one connection through the proxy and direct,
                 alternating, under the same load: p50 / p99 and what the proxy adds

    .venv/bin/python benchmarks/proxy_display_under_load.py [--seconds 20] [--runs 3]
        [--no-burners]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proxy_vs_direct import api_versions, latencies, pct  # noqa: E402
from tests.support.broker import Broker, free_port  # noqa: E402


def burners(seconds: float) -> list[subprocess.Popen]:
    """One busy loop per core, at normal priority, each ending by itself."""
    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]


def one_run(broker: Broker, seconds: float, load: bool, out_dir: Path) -> dict:
    port = free_port()
    out = out_dir / f"run-{port}.jsonl"
    err = out_dir / f"run-{port}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proxy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "proxy",
                "--upstream",
                f"127.0.0.1:{broker.port}",
                "--listen",
                f"127.0.0.1:{port}",
                "--no-tui",
                "--format",
                "jsonl",
            ],
            stdout=o,
            stderr=e,
            cwd=ROOT,
        )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    burning = burners(seconds + 30) if load else []
    try:
        time.sleep(1.0 if load else 0)
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0})
        start = time.monotonic()
        first_line = None
        n = 0
        lat_proxy: list[float] = []
        lat_direct: list[float] = []
        while time.monotonic() - start < seconds:
            producer.produce("under-load", b"x" * 200)
            producer.poll(0)
            n += 1
            if n % 50 == 0:  # round trips, alternating which goes first
                pair = [(port, lat_proxy), (broker.port, lat_direct)]
                for p, into in pair if n % 100 else pair[::-1]:
                    into.extend(latencies(f"127.0.0.1:{p}", api_versions(), 20))
            if first_line is None and out.stat().st_size:
                first_line = time.monotonic() - start
            time.sleep(0.01)
        producer.flush(30)
        if first_line is None and out.stat().st_size:
            first_line = time.monotonic() - start
        stop = time.monotonic()
        proxy.send_signal(signal.SIGTERM)
        try:
            proxy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proxy.kill()
        exit_s = time.monotonic() - stop
    finally:
        for b in burning:
            b.kill()
        if proxy.poll() is None:
            proxy.kill()
    text = err.read_text()
    m = re.search(
        r"display: (\d+) requests shown(?:, (\d+) exchanges left out[^,;]*)?"
        r"(?:[^;]*?, (\d+) shed by the forwarder)?.*?at most ([\d.]+) s behind",
        text,
    )
    return {
        "sent": n,
        "first_line": first_line,
        "exit": exit_s,
        "shown": int(m[1]) if m else None,
        "left_out": int(m[2] or 0) if m else None,
        "shed": int(m[3] or 0) if m else None,
        "lag": float(m[4]) if m else None,
        "lat_proxy": lat_proxy,
        "lat_direct": lat_direct,
        "traceback": "Traceback" in text,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-burners", action="store_true")
    args = ap.parse_args()
    broker = Broker()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = [
                one_run(broker, args.seconds, not args.no_burners, Path(tmp))
                for _ in range(args.runs)
            ]
    finally:
        broker.stop()
    print(
        f"{os.cpu_count()} cores, {'no burners' if args.no_burners else 'one burner per core'}"
        f", {args.seconds:g} s of produce (one 200 B message per 10 ms) per run"
    )
    for r in results:
        fl = f"{r['first_line']:.2f} s" if r["first_line"] is not None else "never"
        p, d = r["lat_proxy"], r["lat_direct"]
        lat = (
            (
                f"ApiVersions p50 {pct(p, 0.5):.2f} / p99 {pct(p, 0.99):.2f} ms proxied, "
                f"{pct(d, 0.5):.2f} / {pct(d, 0.99):.2f} direct "
                f"(+{pct(p, 0.99) - pct(d, 0.99):.2f} ms p99)"
            )
            if p and d
            else ""
        )
        print(
            f"sent {r['sent']}: first line after {fl}; shown {r['shown']}, left out "
            f"{r['left_out']}, shed {r['shed']}; lag at most {r['lag']} s; exit "
            f"{r['exit']:.2f} s after SIGTERM; {lat}" + ("; TRACEBACK" if r["traceback"] else "")
        )
    exits = [r["exit"] for r in results]
    print(f"median exit {statistics.median(exits):.2f} s, worst {max(exits):.2f} s")


if __name__ == "__main__":
    main()
