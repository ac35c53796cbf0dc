#!/usr/bin/env python3
"""The forwarder's cost per large answer, as the Java consumer pays it: one client sends a
Fetch request, waits for its whole answer (a Fetch v16 answer of --size bytes, its records
opaque), sends the next; a scripted upstream answers each at once. Timed direct and through
the proxy's forwarder (this checkout's, and with --compare DIR another's: before/after in
the same rounds), each round rotating the order: the cycle time per answer, and the CPU
seconds the forwarder process spent (user + system, from its rusage). No display (the
forwarding path alone); the forwarder keeps freed memory as `kdissect proxy` does.

    .venv/bin/python benchmarks/proxy_large_answers.py [--answers 300] [--size 1400000]
        [--rounds 5] [--compare DIR]

Unlike proxy_on_apache_kafka.py, no broker or JVM shares the machine's two cores with
the proxy: the figures move less with the load, and say what one answer costs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from kdissect.protocol.varint import uvarint_bytes

ROOT = Path(__file__).resolve().parents[1]


def _exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def fetch_request(corr: int) -> bytes:
    body = struct.pack(">hhih", 1, 16, corr, 2) + b"bn" + b"\0"  # header v2, no body
    return struct.pack(">i", len(body)) + body


def fetch_answer(corr: int, records: bytes) -> bytes:
    """A Fetch v16 answer: one topic, one partition holding ``records`` (with its size)."""
    partition = (
        struct.pack(">ihqqq", 0, 0, 10, 10, 0)
        + b"\x01"  # no aborted transactions
        + struct.pack(">i", -1)
        + uvarint_bytes(len(records) + 1)
        + records
        + b"\0"
    )
    body = (
        struct.pack(">i", corr)
        + b"\0"  # header v1
        + struct.pack(">ihi", 0, 0, 0)
        + b"\x02"
        + bytes(range(16))
        + b"\x02"
        + partition
        + b"\0"  # the topic's tags
        + b"\0"  # the answer's tags
    )
    return struct.pack(">i", len(body)) + body


class Upstream:
    """Answers every Fetch request at once with an answer of the same records."""

    def __init__(self, size: int) -> None:
        self.records = os.urandom(size)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Kafka's sockets
        with conn:
            try:
                while True:
                    request = _exactly(conn, struct.unpack(">i", _exactly(conn, 4))[0])
                    corr = struct.unpack_from(">i", request, 4)[0]
                    conn.sendall(fetch_answer(corr, self.records))
            except (ConnectionError, OSError):
                return


def cycles(port: int, n: int) -> float:
    """Seconds for ``n`` request/answer cycles on one connection (after 10 untimed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = 0.0
        for i in range(n + 10):
            if i == 10:
                start = time.perf_counter()
            s.sendall(fetch_request(i + 1))
            _exactly(s, struct.unpack(">i", _exactly(s, 4))[0])
        return time.perf_counter() - start


def serve(upstream_port: int) -> None:
    """(Child process) the forwarder of the checkout on sys.path; prints its port, ends
    at the end of stdin."""
    import asyncio

    from kdissect.proxy import process
    from kdissect.proxy.server import Proxy

    keep = getattr(process, "keep_freed_memory", None) or getattr(
        process, "_keep_freed_memory", None
    )
    if keep is not None:
        keep()

    async def main() -> None:
        proxy = Proxy([("127.0.0.1", upstream_port)], port=0)
        await proxy.start()
        print(proxy.bootstrap_port, flush=True)
        await asyncio.to_thread(sys.stdin.read)
        await proxy.close()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", type=int, default=300)
    ap.add_argument("--size", type=int, default=1_400_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", type=Path, help="another checkout's forwarder ('old')")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    if args.upstream:  # (child process: not sharing the client's interpreter lock)
        print(Upstream(args.size).port, flush=True)
        sys.stdin.read()
        return
    upstream_proc = subprocess.Popen(
        [sys.executable, __file__, "--upstream", "--size", str(args.size)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upstream_proc.stdout is not None and upstream_proc.stdin is not None
    upstream_port = int(upstream_proc.stdout.readline())
    arms = {"direct": None, "new": ROOT}
    if args.compare is not None:
        arms["old"] = args.compare.resolve()
    names = list(arms)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names if n != "direct"}
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load before: {load} on {os.cpu_count()} cores", flush=True)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            root = arms[name]
            if root is None:
                times[name].append(cycles(upstream_port, args.answers))
                continue
            child = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(upstream_port)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=root,
                env={**os.environ, "PYTHONPATH": str(root)},
            )
            assert child.stdin is not None and child.stdout is not None
            port = int(child.stdout.readline())
            cycles(port, 10)  # the forwarder's start-up is not counted below
            before = _cpu_of(child.pid)
            times[name].append(cycles(port, args.answers))
            cpu[name].append(_cpu_of(child.pid) - before)
            child.stdin.close()
            child.wait(30)
        print(
            f"round {r + 1}: "
            + ", ".join(f"{n} {times[n][-1] / args.answers * 1e3:.2f} ms" for n in names)
            + f"; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
            flush=True,
        )
    upstream_proc.stdin.close()
    upstream_proc.wait(30)
    print(f"\n{args.answers} answers of {args.size:,} B per run, {args.rounds} rounds (medians)")
    for n in names:
        per = statistics.median(times[n]) / args.answers * 1e3
        line = f"  {n}: {per:.2f} ms per answer cycle"
        if n in cpu:
            line += f", forwarder CPU {statistics.median(cpu[n]) / args.answers * 1e3:.2f} ms per answer"
        print(line)


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
