"""Keep the memory of long bulk runs from growing with big transient buffers.

JSON lines make big short-lived buffers (a Fetch response's decompressed batches, its
JSON text: megabytes). glibc serves such buffers from their own mappings, returned when
freed, but raises that threshold after each one is freed (up to 32 MiB), after which
they come from the heap, which it seldom gives back. Fixing the threshold keeps every
big buffer in its own mapping. Measured (docs/guide/pcap.md): on a 145 MiB capture the peak
went from 120 to 105 MiB in one process and from 286 to 200 MiB with two workers; on a
1.5 GB capture from 308 to 302 and from 753 to 590 MiB.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

_M_MMAP_THRESHOLD = -3  # mallopt parameter (glibc's malloc.h)
_THRESHOLD = 256 * 1024


@lru_cache(maxsize=1)
def _libc():
    """The C library: the process's own symbols (dlopen(NULL) reaches the C library the
    interpreter runs on) or, where that cannot be opened, the library found by name
    (``find_library`` runs ldconfig in a child process: 15 ms of CPU, a tenth of a small
    run); None where it cannot be loaded."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):
        pass
    try:
        from ctypes.util import find_library

        return ctypes.CDLL(find_library("c"))
    except (OSError, TypeError):
        return None


def steady_heap() -> None:
    """Fix glibc's mmap threshold for this process and the workers it forks; nothing
    elsewhere (other C libraries keep their own policy)."""
    try:
        _libc().mallopt(_M_MMAP_THRESHOLD, _THRESHOLD)
    except AttributeError:
        pass


def give_back() -> None:
    """Return the heap's free memory to the system (glibc's malloc_trim): a worker calls
    it after each chunk, so that what one big Fetch response needed is not kept."""
    try:
        _libc().malloc_trim(0)
    except AttributeError:
        pass
