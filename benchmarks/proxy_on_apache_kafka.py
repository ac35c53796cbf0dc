#!/usr/bin/env python3
"""Produce and consume through `kdissect proxy` against direct, on real Apache Kafka
(the pinned 4.4 release, tests/support/apache_kafka.py: --nodes 1 or 3 KRaft nodes),
with decoding on (JSON lines of every exchange to a file, or with --format text the
default display's summary line per message, the default display lag):

    java      Kafka's own kafka-producer-perf-test / kafka-consumer-perf-test
              (org.apache.kafka.tools.ProducerPerformance / ConsumerPerformance from the
              release's kafka-tools jar): --records records of --size bytes, acks=1,
              as fast as it goes; records per second as the tool reports them
    rdkafka   confluent-kafka (librdkafka): the same records produced (acks=1) and read
              back by a consumer; records per second from first to last record

Each round runs direct and every other arm (the proxy, and those asked for below) once,
in an order rotated every two rounds and reversed every second round, so that each arm
runs as often before direct as after it; a ratio is the median of the rounds' arm /
direct, printed also order-balanced (the geometric mean over as many rounds of each
order) beside each order's median and with a 90 % interval (rounds resampled): on three
nodes an arm gained from coming later, and rounds move by tens of percent, so a goal is
met only where the interval clears it. Each arm starts once the brokers are quiet. For each proxied run the CPU seconds of the
forwarding process and of the display process (decoding, JSON) are read from /proc, so
the figures say where the proxy spent its time; the exchanges the display shed or left
out are read from the proxy's exit summary. The load average is printed before and after:
on a shared machine state it beside the figures.

    .venv/bin/python benchmarks/proxy_on_apache_kafka.py [--nodes 1] [--repeats 6]
        [--records 200000] [--size 1024] [--clients java,rdkafka] [--only consume]
        [--forwarding-only] [--relay] [--relay-mode copy,splice,framed] [--relay-only]
        [--proxy-root DIR] [--compare DIR] [--latency 2000]

``--relay`` adds a run through a plain copy relay (copy_relay.py): the cost of any
second hop through user space on this machine, the ceiling to read the proxy against.
``--relay-mode`` says which relays (comma-separated; each mode a process in front of a
listener of its own on each node, a run each per round): copy (the default), splice
(copy_relay.py --splice: socket -> pipe -> socket, the bytes never in user space) or
framed (copy_relay.py --framed: the copy relay's threads also frame, pair and feed a
display pipe, as a forwarder with a thread per direction would).
``--relay-only`` leaves the proxy out: direct and the relays only, their order rotating
each round, with each relay's CPU seconds per run.
``--only consume`` produces each client's records once (direct) and then times only the
consumers, each run reading that topic from the start; ``--proxy-root`` runs the proxy of
another checkout (e.g. the main branch, for before/after figures); ``--compare DIR`` runs
a second proxy from another checkout in the same rounds (direct, this one, that one, the
order rotating each round), so before/after figures share the machine's load. Each round
also times --latency ApiVersions round trips on one connection, direct and through each
proxy and relay (the added latency at p50 and p99 of a small request on a quiet connection).
"""

from __future__ import annotations

import argparse
import os
import re
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.apache_kafka import ApacheKafka, classpath, java  # noqa: E402
from tests.support.broker import free_port  # noqa: E402

PERF_JVM = ["-Xms256m", "-Xmx512m", "-XX:+UseSerialGC"]


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


class Proxy:
    """`kdissect proxy` with JSON lines of every exchange (or ``fmt``) to a file."""

    def __init__(
        self,
        bootstrap: str,
        workdir: Path,
        root: Path = ROOT,
        fmt: str = "jsonl",
        options: tuple[str, ...] = (),
    ):
        self.port = free_port()
        self.out = open(workdir / f"proxy.{fmt}", "w")
        self.err = open(workdir / "proxy.err", "w+")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "proxy",
                "--upstream",
                bootstrap,
                "--listen",
                f"127.0.0.1:{self.port}",
                "--no-tui",
                "--format",
                fmt,
                *options,
            ],
            stdout=self.out,
            stderr=self.err,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        import socket

        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        kids = _children(self.proc.pid)
        self.forwarder = kids[0] if kids else 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> tuple[float, float]:
        """(forwarder, display) CPU seconds so far."""
        return _cpu_seconds(self.forwarder), _cpu_seconds(self.proc.pid)

    def settle(self, timeout: float = 60) -> None:
        """Until the display sleeps on an empty channel (no run pays for the one before)."""
        asleep, deadline = 0, time.monotonic() + timeout
        while asleep < 20 and time.monotonic() < deadline:
            state = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "T":  # stopped (--forwarding-only): it decodes nothing
                return
            asleep = asleep + 1 if state == "S" else 0
            time.sleep(0.05)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.err.seek(0)
        return self.err.read()


def _producer_command(bootstrap: str, topic: str, records: int, size: int) -> list[str]:
    return [
        java(),
        *PERF_JVM,
        "-cp",
        classpath(),
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        "acks=1",
        "linger.ms=5",
        "batch.size=65536",
    ]


def java_produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    done = subprocess.run(
        _producer_command(bootstrap, topic, records, size),
        capture_output=True,
        text=True,
        timeout=600,
    )
    last = [line for line in done.stdout.splitlines() if "records sent" in line]
    if not last:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    return float(re.search(r"([\d.]+) records/sec", last[-1]).group(1))


def java_consume(bootstrap: str, topic: str, records: int) -> float:
    # one run: with --show-detailed-stats and a long --reporting-interval (as this was until
    # 2026-11-30) the 4.4 tool prints no row, so every measurement ran the consumer twice
    # and timed the second while the display still worked through the first's backlog
    done = subprocess.run(
        [
            java(),
            *PERF_JVM,
            "-cp",
            classpath(),
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--timeout",
            "60000",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    # summary: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
    # nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    rows = [
        line.split(",")
        for line in done.stdout.splitlines()
        if line.count(",") >= 9 and line[:1].isdigit()
    ]
    if not rows:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    return float(rows[-1][9])  # fetch.nMsg.sec: without the group's join time


def rdkafka_produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 65536,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = os.urandom(size)
    p.produce(topic, value)
    p.flush(30)  # connections and metadata before the clock
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(300)
    return records / (time.perf_counter() - started)


def rdkafka_consume(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got, first, started = 0, 0, None
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        batch = c.consume(10000, 1.0)
        if batch and started is None:  # the clock starts after the first batch
            started, first = time.perf_counter(), len(batch)
        got += len(batch)
    elapsed = time.perf_counter() - (started or time.perf_counter())
    c.close()
    if got < records:
        raise RuntimeError(f"the consumer read {got} of {records} records")
    return (got - first) / elapsed if elapsed else 0.0


CLIENTS = {"java": (java_produce, java_consume), "rdkafka": (rdkafka_produce, rdkafka_consume)}
# runs beside direct and the proxy in a round, and how their ratios are labelled
# copy_relay.py's: plain copies, splice(2), or copies framed and fed to a display pipe
RELAY_MODES = ("copy", "splice", "framed")
ARMS = (
    ("old", "old"),
    *((f"relay-{mode}", f"{mode} relay") for mode in RELAY_MODES),
    ("forwarding", "display stopped"),
)


class Relay:
    """copy_relay.py in ``mode``, a process in front of each node: ``hops`` are (the
    relay's port, the node's port), both on 127.0.0.1."""

    def __init__(self, mode: str, hops: list[tuple[int, int]]):
        self.port = hops[0][0]
        flags = [f"--{mode}"] if mode != "copy" else []
        self.procs: list[subprocess.Popen] = []
        try:
            for port, upstream in hops:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, str(ROOT / "benchmarks" / "copy_relay.py"), *flags]
                        + [str(port), str(upstream)]
                    )
                )
        except BaseException:  # (none left running behind a failed start)
            self.stop()
            raise

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> tuple[float, float]:  # (the relays, their display pipes' readers)
        pids = [p.pid for p in self.procs]
        return (
            sum(map(_cpu_seconds, pids)),
            sum(_cpu_seconds(k) for pid in pids for k in _children(pid)),
        )

    def settle(self) -> None:
        pass

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def relay_listener(mode: str) -> str:
    """The name of the listener the relays of ``mode`` stand in front of."""
    return f"RELAY_{mode.upper()}"


def relayed_cluster(nodes: int, modes: tuple[str, ...]) -> tuple[ApacheKafka, dict[str, list[int]]]:
    """An Apache Kafka cluster, not started, with a listener per relay mode (RELAY_COPY...)
    that each node advertises at a port of its own: a client that bootstraps through a
    relay is told each node's relay, so every connection takes the hop. Returns it and
    each mode's relay ports, node by node."""
    cluster = ApacheKafka(
        nodes=nodes, listeners=("PLAINTEXT", *map(relay_listener, modes)), start=False
    )
    ports = {m: [free_port() for _ in range(nodes)] for m in modes}
    for m, mode_ports in ports.items():
        for node, port in enumerate(mode_ports, 1):
            cluster.advertise(node, relay_listener(m), "127.0.0.1", port)
    return cluster, ports


def start_relays(cluster: ApacheKafka, ports: dict[str, list[int]]) -> dict[str, Relay]:
    """The relays of ``relayed_cluster``'s ports (the cluster started), as arms
    (relay-copy...)."""
    relays: dict[str, Relay] = {}
    try:
        for m, mode_ports in ports.items():
            hops = [
                (port, cluster.node(node).ports[relay_listener(m)])
                for node, port in enumerate(mode_ports, 1)
            ]
            relays[f"relay-{m}"] = Relay(m, hops)
    except BaseException:
        for relay in relays.values():
            relay.stop()
        raise
    return relays


class Idle:
    """No process between client and broker (direct, with --relay-only)."""

    def cpu(self) -> tuple[float, float]:
        return 0.0, 0.0

    def settle(self) -> None:
        pass


def _topics(bootstrap: str, *args: str, check: bool = True) -> None:
    """Kafka's own kafka-topics (TopicCommand) with ``args``."""
    subprocess.run(
        [
            java(),
            *PERF_JVM,
            "-cp",
            classpath(),
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        check=check,
        timeout=120,
    )


def _create(bootstrap: str, topic: str, rf: int, check: bool = True, partitions: int = 3) -> None:
    _topics(
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--replication-factor",
        str(rf),
        check=check,
    )


def _round_trips(bootstrap: str, n: int) -> list[float]:
    """Seconds per ApiVersions v0 round trip on one connection, ``n`` of them (after 50
    not timed: the connection to the broker made)."""
    import socket
    import struct

    host, port = bootstrap.split(",")[0].rsplit(":", 1)  # (a cluster's: its first broker)
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    request = struct.pack(">i", len(body)) + body
    out = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(n + 50):
            start = time.perf_counter()
            sock.sendall(request)
            need, got = 4, b""
            while len(got) < need:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed during a round trip")
                got += chunk
                if need == 4 and len(got) >= 4:
                    need = 4 + struct.unpack(">i", got[:4])[0]
            if i >= 50:
                out.append(time.perf_counter() - start)
    return out


def _beside_flood(bootstrap: str, topic: str, size: int, n: int) -> list[float]:
    """``n`` ApiVersions round trips on one connection while a Java producer floods the
    same path (as fast as it goes, acks=1) on its own connection: the head-of-line cost a
    small request pays beside bulk traffic."""
    flood = subprocess.Popen(
        _producer_command(bootstrap, topic, 50_000_000, size),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(4)  # the JVM started, its connections made, records flowing
        if flood.poll() is not None:
            raise RuntimeError("the flooding producer ended before the round trips")
        return _round_trips(bootstrap, n)
    finally:
        flood.kill()
        flood.wait()


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _quiet(cluster: ApacheKafka, timeout: float = 30.0, share: float = 0.15) -> float:
    """Wait until the brokers' JVMs use under ``share`` of a core over half a second, after
    writing the page cache's dirty pages (``os.sync``): the last run's replication and log
    flushes, or the flood's deleted topic, must not fall on the next arm. Without it the
    second arm of a round ran faster whichever it was (rounds with direct first gave the
    proxy 99-128 % of direct, rounds with the proxy first 69-87 %). Returns the seconds
    waited."""
    start = time.monotonic()
    os.sync()
    pids = [n.proc.pid for n in cluster.nodes if n.proc is not None]
    while time.monotonic() - start < timeout:
        before = sum(_cpu_seconds(p) for p in pids)
        time.sleep(0.5)
        if sum(_cpu_seconds(p) for p in pids) - before < share * 0.5:
            break
    return time.monotonic() - start


def _order(arms: tuple[str, ...], i: int) -> tuple[str, ...]:
    """Round ``i``'s order of ``arms``: rotated every two rounds, and reversed in every
    second round, so that over an even number of rounds each arm runs as often before
    direct as after it, and over a multiple of twice the arms in every place alike (on
    three nodes an arm gained from coming later; the arms once added after the two
    alternating ones always ran last)."""
    k = (i // 2) % len(arms)
    order = arms[k:] + arms[:k]
    return order if i % 2 == 0 else order[::-1]


def _by_order(
    rows: list[tuple[float, float, bool]], k: int
) -> tuple[list[float], list[float], int]:
    """Ratio ``k`` of the rounds with direct first, of those with the arm first, and how
    many rounds of each order there are alike."""
    first = [r[k] for r in rows if not r[2]]
    second = [r[k] for r in rows if r[2]]
    return first, second, min(len(first), len(second))


def _order_effect(rows: list[tuple[float, float, bool]], k: int) -> tuple[float, float, float]:
    """(median ratio of rounds with direct first, of rounds with the arm first, their
    order-balanced estimate): a run that gains from going second gains ``b`` in one order
    and loses it in the other, so the geometric mean of equally many rounds of each order
    cancels it, where a median of all rounds keeps whatever the odd round brings."""
    first, second, n = _by_order(rows, k)
    balanced = statistics.geometric_mean(first[:n] + second[:n]) if n else float("nan")
    return (
        statistics.median(first) if first else float("nan"),
        statistics.median(second) if second else float("nan"),
        balanced,
    )


def _interval(
    rows: list[tuple[float, float, bool]], k: int, draws: int = 4000
) -> tuple[float, float]:
    """A 90 % interval of the order-balanced estimate, by resampling each order's rounds
    (seeded: the same rounds give the same interval). Whether a goal such as 95 % of
    direct is met, missed or not shown by these rounds: rounds here move by tens of
    percent, so a median alone says little."""
    first, second, n = _by_order(rows, k)
    if n < 2:
        return float("nan"), float("nan")
    rng = random.Random(44)
    means = sorted(
        statistics.geometric_mean(rng.choices(first[:n], k=n) + rng.choices(second[:n], k=n))
        for _ in range(draws)
    )
    return means[int(0.05 * draws)], means[int(0.95 * draws) - 1]


def _cpu_idle() -> tuple[int, int]:
    """(idle, all) clock ticks of every core since boot (/proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return ticks[3] + ticks[4], sum(ticks)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=6)  # (even: see _order)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument(
        "--partitions",
        type=int,
        default=3,
        help="of each topic produced and consumed (more per node: larger Fetch answers, "
        "up to 1 MiB per partition)",
    )
    ap.add_argument("--clients", default="java,rdkafka")
    ap.add_argument(
        "--only",
        choices=("produce", "consume"),
        help="time only producers, or only consumers (of records produced once)",
    )
    ap.add_argument(
        "--proxy-root",
        type=Path,
        default=ROOT,
        help="the kdissect checkout whose proxy runs (default: this one)",
    )
    ap.add_argument(
        "--compare",
        type=Path,
        help="a second kdissect checkout whose proxy runs in the same rounds ('old')",
    )
    ap.add_argument(
        "--latency",
        type=int,
        default=2000,
        help="ApiVersions round trips timed per round and path (0: none)",
    )
    ap.add_argument(
        "--flood-latency",
        type=int,
        default=0,
        help="ApiVersions round trips timed per round and path beside a flooding Java "
        "producer on the same path (0: none)",
    )
    ap.add_argument(
        "--relay",
        action="store_true",
        help="also a run through a plain copy relay (copy_relay.py, a process in front "
        "of a listener of each node's own, advertised at that relay): what the second "
        "hop alone costs on this machine",
    )
    ap.add_argument(
        "--format",
        default="jsonl",
        choices=("jsonl", "text"),
        help="the proxy display's output: jsonl (every record of every exchange) or text "
        "(a summary line per message: the default display, decoding what the TUI does)",
    )
    ap.add_argument(
        "--forwarding-only",
        action="store_true",
        help="also a run through the proxy with its display stopped (SIGSTOP): "
        "what forwarding alone costs",
    )
    ap.add_argument(
        "--relay-mode",
        default="copy",
        help="with --relay: which relays, comma-separated: copy (recv_into + sendall), "
        "splice (socket -> pipe -> socket, no copy through user space), framed (copies, "
        "each message also framed, paired and put on a display pipe); default copy",
    )
    ap.add_argument(
        "--proxy-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="an option for this checkout's proxy only (not --compare's), e.g. "
        "--proxy-option=--forwarder-priority=realtime; repeatable",
    )
    ap.add_argument(
        "--relay-only",
        action="store_true",
        help="with --relay: no proxy, only direct and the relays (order rotating)",
    )
    args = ap.parse_args()
    modes = args.relay_mode.split(",")
    if not set(modes) <= set(RELAY_MODES) or len(set(modes)) != len(modes):
        ap.error(f"--relay-mode: distinct ones of {', '.join(RELAY_MODES)}")
    if args.relay_only and not args.relay:
        ap.error("--relay-only needs --relay")
    if args.relay_only and (args.compare or args.forwarding_only):
        ap.error("--relay-only runs no proxy (no --compare, no --forwarding-only)")

    def timed(rates: tuple[float, float], ratio: tuple[float, float] | None = None) -> str:
        """A run's records/s (and ratios to direct), of what was timed."""
        return ", ".join(
            f"{name} {rates[k]:,.0f}/s" + (f" ({ratio[k]:.0%})" if ratio else "")
            for k, name in enumerate(("produce", "consume"))
            if not args.only or name == args.only
        )

    workdir = Path(tempfile.mkdtemp(prefix="kdissect-bench-"))
    print(f"load before: {_load()} on {os.cpu_count()} cores", flush=True)
    if args.repeats % 2:
        print(
            "(an odd --repeats: the last round's order has no counterpart; "
            "the order-balanced figures leave it out)"
        )
    cluster, relay_ports = relayed_cluster(args.nodes, tuple(modes) if args.relay else ())
    cluster.start()
    proxy = old = None
    relays: dict[str, Relay] = {}
    try:
        relays.update(start_relays(cluster, relay_ports))
        if not args.relay_only:
            proxy = Proxy(
                cluster.bootstrap(),
                workdir,
                args.proxy_root.resolve(),
                args.format,
                tuple(args.proxy_option),
            )
        if args.compare is not None:
            (workdir / "old").mkdir()
            old = Proxy(cluster.bootstrap(), workdir / "old", args.compare.resolve(), args.format)
        lat: dict[str, list[tuple[float, float]]] = {}
        rf = min(3, args.nodes)
        _create(cluster.bootstrap(), "warm", rf, check=False)
        results: dict[str, list[tuple[float, float]]] = {}
        rates: dict[str, list[tuple[float, float]]] = {}  # records/s per client and arm
        cpu: dict[str, list[tuple[float, float]]] = {}
        quiet_s: list[float] = []  # waits for quiet brokers before each arm
        idle: dict[str, list[float]] = {}  # share of the cores idle during each consume
        for client in args.clients.split(","):
            produce, consume = CLIENTS[client]
            if args.only == "consume":  # one topic, produced once, read by every run
                shared = f"{client}-consumed"
                _create(cluster.bootstrap(), shared, rf, partitions=args.partitions)
                produce(cluster.bootstrap(), shared, args.records, args.size)
            arms = ("direct", *(("proxy",) if not args.relay_only else ()))
            arms += ("old",) * (old is not None) + ("forwarding",) * args.forwarding_only
            arms += tuple(relays)
            for i in range(args.repeats):
                order = _order(arms, i)
                figures = {}
                for where in order:
                    topic = f"{client}-{where}-{i}"
                    if args.only == "consume":
                        topic = shared
                    else:
                        _create(cluster.bootstrap(), topic, rf, partitions=args.partitions)
                    bootstrap = cluster.bootstrap()
                    if where != "direct":  # forwarding: the proxy with its display stopped
                        bootstrap = (
                            relays.get(where) or (old if where == "old" else proxy)
                        ).bootstrap
                    for running in (proxy, old):
                        if running is not None:
                            running.settle()
                    quiet_s.append(_quiet(cluster))
                    if where == "forwarding":  # the display stopped: it sheds all
                        os.kill(proxy.proc.pid, signal.SIGSTOP)
                    # whose CPU seconds the run reads (direct with --relay-only: nobody's)
                    meter = relays.get(where) or (old if where == "old" else proxy)
                    if meter is None:
                        meter = Idle()
                    before = meter.cpu()
                    p = c = 1.0
                    if args.only != "consume":
                        p = produce(bootstrap, topic, args.records, args.size)
                    mid = meter.cpu()
                    meter.settle()
                    mid2 = meter.cpu()
                    if args.only != "produce":
                        ticks = _cpu_idle()
                        c = consume(bootstrap, topic, args.records)
                        spare = [b - a for a, b in zip(ticks, _cpu_idle())]
                        idle.setdefault(where, []).append(spare[0] / max(1, spare[1]))
                    after = meter.cpu()
                    if where == "forwarding":
                        os.kill(proxy.proc.pid, signal.SIGCONT)
                    figures[where] = (p, c)
                    rates.setdefault(f"{client} {where}", []).append((p, c))
                    if where in ("proxy", "old") or where in relays:
                        label = {"proxy": "", "old": " (old)"}.get(where, f" ({where})")
                        cpu.setdefault(f"{client} produce{label}", []).append(
                            (mid[0] - before[0], mid[1] - before[1])
                        )
                        cpu.setdefault(f"{client} consume{label}", []).append(
                            (after[0] - mid2[0], after[1] - mid2[1])
                        )
                paths = {"direct": cluster.bootstrap()}
                for arm, other in (("proxy", proxy), ("old", old), *relays.items()):
                    if other is not None:
                        paths[arm] = other.bootstrap
                for where in (w for w in order if w in paths):
                    # no arm's round trips beside the other proxy's display still decoding
                    # the flood before (it lags up to --display-lag seconds)
                    for running in (proxy, old):
                        if running is not None:
                            running.settle()
                    if args.latency:
                        trips = _round_trips(paths[where], args.latency)
                        lat.setdefault(where, []).append((_pct(trips, 0.5), _pct(trips, 0.99)))
                    if args.flood_latency:
                        topic = f"flood-{where}-{client}-{i}"
                        _create(cluster.bootstrap(), topic, rf)
                        quiet_s.append(_quiet(cluster))  # the last flood's GBs deleted
                        trips = _beside_flood(paths[where], topic, args.size, args.flood_latency)
                        _topics(cluster.bootstrap(), "--delete", "--topic", topic)  # its GBs
                        lat.setdefault(f"{where} beside a flood", []).append(
                            (_pct(trips, 0.5), _pct(trips, 0.99))
                        )
                line = ""
                for arm, label in (("proxy", None), *ARMS):  # each run against direct
                    if arm not in figures:
                        continue
                    ratio = (
                        figures[arm][0] / figures["direct"][0],
                        figures[arm][1] / figures["direct"][1],
                    )
                    before = order.index(arm) < order.index("direct")
                    results.setdefault(client + (f" ({label})" if label else ""), []).append(
                        (*ratio, before)
                    )
                    line += f"; {label or 'proxy'}: {timed(figures[arm], ratio)}"
                print(
                    f"{client} round {i + 1} ({', '.join(order)}): direct "
                    f"{timed(figures['direct'])}{line}; load {_load()}",
                    flush=True,
                )
        summary = proxy.stop() if proxy is not None else ""
        proxy = None
        if old is not None:
            summary += "".join(
                f"\n{line} (old)"
                for line in old.stop().splitlines()
                if line.startswith("display: ")
            )
            old = None
        print(
            f"\n{args.nodes} Apache Kafka node(s), {args.records:,} records of "
            f"{args.size} B per run in topics of {args.partitions} partitions, "
            f"{args.repeats} rounds per client"
        )

        def medians(table: dict, form: str, unit: str) -> None:
            """Each row's produce and consume medians (and ranges) in ``form``."""
            for who, rows in table.items():
                for k, name in enumerate(("produce", "consume")):
                    if args.only and name != args.only:
                        continue
                    v = sorted(r[k] for r in rows)
                    median, lo, hi = (format(x, form) for x in (statistics.median(v), v[0], v[-1]))
                    print(f"  {who} {name}: median {median}{unit} ({lo}–{hi})")

        medians(rates, ",.0f", " records/s")
        medians(results, ".0%", " of direct")
        # (each arm ran as often before direct as after it: _order)
        for who, rows in results.items():
            for k, name in enumerate(("produce", "consume")):
                if args.only and name != args.only:
                    continue
                d_first, p_first, balanced = _order_effect(rows, k)
                lo, hi = _interval(rows, k)
                print(
                    f"  {who} {name}: {balanced:.0%} of direct order-balanced (geometric "
                    f"mean; direct first {d_first:.0%}, arm first {p_first:.0%}); "
                    f"90 % interval {lo:.0%}–{hi:.0%}"
                )
        # a machine with no idle core while direct runs has no time to give a hop: each
        # CPU second the proxy takes then comes out of the clients' and brokers' share
        for where, shares in idle.items():
            print(
                f"  the cores idle while {where} consumed (the client's start too): median "
                f"{statistics.median(shares):.0%} ({min(shares):.0%}–{max(shares):.0%})"
            )
        if quiet_s:
            print(
                f"  waits for quiet brokers before an arm: median {statistics.median(quiet_s):.1f} s"
                f" (max {max(quiet_s):.1f} s)"
            )
        for where, rows in lat.items():
            if where.startswith("direct"):
                continue
            base = lat["direct" + where.partition(" ")[1] + where.partition(" ")[2]]
            for k, name in enumerate(("p50", "p99")):
                added = sorted((r[k] - d[k]) * 1e6 for r, d in zip(rows, base))
                print(
                    f"  {where}: ApiVersions round trip {name} added "
                    f"{statistics.median(added):.0f} µs (rounds {added[0]:.0f}–{added[-1]:.0f}; "
                    f"direct {statistics.median(d[k] for d in base) * 1e6:.0f} µs)"
                )
        for what, pairs in cpu.items():
            if args.only and f" {args.only}" not in what:
                continue  # not timed
            fwd = statistics.median(p[0] for p in pairs)
            disp = statistics.median(p[1] for p in pairs)
            if "(relay-" in what:
                reader = f", its display pipe's reader {disp:.2f} s" if "framed" in what else ""
                print(f"  CPU per run, {what}: relay {fwd:.2f} s{reader}")
                continue
            print(f"  CPU per proxied run, {what}: forwarder {fwd:.2f} s, display {disp:.2f} s")
        for line in summary.splitlines():
            if line.startswith(("proxy: ", "display: ")):
                print("  " + line)
        print(f"load after: {_load()}")
    finally:
        for p in (proxy, old):
            if p is not None:
                p.proc.kill()
        for relay in relays.values():
            relay.stop()
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
