"""Decode rate of representative messages: kdissect's full field tree vs its header-only
read, side by side with kio's native (Rust) parser on the same bytes as the peer.

    .venv/bin/python benchmarks/decode_rate.py [--seconds 2]

Messages: a large Metadata v12 response (kio-encoded), and a Fetch v12 response holding
about 1 MB of compressed records (batches written by kafka-python's batch builder).
Needs the [test] extra (kafka-python)."""

from __future__ import annotations

import argparse
import datetime
import io
import os
import time
import uuid

from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i32, i32Timedelta, i64
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName

from kdissect.protocol import Options, decode_response


def metadata_v12(topics: int = 300, partitions: int = 30, brokers: int = 12) -> bytes:
    msg = MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        cluster_id="bench-cluster",
        controller_id=BrokerId(1),
        brokers=tuple(
            MetadataResponseBroker(
                node_id=BrokerId(b),
                host=f"broker-{b}.example.com",
                port=i32(9092),
                rack=f"rack-{b % 3}",
            )
            for b in range(brokers)
        ),
        topics=tuple(
            MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(f"orders.region-{t}.v2"),
                topic_id=uuid.UUID(int=t + 1),
                is_internal=False,
                partitions=tuple(
                    MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=i32(p),
                        leader_id=BrokerId(p % brokers),
                        leader_epoch=i32(7),
                        replica_nodes=tuple(BrokerId((p + k) % brokers) for k in range(3)),
                        isr_nodes=tuple(BrokerId((p + k) % brokers) for k in range(3)),
                        offline_replicas=(),
                    )
                    for p in range(partitions)
                ),
            )
            for t in range(topics)
        ),
    )
    return _with_header(msg, flexible=True)


def fetch_v12_records(codec: int, target: int = 1 << 20) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    batches, size, offset = [], 0, 0
    rnd = os.urandom(64)
    while size < target:
        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 24,
        )
        for i in range(500):
            value = (
                b'{"order": %d, "sku": "item-%d", "note": "' % (offset + i, i % 97)
                + rnd.hex().encode()[: i % 64]
                + b'"}'
            )
            b.append(
                i,
                timestamp=1700000000000 + i,
                key=b"k%d" % (i % 50),
                value=value,
                headers=[("trace", b"abc")],
            )
        raw = bytearray(b.build())
        raw[0:8] = offset.to_bytes(8, "big")  # absolute base offset, as a broker would
        batches.append(bytes(raw))
        size += len(raw)
        offset += 500
    records = b"".join(batches)
    msg = FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(
            FetchableTopicResponse(
                topic=TopicName("orders"),
                partitions=(
                    PartitionData(
                        partition_index=i32(0),
                        error_code=ErrorCode.none,
                        high_watermark=i64(offset),
                        last_stable_offset=i64(offset),
                        log_start_offset=i64(0),
                        aborted_transactions=(),
                        preferred_read_replica=BrokerId(-1),
                        records=Records(records),
                    ),
                ),
            ),
        ),
    )
    return _with_header(msg, flexible=True)


def _with_header(msg, flexible: bool) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(msg))(buf, msg)
    return (42).to_bytes(4, "big") + (b"\x00" if flexible else b"") + buf.getvalue()


def rate(fn, seconds: float) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        n += 1
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    cases = [("Metadata v12 response", 3, 12, metadata_v12(), MetadataResponse)]
    for codec, name in ((1, "gzip"), (3, "lz4"), (4, "zstd")):
        cases.append(
            (
                f"Fetch v12 response, ~1 MB {name} records",
                1,
                12,
                fetch_v12_records(codec),
                FetchResponse,
            )
        )
    header = (
        f"{'message':40} {'bytes':>9}  {'full tree':>16}  {'no records':>16}  "
        f"{'header only':>14}  {'kio native':>16}  {'full/kio':>8}  {'no-rec/kio':>10}"
    )
    print(header)
    print("-" * len(header))
    no_records = Options(records=False)
    # the whole tree, past the default per-message budget (a 1 MB Fetch of 15-byte
    # records is 600k+ fields, more than Options.max_nodes allows by default)
    everything = Options(max_nodes=1 << 40)
    for title, key, version, data, cls in cases:
        full = rate(lambda: decode_response(data, key, version, everything), args.seconds)
        bare = rate(lambda: decode_response(data, key, version, no_records), args.seconds)
        head = rate(lambda: int.from_bytes(data[:4], "big"), args.seconds / 4)
        flexible_start = 5
        reader = entity_reader(cls)
        peer = rate(lambda: reader(data, flexible_start), args.seconds)
        mb = len(data) / 1e6
        tree = decode_response(data, key, version, everything).tree
        nodes = sum(1 for _ in tree.walk())
        records = sum(1 for n in tree.walk() if n.ktype == "record")
        print(
            f"{title:40} {len(data):>9}  {full:7.1f}/s {full * mb:5.1f}MB/s  "
            f"{bare:7.1f}/s {bare * mb:5.1f}MB/s  {head:12.0f}/s  "
            f"{peer:7.1f}/s {peer * mb:5.1f}MB/s  {full / peer:8.3f}  {bare / peer:10.3f}"
        )
        print(
            f"{'':40} {nodes} nodes ({full * nodes / 1e3:.0f}k nodes/s)"
            + (f", {records} records ({full * records / 1e3:.0f}k records/s)" if records else "")
        )
    print(
        "\nfull tree: every field located (records decompressed and decoded);"
        " no records: Options(records=False); header only: the correlation id, which is all"
        " the capture index reads; kio native: kio's Rust parser building dataclasses"
        " (records stay opaque bytes)."
    )


if __name__ == "__main__":
    main()
