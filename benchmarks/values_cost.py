#!/usr/bin/env python3
"""What decoding record values costs: `kdissect pcap --format jsonl` of a capture whose
records are all Schema-Registry-framed Avro values (the tests' Order schema: nested
records, unions, enums, decimals, maps, timestamps), with `--schemas DIR` against the
same run with the values left raw. Goal (issue 27): at most 2x.

The capture is recorded here: the pinned Apache Kafka (tests/support/apache_kafka.py),
confluent-kafka producing and consuming, tcpdump on loopback (needs root or capture
rights). Prints the medians of alternating runs and the ratio.

    .venv/bin/python benchmarks/values_cost.py [--records 20000] [--runs 3] [--keep DIR]

The decoded run takes JSON lines' values-only path (a reader generated per Avro schema)
for clean values; the located decoders (byte spans) serve -V, the TUI and damaged values.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import threading
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def record(directory: Path, n: int, repeat: int | None = None, tail: bool = False) -> Path:
    from confluent_kafka import Consumer, Producer

    from tests.support.apache_kafka import ApacheKafka
    from tests.support.capture import Tcpdump
    from tests.test_values_real import _orders
    from tests.test_values_schema import ORDER, avro_bytes, framed

    (directory / "7.avsc").write_text(json.dumps(ORDER))
    # every value different (as on a real topic), unless --repeat asks for a cycle
    values = [framed(7, avro_bytes(ORDER, v)) for v in _orders(repeat or n)]
    pcap = directory / "avro-values.pcap"
    with ApacheKafka(nodes=1) as kafka:
        conf = {"bootstrap.servers": kafka.bootstrap()}
        with Tcpdump(pcap, kafka.ports("PLAINTEXT")):
            got = [0]

            def consume() -> None:
                c = Consumer({**conf, "group.id": "bench", "auto.offset.reset": "earliest"})
                c.subscribe(["orders"])
                deadline = time.monotonic() + 120
                while got[0] < n and time.monotonic() < deadline:
                    m = c.poll(1)
                    got[0] += m is not None and not m.error()
                c.close()
            # --tail: the consumer reads while the producer writes (as a live consumer
            # does); otherwise it starts once everything is written
            reader = threading.Thread(target=consume)
            if tail:
                reader.start()
            p = Producer({**conf, "linger.ms": 20})
            for i in range(n):
                while True:
                    try:
                        p.produce("orders", key=b"k%d" % i, value=values[i % len(values)])
                        break
                    except BufferError:
                        p.poll(0.05)
                if tail and i % 500 == 499:
                    time.sleep(0.05)         # a producer at a steady pace
            assert p.flush(60) == 0
            if not tail:
                reader.start()
            reader.join()
    return pcap


def run(pcap: Path, extra: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys of the kdissect process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kdissect", "pcap", str(pcap), "--no-tui",
                    "--format", "jsonl", "-j", "1", *extra], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, metavar="N",
                    help="produce N different values in a cycle (default: all different; "
                         "the first figures in docs/values.md used --repeat 500)")
    ap.add_argument("--tail", action="store_true",
                    help="the consumer reads while the producer writes (default: after)")
    ap.add_argument("--keep", type=Path, help="record into this directory and keep it; "
                    "if it already holds the capture, reuse it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        pcap = directory / "avro-values.pcap"
        if not (args.keep and pcap.exists()):
            pcap = record(directory, args.records, args.repeat, args.tail)
        raw, decoded = [], []
        load = os.getloadavg()[0]
        for _ in range(args.runs):           # alternating, so load drifts hit both
            raw.append(run(pcap, []))
            decoded.append(run(pcap, ["--schemas", str(directory)]))
        load = (load + os.getloadavg()[0]) / 2
        print(f"capture: {pcap.stat().st_size / 1e6:.1f} MB, {args.records} Avro records "
              f"produced and fetched; load average {load:.1f} on {os.cpu_count()} CPUs")
        for what, runs in (("values raw", raw), ("values decoded (Avro)", decoded)):
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            print(f"jsonl, {what:22} median {statistics.median(walls):.2f} s wall, "
                  f"{statistics.median(cpus):.2f} s CPU  (CPU runs "
                  f"{', '.join(f'{c:.2f}' for c in cpus)})")
        r = statistics.median(c for _, c in raw)
        d = statistics.median(c for _, c in decoded)
        rw = statistics.median(w for w, _ in raw)
        dw = statistics.median(w for w, _ in decoded)
        print(f"ratio decoded/raw: {d / r:.2f}x CPU, {dw / rw:.2f}x wall (goal <= 2x)")


if __name__ == "__main__":
    main()
