"""`kdissect log --format jsonl`'s record lines of a clean v2 batch, as text in one go.

A record's JSON line is the prefix every record of its batch shares (type, file, topic,
partition, batch_position) followed by ``"position": P, "offset": ...}`` (docs/guide/log.md).
``record_lines`` writes the second part of every record of a batch, one line each:
``P, "offset": O, "timestamp": T, "key": K, "value": V, "headers": [...]}``; the writer
puts the prefix in front of each line (``prefixed``, straight to bytes for stdout).

Two implementations give the same text: ``record_lines_py``, the reference (the values
decoder's record loop, ``json_bytes``, the ``json`` module), and the compiled one
(native/src/logjson.rs, in ``kdissect._native`` when it was built), which writes the
text without making a Python object per field and hands anything it cannot be sure of
back to the reference. ``KDISSECT_PURE=1`` forces the reference (as for the packet path,
kdissect/capture/native.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..protocol.batch import record_starts
from ..protocol.reader import Bail, VarintTooLong
from ..protocol.values import record_loop
from ..protocol.native_ext import bind, compiled as _compiled
from .records import json_bytes

# json.dumps(x, default=str): what every `kdissect log` JSON line is encoded with
encode = json.JSONEncoder(default=str).encode
RecordLines = Callable[[Any, int, int, int, int, int, bool], "str | None"]


def record_lines_py(
    data, pos: int, end: int, count: int, base: int, ts0: int, fixed_ts: bool
) -> str | None:
    """The lines of the ``count`` records in ``data[pos:end]`` (``base``: the batch's base
    offset; ``ts0``: its base timestamp, or with ``fixed_ts`` its log-append time); None
    when they are not clean (the batch then takes the located path)."""
    try:
        records, stop = record_loop(data, pos, end, count, base, ts0, fixed_ts, json_bytes)
    except (Bail, IndexError, UnicodeDecodeError, VarintTooLong):
        return None
    if stop != end:
        return None
    enc = encode
    return "".join(
        [f"{p}, {enc(r)[1:]}\n" for p, r in zip(record_starts(data, pos, count), records)]
    )


def record_lines_for() -> RecordLines:
    """The compiled writer with the reference behind it, or the reference alone."""
    native = _compiled("log_record_lines")
    if native is None:
        return record_lines_py

    def record_lines(
        data, pos: int, end: int, count: int, base: int, ts0: int, fixed_ts: bool
    ) -> str | None:
        got = native(data, pos, end, count, base, ts0, fixed_ts)
        return (
            got if got is not None else record_lines_py(data, pos, end, count, base, ts0, fixed_ts)
        )

    return record_lines


def prefixed_py(prefix: str, lines: str) -> bytes:
    """``lines`` (each ending in a newline) with ``prefix`` in front of each, as UTF-8; the
    JSON text holds no raw newline (``json`` escapes it), so each newline ends a line."""
    if not lines:
        return b""
    return (prefix + lines[:-1].replace("\n", "\n" + prefix) + "\n").encode()


prefixed: Callable[[str, str], bytes] = bind(__name__, "prefixed", "log_prefix_lines", prefixed_py)
