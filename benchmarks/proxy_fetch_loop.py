#!/usr/bin/env python3
"""The forwarding hop alone at a consumer's pace, without a JVM: one Fetch in flight at a
time (as the Java consumer has per broker), v17 by default (so a proxy holds each
answer's last 64 KB for its KIP-951 leader hints), three partitions of up to 1 MiB each
read from offset 0 again and again (a 3 MB answer the broker sends from its page cache),
on the pinned Apache Kafka (one node, tests/support/apache_kafka.py).

    .venv/bin/python benchmarks/proxy_fetch_loop.py [--trials 8] [--seconds 3]
        [--compare DIR] [--forwarding-only] [--relay copy|splice] [--version 17]

The client only reads the answers (no parsing), so the hop is most of what is timed:
direct against `kdissect proxy` (JSON lines of every exchange to a file, as in
proxy_on_apache_kafka.py), its order rotating each trial; ``--forwarding-only`` adds a
run with the display stopped (SIGSTOP: it sheds everything), ``--compare DIR`` another
checkout's proxy, ``--relay`` copy_relay.py (a thread per direction; ``splice``: no copy
through user space). Each row is MB/s and the ratio to direct in the same trial; the
summary gives medians of those ratios and the forwarder's and display's CPU per MB.
Java consumers spend ~15 ms of their own per 3 MB answer here, so what this shows per
answer is what the hop adds to each of their fetches, at a scale their noise hides.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import proxy_on_apache_kafka as bench  # noqa: E402

from tests.support.apache_kafka import ApacheKafka  # noqa: E402
from tests.support.broker import free_port  # noqa: E402


def fetch_request(correlation: int, topic_id: bytes, version: int) -> bytes:
    """Fetch v13+ (flexible, topics by id) for partitions 0-2 from offset 0, 1 MiB each."""
    header = struct.pack(">hhih", 1, version, correlation, 5) + b"bench" + b"\x00"
    body = struct.pack(">iiibii", 500, 1, 50 << 20, 0, 0, -1)  # no fetch session
    body += bytes([2]) + topic_id + bytes([4])  # one topic, three partitions
    for p in range(3):
        body += struct.pack(">iiqiqi", p, -1, 0, -1, -1, 1 << 20) + b"\x00"
    body += b"\x00" + b"\x01" + b"\x01" + b"\x00"  # tags; no forgotten topics; rack ""; tags
    message = header + body
    return struct.pack(">i", len(message)) + message


def trial(address: str, topic_id: bytes, version: int, seconds: float) -> tuple[float, int]:
    """(MB/s, the answer's size) for ``seconds`` of fetches, one at a time."""
    host, port = address.rsplit(":", 1)
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    total = correlation = size = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        while True:
            correlation += 1
            sock.sendall(fetch_request(correlation, topic_id, version))
            got = 0
            while got < 4:  # the size
                n = sock.recv_into(view[got:4])
                if not n:
                    raise ConnectionError("closed during a fetch")
                got += n
            size = 4 + struct.unpack_from(">i", buf)[0]
            got = 4
            while got < size:  # the answer, read and dropped
                n = sock.recv_into(view[: min(size - got, len(buf))])
                if not n:
                    raise ConnectionError("closed during a fetch")
                got += n
            total += size
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return total / elapsed / 1e6, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--version", type=int, default=17, help="Fetch version (13 or later)")
    ap.add_argument("--compare", type=Path, help="another checkout's proxy in the same trials")
    ap.add_argument("--forwarding-only", action="store_true", help="also the display stopped")
    ap.add_argument("--relay", choices=("copy", "splice"), help="also copy_relay.py")
    args = ap.parse_args()
    if args.version < 13:
        ap.error("--version: 13 or later (topics by id)")

    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    workdir = Path(tempfile.mkdtemp(prefix="kdissect-fetch-loop-"))
    print(f"load before: {bench._load()} on {os.cpu_count()} cores", flush=True)
    cluster = ApacheKafka(nodes=1, listeners=("PLAINTEXT",), start=False)
    cluster.start()
    proxies: dict[str, bench.Proxy] = {}
    relay = None
    try:
        bench._create(cluster.bootstrap(), "fetched", 1)
        bench.java_produce(cluster.bootstrap(), "fetched", args.records, 1024)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        found = admin.describe_topics(TopicCollection(["fetched"]))["fetched"].result()
        uid = found.topic_id
        topic_id = struct.pack(
            ">qq", uid.get_most_significant_bits(), uid.get_least_significant_bits()
        )
        (workdir / "proxy").mkdir()
        proxies["proxy"] = bench.Proxy(cluster.bootstrap(), workdir / "proxy")
        if args.compare is not None:
            (workdir / "old").mkdir()
            proxies["old"] = bench.Proxy(cluster.bootstrap(), workdir / "old", args.compare)
        addresses = {"direct": cluster.bootstrap(), **{k: p.bootstrap for k, p in proxies.items()}}
        if args.forwarding_only:
            addresses["stopped"] = proxies["proxy"].bootstrap
        if args.relay:
            port = free_port()
            flags = ["--splice"] if args.relay == "splice" else []
            broker = cluster.bootstrap().rsplit(":", 1)[1]
            relay = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "benchmarks" / "copy_relay.py"),
                    *flags,
                    str(port),
                    broker,
                ]
            )
            time.sleep(1)
            addresses[f"{args.relay} relay"] = f"127.0.0.1:{port}"
        arms = list(addresses)
        trial(cluster.bootstrap(), topic_id, args.version, 1.0)  # the page cache warm
        rates: dict[str, list[float]] = {a: [] for a in arms}
        cpu: dict[str, list[tuple[float, float]]] = {a: [] for a in arms}
        size = 0
        for i in range(args.trials):
            order = arms[i % len(arms) :] + arms[: i % len(arms)]
            for arm in order:
                proxy = proxies.get("proxy" if arm == "stopped" else arm)
                if proxy is not None:
                    proxy.settle()
                if arm == "stopped":
                    os.kill(proxy.proc.pid, signal.SIGSTOP)
                before = proxy.cpu() if proxy else (0.0, 0.0)
                try:
                    mbps, size = trial(addresses[arm], topic_id, args.version, args.seconds)
                finally:
                    if arm == "stopped":
                        os.kill(proxy.proc.pid, signal.SIGCONT)
                after = proxy.cpu() if proxy else (0.0, 0.0)
                rates[arm].append(mbps)
                mb = mbps * args.seconds
                cpu[arm].append(
                    ((after[0] - before[0]) / mb * 1e3, (after[1] - before[1]) / mb * 1e3)
                )
            direct = rates["direct"][-1]
            print(
                f"trial {i + 1}: direct {direct:,.0f} MB/s; "
                + "; ".join(
                    f"{a} {rates[a][-1]:,.0f} MB/s ({rates[a][-1] / direct:.0%})" for a in arms[1:]
                )
                + f"; load {bench._load()}",
                flush=True,
            )
        print(
            f"\nFetch v{args.version}, answers of {size:,} B, one in flight, "
            f"{args.trials} trials of {args.seconds:g} s"
        )
        print(f"  direct: median {statistics.median(rates['direct']):,.0f} MB/s")
        for arm in arms[1:]:
            ratios = sorted(r / d for r, d in zip(rates[arm], rates["direct"]))
            line = (
                f"  {arm}: median {statistics.median(rates[arm]):,.0f} MB/s, "
                f"{statistics.median(ratios):.0%} of direct ({ratios[0]:.0%}–{ratios[-1]:.0%})"
            )
            if arm in proxies or arm == "stopped":
                fwd = statistics.median(c[0] for c in cpu[arm])
                disp = statistics.median(c[1] for c in cpu[arm])
                line += f"; CPU per MB: forwarder {fwd:.2f} ms, display {disp:.2f} ms"
            print(line)
        if "old" in rates:
            paired = sorted(p / o for p, o in zip(rates["proxy"], rates["old"]))
            print(
                f"  proxy / old, paired by trial: median {statistics.median(paired):.0%} "
                f"({paired[0]:.0%}–{paired[-1]:.0%})"
            )
        print(f"load after: {bench._load()}")
    finally:
        for proxy in proxies.values():
            try:
                os.kill(proxy.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            proxy.proc.kill()
        if relay is not None:
            relay.kill()
            relay.wait()
        cluster.close()


if __name__ == "__main__":
    main()
