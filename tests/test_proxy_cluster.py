"""`kdissect proxy` in front of Apache Kafka's three-node cluster: a producer and a consumer
group work through it while a broker is stopped and started again; they follow the
leaders and stay on the proxy's addresses; nothing acknowledged is lost or altered."""

from __future__ import annotations

import time

import pytest

from tests.support.kafka_scenarios import broker_killed
from tests.test_proxy import ProxyProcess

pytestmark = pytest.mark.slow


def test_clients_follow_leader_changes_through_the_proxy(apache_cluster):
    from confluent_kafka.admin import AdminClient
    proxy = ProxyProcess(apache_cluster.bootstrap())
    try:
        real_ports = set(apache_cluster.ports())
        admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
        before = admin.list_topics(timeout=20).brokers.values()
        assert len(before) == 3 and not {b.port for b in before} & real_ports
        acked, read_back = broker_killed(apache_cluster, victim=1, bootstrap=proxy.bootstrap,
                                         topic="through-proxy", kill=False)
        after = admin.list_topics(timeout=20)
        assert len(after.brokers) == 3 and not {b.port for b in after.brokers.values()} & real_ports
        leaders = {p.leader for p in after.topics["through-proxy"].partitions.values()}
        assert leaders <= set(after.brokers)
        err = "".join(proxy.err)
        print(f"proxy display: {len(proxy.out)} lines; stderr: {err[-500:]!r}")
    finally:
        # not SIGTERM: after this run the proxy took over 180 s to exit (reported)
        proxy.proc.kill()
        proxy.proc.wait(30)
    assert acked > 100 and read_back == acked          # nothing acknowledged lost or altered
    assert "Traceback" not in err, err[-3000:]
    # (the proxy's display is not checked here: after this run it printed no exchange
    # lines before the kill and needed over 180 s to exit on SIGTERM; reported)
