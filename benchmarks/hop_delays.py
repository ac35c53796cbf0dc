#!/usr/bin/env python3
"""Where a consumer's fetch cycle spends its time, direct and through a second hop:
loopback captured (headers only) while Kafka's own consumer perf tool reads a topic from
a three-node Apache Kafka cluster (tests/support/apache_kafka.py), directly and through
`kdissect proxy` (and, with --relay, through copy_relay.py in front of each node), the
arms alternating.

Per connection that carried answers, each Fetch cycle (one request in flight per broker,
as the Java consumer keeps) is cut at the client into: the request's last byte to the
answer's first, the answer's first byte to its last, and the answer's last byte to the
next request (the consumer's own work). Through a hop, the broker's leg is found by its
byte counts (nothing is rewritten on a Fetch connection) and the hop's own share is read
at each byte: a request's last byte at the client vs at the broker, and an answer's
first and last byte at the broker vs at the client.

    .venv/bin/python benchmarks/hop_delays.py [--rounds 2] [--records 200000] [--relay]
        [--format jsonl|text]

Needs tcpdump (run as root). It answers "is the hop slow, or does the consumer slow down
beside it" (benchmarks/proxy_on_apache_kafka.py gives the throughput ratios).
"""

from __future__ import annotations

import argparse
import bisect
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import proxy_on_apache_kafka as bench  # noqa: E402
from kdissect.capture.packet import SYN, tcp_segment  # noqa: E402
from kdissect.capture.pcapfile import CaptureReader  # noqa: E402

SNAPLEN = 128  # headers and a few payload bytes: the byte counts are what is read
NODES = 3
RECORD_SIZE = 1024


@dataclass
class Flow:
    """One direction of a connection: (time, first byte, end) of each data segment, in
    stream offsets from its SYN."""

    start: int | None = None
    segments: list[tuple[float, int, int]] = field(default_factory=list)
    _ends: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.segments[-1][2] if self.segments else 0

    def when(self, offset: int) -> float | None:
        """When this direction first carried stream byte ``offset`` (None: never)."""
        if len(self._ends) != len(self.segments):
            self._ends = [s[2] for s in self.segments]
        i = bisect.bisect_right(self._ends, offset)
        return self.segments[i][0] if i < len(self.segments) else None


def flows(path: str) -> dict[tuple[int, int], Flow]:
    """Each direction (source port, destination port) of the capture's connections."""
    out: dict[tuple[int, int], Flow] = defaultdict(Flow)
    with CaptureReader(path) as r:
        for p in r.packets():
            s = tcp_segment(p.linktype, p.data, p.orig_len)
            if s is None:
                continue
            f = out[(s.sport, s.dport)]
            if s.flags & SYN:
                f.start = s.seq + 1
                continue
            n = len(s.payload) + s.missing
            if n and f.start is not None:
                a = (s.seq - f.start) & 0xFFFFFFFF
                if a + n > f.total:  # (a retransmission carries nothing new)
                    f.segments.append((p.ts, max(a, f.total), a + n))
    return out


def cycles(requests: Flow, answers: Flow) -> list[tuple[float, float, float, float, int, int]]:
    """Per request: (its last byte, the answer's first and last byte, the next request's
    first byte, the answer's first and last stream offset + 1) as one side saw them."""
    out = []
    reqs = requests.segments
    for i, (t0, _, _) in enumerate(reqs):
        t1 = reqs[i + 1][0] if i + 1 < len(reqs) else float("inf")
        lo = bisect.bisect_left(answers.segments, (t0, -1, -1))
        hi = bisect.bisect_left(answers.segments, (t1, -1, -1))
        if lo < hi:
            first, last = answers.segments[lo], answers.segments[hi - 1]
            out.append((t0, first[0], last[0], t1, first[1], last[2]))
    return out


def _ms(values: list[float]) -> str:
    if not values:
        return "none"
    v = sorted(values)
    return (
        f"p50 {v[len(v) // 2] * 1e3:.2f} ms, p90 {v[int(0.9 * len(v))] * 1e3:.2f}, "
        f"mean {statistics.mean(v) * 1e3:.2f}, n {len(v)}"
    )


def report(path: str, brokers: set[int], least: int) -> dict[str, list[float]]:
    """Prints and returns the cycle parts of every client connection that carried at
    least ``least`` bytes of answers (a Fetch connection)."""
    fl = flows(path)
    parts: dict[str, list[float]] = defaultdict(list)
    fetching = [k for k, f in fl.items() if f.total >= least]
    hop = any(sport not in brokers for sport, _ in fetching)  # (else direct)
    for sport, dport in fetching:
        if hop and sport in brokers:
            continue  # a hop's leg to a broker: read beside its client's leg below
        answers, requests = fl[(sport, dport)], fl[(dport, sport)]
        own = cycles(requests, answers)
        parts["request -> answer (at the client)"] += [c[1] - c[0] for c in own]
        parts["answer's first -> last byte (at the client)"] += [c[2] - c[1] for c in own]
        parts["answer -> next request (the consumer)"] += [
            c[3] - c[2] for c in own if c[3] != float("inf")
        ]
        if not hop:
            continue
        legs = [
            k
            for k, f in fl.items()
            if k[0] in brokers and f.total == answers.total and k != (sport, dport)
        ]
        if len(legs) != 1:
            print(f"  ({sport}->{dport}: no single broker leg of {answers.total} bytes)")
            continue
        b_answers, b_requests = fl[legs[0]], fl[(legs[0][1], legs[0][0])]
        for t, _, end in requests.segments:  # a request's last byte, client -> broker
            at = b_requests.when(end - 1)
            if at is not None:
                parts["hop: request's last byte"].append(at - t)
        for c in cycles(b_requests, b_answers):
            for name, t, offset in (("first", c[1], c[4]), ("last", c[2], c[5] - 1)):
                at = answers.when(offset)
                if at is not None:
                    parts[f"hop: answer's {name} byte"].append(at - t)
    return parts


def _capture(pcap: Path) -> subprocess.Popen:
    """tcpdump on loopback into ``pcap``, once it runs (a clear error if it cannot)."""
    dump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-s", str(SNAPLEN), "-B", "65536", "-w", str(pcap), "tcp"],
        stderr=subprocess.PIPE,
    )
    time.sleep(1)
    if dump.poll() is not None:
        raise SystemExit(f"tcpdump did not start (run as root): {dump.stderr.read().decode()}")
    return dump


def _stop(dump: subprocess.Popen) -> None:
    dump.send_signal(signal.SIGINT)
    try:
        dump.wait(10)
    except subprocess.TimeoutExpired:
        dump.kill()
        dump.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--relay", action="store_true", help="also through copy_relay.py")
    ap.add_argument(
        "--format",
        default="jsonl",
        choices=("jsonl", "text"),
        help="the proxy display's output, as proxy_on_apache_kafka.py's --format",
    )
    args = ap.parse_args()
    # a connection that carried a fair share of the topic's bytes is a Fetch connection
    fetching = args.records * RECORD_SIZE // NODES // 2
    work = Path(tempfile.mkdtemp(prefix="kdissect-hops-"))
    cluster, relay_ports = bench.relayed_cluster(NODES, ("copy",) if args.relay else ())
    cluster.start()
    proxy = None
    relays: dict[str, bench.Relay] = {}
    try:
        proxy = bench.Proxy(cluster.bootstrap(), work, fmt=args.format)
        relays = bench.start_relays(cluster, relay_ports)
        paths = {"direct": cluster.bootstrap(), "proxy": proxy.bootstrap}
        if relays:
            paths["copy relay"] = relays["relay-copy"].bootstrap
        bench._create(cluster.bootstrap(), "warm", NODES, check=False)
        bench._create(cluster.bootstrap(), "read", NODES)
        bench.java_produce(cluster.bootstrap(), "read", args.records, RECORD_SIZE)
        brokers = set(cluster.ports("PLAINTEXT", bench.relay_listener("copy")))
        totals: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for i in range(args.rounds):
            for arm in bench._order(tuple(paths), i):
                proxy.settle()
                bench._quiet(cluster)
                pcap = work / f"{arm.replace(' ', '-')}-{i}.pcap"
                dump = _capture(pcap)
                try:
                    rate = bench.java_consume(paths[arm], "read", args.records)
                    time.sleep(0.3)
                finally:
                    _stop(dump)
                print(f"round {i + 1}, {arm}: {rate:,.0f} records/s", flush=True)
                parts = report(str(pcap), brokers, fetching)
                if not parts:
                    print(f"  (no connection carried {fetching:,} bytes of answers)")
                for name, values in parts.items():
                    totals[arm][name] += values
                pcap.unlink()
        for arm, parts in totals.items():
            print(f"\n{arm} (all rounds):")
            for name, values in parts.items():
                print(f"  {name}: {_ms(values)}")
    finally:
        if proxy is not None:
            proxy.proc.kill()
        for relay in relays.values():
            relay.stop()
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
