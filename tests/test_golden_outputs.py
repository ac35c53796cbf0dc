"""Every capture and paste in the repository prints what it printed before (issue #20).

A refactor must leave these digests alone; a change meant to alter an output
regenerates the table (`python -m tests.support.golden --update`) in the same commit.
"""

from __future__ import annotations

import json

import pytest

from tests.support.golden import TABLE, cases, compute, digest

pytestmark = pytest.mark.slow


def test_outputs_are_unchanged() -> None:
    expected = json.loads(TABLE.read_text())
    actual = compute()
    # the digests come from children forked by one process: a few views, each one
    # `python -m kdissect` of its own, show they are what separate processes print
    # (JSON lines on worker processes, the verbose tree, statistics, a paste)
    named = dict(cases())
    blob = min(n for n in named if n.startswith("blob/"))
    for name in ("pcap/kcat.pcap/jsonl", "pcap/sasl-scram.pcap/verbose",
                 "pcap/tls/kafka-tls.pcap/stats", blob):
        assert digest(named[name]) == actual[name], name
    changed = sorted(name for name in expected.keys() | actual.keys() if expected.get(name) != actual.get(name))
    assert not changed, f"{len(changed)} outputs changed (first: {changed[:8]}); " \
                        "if intended, run python -m tests.support.golden --update"
