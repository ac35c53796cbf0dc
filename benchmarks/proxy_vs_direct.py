#!/usr/bin/env python3
"""Kafka traffic direct to the broker against through `kdissect proxy`, side by side in one
run on the Tansu broker; direct and proxied runs alternate in pairs (which goes first
alternates too), each figure is the median of --repeats pairs, and a ratio is the median
of the pairs' proxied / direct:

    throughput   confluent-kafka produces --messages messages (lz4), then a consumer
                 reads them back; messages per second, in steady state (the producer's
                 connections and first batch before the clock starts; the consumer's
                 clock starts at its first message). Before each run the proxy's
                 display finishes what it has (up to 30 s), so that no run pays for
                 the one before. The proxy runs in each display
                 mode: JSON lines to a file, text lines to /dev/null, the TUI (in a tmux
                 terminal, so its loader decodes everything), and JSON lines on plain
                 asyncio instead of uvloop.
    latency      round trips on one connection: ApiVersions, and Metadata for all topics
                 (--topics made for it, plus those the throughput runs made; the output
                 says how many and how big the answer is); p50 / p99 direct and
                 proxied, and what the proxy adds
    probe        the worst and p99 ApiVersions round trip of a second connection while
                 consumers read at full speed for --probe-seconds (direct and proxied)

    .venv/bin/python benchmarks/proxy_vs_direct.py [--messages 500000] [--size 200]
        [--repeats 11] [--modes jsonl,text,tui,asyncio] [--topics 60] [--latency-only]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.broker import Broker, free_port  # noqa: E402

MODES = {
    "jsonl": ("--no-tui --format jsonl", "JSON lines to a file"),
    "text": ("--no-tui", "text lines to /dev/null"),
    "tui": ("--tui", "the TUI (tmux terminal)"),
    "asyncio": ("--no-tui --format jsonl --event-loop asyncio", "JSON lines, plain asyncio"),
}


class ProxyRun:
    """`kdissect proxy` in one display mode, until stopped."""

    def __init__(self, upstream: int, mode: str, workdir: str):
        self.port = free_port()
        args = [
            sys.executable,
            "-m",
            "kdissect",
            "proxy",
            "--upstream",
            f"127.0.0.1:{upstream}",
            "--listen",
            f"127.0.0.1:{self.port}",
            *MODES[mode][0].split(),
        ]
        self.tmux = None
        out = Path(workdir) / f"{mode}.out"
        if mode == "tui":
            self.tmux = f"kdissect-bench-{os.getpid()}"
            cmd = " ".join(args) + f" 2>{workdir}/tui.err"
            subprocess.run(
                ["tmux", "-L", self.tmux, "new-session", "-d", "-x", "200", "-y", "50", cmd],
                check=True,
                cwd=ROOT,
            )
            self.proc = None
        else:
            stdout = open(out if mode != "text" else os.devnull, "w")
            self.proc = subprocess.Popen(
                args, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=ROOT
            )
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the proxy ({mode}) did not start")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _processes(self) -> tuple[int, list[int]]:
        """(the forwarding process, the display's processes: printer or TUI and loader)."""
        found = subprocess.run(
            ["pgrep", "-f", "--", f"--listen 127.0.0.1:{self.port}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        pythons = {
            int(p)
            for p in found
            if Path(f"/proc/{p}/comm").exists()
            and Path(f"/proc/{p}/comm").read_text().startswith("python")
        }
        parent = {p: _stat(p)[1] for p in pythons}
        main = next(p for p in pythons if parent[p] not in pythons)
        forwarder = min(p for p in pythons if parent[p] == main)  # forked first
        return forwarder, [p for p in pythons if p != forwarder]

    def cpu(self) -> tuple[float, float]:
        """CPU seconds used so far by (forwarding, display)."""
        forwarder, display = self._processes()
        return _stat(forwarder)[0], sum(_stat(p)[0] for p in display)

    def wait_idle(self, quiet: float = 0.3, limit: float = 30) -> None:
        """Until the proxy's processes stop using CPU (the display catching up), at most
        ``limit`` seconds, so that its leftover work does not slow the next run."""
        deadline = time.monotonic() + limit
        last = sum(self.cpu())
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = sum(self.cpu())
            if now == last:
                return
            last = now

    def stop(self) -> str:
        """Stop it; its exit summary."""
        if self.tmux:
            subprocess.run(["tmux", "-L", self.tmux, "kill-server"], check=False)
            return ""
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=60)
        return "\n".join(
            line for line in err.splitlines() if line.startswith("proxy:") or "not shown" in line
        )


def _stat(pid: int) -> tuple[float, int]:
    """(CPU seconds used, parent pid) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[1])


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1 << 20,
        }
    )
    value = os.urandom(size // 2).hex().encode()
    # steady state: connections, metadata and the first batch before the clock starts
    # (connection set-up through the proxy is what the latency figures measure)
    for _ in range(100):
        p.produce(topic, value)
    p.flush(60)
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
    return n / (time.monotonic() - start)


def consume(bootstrap: str, topic: str, n: int) -> float:
    """Messages per second reading ``topic`` (its partitions assigned: no group join)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 32 << 20,
        }
    )
    partitions = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    got, start = 0, None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                if start is None:  # from the first message
                    start = time.monotonic()
                got += 1
    rate = got / (time.monotonic() - start) if start else 0.0
    c.close()
    return rate


# -- raw round trips ------------------------------------------------------------------


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def answer(sock: socket.socket, request: bytes) -> bytes:
    """Send ``request``; its response, without the size."""
    sock.sendall(request)
    return _recv(sock, struct.unpack(">i", _recv(sock, 4))[0])


def round_trip(sock: socket.socket, request: bytes) -> float:
    start = time.perf_counter()
    answer(sock, request)
    return time.perf_counter() - start


def api_versions() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    return struct.pack(">i", len(body)) + body


def metadata_all() -> bytes:
    """Metadata v12, all topics (a null topic list)."""
    body = struct.pack(">hhih", 3, 12, 2, 5) + b"bench" + b"\x00" + b"\x00\x01\x00\x00"
    return struct.pack(">i", len(body)) + body


def metadata_answer(bootstrap: str) -> tuple[int, int]:
    """(topics, bytes) of the all-topics Metadata answer the latency runs get."""
    from kdissect.protocol import decode_response

    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port))) as s:
        data = answer(s, metadata_all())
    topics = decode_response(data, 3, 12).body.child("topics")
    return len(topics.children) if topics is not None else 0, len(data)


def latencies(bootstrap: str, request: bytes, count: int) -> list[float]:
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port))) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(20):
            round_trip(s, request)  # warm up
        return [round_trip(s, request) for _ in range(count)]


def per_k(seconds: list[float], messages: int) -> str:
    return f"{seconds[0] / messages * 1e6:.1f} / {seconds[1] / messages * 1e6:.1f} ms"


def spread(ratios: list[float]) -> str:
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return f"{q[0]:.0%}–{q[2]:.0%}"


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def probe(bootstrap: str, topic: str, n: int, seconds: float) -> tuple[float, float, int]:
    """(worst ms, p99 ms, round trips) of ApiVersions every 5 ms on another connection
    while consumers read ``topic`` (``n`` messages) at full speed, again and again, for
    ``seconds``."""
    samples: list[float] = []
    done = threading.Event()

    def reader():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            consume(bootstrap, topic, n)
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port))) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not done.is_set():
            samples.append(round_trip(s, api_versions()))
            time.sleep(0.005)
    t.join()
    return max(samples) * 1000, pct(samples, 0.99), len(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--modes", default="jsonl,text,tui,asyncio")
    ap.add_argument("--topics", type=int, default=60)
    ap.add_argument("--round-trips", type=int, default=2000)
    ap.add_argument("--probe-seconds", type=float, default=15)
    ap.add_argument(
        "--latency-only",
        action="store_true",
        help="skip the throughput runs (the proxy displays JSON lines)",
    )
    args = ap.parse_args()
    if args.latency_only:
        args.modes = "jsonl"
    modes = [m for m in args.modes.split(",") if m]
    if "tui" in modes and not shutil.which("tmux"):
        modes.remove("tui")
        print("(no tmux: the TUI mode is skipped)")
    workdir = tempfile.mkdtemp(prefix="kdissect-bench-")
    broker = Broker()
    direct = f"127.0.0.1:{broker.port}"
    proxies: dict[str, ProxyRun] = {}
    try:
        for mode in modes:
            proxies[mode] = ProxyRun(broker.port, mode, workdir)
        n = args.messages
        print(
            f"Tansu broker; confluent-kafka {n} messages of {args.size} bytes (lz4); "
            f"median of {args.repeats} alternating runs\n"
        )
        print(
            f"{'proxy display':<28}{'produce direct':>15}{'proxy':>10}{'ratio':>7}"
            f"{'consume direct':>16}{'proxy':>10}{'ratio':>7}   (messages/s)"
        )
        for mode in modes if not args.latency_only else ():
            figures = {k: [] for k in ("pd", "pp", "cd", "cp", "rp", "rc")}
            cpu = {"p": [0.0, 0.0], "c": [0.0, 0.0]}  # (forwarding, display) seconds
            for r in range(args.repeats):
                first_direct = r % 2 == 0  # alternate which goes first
                order = [("d", direct), ("p", proxies[mode].bootstrap)]
                if not first_direct:
                    order.reverse()
                got = {}
                for tag, bootstrap in order:
                    topic = f"t-{mode}-{r}-{tag}"
                    for kind, run in (("p", produce), ("c", consume)):
                        proxies[mode].wait_idle()
                        before = proxies[mode].cpu()
                        got[kind + tag] = (
                            run(bootstrap, topic, n)
                            if kind == "c"
                            else run(bootstrap, topic, n, args.size)
                        )
                        if tag == "p":
                            proxies[mode].wait_idle()  # the display's share too
                            after = proxies[mode].cpu()
                            cpu[kind][0] += after[0] - before[0]
                            cpu[kind][1] += after[1] - before[1]
                for k, v in got.items():
                    figures[k].append(v)
                figures["rp"].append(got["pp"] / got["pd"])
                figures["rc"].append(got["cp"] / got["cd"])
            med = {k: statistics.median(v) for k, v in figures.items()}
            print(
                f"{MODES[mode][1]:<28}{med['pd']:>15.0f}{med['pp']:>10.0f}{med['rp']:>7.0%}"
                f"{med['cd']:>16.0f}{med['cp']:>10.0f}{med['rc']:>7.0%}"
                f"   (middle half of the ratios: produce {spread(figures['rp'])}, "
                f"consume {spread(figures['rc'])}; CPU per 1000 messages, forwarding / "
                f"display: produce {per_k(cpu['p'], n * args.repeats)}, consume "
                f"{per_k(cpu['c'], n * args.repeats)})"
            )

        # latency: many topics first, so that Metadata is a big answer
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": direct})
        for i in range(args.topics):
            p.produce(f"meta-{i:03d}", b"x")
        p.flush(60)
        via = proxies.get("jsonl") or next(iter(proxies.values()))
        topics, size = metadata_answer(direct)
        print(
            f"\nround trips on one connection ({args.round_trips} each, alternating "
            f"blocks; proxy with {MODES[[k for k, v in proxies.items() if v is via][0]][1]}):"
        )
        for name, request in (
            ("ApiVersions", api_versions()),
            (f"Metadata, {topics} topics", metadata_all()),
        ):
            d, q = [], []
            via.wait_idle()
            forwarding = displaying = 0.0
            for _ in range(4):
                d += latencies(direct, request, args.round_trips // 4)
                before = via.cpu()
                q += latencies(via.bootstrap, request, args.round_trips // 4)
                via.wait_idle()
                after = via.cpu()
                forwarding += after[0] - before[0]
                displaying += after[1] - before[1]
            if name.startswith("Metadata"):
                print(f"  (the Metadata answer: {topics} topics, {size:,} bytes)")
            print(
                f"  {name:<28} direct p50 {pct(d, 0.5):.3f} ms p99 {pct(d, 0.99):.3f} ms | "
                f"proxied p50 {pct(q, 0.5):.3f} ms p99 {pct(q, 0.99):.3f} ms | added p50 "
                f"{pct(q, 0.5) - pct(d, 0.5):+.3f} ms p99 {pct(q, 0.99) - pct(d, 0.99):+.3f} ms"
            )
            print(
                f"  {'':<28} CPU per round trip: forwarding {forwarding / len(q) * 1e6:.0f} µs,"
                f" display {displaying / len(q) * 1e6:.0f} µs"
            )

        print("\nanother connection while a consumer reads at full speed (ApiVersions every 5 ms):")
        for tag, bootstrap in (("direct", direct), ("proxied", via.bootstrap)):
            topic = f"probe-{tag}"
            produce(bootstrap, topic, n, args.size)
            via.wait_idle()
            worst, p99, count = probe(bootstrap, topic, n, args.probe_seconds)
            print(f"  {tag:<8} worst {worst:.1f} ms, p99 {p99:.2f} ms ({count} round trips)")
    finally:
        summaries = {mode: pr.stop() for mode, pr in proxies.items()}
        broker.stop()
    print()
    for mode, text in summaries.items():
        if text:
            print(f"[{mode}] {text}")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
