#!/usr/bin/env python3
"""Record the Apache Kafka captures (captures/kafka-*.pcap): the pinned release started by
tests/support/apache_kafka.py on free loopback ports, real clients, tcpdump on the ports of
the listeners each capture is about (tests/support/kafka_scenarios.py: CAPTURES). Needs
tcpdump rights and the [test] extra.

    .venv/bin/python scripts/make_kafka_captures.py [NAME ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.apache_kafka import ApacheKafka  # noqa: E402
from tests.support.capture import Tcpdump  # noqa: E402
from tests.support.kafka_scenarios import (  # noqa: E402
    CAPTURES,
    QUIET_REPLICATION,
    SNAPSHOTTING,
    franz_tls_session,
    java_tls_session,
    kraft_snapshot_fetch,
    tls_session,
)


def main() -> None:
    names = sys.argv[1:] or list(CAPTURES)
    unknown = [n for n in names if n not in CAPTURES]
    if unknown:
        sys.exit(f"unknown capture(s) {unknown}; choose from {list(CAPTURES)}")
    if "kafka-kraft-snapshot" in names:  # its own cluster: SNAPSHOTTING
        out = ROOT / "captures" / "kafka-kraft-snapshot.pcap"
        with ApacheKafka(nodes=3, start=False, extra=SNAPSHOTTING) as kafka:
            with Tcpdump(out, kafka.ports("CONTROLLER")):  # from the start: whole connections
                kafka.start()
                print("kafka-kraft-snapshot", kraft_snapshot_fetch(kafka))
        print(f"{out}: {out.stat().st_size} bytes", flush=True)
    if "kafka44-cluster" in names:  # its own cluster: QUIET_REPLICATION
        out = ROOT / "captures" / "kafka44-cluster.pcap"
        with ApacheKafka(nodes=3, extra=QUIET_REPLICATION) as kafka:
            with Tcpdump(out, kafka.ports(*CAPTURES["kafka44-cluster"][1])):
                print("kafka44-cluster", CAPTURES["kafka44-cluster"][2](kafka))
        print(f"{out}: {out.stat().st_size} bytes", flush=True)
    own = ("kafka-kraft-snapshot", "kafka44-cluster")
    for size in (1, 3):
        todo = [n for n in names if CAPTURES[n][0] == size and n not in own]
        if not todo:
            continue
        listeners = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL") if size == 1 else ("PLAINTEXT",)
        with ApacheKafka(nodes=size, listeners=listeners, start=False) as kafka:
            boot = None
            if "kafka-kraft-cluster" in todo:  # from the start: no connection mid-stream
                boot = Tcpdump(
                    ROOT / "captures" / "kafka-kraft-cluster.pcap",
                    kafka.ports(*CAPTURES["kafka-kraft-cluster"][1]),
                )
            kafka.start()
            for name in todo:
                _size, capture_listeners, session, _about = CAPTURES[name]
                tls = name in ("kafka-tls", "kafka44-tls", "kafka44-java-tls")
                out = ROOT / "captures" / ("tls" if tls else "") / f"{name}.pcap"
                if name == "kafka-kraft-cluster":
                    print(name, session(kafka))
                    boot.stop()
                    print(f"{out}: {out.stat().st_size} bytes", flush=True)
                    continue
                if name == "kafka44-java-tls":  # its own tcpdump: the proxy's ports
                    keys = out.with_suffix(".keys")
                    keys.unlink(missing_ok=True)
                    print(name, java_tls_session(kafka, out, keys))
                    print(f"{out}: {out.stat().st_size} bytes", flush=True)
                    continue
                with Tcpdump(out, kafka.ports(*capture_listeners)):
                    if tls:
                        keys = out.with_suffix(".keys")
                        keys.unlink(missing_ok=True)
                        print(
                            (tls_session if name == "kafka-tls" else franz_tls_session)(kafka, keys)
                        )
                    else:
                        print(name, session(kafka))
                print(f"{out}: {out.stat().st_size} bytes", flush=True)


if __name__ == "__main__":
    main()
