"""Log directories wherever they are -- local paths, or URLs (``s3://``, ``s3a://``,
``file://``... through fsspec, as ``pipeline.storage`` opens captures) -- cut into units
of work: a log dir's own files, one partition directory, or one file. A partition is the
unit because the checks run across its segments (and its log dir's high watermarks).

A local unit is read in place. A URL's unit is copied to a temporary directory first, one
partition at a time (the disk used is one partition's, freed as soon as it is read), and
its items name the URL. Both ``kdissect log`` and the Spark job (pipeline/log_job.py)
read through here, so their tables are the same."""

from __future__ import annotations

import itertools
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..protocol.context import Options
from ..protocol.native_ext import refresh as refresh_compiled
from . import logdir
from .logdir import Conv, LogError, LogItem


@dataclass(frozen=True)
class Unit:
    kind: str  # "files" (a log dir's own files), "partition" or "file"
    path: str  # a local path or a URL
    log_dir: str | None = None  # a partition's log dir (for its high watermarks)


def is_url(path: str) -> bool:
    return "://" in path


def _fs(url: str):
    try:
        import fsspec

        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:  # no such protocol, or its package is missing
        raise LogError(f"{url}: {e}") from None


def _join(url: str, name: str) -> str:
    return url.rstrip("/") + "/" + name


def _listing(url: str) -> tuple[list[str], list[str], list[str]]:
    """(files, directories, others) directly under a URL, by name; others are neither
    (``file://``: a FIFO, a socket, a dangling link; a link counts as what it names, as
    a local path's do)."""
    fs, p = _fs(url)
    kinds: dict[str, list[str]] = {"file": [], "directory": [], "other": []}
    for e in fs.ls(p, detail=True):
        name = posixpath.basename(e["name"].rstrip("/"))
        kind = e["type"]
        if kind not in ("file", "directory"):  # (fsspec's local listing does not follow links)
            kind = "file" if fs.isfile(e["name"]) else "directory" if fs.isdir(e["name"]) else kind
        kinds.get(kind, kinds["other"]).append(name)
    return sorted(kinds["file"]), sorted(kinds["directory"]), sorted(kinds["other"])


def plan(inputs: list[str]) -> list[Unit]:
    """The units of every input, in the order ``kdissect log`` reads them."""
    units: list[Unit] = []
    for text in inputs:
        if not is_url(text):
            path = Path(text)
            if not path.exists():
                raise LogError(f"{text}: no such file or directory")
            if path.is_file():
                units.append(Unit("file", text))
            elif (
                any(logdir.is_partition_dir(p) for p in path.iterdir())
                or (path / "meta.properties").exists()
            ):
                units.append(Unit("files", text))
                units += [
                    Unit("partition", str(p), text)
                    for p in sorted(path.iterdir())
                    if logdir.is_partition_dir(p)
                ]
            else:
                units.append(Unit("partition", text))
            continue
        fs, p = _fs(text)
        if not fs.exists(p):
            raise LogError(f"{text}: no such file or directory")
        if fs.isfile(p):
            units.append(Unit("file", text))
            continue
        if not fs.isdir(p):
            raise logdir.not_file_or_dir(text)
        files, dirs, _ = _listing(text)
        parts = [d for d in dirs if logdir.is_partition_name(d)]
        if parts or "meta.properties" in files:
            units.append(Unit("files", text))
            units += [Unit("partition", _join(text, d), text) for d in parts]
        else:
            units.append(Unit("partition", text))
    return units


def items(unit: Unit, options: Options, conv: Conv = None) -> Iterator[LogItem]:
    """The items of one unit (a URL's copied to a temporary directory meanwhile)."""
    if not is_url(unit.path):
        yield from _local(
            unit, Path(unit.path), options, conv, Path(unit.log_dir) if unit.log_dir else None
        )
        return
    with tempfile.TemporaryDirectory(prefix="kdissect-log-") as tmp:
        name = posixpath.basename(unit.path.rstrip("/")) or "root"
        local = Path(tmp) / name
        base = unit.path.rstrip("/")
        topic, partition = logdir.partition_of(Path(name))
        skipped: list[LogItem] = []  # listed, then not copied: said first, the rest read
        fs, p = _fs(unit.path)
        if unit.kind == "file":
            skipped += _copied(fs, p, local, None, None)
        else:
            local.mkdir()
            skipped += _copy_partition(fs, unit.path, local, topic, partition)
        hw_dir = None
        if unit.log_dir is not None:  # the checkpoints of high watermarks, log starts...
            for name in logdir.DIR_CHECKPOINTS:
                ck = _join(unit.log_dir, name)
                cfs, cp = _fs(ck)
                hw = Path(tmp) / "_log_dir"
                hw.mkdir(exist_ok=True)
                if cfs.exists(cp) and not _copied(cfs, cp, hw / name, None, None):
                    hw_dir = hw  # (one gone since: the checks go without it, as without one)
        read = (
            ()
            if unit.kind == "file" and skipped
            else _local(unit, local, options, conv, hw_dir, [i.path for i in skipped])
        )
        for item in itertools.chain(skipped, read):
            rel = os.path.relpath(item.path, local)
            item.url = base if rel == "." else f"{base}/{rel}"
            yield item


def _copy_partition(
    fs, url: str, local: Path, topic: str | None, partition: int | None, again: bool = True
) -> list[LogItem]:
    """A URL's partition directory copied file by file into ``local``: the items of what
    could not be copied. The log cleaner swaps a cleaned segment in file by file (renames)
    and deletes the segments it merged: copied meanwhile, a segment's files were of two
    generations (an index naming positions past the new, smaller segment) and merged
    segments overlapped the new one. A partition with a file replaced while it was copied
    (another file under its name, where the filesystem tells inodes) is copied again
    whole, once (``again``)."""
    skipped: list[LogItem] = []
    try:
        files, _, others = _listing(url)
    except OSError as e:  # listed with its log dir, gone since
        return [logdir.cannot_read(local, topic, partition, e)]
    # segments last: an index or snapshot copied after its segment may name batches a
    # running broker appended since (copied first, it names fewer)
    files.sort(key=lambda f: f.endswith(".log"))
    copied: list[tuple[str, int | None]] = []  # (source path, its inode when copied)
    for f in files:
        src = _fs(_join(url, f))[1]
        copied.append((src, _inode(fs, src)))
        skipped += _copied(fs, src, local / f, topic, partition)
    if again and any(
        ino is not None and (now := _inode(fs, src)) is not None and now != ino
        for src, ino in copied
    ):
        shutil.rmtree(local)
        local.mkdir()
        return _copy_partition(fs, url, local, topic, partition, again=False)
    return skipped + [
        logdir.not_regular(local / f, topic, partition)
        for f in others
        if logdir.file_kind(Path(f)) is not None  # (others are not read locally either)
    ]


def _inode(fs, path: str) -> int | None:
    """The file's inode on a local filesystem (``file://``), else None (not asked of
    object stores: a request per file, and no broker writes there)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "file" not in protocols:
        return None
    try:
        ino = fs.info(path).get("ino")
    except OSError:
        return None
    return ino if isinstance(ino, int) else None


def _copied(fs, src: str, dst: Path, topic: str | None, partition: int | None) -> list[LogItem]:
    """Copy one listed file; the item saying why not, if it could not be (gone since it
    was listed, no right to read it)."""
    try:
        fs.get(src, str(dst))
    except OSError as e:
        dst.unlink(missing_ok=True)  # (a part copied)
        return [logdir.cannot_read(dst, topic, partition, e)]
    try:
        now = fs.size(src)  # trimmed while copied (a broker trims an index when it rolls)
    except OSError:  # deleted once copied (retention): kept as copied
        return []
    if now is not None and now < dst.stat().st_size:
        os.truncate(dst, now)  # past its new end is not the file's
    return []


def _local(
    unit: Unit,
    path: Path,
    options: Options,
    conv: Conv,
    log_dir: Path | None,
    not_read: list[Path] | None = None,
) -> Iterator[LogItem]:
    """``not_read``: a URL's files listed and not copied (a partition's log has gaps
    there)."""
    if unit.kind == "file":
        return logdir.single_file(path, options, conv)
    if unit.kind == "files":
        return logdir.log_dir_files(path, options, conv)
    marks = logdir.dir_checkpoints(log_dir) if log_dir is not None else None
    return logdir.partition_items(path, options, marks, conv, not_read or ())


class LogDir:
    """The engine's source for Kafka's files on disk: its events are items (files and
    record batches, ``sink.item``), not exchanges; nothing to frame or pair. ``values``,
    ``lines``: as for ``walk``."""

    def __init__(
        self,
        paths: list[str],
        options: Options,
        values: bool = False,
        lines: Callable[..., str | None] | None = None,
    ):
        self.paths, self.options, self.values, self.lines = paths, options, values, lines

    def feed(self, sink) -> None:
        for item in walk(self.paths, self.options, values=self.values, lines=self.lines):
            sink.item(item)
        sink.done()


def walk(
    paths: list[str],
    options: Options,
    values: bool = False,
    lines: Callable[..., str | None] | None = None,
) -> Iterator[LogItem]:
    """Every item of every path (local or a URL), in order: a log dir's files, then its
    partitions. ``values``: clean v2 batches of ordinary topics come as plain values
    (``item.values``, bytes as ``protocol.json_view.json_bytes`` shows them) instead of
    located trees, for bulk output (JSON lines, Parquet); the checks are the same.
    ``lines``: a record-lines writer (render/log_lines.py's ``record_lines_for()``): such
    batches come with their records as JSON text instead (``item.lines``), for JSON lines."""
    refresh_compiled()  # KDISSECT_PURE as it is now, for this run
    conv = logdir.conv_for(values, lines)
    for text in paths:
        if is_url(text):  # copied a partition at a time
            for unit in plan([text]):
                yield from items(unit, options, conv)
        else:
            yield from logdir.path_items(text, options, conv)
