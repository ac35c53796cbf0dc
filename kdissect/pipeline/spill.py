"""Rows sorted without holding them all: ``kdissect pcap --format parquet`` writes its tables
in time order, but exchanges complete (and become rows) in another order, and a capture
may hold millions of them. Rows are kept in memory up to ``RUN`` of them (a few MiB per thousand); past that, each
run is sorted and pickled to a temporary file, and reading merges the runs (a stable
sort, like ``sorted``: the same order either way)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
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

    def __init__(self, key: Callable[[Any], Any], run: int | None = None, shape: Any = None):
        self.key, self.run, self.shape = key, run or RUN, shape
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
        for item in sorted(self.rows, key=self.sort_key):  # pickles of about _CHUNK rows
            chunk.append(item)
            n += len(item) if type(item) is RecordBlock else 1
            if n >= _CHUNK:
                pickle.dump(chunk, f, pickle.HIGHEST_PROTOCOL)
                chunk, n = [], 0
        if chunk:
            pickle.dump(chunk, f, pickle.HIGHEST_PROTOCOL)
        f.seek(0)
        self.files.append(f)
        self.rows, self.held = [], 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        if not self.files:
            yield from _rows(sorted(self.rows, key=self.sort_key))
            return
        runs = [_read(f) for f in self.files] + [iter(sorted(self.rows, key=self.sort_key))]
        self.rows = []
        try:
            yield from _rows(heapq.merge(*runs, key=self.sort_key))
        finally:
            for f in self.files:
                f.close()


def _rows(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        if type(item) is RecordBlock:
            yield from item.rows()
        else:
            yield item


def _read(f: IO[bytes]) -> Iterator[Any]:
    import pickle

    while True:
        try:
            yield from pickle.load(f)
        except EOFError:
            return
