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


# -- tiers ---------------------------------------------------------------------------------
# `pytest -m "not slow"` is the fast tier for day-to-day work: no broker, JVM, tshark, Spark
# or terminal, and under two minutes on a 2-core machine. The whole suite (CI) runs both.
# Whole modules that need such parts are slow here, in one place; single tests elsewhere
# carry @pytest.mark.slow themselves.
SLOW_MODULES = {
    "test_proxy", "test_real_clients", "test_spark", "test_live", "test_hostile",
    "test_pipeline", "test_jsonl_workers", "test_legacy_table",
    "test_tui", "test_tui_snapshots", "test_tui_workflow", "test_tui_terminal",
}
# fixtures that start a broker: any test that uses one is slow
SLOW_FIXTURES = {"kafka", "recorded"}
# single tests in otherwise fast modules that run tshark/tcpdump or whole CLI pipelines
SLOW_TESTS = {
    "test_engine.py::test_every_path_gives_the_same_exchanges",
    "test_engine.py::test_an_orphan_response_stays_an_exchange_on_every_path",
    "test_engine.py::test_no_import_cycles_in_protocol",
    "test_captures.py::test_agrees_with_tshark",
    "test_captures.py::test_damaged_captures",
    "test_blob.py::test_tcpdump_x_output",
    "test_blob.py::test_wireshark_hex_dump",
    "test_blob.py::test_sasl_secrets_redacted_unless_asked",
    "test_filters_stats.py::test_wireshark_field_names_are_aliases",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.stem
        name = f"{item.path.name}::{item.originalname}"
        if (module in SLOW_MODULES or name in SLOW_TESTS
                or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)
