"""--stats at the widths of real terminals (80 to 160 columns): identifying cells (an
address, a client id, an API) and figures are never cut, "and N more" is one line; and
broker time counted by one rule in every table (a Fetch answered before its
max_wait_ms has no known broker time)."""

from __future__ import annotations

import heapq
import re
from pathlib import Path

import pytest

from kdissect.render.stats import LISTED
from kdissect.stream.fields import ExchangeFields
from kdissect.stream.stats import Stats, service_known
from tests.support.cli import kdissect_text
from tests.test_captures import dissect

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
CLUSTER = CAPTURES / "kafka44-cluster.pcap"
GROUP = CAPTURES / "confluent-group.pcap"

pytestmark = pytest.mark.slow


def _stats(path: Path) -> Stats:
    stats = Stats()
    for ex in dissect(path)[0]:
        stats.add(ex, ExchangeFields(ex))
    return stats


@pytest.fixture(scope="module")
def cluster() -> Stats:
    return _stats(CLUSTER)


@pytest.mark.parametrize("path", [CLUSTER, GROUP], ids=lambda p: p.name)
@pytest.mark.parametrize("columns", [80, 100, 120, 160])
@pytest.mark.parametrize("no_color", [False, True])
def test_narrow_stats_cut_no_name_and_no_number(path, columns, no_color):
    stats = _stats(path)
    env = {"COLUMNS": str(columns), **({"NO_COLOR": "1"} if no_color else {})}
    res = kdissect_text("pcap", str(path), "--stats", env=env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    words = set(re.findall(r"[^\s│┃|]+", out))
    for name in [*stats.brokers, *stats.clients, *stats.per_api]:
        assert name in words, (name, columns)
    listed = heapq.nlargest(
        LISTED, stats.connections.items(), key=lambda kv: (kv[1].exchanges, -kv[0])
    )
    for _, c in listed:
        assert c.client in words and c.broker in words, (c.client, columns)
    assert not re.search(r"(?<![\w.:-])[\d.:]+…", out), "a figure was cut"
    assert all(len(line) <= columns for line in out.splitlines())
    for more in re.findall(r"and \d+ more", out):
        assert re.search(rf"^\s*{more}\s*$", out, re.M), more
    if path == CLUSTER:
        assert "and 13 more" in out


def test_unknown_broker_time_is_left_out_of_every_table(cluster):
    assert service_known(0.5, 0.2) and service_known(0.0, 0.0)
    assert not service_known(0.5, 0.0) and not service_known(None, None)
    # the replica fetchers' Fetches, answered before max_wait_ms: most have no broker time
    for name, b in cluster.clients.items():
        assert all(v > 0 for v in b.latency), name
        if name.startswith("broker-") and "fetcher" in name:
            assert 0 < len(b.latency) < b.exchanges
    assert sum(len(b.latency) for b in cluster.clients.values()) == sum(
        len(v) for v in cluster.service.values()
    )


def test_stats_say_how_many_exchanges_the_percentiles_cover():
    out = kdissect_text("pcap", str(CLUSTER), "--stats", env={"COLUMNS": "160"}).stdout
    header = next(
        line
        for line in out.splitlines()
        if "exchanges" in line and "client" in line and "p50" in line
    )
    assert "timed" in header
    row = next(line for line in out.splitlines() if line.strip().startswith("broker-3-fetcher-0"))
    # exchanges 30, timed 5, a p50 that is not the 0.00 of "unknown"
    cells = row.split()
    assert cells[1] == "30" and cells[3] == "5" and cells[4] != "0.00", row
