"""Display filters and --stats, on a real capture (confluent-kafka consumer group)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kdissect.filters import FilterError, parse_filter
from kdissect.stream.facts import ExchangeView
from kdissect.stream.stats import Stats, percentile
from tests.test_captures import dissect

ROOT = Path(__file__).resolve().parents[1]
GROUP = ROOT / "captures" / "confluent-group.pcap"


@pytest.fixture(scope="module")
def views():
    exchanges, _, _ = dissect(GROUP)
    return [ExchangeView(ex) for ex in exchanges]


def select(views, text: str) -> list:
    f = parse_filter(text)
    return [v for v in views if f(v)]


def test_filters_select_what_they_say(views):
    apis = lambda vs: sorted({v.ex.first.api_key for v in vs})
    assert apis(select(views, "api == JoinGroup")) == [11]
    assert select(views, "api == 11") == select(views, "api == joingroup")
    errors = select(views, "error != 0")
    assert len(errors) == 1 and errors[0].facts().errors == [79]          # MEMBER_ID_REQUIRED
    assert select(views, "error == MEMBER_ID_REQUIRED") == errors
    slow = select(views, "latency > 1s")
    assert [v.ex.first.api_key for v in slow] == [11]                     # Tansu holds the join
    assert select(views, "latency > 1000ms") == slow == select(views, "latency > 1000000us")
    produce = select(views, 'api == Produce and topic == "ck-group" and records == 4')
    assert len(produce) == 1 and produce[0].field("partition") == [0]
    assert len(select(views, 'client_id ~ "^rdk"')) == len(
        [v for v in views if v.ex.request is not None])
    assert select(views, "not api in {Metadata, ApiVersions, FindCoordinator, ListOffsets, "
                         "GetTelemetrySubscriptions, JoinGroup, Fetch, Produce, SyncGroup, "
                         "Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup}") == []
    unanswered = select(views, 'status == "unanswered"')
    assert unanswered and all(v.ex.response is None for v in unanswered)
    assert select(views, "topic != ck-group") == [v for v in views if "ck-group" not in v.field("topic")]


@pytest.mark.parametrize("text,position,words", [
    ("", 0, "expected a filter"),
    ("api ==", 6, "expected a value for api"),
    ("api == Produce and", 18, "expected a field name"),
    ("latency > fast", 10, "duration like 50ms"),
    ("topik == x", 0, "unknown field 'topik' (did you mean topic"),
    ("api == Nope", 7, "unknown API"),
    ("(api == Fetch", 13, "expected ')'"),
    ("client_id ~ '('", 12, "bad regular expression"),
    ("api == Fetch Fetch", 13, "expected 'and', 'or'"),
    ("version == 1.5", 11, "whole number"),
])
def test_filter_errors_say_where(text, position, words):
    with pytest.raises(FilterError) as e:
        parse_filter(text)
    assert e.value.position == position and words in str(e.value)


def test_stats_add_up(views):
    stats = Stats()
    for v in views:
        stats.add(v.ex, v)
    assert sum(stats.per_api.values()) == len(views)
    assert stats.per_api["JoinGroup"] == 2 and stats.errors == {"MEMBER_ID_REQUIRED": 1}
    p50, p90, p99, top = stats.latency_summary(stats.latency["JoinGroup"])
    assert top > 3.0 and p50 < 0.1                   # one immediate answer, one held 3 s
    assert stats.bytes_requests == sum(len(m.data) + 4 for v in views for m in
                                       (v.ex.request,) if m is not None)
    assert len(stats.connections) == 5
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([5.0], 99) == 5.0


def test_cli_filter_and_stats():
    run = lambda *a: subprocess.run([sys.executable, "-m", "kdissect", "pcap", str(GROUP), *a],
                                    capture_output=True, text=True, timeout=120)
    res = run("-Y", "error != 0")
    assert res.returncode == 0 and res.stdout.count("\n") == 1 and "MEMBER_ID_REQUIRED" in res.stdout
    res = run("--stats")
    assert "Exchanges per API" in res.stdout and "MEMBER_ID_REQUIRED" in res.stdout
    assert "127.0.0.1:9092" in res.stdout
    res = run("-Y", "api === x")
    assert res.returncode == 2 and "position" in res.stderr and "Traceback" not in res.stderr


def test_topic_ids_are_named_from_the_capture():
    """Fetch v16 names topics only by id; the Metadata exchanges before it say which."""
    run = lambda *a: subprocess.run([sys.executable, "-m", "kdissect", "pcap", str(GROUP), *a],
                                    capture_output=True, text=True, timeout=120)
    res = run("-Y", "api == Fetch and topic == ck-group")
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and all("Fetch v16" in ln and "ck-group[0,1,2,3]" in ln for ln in lines)
    assert "topic-id:" not in run().stdout
