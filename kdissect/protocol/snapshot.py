"""kio's layouts and error codes, prepared once and shipped as data (kio_snapshot.json.gz).

Importing kio's generated modules costs seconds (hundreds of dataclasses), and guessing
an API tries every layout: reading them from this snapshot instead, lazily per layout,
lets a paste be answered at once. The snapshot is made from kio by
``python -m codegen.snapshot``; a test checks that it equals what kio gives
(tests/test_pasted.py), so a kio upgrade or a change to kio_schemas.py is caught.
"""

from __future__ import annotations

from typing import Any

import gzip
import json
import os
from functools import lru_cache

from .layout import Field, Struct

FILE = "kio_snapshot.json.gz"


def package_data(name: str) -> bytes:
    """A file shipped in this package, read by the package's loader, as
    ``pkgutil.get_data`` reads it (importing pkgutil, or importlib.resources, is a
    percent of a small capture's run)."""
    assert __spec__ is not None and __spec__.loader is not None
    data: bytes = __spec__.loader.get_data(  # type: ignore[attr-defined]
        os.path.join(os.path.dirname(__file__), name)
    )
    return data


@lru_cache(maxsize=1)
def _data() -> dict[Any, Any] | None:
    try:
        raw = package_data(FILE)
    except (FileNotFoundError, OSError):
        return None
    loaded: dict[Any, Any] = json.loads(gzip.decompress(raw))
    return loaded


def available() -> bool:
    return _data() is not None


def _loaded() -> dict[Any, Any]:
    """The snapshot (callers asked ``available()`` first)."""
    data = _data()
    if data is None:
        raise FileNotFoundError(f"{FILE} is missing from the kdissect package: reinstall it")
    return data


def versions() -> dict[int, list[int]]:
    return {int(k): v for k, v in _loaded()["versions"].items()}


def errors() -> dict[int, tuple[str, bool]]:
    return {int(k): (name, retriable) for k, (name, retriable) in _loaded()["errors"].items()}


def layout(api_key: int, version: int, direction: str) -> Struct | None:
    index = _loaded()["layouts"].get(f"{api_key}/{version}/{direction}")
    return None if index is None else _struct(index)


@lru_cache(maxsize=None)
def _struct(index: int) -> Struct:
    name, fields, tagged, flexible = _loaded()["structs"][index]
    return Struct(name, tuple(map(_field, fields)), tuple(map(_field, tagged)), flexible)


def _field(row: list[Any]) -> Field:
    name, type_, array, nullable, tag, struct, hint, compact = row
    return Field(
        name,
        type_,
        array,
        nullable,
        tag,
        None if struct is None else _struct(struct),
        hint,
        compact,
    )
