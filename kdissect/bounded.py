"""Reading the small files kdissect takes whole (checkpoints, quorum-state, key logs,
schemas, registry answers, the registry's cache) within limits: only regular files (a
FIFO or a device would block or never end), at most ``cap`` bytes (a size field or a
hostile file never drives allocation past it), and JSON with its nesting and its
numbers bounded. Every failure is an ``InputError`` whose text says what to do; the
callers turn it into their own error or finding."""

from __future__ import annotations

import os
import stat
from typing import Any

from .protocol.json_bounded import JsonError, load_json as _load

MiB = 1 << 20


class InputError(Exception):
    """A file or document that cannot be taken (unreadable, not a regular file, too big,
    not JSON, nested too deep)."""


def read_file(path: str | os.PathLike, cap: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, refused past ``cap`` bytes."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise InputError(f"{name}: cannot read the {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(
                f"{name}: not a regular file (a FIFO, device or directory); give the {what} itself"
            )
        if st.st_size > cap:
            raise InputError(
                f"{name}: {st.st_size} bytes is too big for a {what} (at most {_size(cap)})"
            )
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 4 * MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        shrunk = os.fstat(fd).st_size
        if shrunk < len(data):  # trimmed while read (a broker trims a preallocated index
            data = data[:shrunk]  # when its segment rolls): past its new end is not the file's
    except OSError as e:
        raise InputError(f"{name}: cannot read the {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > cap:  # grew while read
        raise InputError(f"{name}: more than {_size(cap)}: too big for a {what}")
    return data


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= MiB else f"{n} bytes"


def load_json(data: bytes | str, what: str = "JSON") -> Any:
    """JSON with its nesting and integers bounded (protocol/json_bounded.py)."""
    try:
        return _load(data)
    except JsonError as e:
        raise InputError(f"{what}: {e}") from None


def read_json(path: str | os.PathLike, cap: int, what: str) -> Any:
    return load_json(read_file(path, cap, what), f"{os.fspath(path)}")
