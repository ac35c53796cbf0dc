"""The manifest of an output directory (``_kdissect.json`` beside the tables): what the
tables are (their kind and schema version), how they are laid out (partitioning, a
records table or not) and every run that wrote to them (run id, kdissect version,
options, and each capture by name and by content). An append is checked against it
before any work is done, so that it cannot mix layouts or add a capture twice, even
under another name (``./x.pcap`` after ``x.pcap``, or a copy elsewhere)."""

from __future__ import annotations

import json

from ..protocol.json_bounded import load_json
from . import storage

MAX_SIZE = 64 << 20  # a manifest grows by a run's few hundred bytes

NAME = "_kdissect.json"  # Spark and DuckDB skip names starting with "_"
# The version of the tables' columns (names and types): an append needs the same one.
# 2: record timestamps as TIMESTAMP, every table's source file in `source`, run metadata
SCHEMA_VERSION = 2
_BLOCK = 1 << 20  # a capture's identity: its size and a hash of these ends


def new_run_id() -> str:
    import uuid

    return uuid.uuid4().hex


def now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def content_id(path: str) -> str:
    """A capture identified by its content: its size and a hash of its first and last
    MiB (the whole file when smaller), whatever it is called or wherever it lies."""
    from hashlib import blake2b

    size = storage.size(path)
    h = blake2b(digest_size=16)
    with storage.open_input(path) as f:
        h.update(f.read(_BLOCK))
        if size > 2 * _BLOCK:
            f.seek(size - _BLOCK)
            h.update(f.read(_BLOCK))
        elif size > _BLOCK:
            h.update(f.read())
    return f"{size}:{h.hexdigest()}"


def read(out: str) -> dict | None:
    """The manifest in ``out``, or None if there is none. Raises ValueError if it cannot
    be read as one."""
    path = storage.child(out, NAME)
    if not storage.exists(path):
        return None
    with storage.open_input(path) as f:
        text = f.read(MAX_SIZE + 1)
    if len(text) > MAX_SIZE:
        raise ValueError(f"{path} is not a kdissect manifest (over {MAX_SIZE >> 20} MiB)")
    try:
        found = load_json(text)  # nesting and integers bounded
    except ValueError:
        raise ValueError(f"{path} is not a kdissect manifest (not JSON)") from None
    if (
        not isinstance(found, dict)
        or "schema_version" not in found
        or not isinstance(found.get("runs"), list)
        or not isinstance(found.get("layout"), dict)
    ):
        raise ValueError(f"{path} is not a kdissect manifest")
    return found


def write(out: str, manifest: dict) -> None:
    """Write the manifest whole (a local one through a rename: never half written)."""
    text = json.dumps(manifest, indent=1, sort_keys=False) + "\n"
    path = storage.child(out, NAME)
    if storage.is_url(path):
        fs, p = storage.filesystem(path)
        fs.pipe(p, text.encode())
        return
    import os

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def metadata(kind: str, options: dict) -> dict[str, str]:
    """The key-value metadata of the Parquet files kdissect writes itself (``kdissect pcap
    --format parquet``, ``kdissect log --format parquet``). No run id or time: the same
    input and options give the same bytes. (Spark's writer takes no key-value metadata:
    its tables have the manifest.)"""
    from .. import __version__

    return {
        "kdissect.kind": kind,
        "kdissect.schema_version": str(SCHEMA_VERSION),
        "kdissect.version": __version__,
        "kdissect.options": json.dumps(options, sort_keys=True),
    }


def recorded(
    previous: dict | None, *, kind: str, layout: dict, tables: list[str], run: dict
) -> dict:
    """The manifest after a run: ``previous`` (None for a new directory) with ``run``
    added."""
    from .. import __version__

    run = {"run_id": run.pop("run_id"), "kdissect_version": __version__, **run}
    if previous is None:
        return {
            "kind": kind,
            "schema_version": SCHEMA_VERSION,
            "layout": layout,
            "tables": tables,
            "runs": [run],
        }
    return {**previous, "runs": previous["runs"] + [run]}
