#!/usr/bin/env python3
"""kdissect log against Kafka's own kafka-dump-log on the same segments, in one run:

    kafka-dump-log --deep-iteration --print-data-log --files ...   vs
    kdissect log DIR --format jsonl --records

The segments are real: the Apache Kafka broker of the tests (tests/support/apache_kafka.py)
writes --size-mb of records (MIX: batches of every codec; SIZES: values of 120 B to 16 KiB,
keys, a header) to one partition, is stopped, and its partition directory is kept in --dir
(reused when it is already there). kafka-dump-log runs with the JVM options its script
uses (PEER_JVM). Both commands then run alternately --runs times; the
table gives medians of wall time, CPU time (user+sys of the process tree) and peak memory
(PSS of the process tree, sampled every 20 ms), and the ratios (peer / ours: above 1,
kdissect is faster or smaller), with the load average. Output goes to /dev/null. On a
machine others share, wall time depends on their load; CPU time much less.
--slice-mb N compares on the first N MiB too (where the JVM's start-up weighs most);
--pure adds kdissect's pure-Python path (KDISSECT_PURE=1).

    .venv/bin/python benchmarks/log_vs_dump_log.py [--size-mb 1024] [--runs 3] [--dir DIR]
        [--slice-mb 32] [--slice-only] [--pure]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pcap_vs_tshark import ENV, measure  # noqa: E402


# The mix written: (codec, value sizes in bytes with their weights). Small JSON-like
# events dominate real topics; some 1 KiB documents and a few 16 KiB blobs.
MIX = (("lz4", 0.30), ("zstd", 0.20), ("snappy", 0.15), ("gzip", 0.05), ("none", 0.30))
SIZES = ((120, 70), (1024, 25), (16 << 10, 5))


def _values(n: int) -> list[bytes]:
    """``n`` values of the sizes in SIZES, half text (compressible), half random hex."""
    import random

    rng = random.Random(7)
    out = []
    for i in range(n):
        size = rng.choices([s for s, _ in SIZES], [w for _, w in SIZES])[0]
        head = b'{"event":"order","id":%d,"customer":"c-%d","items":[' % (i, i % 977)
        body = head + os.urandom(max(0, size - len(head)) // 4).hex().encode()
        out.append((body + b"x" * size)[:size])
    return out


def make_segments(target: Path, size_mb: int) -> Path:
    """A partition directory of about ``size_mb`` MiB written by the real broker: batches
    of every codec in MIX (the producers take turns, so each segment holds them all) and
    values of the sizes in SIZES, with keys and a header."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.apache_kafka import ApacheKafka

    kafka = ApacheKafka(nodes=1, extra={"log.segment.bytes": str(256 << 20)})
    try:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap()})
        for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
            f.result(30)
        pool = _values(4096)
        data = kafka.log_dirs[0] / "bench-0"
        producers = [
            (
                Producer(
                    {
                        "bootstrap.servers": kafka.bootstrap(),
                        "compression.type": c,
                        "linger.ms": 20,
                        "batch.size": 256 << 10,
                        "queue.buffering.max.kbytes": 64 << 10,
                    }
                ),
                share,
            )
            for c, share in MIX
        ]
        i = 0
        goal = size_mb << 20
        while sum(f.stat().st_size for f in data.glob("*.log")) < goal:
            for p, share in producers:  # a turn each: about ``share`` of the bytes
                for _ in range(int(20000 * share)):
                    value = pool[i % len(pool)]
                    while True:
                        try:
                            p.produce(
                                "bench",
                                key=b"key-%d" % (i % 10000),
                                value=value,
                                headers=[("n", b"%d" % i)],
                            )
                            break
                        except BufferError:  # the client's queue is full: let it send
                            p.poll(0.05)
                    i += 1
                p.flush(120)
        del producers, p  # closed before the broker stops (no reconnect noise)
        kafka.stop_node(1)
        src = kafka.log_dirs[0] / "bench-0"
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(src), str(target)], check=True)
    finally:
        kafka.close()
    return target


# what bin/kafka-dump-log.sh runs the tool with (kafka-run-class.sh's defaults)
PEER_JVM = [
    "-Xmx256M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]


def make_slice(part: Path, size_mb: int) -> Path:
    """A partition directory beside ``part`` holding the first ``size_mb`` MiB of its first
    segment, cut at a batch boundary (the same real batches, less of them)."""
    import struct

    target = part.parent.parent / f"slice{size_mb}" / part.name
    segment = target / "00000000000000000000.log"
    if segment.exists():
        return target
    target.mkdir(parents=True)
    with open(sorted(part.glob("*.log"))[0], "rb") as f:
        data = f.read((size_mb + 16) << 20)
    pos = 0
    while pos < size_mb << 20 and pos + 12 <= len(data):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    segment.write_bytes(data[:pos])
    return target


def compare(part: Path, args: argparse.Namespace) -> None:
    """kafka-dump-log and kdissect (and its pure-Python path with --pure) on ``part``,
    alternating, medians; a table with the ratios."""
    from tests.support.apache_kafka import DUMP_LOG, classpath, java

    segments = sorted(part.glob("*.log"))
    size = sum(s.stat().st_size for s in segments) / 2**20
    peer = [
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
    ours = [args.python, "-m", "kdissect", "log", str(part), "--format", "jsonl", "--records"]
    runs = {
        "kafka-dump-log --deep-iteration --print-data-log": (peer, False),
        "kdissect log --format jsonl --records": (ours, False),
    }
    if args.pure:
        runs["  the same, KDISSECT_PURE=1 (pure Python)"] = (ours, True)
    load = os.getloadavg()[0]
    print(
        f"segments: {part} ({len(segments)} files, {size:.0f} MiB); {args.runs} "
        f"alternating runs, medians; load average at start {load:.1f}",
        flush=True,
    )
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
    for _ in range(args.runs):
        for name, (cmd, pure) in runs.items():
            got[name].append(measure(cmd, pure=pure))
    med = {
        name: tuple(statistics.median(r[i] for r in rs) for i in range(3))
        for name, rs in got.items()
    }
    print(f"{'run':52} {'wall s':>7} {'CPU s':>7} {'MiB':>6}   CPU s of each run")
    for name, m in med.items():
        each = " ".join(f"{r[1]:.1f}" for r in got[name])
        print(f"{name:52} {m[0]:7.1f} {m[1]:7.1f} {m[2]:6.0f}   {each}")
    peer_m = med["kafka-dump-log --deep-iteration --print-data-log"]
    for name, m in med.items():
        if name.startswith("kafka-dump-log"):
            continue
        w, c, mem = (peer_m[i] / m[i] for i in range(3))
        print(
            f"ratios kafka-dump-log / {name.strip()}: CPU {c:.2f}x, wall {w:.2f}x, "
            f"memory {mem:.2f}x"
        )
    print(f"load average at end {os.getloadavg()[0]:.1f}\n", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--dir",
        default="/tmp/kdissect-bench-log/mix/bench-0",
        help="the partition directory (made by the broker when missing)",
    )
    ap.add_argument(
        "--slice-mb",
        type=int,
        default=0,
        help="also compare on the first N MiB of the first segment (first)",
    )
    ap.add_argument("--slice-only", action="store_true", help="only the slice")
    ap.add_argument(
        "--pure", action="store_true", help="also run kdissect's pure-Python path (KDISSECT_PURE=1)"
    )
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    part = Path(args.dir)
    if not part.exists():
        print(f"writing {args.size_mb} MiB with the Apache Kafka broker...", flush=True)
        make_segments(part, args.size_mb)
    subprocess.run(
        [args.python, "-m", "kdissect", "log", "--help"], capture_output=True, env=ENV, check=True
    )  # warm-up: bytecode
    version = (
        subprocess.run(
            [args.python, "-m", "kdissect", "--version"], env=ENV, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()
    )
    print(f"kdissect: {'; '.join(version)}; {os.cpu_count()} cores\n", flush=True)
    if args.slice_mb:
        compare(make_slice(part, args.slice_mb), args)
    if not args.slice_only:
        compare(part, args)


if __name__ == "__main__":
    main()
