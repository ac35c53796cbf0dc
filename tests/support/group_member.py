"""One consumer-group member in its own process (so a test can SIGSTOP it past its
session timeout): ``python -m tests.support.group_member BOOTSTRAP GROUP TOPIC PROTOCOL
CLIENT_ID``. It polls until SIGTERM, then closes (leaving the group) and exits; it prints
"joined" once it has an assignment."""

from __future__ import annotations

import signal
import sys


def main(bootstrap: str, group: str, topic: str, protocol: str, client_id: str) -> None:
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        # the broker's minimum session; heartbeats often, so a stopped member is missed soon
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    c = Consumer(config)
    said = False
    c.subscribe([topic])
    while not stop:
        c.poll(0.2)
        if not said and c.assignment():
            print("joined", flush=True)
            said = True
    c.close()


if __name__ == "__main__":
    main(*sys.argv[1:6])
