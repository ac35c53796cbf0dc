import pytest

from tests.support.broker import Broker
from tests.support.relay import Relay


@pytest.fixture(scope="session")
def kafka():
    """A real broker behind a recording relay; clients bootstrap at ``kafka.bootstrap``
    and the broker advertises the relay, so every connection is recorded."""
    relay = Relay()
    broker = Broker(advertised_port=relay.port)
    relay.upstream = ("127.0.0.1", broker.port)
    relay.bootstrap = f"127.0.0.1:{relay.port}"
    yield relay
    relay.close()
    broker.stop()


@pytest.fixture
def recorded(kafka):
    kafka.reset()
    return kafka


@pytest.fixture(scope="session")
def apache_kafka():
    """One Apache Kafka node (broker+controller, KRaft) of the pinned release for the whole
    session, with PLAINTEXT, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256/512 users of
    tests.support.apache_kafka.USERS) and SSL (trust ``apache_kafka.tls.ca``) listeners."""
    from tests.support.apache_kafka import ApacheKafka
    node = ApacheKafka(nodes=1, listeners=("PLAINTEXT", "SASL_PLAINTEXT", "SSL"))
    yield node
    node.close()


@pytest.fixture(scope="session")
def apache_cluster():
    """Three combined broker+controller nodes (a 3-voter KRaft quorum, replication factor 3),
    PLAINTEXT only; tests may stop and start nodes but must leave all three running."""
    from tests.support.apache_kafka import ApacheKafka
    cluster = ApacheKafka(nodes=3)
    yield cluster
    cluster.close()
