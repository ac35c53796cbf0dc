#!/usr/bin/env python3
"""What decoding record values costs: `kdissect pcap --format jsonl` of a capture whose
records are all Schema-Registry-framed Avro values (the tests' Order schema: nested
records, unions, enums, decimals, maps, timestamps; or with --kind the same as Protobuf,
or JSON documents), with `--schemas DIR` against the same run with the values left raw.
Goal (issue 27): at most 2x for Avro.

The capture is recorded here: the pinned Apache Kafka (tests/support/apache_kafka.py),
confluent-kafka producing and consuming, tcpdump on loopback (needs root or capture
rights). Prints the medians of alternating runs and the ratio.

    .venv/bin/python benchmarks/values_cost.py [--records 20000] [--runs 3] [--keep DIR]
        [--kind avro|protobuf|json] [--tail] [--repeat N] [--pure]

The decoded run takes JSON lines' values-only path for clean Avro values (the compiled
reader of native/src/avro.rs writing JSON text; with --pure, KDISSECT_PURE=1 in both
runs, the Python reader of values_schema/avro_fast.py) and JSON values; Protobuf takes
the located decoder, as -V, the TUI and damaged values do.
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


def values_of(kind: str, directory: Path, n: int) -> list[bytes]:
    """``n`` different framed values of ``kind``, their schema written into ``directory``:
    the tests' Order as Avro (id 7) or Protobuf (id 8, message indexes [0]), or a JSON
    document (id 9, JSON Schema)."""
    from tests.test_values_real import _orders
    from tests.test_values_schema import COMMON_PROTO, ORDER, SHOP_PROTO, avro_bytes, framed

    if kind == "avro":
        (directory / "7.avsc").write_text(json.dumps(ORDER))
        return [framed(7, avro_bytes(ORDER, v)) for v in _orders(n)]
    if kind == "json":
        (directory / "9.json").write_text(json.dumps({"title": "Order", "type": "object"}))
        return [
            framed(
                9,
                json.dumps(
                    {
                        "id": f"o-{i}",
                        "qty": i,
                        "customer": {"id": f"c-{i}", "vip": i % 2 == 0},
                        "lines": [{"sku": f"s{j}", "n": j} for j in range(i % 3)],
                        "total": f"{i}.50",
                        "note": None if i % 2 else "n",
                    }
                ).encode(),
            )
            for i in range(n)
        ]
    from google.protobuf import message_factory

    from kdissect.schemas_source import compile_proto

    (directory / "8.proto").write_text(SHOP_PROTO)
    (directory / "common.proto").write_text(COMMON_PROTO)
    Order = message_factory.GetMessages(
        compile_proto(SHOP_PROTO, {"common.proto": COMMON_PROTO}, "bench").file
    )["shop.Order"]
    out = []
    for i in range(n):
        m = Order(id=f"o-{i}", qty=i, packed=list(range(i % 5)), status=i % 3)
        m.lines.add(sku="a", n=i).notes.add(text=f"note {i}")
        m.by_sku[f"s{i}"].n = i
        m.customer.id = f"c-{i}"
        out.append(framed(8, b"\x00" + m.SerializeToString()))
    return out


def record(
    directory: Path, n: int, repeat: int | None = None, tail: bool = False, kind: str = "avro"
) -> Path:
    from confluent_kafka import Consumer, Producer

    from tests.support.apache_kafka import ApacheKafka
    from tests.support.capture import Tcpdump

    # every value different (as on a real topic), unless --repeat asks for a cycle
    values = values_of(kind, directory, repeat or n)
    pcap = directory / f"{kind}-values.pcap"
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
                    time.sleep(0.05)  # a producer at a steady pace
            assert p.flush(60) == 0
            if not tail:
                reader.start()
            reader.join()
    return pcap


def run(pcap: Path, extra: list[str], pure: bool = False) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys of the kdissect process)."""
    env = {**os.environ, "KDISSECT_PURE": "1"} if pure else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "pcap",
            str(pcap),
            "--no-tui",
            "--format",
            "jsonl",
            "-j",
            "1",
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="produce N different values in a cycle (default: all different; "
        "the first figures in docs/guide/values.md used --repeat 500)",
    )
    ap.add_argument(
        "--tail",
        action="store_true",
        help="the consumer reads while the producer writes (default: after)",
    )
    ap.add_argument(
        "--kind",
        choices=("avro", "protobuf", "json"),
        default="avro",
        help="what the values are (default: Avro)",
    )
    ap.add_argument(
        "--pure", action="store_true", help="KDISSECT_PURE=1 in both runs: the pure-Python paths"
    )
    ap.add_argument(
        "--keep",
        type=Path,
        help="record into this directory and keep it; if it already holds the capture, reuse it",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        pcap = directory / f"{args.kind}-values.pcap"
        if not (args.keep and pcap.exists()):
            pcap = record(directory, args.records, args.repeat, args.tail, args.kind)
        raw, decoded = [], []
        load = os.getloadavg()[0]
        for _ in range(args.runs):  # alternating, so load drifts hit both
            raw.append(run(pcap, [], args.pure))
            decoded.append(run(pcap, ["--schemas", str(directory)], args.pure))
        load = (load + os.getloadavg()[0]) / 2
        print(
            f"capture: {pcap.stat().st_size / 1e6:.1f} MB, {args.records} {args.kind} records "
            f"produced and fetched; load average {load:.1f} on {os.cpu_count()} CPUs"
            + ("; pure-Python paths (KDISSECT_PURE=1)" if args.pure else "")
        )
        for what, runs in (("values raw", raw), (f"values decoded ({args.kind})", decoded)):
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            print(
                f"jsonl, {what:22} median {statistics.median(walls):.2f} s wall, "
                f"{statistics.median(cpus):.2f} s CPU  (CPU runs "
                f"{', '.join(f'{c:.2f}' for c in cpus)})"
            )
        r = statistics.median(c for _, c in raw)
        d = statistics.median(c for _, c in decoded)
        rw = statistics.median(w for w, _ in raw)
        dw = statistics.median(w for w, _ in decoded)
        print(f"ratio decoded/raw: {d / r:.2f}x CPU, {dw / rw:.2f}x wall (goal <= 2x)")


if __name__ == "__main__":
    main()
