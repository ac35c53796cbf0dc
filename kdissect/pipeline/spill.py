"""Rows sorted without holding them all: ``kdissect pcap --format parquet`` writes its tables
in time order, but exchanges complete (and become rows) in another order, and a capture
may hold millions of them. Rows are kept in memory up to ``RUN`` of them (a few MiB per thousand); past that, each
run is sorted and pickled to a temporary file, and reading merges the runs (a stable
sort, like ``sorted``: the same order either way)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from heapq import heapify, heappop, heapreplace
from typing import IO, Any

from ..stream.record_table import RecordBlock

RUN = 16_384  # rows held in memory (about 1 KiB each): a run of this many is spilled
_CHUNK = 256  # rows per pickle (or more: the blocks of one whole): what a run holds in memory while merged


class SortedRows:
    """``append`` rows, then iterate them once, ordered by ``key``. With ``shape`` (a
    record_table.RowShape: the records table's), rows are tuples in its column order and
    may come as record_table.RecordBlock items too (a batch's records, which share their
    sort key), held, sorted and spilled as one and made rows when read: the records table
    then sorts and pickles a tuple of a record's own columns, not a row of all."""

    def __init__(
        self,
        key: Callable[[Any], Any],
        run: int | None = None,
        shape: Any = None,
        fast_key: Callable[[Any], Any] | None = None,
    ):
        # ``fast_key``: ``key`` made in C where it can be, for the sorts (a tuple row's or
        # a RecordBlock's): where sorting by it raises no TypeError it gives ``key``'s
        # order, else ``key`` sorts
        self.key, self.run, self.shape, self.fast_key = key, run or RUN, shape, fast_key
        self.rows: list[Any] = []  # rows and blocks
        self.held = 0  # rows in them
        self.files: list[IO[bytes]] = []
        self.count = 0
        self.sort_key = key  # (the key of a row, until a block comes: _key)

    def _key(self, item: Any) -> Any:
        return self.key(item.first() if type(item) is RecordBlock else item)

    def append(self, row: dict) -> None:
        self.extend([row])

    def extend(self, rows: Iterable[Any]) -> None:
        # a whole list at once (an exchange's records: one call, not one per row); a run
        # may pass ``run`` by that list
        rows = rows if isinstance(rows, list) else list(rows)
        n = len(rows)
        if self.shape is not None:  # (blocks come only with tuple rows)
            for r in rows:
                if type(r) is RecordBlock:
                    n += len(r) - 1
                    self.sort_key = self._key
        self.rows += rows
        self.count += n
        self.held += n
        if self.held >= self.run:
            self._spill()

    def __iadd__(self, rows: Iterable[dict]) -> SortedRows:
        self.extend(rows)
        return self

    def _spill(self) -> None:
        import pickle
        import tempfile  # (here: most captures never spill, and the import costs)

        f = tempfile.TemporaryFile()
        chunk: list[Any] = []
        n = 0
        blocks = False
        for item in self._sorted():  # pickles of about _CHUNK rows
            chunk.append(item)
            if type(item) is RecordBlock:
                n += len(item)
                blocks = True
            else:
                n += 1
            if n >= _CHUNK:
                pickle.dump((blocks, chunk), f, pickle.HIGHEST_PROTOCOL)
                chunk, n, blocks = [], 0, False
        if chunk:
            pickle.dump((blocks, chunk), f, pickle.HIGHEST_PROTOCOL)
        f.seek(0)
        self.files.append(f)
        self.rows, self.held = [], 0

    def _sorted(self) -> list[Any]:
        if self.fast_key is not None:
            try:
                return sorted(self.rows, key=self.fast_key)
            except TypeError:  # (a value ``key`` reads otherwise: a None time, say)
                pass
        return sorted(self.rows, key=self.sort_key)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        return chain.from_iterable(self.chunks())

    def chunks(self) -> Iterator[list[Any]]:
        """The rows in order, as lists of them (each run's sorted stretches: iterating
        rows one by one through a heap cost a Python step a row)."""
        held = _expanded(self._sorted())
        self.rows = []
        if not self.files:
            yield held
            return
        try:
            yield from _merge([_read(f) for f in self.files] + [iter((held,))], self.key)
        finally:
            for f in self.files:
                f.close()


def _expanded(items: list[Any]) -> list[Any]:
    """``items`` with each RecordBlock replaced by its rows."""
    for item in items:
        if type(item) is RecordBlock:
            return [r for x in items for r in (x.rows() if type(x) is RecordBlock else (x,))]
    return items


def _read(f: IO[bytes]) -> Iterator[list[Any]]:
    """A spilled run's chunks of rows."""
    import pickle

    while True:
        try:
            blocks, chunk = pickle.load(f)
        except EOFError:
            return
        yield _expanded(chunk) if blocks else chunk


def _merge(runs: list[Iterator[list[Any]]], key: Callable[[Any], Any]) -> Iterator[list[Any]]:
    """The rows of sorted ``runs`` (each its sorted chunks) merged as heapq.merge(*rows,
    key=key) merges them (stable: of equal keys, an earlier run's first), given as
    stretches: the run whose head comes first gives every row up to the next head of
    another (rows arrive nearly in time order: runs overlap little, and a stretch is
    found with a few key calls, not a step a row). A heap of the runs' heads, as
    heapq.merge's: a step costs the log of the runs, however many."""
    heap: list[list[Any]] = []  # [head key, run index, chunk, position, run]
    for i, run in enumerate(runs):
        for chunk in run:
            if chunk:
                heap.append([key(chunk[0]), i, chunk, 0, run])
                break
    heapify(heap)  # (entries compare by key, then run index: never further)
    while len(heap) > 1:
        first = heap[0]
        second = heap[1] if len(heap) == 2 or heap[1] < heap[2] else heap[2]
        bound, later = second[0], first[1] > second[1]
        chunk, at = first[2], first[3]
        n = len(chunk)
        # rows of ``first`` before the bound: key < bound, or <= bound for an earlier run
        if at + 1 < n and _before(key(chunk[at + 1]), bound, later):
            if _before(key(chunk[-1]), bound, later):
                end = n
            elif later:
                end = bisect_left(chunk, bound, at + 2, n - 1, key=key)
            else:
                end = bisect_right(chunk, bound, at + 2, n - 1, key=key)
        else:
            end = at + 1
        yield chunk if at == 0 and end == n else chunk[at:end]
        if end < n:
            first[0], first[3] = key(chunk[end]), end
            heapreplace(heap, first)
            continue
        for chunk in first[4]:
            if chunk:
                first[0], first[2], first[3] = key(chunk[0]), chunk, 0
                heapreplace(heap, first)
                break
        else:
            heappop(heap)
    for _key, _i, chunk, at, run in heap:
        yield chunk[at:] if at else chunk
        yield from run


def _before(k: Any, bound: Any, later: bool) -> bool:
    return k < bound if later else not bound < k
