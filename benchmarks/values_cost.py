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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def record(directory: Path, n: int) -> Path:
    from confluent_kafka import Consumer, Producer

    from tests.support.apache_kafka import ApacheKafka
    from tests.support.capture import Tcpdump
    from tests.test_values_real import _orders
    from tests.test_values_schema import ORDER, avro_bytes, framed

    (directory / "7.avsc").write_text(json.dumps(ORDER))
    values = [framed(7, avro_bytes(ORDER, v)) for v in _orders(500)]
    pcap = directory / "avro-values.pcap"
    with ApacheKafka(nodes=1) as kafka:
        conf = {"bootstrap.servers": kafka.bootstrap()}
        with Tcpdump(pcap, kafka.ports("PLAINTEXT")):
            p = Producer({**conf, "linger.ms": 20})
            for i in range(n):
                while True:
                    try:
                        p.produce("orders", key=b"k%d" % i, value=values[i % len(values)])
                        break
                    except BufferError:
                        p.poll(0.05)
            assert p.flush(60) == 0
            c = Consumer({**conf, "group.id": "bench", "auto.offset.reset": "earliest"})
            c.subscribe(["orders"])
            got, deadline = 0, time.monotonic() + 120
            while got < n and time.monotonic() < deadline:
                m = c.poll(1)
                got += m is not None and not m.error()
            c.close()
    return pcap


def run(pcap: Path, extra: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kdissect", "pcap", str(pcap), "--no-tui",
                    "--format", "jsonl", "-j", "1", *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="record into this directory and keep it; "
                    "if it already holds the capture, reuse it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        pcap = directory / "avro-values.pcap"
        if not (args.keep and pcap.exists()):
            pcap = record(directory, args.records)
        raw, decoded = [], []
        for _ in range(args.runs):           # alternating, so load drifts hit both
            raw.append(run(pcap, []))
            decoded.append(run(pcap, ["--schemas", str(directory)]))
        r, d = statistics.median(raw), statistics.median(decoded)
        print(f"capture: {pcap.stat().st_size / 1e6:.1f} MB, {args.records} Avro records "
              f"produced and fetched")
        print(f"jsonl, values raw:           median {r:.2f} s  (runs {raw})")
        print(f"jsonl, values decoded (Avro): median {d:.2f} s  (runs {decoded})")
        print(f"ratio decoded/raw: {d / r:.2f}x (goal <= 2x)")


if __name__ == "__main__":
    main()
