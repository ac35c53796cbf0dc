"""Rows sorted without holding them all: ``kdissect pcap --format parquet`` writes its tables
in time order, but exchanges complete (and become rows) in another order, and a capture
may hold millions of them. Rows are kept in memory up to ``RUN`` of them (a few MiB per thousand); past that, each
run is sorted and pickled to a temporary file, and reading merges the runs (a stable
sort, like ``sorted``: the same order either way)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

RUN = 16_384  # rows held in memory (about 1 KiB each): a run of this many is spilled
_CHUNK = 256  # rows per pickle: what a run holds in memory while merged


class SortedRows:
    """``append`` rows, then iterate them once, ordered by ``key``."""

    def __init__(self, key: Callable[[dict], Any], run: int | None = None):
        self.key, self.run = key, run or RUN
        self.rows: list[dict] = []
        self.files: list[IO[bytes]] = []
        self.count = 0

    def append(self, row: dict) -> None:
        self.rows.append(row)
        self.count += 1
        if len(self.rows) >= self.run:
            self._spill()

    def extend(self, rows: Iterable[dict]) -> None:
        for row in rows:
            self.append(row)

    def __iadd__(self, rows: Iterable[dict]) -> SortedRows:
        self.extend(rows)
        return self

    def _spill(self) -> None:
        import pickle
        import tempfile  # (here: most captures never spill, and the import costs)

        f = tempfile.TemporaryFile()
        rows = sorted(self.rows, key=self.key)
        for start in range(0, len(rows), _CHUNK):
            pickle.dump(rows[start : start + _CHUNK], f, pickle.HIGHEST_PROTOCOL)
        f.seek(0)
        self.files.append(f)
        self.rows = []

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[dict]:
        if not self.files:
            yield from sorted(self.rows, key=self.key)
            return
        runs = [_read(f) for f in self.files] + [iter(sorted(self.rows, key=self.key))]
        self.rows = []
        try:
            yield from heapq.merge(*runs, key=self.key)
        finally:
            for f in self.files:
                f.close()


def _read(f: IO[bytes]) -> Iterator[dict]:
    import pickle

    while True:
        try:
            yield from pickle.load(f)
        except EOFError:
            return
