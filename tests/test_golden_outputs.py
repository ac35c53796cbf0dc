"""Every capture and paste in the repository prints what it printed before (issue #20).

A refactor must leave these outputs alone; a change meant to alter an output
regenerates them (`python -m tests.support.golden --update`) in the same commit, and
the readable heads under tests/golden/outputs/ show the change in its diff.
"""

from __future__ import annotations

import difflib
import json

import pytest

from tests.support.golden import TABLE, cases, compute, digest, head_path

pytestmark = pytest.mark.slow


def test_outputs_are_unchanged() -> None:
    expected = json.loads(TABLE.read_text())
    results = compute()
    actual = {name: d for name, (d, _) in results.items()}
    # the digests come from children forked by one process: a few views, each one
    # `python -m kdissect` of its own, show they are what separate processes print
    # (JSON lines on worker processes, the verbose tree, statistics, a paste)
    named = dict(cases())
    blob = min(n for n in named if n.startswith("blob/"))
    for name in (
        "pcap/kcat.pcap/jsonl",
        "pcap/sasl-scram.pcap/verbose",
        "pcap/tls/kafka-tls.pcap/stats",
        blob,
    ):
        assert digest(named[name]) == actual[name], name
    changed = sorted(
        name for name in expected.keys() | actual.keys() if expected.get(name) != actual.get(name)
    )
    assert not changed, (
        f"{len(changed)} outputs changed (first: {changed[:8]}); "
        "if intended, run python -m tests.support.golden --update\n"
        + "".join(_diff(name, results.get(name)) for name in changed[:3])
    )
    # the readable heads are the table's: none stale, none missing
    for name, (_, text) in results.items():
        assert head_path(name).read_bytes() == text, f"{head_path(name)} is stale: --update"


def _diff(name: str, result: tuple[str, bytes] | None) -> str:
    path = head_path(name)
    old = path.read_bytes().decode(errors="replace") if path.exists() else ""
    new = result[1].decode(errors="replace") if result else ""
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"{name} (kept)", f"{name} (now)", n=1, lineterm=""
        )
    )
    return "\n".join(lines[:40]) + "\n"
