#!/usr/bin/env python3
"""Record issue 43's message-dense benchmark captures from real Apache Kafka 4.4 traffic
(tests/support/apache_kafka.py: a 3-node KRaft cluster on loopback ports), into a cache
directory (not the repository: they are ≥ 50 MB each):

    cluster.pcap      every listener of the cluster (PLAINTEXT, INTERNAL, CONTROLLER) while
                      four confluent-kafka producers send one-record acks=all Produce
                      requests to a replicated 6-partition topic and a consumer group
                      fetches them: Produce, follower Fetch, KRaft Fetch, heartbeats,
                      offset commits...
    tls.pcap + tls.keys
                      the SSL listener while kafka-python sends one-record Produce
                      requests (~1 KB a record), Python's ssl writing the session keys

tcpdump on loopback sees 64 KiB segments (segmentation offload); both captures are then
cut into MTU-1500 segments (MSS 1448, sequence numbers and IP lengths rewritten; see
resegment()) so that messages span segments as on a real network. Takes a few minutes;
needs tcpdump rights, Java 17 and the Kafka jars (scripts/kafka/fetch).

    .venv/bin/python benchmarks/make_dense_captures.py [--dir ~/.cache/kdissect/bench]
        [--mb 60]

Then: benchmarks/message_dense.py --capture DIR/cluster.pcap, and
benchmarks/message_dense.py --capture DIR/tls.pcap --keylog DIR/tls.keys.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MSS = 1448  # a 1500-byte MTU less IPv4 and TCP headers with timestamps (20+20+12)
_PCAP_HEAD = struct.Struct("<IIII")


def resegment(src: Path, dst: Path, mss: int = MSS) -> int:
    """Copy the classic pcap ``src`` (Ethernet/IPv4, as tcpdump writes on Linux loopback)
    to ``dst`` with every TCP payload longer than ``mss`` cut into segments of at most
    ``mss`` bytes, each with the original headers, its own sequence number, IP total length
    and IP header checksum (TCP checksums are left as loopback wrote them: offloaded,
    unchecked by kdissect and tshark alike). Returns the number of packets written."""
    data = memoryview(src.read_bytes())
    written = 0
    with open(dst, "wb") as out:
        out.write(data[:24])
        at = 24
        while at + 16 <= len(data):
            sec, usec, incl, orig = _PCAP_HEAD.unpack_from(data, at)
            frame = data[at + 16 : at + 16 + incl]
            at += 16 + incl
            pieces = _cut(bytes(frame), mss) if incl == orig else None
            for piece in pieces or (bytes(frame),):
                out.write(_PCAP_HEAD.pack(sec, usec, len(piece), len(piece)))
                out.write(piece)
                written += 1
    return written


def _cut(frame: bytes, mss: int) -> list[bytes] | None:
    """The frame as segments of at most ``mss`` payload bytes; None: leave it whole."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[14] >> 4 != 4 or frame[23] != 6:
        return None
    ihl = (frame[14] & 15) * 4
    total = struct.unpack_from(">H", frame, 16)[0]
    tcp = 14 + ihl
    doff = (frame[tcp + 12] >> 4) * 4
    start, end = tcp + doff, 14 + total
    if end - start <= mss:
        return None
    seq = struct.unpack_from(">I", frame, tcp + 4)[0]
    head = bytearray(frame[:start])
    out = []
    for off in range(start, end, mss):
        chunk = frame[off : min(off + mss, end)]
        h = bytearray(head)
        struct.pack_into(">H", h, 16, ihl + doff + len(chunk))
        struct.pack_into(">I", h, tcp + 4, (seq + off - start) & 0xFFFFFFFF)
        if off + mss < end:
            h[tcp + 13] &= ~0x09 & 0xFF  # FIN and PSH on the last piece only
        struct.pack_into(">H", h, 24, 0)
        struct.pack_into(">H", h, 24, _checksum(bytes(h[14 : 14 + ihl])))
        out.append(bytes(h) + chunk)
    return out


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _cluster_traffic(kafka, out: Path, target: int) -> str:
    """Small acks=all produces to a replicated topic and a consumer group reading them,
    until the capture holds ``target`` bytes."""
    from confluent_kafka import Consumer, Producer
    from tests.support.kafka_scenarios import create_topic

    bootstrap = kafka.bootstrap()
    create_topic(bootstrap, "dense", 6, 3)
    stop = threading.Event()
    consumed = [0]

    def consume(n: int) -> None:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "dense-readers",
                "client.id": f"dense-reader-{n}",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 20,
                "auto.commit.interval.ms": 200,
            }
        )
        c.subscribe(["dense"])
        while not stop.is_set():
            if c.poll(0.1) is not None:
                consumed[0] += 1
        c.close()

    def write(n: int) -> None:
        # each record flushed alone: one-record acks=all Produce requests, each answered
        # after the followers' Fetch took it (what makes the traffic message-dense)
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "client.id": f"dense-writer-{n}",
            }
        )
        while not stop.is_set():
            p.produce("dense", key=b"k%d" % (sent[0] % 97), value=b"v%08d." % sent[0] + pad)
            p.flush(30)
            sent[0] += 1
        p.flush(30)

    pad = b"." * 100
    sent = [0]
    threads = [threading.Thread(target=consume, args=(n,)) for n in range(2)] + [
        threading.Thread(target=write, args=(n,)) for n in range(4)
    ]
    for t in threads:
        t.start()
    try:
        while out.stat().st_size < target:
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    return f"{sent[0]} records produced, {consumed[0]} consumed"


def _tls_traffic(kafka, keylog: Path, out: Path, target: int) -> str:
    """kafka-python over TLS: one-record Produce requests (each send flushed)."""
    import ssl
    from kafka import KafkaProducer

    context = ssl.create_default_context(cafile=str(kafka.tls.ca))
    context.keylog_filename = str(keylog)
    p = KafkaProducer(
        bootstrap_servers=kafka.bootstrap("SSL"),
        security_protocol="SSL",
        ssl_context=context,
        client_id="dense-tls",
        acks=1,
        linger_ms=0,
    )
    sent = 0
    value = os.urandom(600).hex().encode()  # ~1.2 KB: a Produce spans segments
    while out.stat().st_size < target:
        for _ in range(100):
            p.send("tls-dense", key=b"k%d" % sent, value=value, partition=sent % 3)
            p.flush(30)
            sent += 1
    p.close()
    return f"{sent} one-record produces"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(Path.home() / ".cache" / "kdissect" / "bench"))
    ap.add_argument("--mb", type=float, default=60, help="size of each raw capture (MB)")
    ap.add_argument("--only", choices=["cluster", "tls"], action="append")
    args = ap.parse_args()
    from tests.support.apache_kafka import ApacheKafka
    from tests.support.capture import Tcpdump
    from tests.support.kafka_scenarios import create_topic

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    target = int(args.mb * 1e6)
    with ApacheKafka(nodes=3, listeners=("PLAINTEXT", "SSL")) as kafka:
        if not args.only or "cluster" in args.only:
            raw = out / "cluster-raw.pcap"
            with Tcpdump(raw, kafka.ports("PLAINTEXT", "INTERNAL", "CONTROLLER")):
                print("cluster:", _cluster_traffic(kafka, raw, target), flush=True)
            n = resegment(raw, out / "cluster.pcap")
            raw.unlink()
            print(
                f"{out / 'cluster.pcap'}: {(out / 'cluster.pcap').stat().st_size / 1e6:.1f} "
                f"MB, {n} packets",
                flush=True,
            )
        if not args.only or "tls" in args.only:
            create_topic(kafka.bootstrap(), "tls-dense", 3, 1)
            raw, keys = out / "tls-raw.pcap", out / "tls.keys"
            keys.unlink(missing_ok=True)
            time.sleep(1)
            with Tcpdump(raw, kafka.ports("SSL")):
                print("tls:", _tls_traffic(kafka, keys, raw, target), flush=True)
            n = resegment(raw, out / "tls.pcap")
            raw.unlink()
            print(
                f"{out / 'tls.pcap'}: {(out / 'tls.pcap').stat().st_size / 1e6:.1f} MB, "
                f"{n} packets",
                flush=True,
            )


if __name__ == "__main__":
    main()
