import os

import pytest
from hypothesis import settings

from tests.support.broker import Broker
from tests.support.relay import Relay

# CI runs the property tests on a fixed sequence of examples: a rare shape found there
# then fails every run (reproducible), not one run in many. Day to day they stay random
# and keep exploring.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_sessionstart(session) -> None:
    """GNU readline (imported with pytest's debugger) exports COLUMNS and LINES of its
    terminal into the C environment, not os.environ: every kdissect a test starts would
    then wrap -V and --stats at 80 columns (kdissect honours COLUMNS). Not the user's
    setting: dropped. (A COLUMNS the user sets is in os.environ too, and stays.)"""
    for name in ("COLUMNS", "LINES"):
        if name not in os.environ:
            os.unsetenv(name)


@pytest.fixture(autouse=True)
def _extension_chosen_from_the_environment():
    """Each test starts with the compiled paths as its environment says, as a run does
    (``native_ext.refresh``): a test that set ``KDISSECT_PURE`` and ran leaves the
    per-kind caches made without the extension, for a test that asks them directly."""
    from kdissect.protocol import native_ext

    native_ext.refresh()


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
    tests.support.apache_kafka.USERS) and SSL (trust ``apache_kafka.tls.ca``) listeners.
    A RELAYED listener advertises ``apache_kafka.relay``, a recording relay (see the
    ``kafka`` fixture) whose ``bootstrap`` clients use to be recorded."""
    from tests.support.apache_kafka import ApacheKafka

    relay = Relay()
    # KIP-848 groups may be given sessions as short as classic ones (the broker's floor is
    # 45 s), so a test can see a member's session run out
    node = ApacheKafka(
        nodes=1,
        listeners=("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "RELAYED"),
        start=False,
        extra={
            "group.consumer.min.session.timeout.ms": "6000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
        },
    )
    node.advertise(1, "RELAYED", "127.0.0.1", relay.port)
    relay.upstream = ("127.0.0.1", node.node(1).ports["RELAYED"])
    relay.bootstrap = f"127.0.0.1:{relay.port}"
    node.relay = relay
    try:
        node.start()
        yield node
    finally:
        relay.close()
        node.close()


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    """The hostile set (scripts/make_hostile.py: 90 MB, ~8 CPU-s to write) once for the
    session: tests/test_hostile.py runs it through the CLI, tests/test_native.py through
    both packet paths. Tests read it and must not change it."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path_factory.mktemp("hostile")
    script = Path(__file__).resolve().parents[1] / "scripts" / "make_hostile.py"
    subprocess.run(
        [sys.executable, str(script), str(out)], check=True, timeout=900
    )  # minutes on a loaded machine
    return out


@pytest.fixture
def apache_recorded(apache_kafka):
    """The session's Apache Kafka node behind its recording relay, emptied for this test."""
    apache_kafka.relay.reset()
    return apache_kafka.relay


@pytest.fixture(scope="session")
def apache_cluster(tmp_path_factory):
    """Three combined broker+controller nodes (a 3-voter KRaft quorum, replication factor 3),
    PLAINTEXT for clients; tests may stop and start nodes but must leave all three running.
    ``apache_cluster.kraft_capture`` records the traffic between the nodes (INTERNAL and
    CONTROLLER listeners) from before they start, so no connection is seen mid-stream."""
    from tests.support.apache_kafka import ApacheKafka
    from tests.support.capture import Tcpdump

    cluster = ApacheKafka(nodes=3, start=False)
    cluster.kraft_capture = Tcpdump(
        tmp_path_factory.mktemp("kraft") / "kraft.pcap", cluster.ports("INTERNAL", "CONTROLLER")
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kraft_capture.stop()
        cluster.close()


# -- tiers ---------------------------------------------------------------------------------
# `pytest -m "not slow"` is the fast tier for day-to-day work: no broker, JVM, tshark, Spark
# or terminal, and under two minutes on a 2-core machine. The whole suite (CI) runs both.
# A module that needs such parts says so itself (``pytestmark = pytest.mark.slow``), a
# single test with @pytest.mark.slow; a test using a fixture that starts a broker is slow
# wherever it is.
SLOW_FIXTURES = {
    "kafka",
    "recorded",
    "apache_kafka",
    "apache_cluster",
    "apache_recorded",
    "s3",
    "spark",
}


# -- two cores -----------------------------------------------------------------------------
# The suite runs in two phases (scripts/test, README):
# `--phase shared` on both cores (pytest-xdist, `-n 2 --dist loadgroup`), then `--phase
# alone`, the tests marked `alone`, in one process with the machine to themselves. Under xdist each test goes in a group that one worker runs
# whole. A file with a test on an expensive session fixture goes whole to that fixture's
# group (one Apache Kafka node and cluster, Spark session, Tansu broker or hostile set a
# run, not one a worker; and its module fixtures, such as a scenario started for one of its
# tests, made once); every other file is a group of its own. Workers take groups in
# collection order as they free up, so the longest go first (LONGEST_FIRST, as measured: a
# stale entry costs balance, never a result).
SESSION_GROUPS = {  # fixture -> its group; a file using several goes to the first listed
    "apache_kafka": "apache",
    "apache_recorded": "apache",
    "apache_cluster": "apache",
    "spark": "spark",
    "s3": "spark",
    "kafka": "tansu",
    "recorded": "tansu",
    "hostile": "hostile",
}
LONGEST_FIRST = (  # test-seconds per group on both cores, 2026-12-01: 655, 576, 483...
    "spark",
    "apache",
    "hostile",
    "tests/test_findings_oracle.py",
    "tests/test_roundtrip_kio.py",
    "tests/test_proxy.py",
    "tests/test_tui_typeahead.py",
    "tests/test_values.py",
)


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--phase",
        choices=("all", "shared", "alone"),
        default="all",
        help="all tests (default); all but those marked `alone`; only those (scripts/test)",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "alone: asserts on wall time or on a share of the CPU, or needs a view of the whole "
        "run (syrupy's check for unused snapshots): `--phase alone` runs it after the "
        "others, in one process with the machine to itself",
    )


def _file_groups(items) -> dict[str, str]:
    """Each file's group (see above)."""
    order = list(SESSION_GROUPS)
    first: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        used = [order.index(f) for f in getattr(item, "fixturenames", ()) if f in SESSION_GROUPS]
        if used:
            first[path] = min(used + [first.get(path, len(order))])
    paths = {item.nodeid.split("::")[0] for item in items}
    return {p: SESSION_GROUPS[order[first[p]]] if p in first else p for p in paths}


@pytest.hookimpl(tryfirst=True)  # before xdist names each test's group in its id
def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    phase = config.getoption("--phase")
    if phase != "all":
        keep = [
            i for i in items if (i.get_closest_marker("alone") is not None) == (phase == "alone")
        ]
        if len(keep) < len(items):
            kept = set(map(id, keep))
            config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
            items[:] = keep
    if not hasattr(config, "workerinput"):  # not an xdist worker: nothing to share out
        return
    by_file = _file_groups(items)
    groups = {id(i): by_file[i.nodeid.split("::")[0]] for i in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    rank = {g: n for n, g in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda i: rank.get(groups[id(i)], len(rank)))  # stable: else as collected


# Spark's JVMs in the tests JIT-compile with C1 only, as the Kafka brokers' do
# (tests/support/apache_kafka.py): the suite's Spark jobs are small and short, a JVM's
# start-up is most of each, and C2's compiler threads took half of its CPU (`kdissect spark`
# on kcat.pcap, local[1]: 35-40 CPU-s with C2, 18-22 with C1 only). SPARK_SUBMIT_OPTS is
# read by spark-submit for the driver's JVM: the session fixture's, every `kdissect spark`
# a test starts (they inherit the environment) and a local Spark Connect server;
# SPARK_DAEMON_JAVA_OPTS by a standalone master and its workers (tests/support/
# spark_cluster.py). What the tests assert does not depend on the JIT; a setting the user
# made is kept. (benchmarks/ do not load this file: their JVMs keep the defaults.)
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1")


# Spark and S3 (moto) for test_spark.py and test_log_kafka.py
@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible server (moto) on a free loopback port, with credentials in
    the environment before Spark starts, so that its Python workers inherit them. One for
    the session: Spark's JVM keeps the environment it started with, so a second server
    (another port) would be out of its workers' reach."""
    import os

    from moto.server import ThreadedMotoServer

    from tests.support.broker import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory, s3):
    """One Spark session for every test module (the JVM outlives a stopped session)."""
    from kdissect.pipeline.session import get_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", log=str(log))
    yield session
    session.stop()
