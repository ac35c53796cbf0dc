"""The Apache Kafka proxy benchmark's round order: its ratios are read as balanced
between arms run before direct and after it (on three nodes the later arm gained), so
the order it runs must make them so."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from proxy_on_apache_kafka import _order  # noqa: E402


def test_every_arm_runs_as_often_before_direct_as_after_it_and_in_every_place():
    for arms in [("direct", "proxy"), ("direct", "proxy", "relay-copy", "forwarding", "old")]:
        rounds = [_order(arms, i) for i in range(2 * len(arms))]
        assert all(sorted(r) == sorted(arms) for r in rounds)
        for arm in arms[1:]:
            before = sum(r.index(arm) < r.index("direct") for r in rounds)
            assert before == len(rounds) // 2, (arm, rounds)
        places = Counter((arm, r.index(arm)) for r in rounds for arm in r)
        assert set(places.values()) == {2}, places  # each arm twice in each place
        # any two consecutive rounds are balanced by themselves
        for i in range(0, len(rounds), 2):
            pair = rounds[i : i + 2]
            for arm in arms[1:]:
                assert sum(r.index(arm) < r.index("direct") for r in pair) == 1
