"""CRC-32C (Castagnoli), which record batches carry: the ``crc32c`` package's C function.

Loaded without running the package's ``__init__``, which looks up its own version in its
distribution's metadata and imports its command line (``importlib.metadata``, ``email``,
``argparse``: about 50 ms of CPU, a sixth of a summary's start-up); the plain import
where that layout is not found."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable


def _load() -> Callable[[bytes | bytearray | memoryview], int]:
    spec = importlib.util.find_spec("crc32c")
    where = spec.submodule_search_locations if spec is not None else None
    ext = importlib.machinery.PathFinder.find_spec("crc32c._crc32c", list(where)) \
        if where else None
    if ext is None or ext.loader is None:
        import crc32c as package
        return package.crc32c
    module = importlib.util.module_from_spec(ext)
    ext.loader.exec_module(module)
    crc: Callable[[bytes | bytearray | memoryview], int] = module.crc32c
    return crc


crc32c: Callable[[bytes | bytearray | memoryview], int] = _load()
