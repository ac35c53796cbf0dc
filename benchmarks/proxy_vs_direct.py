#!/usr/bin/env python3
"""Kafka traffic direct to the broker against through `kdissect proxy` (decoding on,
printing lines to /dev/null), side by side in one run, on the Tansu broker:

    throughput   confluent-kafka produces N messages (each codec in turn), then a
                 consumer reads them back; messages per second, direct vs proxied
    latency      one message at a time (produce + wait for the ack), 1000 times;
                 p50 / p99 round trip, direct vs proxied, and the difference

    .venv/bin/python benchmarks/proxy_vs_direct.py [--messages 200000] [--size 200]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.broker import Broker, free_port  # noqa: E402

CODECS = ["none", "lz4", "zstd", "snappy", "gzip"]


def produce(bootstrap: str, topic: str, n: int, size: int, codec: str) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                  "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1 << 20})
    value = os.urandom(size // 2).hex().encode()
    start = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(120)
    return time.monotonic() - start


def consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "max.poll.interval.ms": 6000, "fetch.max.bytes": 32 << 20})
    c.subscribe([topic])
    got, start = 0, time.monotonic()
    while got < n and time.monotonic() - start < 300:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                got += 1
    elapsed = time.monotonic() - start
    c.close()
    return elapsed


def latencies(bootstrap: str, topic: str, count: int = 1000) -> list[float]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    p.produce(topic, b"warm-up")
    p.flush(30)
    out = []
    for _ in range(count):
        t = time.monotonic()
        p.produce(topic, b"x" * 100)
        p.flush(30)
        out.append(time.monotonic() - t)
    return out


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--latency-only", action="store_true")
    args = ap.parse_args()
    broker = Broker()
    port = free_port()
    proxy = subprocess.Popen([sys.executable, "-m", "kdissect", "proxy", "--upstream",
                              f"127.0.0.1:{broker.port}", "--listen", f"127.0.0.1:{port}",
                              "--no-tui"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    direct, proxied = f"127.0.0.1:{broker.port}", f"127.0.0.1:{port}"
    per = args.messages // len(CODECS)
    if args.latency_only:
        CODECS.clear()
    print(f"{per} messages of {args.size} bytes per codec; Tansu broker; proxy decoding on\n")
    print(f"{'codec':<8}{'produce direct':>16}{'via proxy':>12}{'ratio':>8}"
          f"{'consume direct':>16}{'via proxy':>12}{'ratio':>8}   (messages/s)")
    totals = [0.0, 0.0, 0.0, 0.0]
    for codec in CODECS:
        pd = produce(direct, f"d-{codec}", per, args.size, codec)
        pp = produce(proxied, f"p-{codec}", per, args.size, codec)
        cd = consume(direct, f"d-{codec}", per)
        cp = consume(proxied, f"p-{codec}", per)
        for i, v in enumerate((pd, pp, cd, cp)):
            totals[i] += v
        print(f"{codec:<8}{per / pd:>16.0f}{per / pp:>12.0f}{pd / pp:>7.0%} "
              f"{per / cd:>16.0f}{per / cp:>12.0f}{cd / cp:>7.0%}")
    if CODECS:
        print(f"{'all':<8}{args.messages / totals[0]:>16.0f}{args.messages / totals[1]:>12.0f}"
              f"{totals[0] / totals[1]:>7.0%} {args.messages / totals[2]:>16.0f}"
              f"{args.messages / totals[3]:>12.0f}{totals[2] / totals[3]:>7.0%}")
    ld, lp = latencies(direct, "lat-d"), latencies(proxied, "lat-p")
    print(f"\nlatency (produce + ack, one at a time, {len(ld)} each):")
    print(f"  direct   p50 {pct(ld, .5):.2f} ms   p99 {pct(ld, .99):.2f} ms")
    print(f"  proxied  p50 {pct(lp, .5):.2f} ms   p99 {pct(lp, .99):.2f} ms")
    print(f"  added    p50 {pct(lp, .5) - pct(ld, .5):.2f} ms   "
          f"p99 {pct(lp, .99) - pct(ld, .99):.2f} ms")
    proxy.terminate()
    proxy.wait(30)
    broker.stop()


if __name__ == "__main__":
    main()
