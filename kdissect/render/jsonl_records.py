"""JSON lines' record batches (``kdissect pcap --format jsonl``) as text in one go.

The values decoder reads a clean v2 batch's records into dicts (its record loop, bytes
through ``json_bytes``) and JSON lines encode the list with ``json``: most of what a
line of a big Produce or Fetch costs. The compiled writer (native/src/jsonrec.rs, in
``kdissect._native`` when it was built) writes the same text from the batch's bytes
without a Python object per field; the reference is ``records_json_py``, and anything
the compiled writer is not sure of (odd bytes, a header key that is not UTF-8) it hands
back: the values decoder then reads the batch in Python, which decides.
``KDISSECT_PURE=1`` turns the compiled writer off (as for the packet path).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..protocol.reader import Bail, VarintTooLong
from ..protocol.values import record_loop
from ..protocol.values_schema.fast import JsonText
from ..protocol.native_ext import compiled
from .records import json_bytes

# json.dumps(x, default=str), as the lines encode
_encode = json.JSONEncoder(default=str).encode
BatchText = Callable[..., "JsonText | None"]


def records_json_py(
    data, pos: int, end: int, count: int, base: int, ts0: int, fixed_ts: bool
) -> str | None:
    """The reference: ``json.dumps`` of the ``count`` records in ``data[pos:end]`` as the
    values decoder reads them; None when they are not clean."""
    try:
        records, stop = record_loop(data, pos, end, count, base, ts0, fixed_ts, json_bytes)
    except (Bail, IndexError, UnicodeDecodeError, VarintTooLong):
        return None
    return _encode(records) if stop == end else None


def _batch_text() -> BatchText | None:
    native = compiled("records_json")
    if native is None:
        return None

    def batch_text(
        data, pos: int, end: int, count: int, base: int, ts0: int, fixed_ts: bool
    ) -> JsonText | None:
        got = native(data, pos, end, count, base, ts0, fixed_ts)
        return None if got is None else JsonText(got)

    return batch_text


# what the values decoder calls for each batch of a JSON line (``body_values``'s
# ``batch_text``); None without the compiled writer: the record loop reads them
batch_text: BatchText | None = _batch_text()
