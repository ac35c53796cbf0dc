#!/usr/bin/env python3
"""Record the capture-layer benchmark capture: sustained produce + fetch with every
codec (confluent-kafka against Tansu, MTU 1500 so messages span segments), about
160 MB. As root:

    .venv/bin/python benchmarks/make_bulk_capture.py [OUT.pcap] [--mb 160]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import make_captures  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def bulk(target_bytes: int):
    def session(bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer
        noise = os.urandom(1 << 16).hex()
        per_codec = target_bytes // 2 // len(CODECS)     # produce and fetch both count
        for codec in CODECS:
            topic = f"bulk-{codec}"
            p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                          "linger.ms": 5, "batch.size": 256 * 1024,
                          "queue.buffering.max.kbytes": 256 * 1024})
            sent, i = 0, 0
            while sent < per_codec:
                # half random hex: codecs get something to do without shrinking it all
                value = (b'{"order":%d,"sku":"item-%d","blob":"' % (i, i % 977)
                         + noise[(i * 37) % 60000:(i * 37) % 60000 + 180].encode()
                         + b'","pad":"' + b"x" * 180 + b'"}')
                while True:
                    try:
                        p.produce(topic, key=b"k%d" % (i % 1000), value=value,
                                  partition=i % 4, headers=[("i", str(i).encode())])
                        break
                    except BufferError:
                        p.poll(0.05)
                sent += len(value) // (1 if codec == "none" else 2)
                i += 1
            p.flush(120)
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{codec}",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "session.timeout.ms": 6000, "max.poll.interval.ms": 6000,
                          "fetch.max.bytes": 4 * 1024 * 1024})
            c.subscribe([topic])
            got, deadline = 0, time.time() + 180
            while got < i and time.time() < deadline:
                for m in c.consume(1000, 1.0):
                    if not m.error():
                        got += 1
            c.close()
            print(f"{topic}: {i} records produced, {got} fetched", flush=True)
    return session


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=str(ROOT / "benchmarks" / "data" / "bulk.pcap"))
    ap.add_argument("--mb", type=int, default=180)
    args = ap.parse_args()
    make_captures.in_namespace()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    make_captures.record("bulk", bulk(args.mb * 1024 * 1024), mtu=1500, out=out)


if __name__ == "__main__":
    main()
