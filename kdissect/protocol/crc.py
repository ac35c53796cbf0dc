"""kdissect's one place computing checksums: CRC-32C (Castagnoli), which record batches
and producer snapshots carry (the ``crc32c`` package's C function), and the CRC-32 of
MessageSet v0/v1 messages and 0.7 logs (zlib). Record batches are checked through
``batch.Batch.crc_ok``, which calls ``crc32c_of`` once per batch.

The ``crc32c`` package is loaded without running its ``__init__``, which looks up its
own version in its distribution's metadata and imports its command line
(``importlib.metadata``, ``email``, ``argparse``: about 50 ms of CPU, a sixth of a
summary's start-up); the plain import where that layout is not found."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import zlib
from collections.abc import Callable
from typing import Any


def _load() -> Callable[[bytes | bytearray | memoryview], int]:
    spec = importlib.util.find_spec("crc32c")
    where = spec.submodule_search_locations if spec is not None else None
    ext = importlib.machinery.PathFinder.find_spec("crc32c._crc32c", list(where)) if where else None
    if ext is None or ext.loader is None:
        import crc32c as package

        return package.crc32c
    module = importlib.util.module_from_spec(ext)
    ext.loader.exec_module(module)
    crc: Callable[[bytes | bytearray | memoryview], int] = module.crc32c
    return crc


_crc32c: Callable[[bytes | bytearray | memoryview], int] = _load()


def crc32c_of(buf: Any, start: int, end: int) -> int:
    """The CRC-32C of ``buf[start:end]``, through a view (batches are most of a capture's
    bytes: a slice would copy each)."""
    return _crc32c(memoryview(buf)[start:end])


def crc32_of(buf: Any, start: int, end: int) -> int:
    """The CRC-32 (zlib's, unsigned) of ``buf[start:end]``."""
    return zlib.crc32(memoryview(buf)[start:end]) & 0xFFFFFFFF
