"""The pieces of kdissect log's TUI without a terminal (fast): what the list keeps of an
item, sorting, the byte search inside compressed batches, statistics, the segment export
read back, the columns fitted to the width, and tiered storage's file names."""

from __future__ import annotations

from pathlib import Path

from kdissect.protocol import Options
from kdissect.sources.logdir import file_kind, is_partition_name, walk
from kdissect.tui.log_app import (_sort_value, describe, holds, item_bytes, lighten,
                                  whole_batch)
from kdissect.tui.log_export import write_segments
from kdissect.tui.log_list import COLUMNS, fit
from kdissect.tui.log_stats import gather
from tests.test_log import _partition, batch


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
    assert [_sort_value(i, "producer")[0] for i in ordered] == \
        sorted(_sort_value(i, "producer")[0] for i in bulk)


NEEDLE = b"needle " * 8          # repeated: gzip keeps no run of it as it is


def test_search_finds_bytes_inside_compressed_batches_only_where_they_are(tmp_path):
    part = tmp_path / "z-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        batch(2, 1, 0, [(b"k", b"plain words")]) +
        batch(2, 1, 1, [(b"k", b"the hidden " + NEEDLE)]) +
        batch(1, 1, 2, [(b"k", b"legacy " + NEEDLE)]))
    items = [i for i in _items(part) if i.kind == "batch"]
    assert all(NEEDLE not in item_bytes(i) for i in items)        # compressed on disk
    assert [holds(i, NEEDLE, Options()) for i in items] == [False, True, True]


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
    batches = [i for i in items if whole_batch(i)][1:]        # from the second on
    written = write_segments(tmp_path / "out", batches, item_bytes)
    (segment, count), = written.items()
    assert segment == tmp_path / "out" / "pay-0" / f"{batches[0].base:020d}.log"
    assert count == len(batches)
    again = [i for i in _items(segment) if i.kind == "batch"]
    assert [i.cells[2:] for i in again] != [] and \
        [(i.base, i.stat) for i in again] == [(b.base, b.stat) for b in batches]


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
