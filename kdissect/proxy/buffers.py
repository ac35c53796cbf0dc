"""Buffers for whole answers that are filled before anything reads them.

``bytearray(n)`` zeroes its n bytes: for each large answer the forwarder collects (a
3 MB Fetch answer for a Java consumer) and each the display reads, a pass over the
whole answer before the socket or the pipe writes it again. Measured with perf on the
forwarder, that memset was 7-10 % of its CPU while consumers fetched. ``filled_later``
gives a bytearray without that pass (CPython's ``PyByteArray_FromStringAndSize`` with
no source leaves its bytes as the allocator had them). Its callers read only what they
have filled: the forwarder writes, records and shows only the bytes the socket put
there, and the display hands a payload on only once the pipe has filled all of it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

_from_nothing: Callable | None
try:
    _from_nothing = ctypes.pythonapi.PyByteArray_FromStringAndSize
    _from_nothing.restype = ctypes.py_object
    _from_nothing.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
except (AttributeError, OSError):  # (not CPython)
    _from_nothing = None


def filled_later(size: int) -> bytearray:
    """A bytearray of ``size`` bytes whose contents are undefined until written: only
    for a caller that fills all of it before reading, or reads only what it filled."""
    if _from_nothing is None or size <= 0:
        return bytearray(size)
    return _from_nothing(None, size)
