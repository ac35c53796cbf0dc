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
