"""kio's layouts and error codes, prepared once and shipped as data (kio_snapshot.json.gz).

Importing kio's generated modules costs seconds (hundreds of dataclasses), and guessing
an API tries every layout: reading them from this snapshot instead, lazily per layout,
lets a paste be answered at once. The snapshot is made from kio by
``python -m kdissect.protocol.snapshot``; a test checks that it equals what kio gives
(tests/test_pasted.py), so a kio upgrade or a change to kio_schemas.py is caught.
"""

from __future__ import annotations

import gzip
import json
import os
from functools import lru_cache
from typing import Any

from .layout import Field, Struct

FILE = "kio_snapshot.json.gz"


def package_data(name: str) -> bytes:
    """A file shipped in this package, read by the package's loader, as
    ``pkgutil.get_data`` reads it (importing pkgutil, or importlib.resources, is a
    percent of a small capture's run)."""
    assert __spec__ is not None and __spec__.loader is not None
    return __spec__.loader.get_data(  # type: ignore[attr-defined]
        os.path.join(os.path.dirname(__file__), name))


@lru_cache(maxsize=1)
def _data() -> dict | None:
    try:
        raw = package_data(FILE)
    except (FileNotFoundError, OSError):
        return None
    return json.loads(gzip.decompress(raw))


def available() -> bool:
    return _data() is not None


def _loaded() -> dict:
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


def _field(row: list) -> Field:
    name, type_, array, nullable, tag, struct, hint, compact = row
    return Field(name, type_, array, nullable, tag,
                 None if struct is None else _struct(struct), hint, compact)


def build() -> dict:
    """The snapshot's contents, from kio (slow: imports every kio schema module)."""
    from kio.schema.errors import ErrorCode

    from . import kio_schemas
    structs: list[list[Any]] = []
    ids: dict[Struct, int] = {}

    def struct_id(st: Struct) -> int:
        if st not in ids:
            row: list[Any] = [st.name, None, None, st.flexible]
            ids[st] = len(structs)
            structs.append(row)
            row[1] = [field_row(f) for f in st.fields]
            row[2] = [field_row(f) for f in st.tagged]
        return ids[st]

    def field_row(f: Field) -> list:
        return [f.name, f.type, f.array, f.nullable, f.tag,
                None if f.struct is None else struct_id(f.struct), f.hint, f.compact]

    versions = kio_schemas.versions()
    layouts = {}
    for key, vs in versions.items():
        for v in vs:
            for direction in ("request", "response"):
                st = kio_schemas.layout(key, v, direction)
                if st is not None:
                    layouts[f"{key}/{v}/{direction}"] = struct_id(st)
    return {"versions": {str(k): list(v) for k, v in versions.items()},
            "errors": {str(int(e.value)): [e.name.upper(), bool(e.retriable)]
                       for e in ErrorCode},
            "layouts": layouts, "structs": structs}


def main() -> None:
    from importlib import resources
    path = resources.files(__package__).joinpath(FILE)
    text = json.dumps(build(), separators=(",", ":"), sort_keys=True).encode()
    with open(str(path), "wb") as f:
        f.write(gzip.compress(text, 9, mtime=0))
    print(f"wrote {path} ({len(text)} bytes of JSON)")


if __name__ == "__main__":
    main()
