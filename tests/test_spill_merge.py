"""pipeline/spill.py's merge of sorted runs by stretches, held to heapq.merge (the
reference: stable, an earlier run's row first among equal keys) on random runs: many
equal keys, runs that interleave row by row or not at all, chunks of every size (empty
ones too), and the holder's own runs with record blocks."""

from __future__ import annotations

import heapq
import random
from itertools import chain
from operator import itemgetter

import pytest

from kdissect.pipeline import spill


def _runs(rng: random.Random) -> list[list[list[tuple[int, int, int]]]]:
    """Sorted runs of (key, run, index) rows cut into chunks."""
    keys = rng.choice((2, 5, 50, 10_000))
    runs = []
    for r in range(rng.choice((rng.randrange(0, 7), 300))):
        rows = sorted(
            ((rng.randrange(keys), r, i) for i in range(rng.randrange(0, 60 if r > 6 else 300))),
            key=itemgetter(0),
        )
        chunks, at = [], 0
        while at < len(rows):
            n = rng.choice((0, 1, 2, 3, 17, 256))
            chunks.append(rows[at : at + n])
            at += n
        if rng.random() < 0.2:
            chunks.append([])
        runs.append(chunks)
    return runs


@pytest.mark.parametrize("seed", range(400))
def test_merge_is_heapq_merge(seed):
    rng = random.Random(seed)
    runs = _runs(rng)
    key = itemgetter(0)
    want = list(heapq.merge(*(list(chain.from_iterable(c)) for c in runs), key=key))
    got = list(chain.from_iterable(spill._merge([iter(c) for c in runs], key)))
    assert got == want


def test_merge_of_runs_in_time_order_gives_long_stretches():
    """Runs that do not overlap are given a chunk at a time, not a row at a time."""
    key = itemgetter(0)
    runs = [[[(r * 1000 + c * 256 + i,) for i in range(256)] for c in range(3)] for r in range(4)]
    got = list(spill._merge([iter(c) for c in runs], key))
    assert len(got) <= 12 + 4
    assert list(chain.from_iterable(got)) == sorted(chain.from_iterable(chain.from_iterable(runs)))


@pytest.mark.parametrize("seed", range(40))
def test_holder_spilled_or_not_is_sorted(seed):
    """The holder with dict rows, spilled every few rows or never: ``sorted``'s order."""
    rng = random.Random(seed)
    rows = [{"k": rng.randrange(rng.choice((3, 100))), "i": i} for i in range(rng.randrange(500))]
    want = sorted(rows, key=itemgetter("k"))
    for run in (1, 7, 100, 1_000_000):
        held = spill.SortedRows(itemgetter("k"), run=run)
        for r in rows:
            held.append(r)
        assert list(held) == want


@pytest.mark.parametrize("seed", range(30))
def test_records_holder_sorted_by_the_c_key_as_by_its_own(seed):
    """The records holder sorts by local._FAST_ORDER (an itemgetter, on rows and record
    blocks alike) where it can: the order of local._ORDER's key, also with None times
    (which make the C key raise: the holder's own key sorts) and blocks among rows."""
    from kdissect.pipeline import local
    from kdissect.stream import record_table
    from kdissect.stream.record_table import RecordBlock

    shape = local._SHAPE["records"]
    order = shape.order(())
    rng = random.Random(seed)
    nones = seed % 3 == 0
    items = []
    for i in range(rng.randrange(1, 200)):
        ts = None if nones and rng.random() < 0.1 else float(rng.randrange(6))
        shared = (rng.choice(("a", "b")), "fetch", i, ts, "t", 0)
        records = [(o, None, f"k{o}", 1, []) for o in range(rng.choice((1, 1, 2, 5)))]
        if len(records) == 1:
            items.append(order(shared + records[0] + record_table._TAIL))
        else:
            items.append(RecordBlock(shared, records, record_table._TAIL, order))
    rows = [r for x in items for r in (x.rows() if type(x) is RecordBlock else [x])]
    want = sorted(rows, key=local._ORDER["records"])
    for run in (4, 1_000_000):
        held = spill.SortedRows(
            local._ORDER["records"], run=run, shape=shape, fast_key=local._FAST_ORDER["records"]
        )
        for x in items:
            held.extend([x])
        assert list(held) == want
