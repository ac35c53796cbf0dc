"""A bounded slice of the fuzzer (scripts/fuzz.py runs it for as long as you like), and
every input it ever failed on, replayed. See tests/fuzz/ and docs/internals/protocol.md."""

from __future__ import annotations

import os

import pytest

from tests.fuzz import harness, runner

# inputs per target in the slice: about a minute of CPU in all
SLICE = {
    "hinted": 3000,
    "blob": 1000,
    "grammar": 1000,
    "capture": 150,
    "guessed": 50,
    "tls": 500,
    "segment": 250,
}
SLICE.update({"filter": 200, "framing": 500, "tcp": 100, "paste": 50})  # issue 22's
SLICE["native"] = 250  # issue 28's: both packet paths, compared
SLICE["logjson"] = 500  # issue 25's: both record-line writers, compared
SLICE["jsonrec"] = 500  # issue 28's: both record-list writers, compared
SLICE["records"] = 500  # issue 37's: Record views against the record loop
SLICE["rectable"] = 500  # issue 43's: the records table's batch walker, compared
SLICE["bodyjson"] = 500  # issue 43's: JSON lines' compiled body text, compared
SLICE["avro"] = 1000  # issue 27's: both Avro readers, compared
SLICE["parquet"] = 50  # issue 28's: the Parquet writer, read back by pyarrow
SLICE["midway"] = 250  # issue 36's: connections seen without their start
SLICE["relay"] = 500  # issue 44's: the thread forwarder's relay, over sockets
SLICE.update(
    {
        "logfile": 1000,
        "json": 1000,
        "answer": 500,
        "schema": 500,  # issue 39's
        "keylog": 500,
    }
)


# The slice is seeded: a failure here reproduces on every machine. Another seed explores
# other inputs (KDISSECT_FUZZ_SEED=N), scripts/fuzz.py draws fresh ones for as long as asked.
SEED = int(os.environ.get("KDISSECT_FUZZ_SEED", "20261129"))


@pytest.mark.slow  # (~30 s: the fast tier stays under 2 minutes; the full suite runs it)
@pytest.mark.parametrize("target", sorted(SLICE))
def test_fuzz_slice(target):
    ran = runner.run(target, SLICE[target] // 25, batch=25, seed=SEED)
    assert ran == SLICE[target]


REGRESSIONS = sorted(harness.REGRESSIONS.glob("*.bin"))


def test_regressions_are_kept():
    # the inputs found so far (crafted from issue 11's findings, and whatever the fuzzer
    # finds later) stay in the repo
    assert {p.name.split("-", 1)[0] for p in REGRESSIONS} >= {
        "capture",
        "blob",
        "grammar",
        "hinted",
    }


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_regression(path):
    harness.replay(path)
