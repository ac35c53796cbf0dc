"""The forwarder asks the scheduler for short turns on a core.

Every byte a client and a broker exchange waits for the forwarder to be scheduled, and on
a machine whose cores the brokers and clients keep busy it waited behind their time
slices (EEVDF's default: 0.7-3 ms). Linux 6.12+ lets a normal task ask for a shorter
slice (``sched_setattr`` with ``sched_runtime``, no privilege needed): the task's
deadline comes sooner, so when its socket wakes it, it runs before the task on the core
finishes its slice, and its share of the CPU is unchanged (its weight is). Measured on
three Apache Kafka nodes beside a flooding producer on 2 cores: an ApiVersions round trip
through the proxy added 0.15 ms at p50 with 0.1 ms slices, 1.0 ms without
(docs/benchmarks.md). Elsewhere (older kernels, not Linux) nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

SLICE_NS = 100_000  # 0.1 ms: the shortest the kernel grants
# struct sched_attr: size, policy, flags, nice, priority, runtime, deadline, period (its
# first 48 bytes: the layout of Linux 3.14, which every later kernel accepts)
_ATTR = struct.Struct("=IIQiIQQQ")
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}  # (sched_setattr, sched_getattr)


def _syscall():
    numbers = _SYSCALLS.get(platform.machine()) if os.name == "posix" else None
    if numbers is None:
        return None, None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None, None
    return libc.syscall, numbers


def slice_ns() -> int | None:
    """The calling thread's slice (ns), or None where it cannot be read."""
    call, numbers = _syscall()
    if call is None or numbers is None:
        return None
    buf = ctypes.create_string_buffer(_ATTR.size)
    if call(numbers[1], 0, buf, _ATTR.size, 0) != 0:
        return None
    return _ATTR.unpack(buf.raw)[5]


def short_slices(ns: int = SLICE_NS) -> bool:
    """Ask for slices of ``ns`` for the calling thread (a normal task keeps its policy
    and nice value); whether the kernel took it."""
    call, numbers = _syscall()
    if call is None or numbers is None:
        return False
    buf = ctypes.create_string_buffer(_ATTR.size)
    if call(numbers[1], 0, buf, _ATTR.size, 0) != 0:
        return False
    _size, policy, _flags, nice, priority, _runtime, _dl, _period = _ATTR.unpack(buf.raw)
    if policy != 0:  # not SCHED_OTHER (a real-time or idle policy given on purpose)
        return False
    attr = ctypes.create_string_buffer(
        _ATTR.pack(_ATTR.size, policy, 0, nice, priority, ns, 0, 0), _ATTR.size
    )
    return call(numbers[0], 0, attr, 0) == 0 and slice_ns() == ns
