"""The pieces of kdissect log's TUI without a terminal (fast): what the list keeps of an
item, sorting, the byte search inside compressed batches, record filters read from the
batches' values (trees only where the values cannot answer), the reader in a forked
child, statistics, the segment export read back, the columns fitted to the width, and
tiered storage's file names."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kdissect.filters import parse_filter
from kdissect.stream.fields import LOG_NAMES
from kdissect.protocol import Options
from kdissect.sources.logdir import LogItem, file_kind, is_partition_name
from kdissect.sources.logunits import walk
from kdissect.tui import log_items
from kdissect.tui.loader import Done, Progress, run_forked
from kdissect.tui.log_items import (
    _sort_value,
    batch_tree,
    describe,
    holds,
    item_bytes,
    lighten,
    passes,
    read_items,
    whole_batch,
)
from kdissect.tui.log_export import write_segments
from kdissect.tui.log_list import COLUMNS, fit
from kdissect.tui.log_stats import gather
from tests.test_log import _partition, batch, marker_and_damage


def _items(path: Path, values: bool = True) -> list:
    out = []
    for n, item in enumerate(walk([str(path)], Options(), values=values), 1):
        describe(n, item)
        lighten(item)
        out.append(item)
    return out


def test_the_list_keeps_cells_and_places_and_the_two_paths_agree(tmp_path):
    part, positions = _partition(tmp_path)
    bulk, located = _items(part), _items(part, values=False)
    assert [i.cells for i in bulk] == [i.cells for i in located]
    batches = [i for i in bulk if whole_batch(i)]
    assert [b.start for b in batches] == positions
    data = (part / "00000000000000000000.log").read_bytes()
    assert b"".join(item_bytes(b) for b in batches) == data
    # sort: size biggest first; empty cells (no producer) last either way
    by_size = sorted(bulk, key=lambda i: _sort_value(i, "size"), reverse=True)
    assert by_size[0].length == max(i.length for i in bulk)
    ordered = sorted(bulk, key=lambda i: _sort_value(i, "producer"))
    assert [_sort_value(i, "producer")[0] for i in ordered] == sorted(
        _sort_value(i, "producer")[0] for i in bulk
    )


NEEDLE = b"needle " * 8  # repeated: gzip keeps no run of it as it is


def test_search_finds_bytes_inside_compressed_batches_only_where_they_are(tmp_path):
    part = tmp_path / "z-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        batch(2, 1, 0, [(b"k", b"plain words")])
        + batch(2, 1, 1, [(b"k", b"the hidden " + NEEDLE)])
        + batch(1, 1, 2, [(b"k", b"legacy " + NEEDLE)])
    )
    items = [i for i in _items(part) if i.kind == "batch"]
    assert all(NEEDLE not in item_bytes(i) for i in items)  # compressed on disk
    assert [holds(i, NEEDLE, Options()) for i in items] == [False, True, True]


FILTERS = [
    'record.key == "b"',
    'record.key == "k"',
    'record.key contains "e"',
    'record.value == "4"',
    'record.header == "h"',
    'record.header.h == "hv"',
    "producer_id == 7",
    "base_sequence >= 1",
    "records == 2",
    "offset >= 3",
    "magic == 1",
    "partition_leader_epoch == 0",
    'finding and record.key == "a"',
    'not record.key == "c" and producer_epoch == 0',
]


def test_record_filters_read_values_and_answer_as_the_trees_do(tmp_path, monkeypatch):
    """A filter on a batch's header or records reads clean v2 batches again as values
    (no tree: the key filter over a big log stays cheap) and gives the answer the
    batch's located tree gives; damaged, legacy and control batches take their trees."""
    part, _ = _partition(tmp_path)
    log = part / "00000000000000000000.log"
    log.write_bytes(
        log.read_bytes()
        + batch(2, 2, 5, [(b"e", b"6"), (None, b"7")])
        + batch(1, 1, 7, [(b"k", b"legacy")])
        + marker_and_damage(8, 11, 0, 0, [(b"a", b"b")])
    )
    items = [i for i in _items(part) if whole_batch(i)]
    options = Options()

    def by_tree(flt, item) -> bool:  # what the filter said before: the whole tree
        tree = batch_tree(item, options)[0]
        return flt(LogItem(item.kind, item.path, item.topic, item.partition, tree, item.findings))

    trees = []
    real = log_items.batch_tree
    monkeypatch.setattr(
        log_items, "batch_tree", lambda item, o: trees.append(item) or real(item, o)
    )
    for text in FILTERS:
        flt = parse_filter(text, list(LOG_NAMES))
        trees.clear()
        got = [passes(flt, item, options) for item in items]
        # (by_tree calls the real decoder directly: not counted)
        assert got == [by_tree(flt, item) for item in items], text
        # clean v2 batches of an ordinary topic never needed their tree
        clean = [
            i
            for i in items
            if i.cells[1] == "batch v2" and not i.every and "control" not in i.cells[6]
        ]
        assert len(clean) >= 4 and not set(map(id, trees)) & set(map(id, clean)), text
    assert any(
        passes(parse_filter('record.key == "e"', list(LOG_NAMES)), i, options) for i in items
    )


def test_the_reader_runs_in_a_forked_child(tmp_path):
    """The log TUI's reading (``read_items``) runs in another process and sends what the
    list keeps, in order: the UI process's GIL stays with the UI."""
    part, _ = _partition(tmp_path)
    got: list = []
    pids: list[int] = []

    def work(emit) -> None:
        emit(os.getpid())
        read_items([str(part)], Options(), parse_filter("producer_id == 9", list(LOG_NAMES)), emit)

    assert run_forked(work, got.append, threading.Event()) is None
    pids, rest = got[:1], got[1:]
    assert pids[0] != os.getpid()
    assert isinstance(rest[-1], Done)
    items = [o for o in rest if isinstance(o, LogItem)]
    assert [i.cells for i in items] == [i.cells for i in _items(part)]
    assert [i.passed for i in items if i.kind == "batch"] == [False, False, True]
    assert all(i.tree is None for i in items if whole_batch(i))  # no tree kept
    assert all(isinstance(o, (LogItem, Progress, Done)) for o in rest)


def test_a_reader_that_dies_says_so():
    assert run_forked(lambda emit: os._exit(3), lambda obj: None, threading.Event()) == 3


def test_statistics_per_partition_and_file(tmp_path):
    part, _ = _partition(tmp_path)
    items = _items(part)
    stats = gather(items)
    assert stats is not None
    tally = stats.partitions["pay-0"]
    assert tally.batches == sum(1 for i in items if i.kind == "batch")
    assert tally.records == sum(i.stat[0] or 0 for i in items if i.kind == "batch")
    assert tally.producers == {i.stat[2] for i in items if i.stat[2] is not None}
    assert tally.first_ts == 1700000000000 and len(stats.files) == 1


def test_exported_segments_read_back_as_the_same_batches(tmp_path):
    part, _ = _partition(tmp_path)
    items = _items(part)
    batches = [i for i in items if whole_batch(i)][1:]  # from the second on
    written = write_segments(tmp_path / "out", batches, item_bytes)
    ((segment, count),) = written.items()
    assert segment == tmp_path / "out" / "pay-0" / f"{batches[0].base:020d}.log"
    assert count == len(batches)
    again = [i for i in _items(segment) if i.kind == "batch"]
    assert [i.cells[2:] for i in again] != [] and [(i.base, i.stat) for i in again] == [
        (b.base, b.stat) for b in batches
    ]


def test_columns_fit_the_width():
    for width in (60, 80, 120, 200):
        shown = fit(width)
        assert sum(w for _, w in shown) + len(shown) - 1 <= max(width, 60)
        names = [COLUMNS[i].name for i, _ in shown]
        assert {"#", "position", "status"} <= set(names)
    assert "time" in [COLUMNS[i].name for i, _ in fit(200)]
    assert "time" not in [COLUMNS[i].name for i, _ in fit(80)]


def test_tiered_storage_names():
    """LocalTieredStorage: `topic-0-<topic id>/<offset>-<segment id>.log` and friends."""
    name = "00000000000000000000-kn8dkGiJSPScmjoRCMtFhQ"
    assert file_kind(Path(f"{name}.log")) == "segment"
    assert file_kind(Path(f"{name}.index")) == "offset_index"
    assert file_kind(Path(f"{name}.snapshot")) == "producer_snapshot"
    assert file_kind(Path(f"{name}.leader_epoch_checkpoint")) == "checkpoint"
    assert file_kind(Path("00000000000000000000-short.log")) is None
    assert is_partition_name("tiered-0-VLY7UePSTTayRfhxDPO-mQ")
    assert is_partition_name("my-topic-12") and not is_partition_name("my-topic")


def test_exported_segments_keep_their_aborted_transactions(tmp_path):
    """The export wrote the segment alone: read again, the batches of an aborted
    transaction (and its ABORT marker) were no longer marked aborted: their .txnindex
    entry was left behind. The export lists them in a .txnindex of its own."""
    from tests.test_tui_log_marks import _operator_partition

    part = _operator_partition(tmp_path)
    batches = [i for i in _items(part) if whole_batch(i)]
    before = [(b.base, b.aborted) for b in batches]
    assert (2, True) in before and (0, False) in before, before
    written = write_segments(tmp_path / "out", batches, item_bytes)
    ((segment, _),) = written.items()
    assert segment.with_suffix(".txnindex").is_file()
    again = [i for i in _items(segment.parent) if i.kind == "batch"]
    assert [(i.base, i.aborted) for i in again] == before
    # the transaction's batches without their marker: still aborted, to the last one
    written = write_segments(tmp_path / "part", [b for b in batches if b.base != 4], item_bytes)
    ((segment, _),) = written.items()
    again = [i for i in _items(segment.parent) if i.kind == "batch"]
    assert [(i.base, i.aborted) for i in again] == [x for x in before if x[0] != 4]
