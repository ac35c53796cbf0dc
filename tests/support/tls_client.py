"""A Kafka workload over TLS, run as its own process (so OPENSSL_CONF can restrict the
TLS 1.3 cipher suites the client offers): kafka-python produces, consumes and asks for
metadata, writing its TLS secrets to a key log.

    python -m tests.support.tls_client HOST:PORT CAFILE KEYLOG [--tls12] [--ciphers C]
        [--cert CERT --key KEY] [--sasl USER:PASSWORD [--mechanism M]] [--messages N]
        [--bootstrap-only] [--plaintext] [--compression none]
"""

from __future__ import annotations

import argparse
import ssl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("cafile")
    ap.add_argument("keylog")
    ap.add_argument("--tls12", action="store_true")
    ap.add_argument("--ciphers")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--sasl", help="USER:PASSWORD")
    ap.add_argument("--mechanism", default="SCRAM-SHA-256")
    ap.add_argument(
        "--bootstrap-only",
        action="store_true",
        help="connect, authenticate, ask for metadata, and stop",
    )
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--topic", default="tls-topic")
    ap.add_argument("--plaintext", action="store_true", help="the same workload without TLS")
    ap.add_argument("--compression", default="gzip", help="the producer's (none: raw bytes)")
    ap.add_argument("--batch-size", type=int, default=16384, help="the producer's batch.size")
    ap.add_argument(
        "--fetch-bytes", type=int, default=1048576, help="the consumer's max.partition.fetch.bytes"
    )
    a = ap.parse_args()
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    ctx = ssl.create_default_context(cafile=a.cafile)
    ctx.keylog_filename = a.keylog
    if a.tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if a.ciphers:
        ctx.set_ciphers(a.ciphers)
    if a.cert:
        ctx.load_cert_chain(a.cert, a.key)
    common = dict(
        bootstrap_servers=a.bootstrap,
        ssl_context=ctx,
        security_protocol="SASL_SSL" if a.sasl else "SSL",
        request_timeout_ms=20000,
    )
    if a.plaintext:
        common.update(security_protocol="PLAINTEXT", ssl_context=None)
    if a.sasl:
        user, _, password = a.sasl.partition(":")
        common.update(
            sasl_mechanism=a.mechanism, sasl_plain_username=user, sasl_plain_password=password
        )
    producer = KafkaProducer(
        **common,
        compression_type=None if a.compression == "none" else a.compression,
        linger_ms=5,
        batch_size=a.batch_size,
    )
    if a.bootstrap_only:  # (the broker may advertise addresses not reachable so)
        producer.close(5)
        print("bootstrapped")
        return
    for i in range(a.messages):
        producer.send(
            a.topic,
            key=f"key-{i}".encode(),
            value=(f"tls value {i} ".encode() * (a.size // 12 + 1))[: a.size],
        )
    producer.flush(20)
    producer.close(5)
    consumer = KafkaConsumer(
        **common,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        enable_auto_commit=False,
        max_partition_fetch_bytes=a.fetch_bytes,
    )
    tp = TopicPartition(a.topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = 0
    for _ in consumer:
        got += 1
        if got >= a.messages:
            break
    consumer.close()
    print(f"consumed {got}")


if __name__ == "__main__":
    main()
