"""`kdissect proxy` in front of Apache Kafka's three-node cluster: a producer and a consumer
group work through it while a broker is stopped and started again; they follow the
leaders and stay on the proxy's addresses; nothing acknowledged is lost or altered."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.support.kafka_scenarios import broker_killed
from tests.test_proxy import FORWARDERS, ProxyProcess

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_clients_follow_leader_changes_through_the_proxy(apache_cluster, forwarder):
    from confluent_kafka.admin import AdminClient

    # the display samples while it is behind (the default lag): on a busy machine a
    # display of every exchange at low priority would need minutes to catch up
    proxy = ProxyProcess(apache_cluster.bootstrap(), "--display-lag", "5", "--forwarder", forwarder)
    try:
        real_ports = set(apache_cluster.ports())
        admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
        before = admin.list_topics(timeout=20).brokers.values()
        assert len(before) == 3 and not {b.port for b in before} & real_ports
        acked, read_back = broker_killed(
            apache_cluster,
            victim=1,
            bootstrap=proxy.bootstrap,
            topic=f"through-proxy-{forwarder}",
            kill=False,
        )
        after = admin.list_topics(timeout=20)
        assert len(after.brokers) == 3 and not {b.port for b in after.brokers.values()} & real_ports
        leaders = {p.leader for p in after.topics[f"through-proxy-{forwarder}"].partitions.values()}
        assert leaders <= set(after.brokers)
        del admin
    finally:
        started = time.monotonic()
        try:
            rows, err = proxy.stop()  # SIGTERM once the display has caught up
        except subprocess.TimeoutExpired:
            proxy.proc.kill()
            proxy.proc.wait(30)
            raise AssertionError("the proxy did not end within 30 s of SIGTERM") from None
    print(
        f"proxy: {len(rows)} exchanges shown, stopped in {time.monotonic() - started:.1f} s;"
        f" {err.strip().splitlines()[-1]!r}"
    )
    assert proxy.proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert acked > 100 and read_back == acked  # nothing acknowledged lost or altered
    # what the display showed: the clients' exchanges, through the leader changes
    apis = {r["api_name"] for r in rows}
    assert {"Metadata", "Produce", "Fetch"} <= apis, apis
    clients = {r.get("client_id") for r in rows if r["direction"] == "request"}
    assert {"kd-under-load", "kd-under-load-reader"} <= clients, clients
    assert "display: " in err and " requests shown" in err
