"""The records table's rows the fast way: a Produce or Fetch body read by the compiled
table read (``values.table_values``: each clean, uncompressed v2 batch straight to its
rows, followed to its topic and partition in Rust), else by the values decoder (no tree),
each clean v2 batch's records turned into their columns by the compiled walker
(native/src/records_table.rs), a row per record from one template per partition.

The reference is the located tree (``rows.record_rows``'s ``_record_row``): a message
this path is not sure of (damage, a message set, internal topics' records, keys or values
by schema, holes, a batch the walker hands back) is left to it, whole. The compiled
walker is the only fast one: without it (not built, ``KDISSECT_PURE=1``) every message
takes the tree. tests/test_records_table.py compares the two on every capture.
"""

from __future__ import annotations

import struct
from operator import itemgetter
from typing import Any

from ..protocol import schemas
from ..protocol.layout import Struct
from ..protocol.reader import Bail
from ..protocol.values import NO_BYTES, body_values, table_reader, table_values
from ..protocol.native_ext import bind, forget_on_change
from .cells import PARTITION_FIELDS, TOPIC_FIELDS, ms_micros, text_or_hex
from .facts import topic_of_id
from .model import KafkaMessage


class _Rows(list):  # type: ignore[type-arg]
    """One batch's record columns (what the values decoder keeps as the batch's records)."""

    __slots__ = ()


_native = bind(__name__, "_native", "record_table_rows")


def _batch_rows(
    data: Any, pos: int, end: int, count: int, base: int, ts0: int, fixed_ts: bool
) -> _Rows:
    assert _native is not None
    got = _native(data, pos, end, count, base, ts0, fixed_ts)
    if got is None:
        raise Bail  # the tree decides, for the whole message
    return _Rows(got)


def _same(records: Any) -> Any:
    return records


class _Unsure(Exception):
    """A body this path leaves to the tree (found while walking it)."""


_KEY_VERSION = struct.Struct(">hh")


def fast_record_rows(
    m: KafkaMessage,
    capture: str,
    options: Any,
    out: list[Any],
    joins: dict[str, Any] | None,
    shape: RowShape | None = None,
) -> bool:
    """Append the rows of the records ``m`` carries to ``out``: dicts as the tree's, or
    with ``shape`` tuples in its column order, a batch of more than one record as one
    RecordBlock; False (nothing appended) when the located tree must decide."""
    if _native is None or m.holes or m.forwarded is not None or m.api_version is None:
        return False
    assert m.api_key is not None
    direction, data = m.direction, m.data
    route, reader, head = _route_of(m.api_key, m.api_version, direction)
    if head is not None and data[:4] != head:
        return False  # the tree reads the request's own header
    found: list[tuple[Any, Any, list[Any]]] = []  # (topic, partition, rows) of each batch
    # each records field's batches read to their rows at once, and followed, compiled
    batches = (
        table_values(reader, data, m.api_key, direction, options, route.spec, topic_of_id)
        if reader is not None and route is not None
        else None
    )
    if batches is not None:
        found = batches
    else:
        body = body_values(
            m.data,
            m.direction,
            m.api_key,
            m.api_version,
            options,
            NO_BYTES,
            batch_records=_same,
            batch_text=_batch_rows,
            replayable=True,
        )
        if body is None:
            return False
        try:
            _follow(body, route, None, None, found)
        except _Unsure:
            return False
    if not found:
        return True
    message = (capture, "produce" if direction == "request" else "fetch", m.correlation_id, m.ts)
    join_names = tuple(joins) if joins else ()
    # after a record's own columns: its problems, the value columns (null), the joins
    tail = _TAIL + (tuple(joins.values()) if joins else ())
    if shape is None:
        names = _SOURCE + join_names
        for topic, partition, rows in found:
            shared = message + (topic, partition)
            for record in rows:
                row = dict(zip(names, shared + record + tail))
                row["problems"] = []  # (each row its own list, as the tree's)
                out.append(row)
        return True
    order = shape.order(join_names)
    for topic, partition, rows in found:
        shared = message + (topic, partition)
        if len(rows) == 1:
            # a row as it is: on message-dense traffic (a record a message) a block, its
            # pickling and its making of rows cost more than they saved
            out.append(order(shared + rows[0] + tail))
        elif rows:
            out.append(RecordBlock(shared, rows, tail, order))
    return True


# a record row's values in the order this module makes them (the tree's dict's:
# rows._record_row): the message's, the batch's (topic, partition), the record's own
# (the compiled walker's five, then problems), the value columns, then the joins
_HEAD = ("capture", "direction", "correlation_id", "message_ts")
_SOURCE = _HEAD + (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value_size",
    "headers",
    "problems",
    "key_json",
    "key_schema",
    "value_json",
    "value_schema",
)
# a fast row's problems (none: one empty list, never changed, shared by every tuple row)
# and value columns (no schemas on this path)
_TAIL: tuple[Any, ...] = ([], None, None, None, None)


class RowShape:
    """Record rows as tuples in a table's column order (``names``: columns.RECORDS's,
    given by the pipeline), for the records table's holder, spill and writer: a tuple
    of its values, not a dict keyed by every column name. A column this module does not
    make is null."""

    __slots__ = ("names", "topic", "_orders")

    def __init__(self, names: tuple[str, ...]):
        if len(names) < 2:  # (an itemgetter of one index gives a value, not a tuple)
            raise ValueError("a row shape has two columns or more")
        self.names = names
        self.topic = names.index("topic")
        self._orders: dict[tuple[str, ...], Any] = {}

    def order(self, joins: tuple[str, ...]) -> Any:
        """What puts a row made here (_SOURCE's values, then those of ``joins``) in the
        column order: one itemgetter, made once per join names."""
        got = self._orders.get(joins)
        if got is None:
            at = {n: i for i, n in enumerate(_SOURCE + joins)}
            null = _SOURCE.index("key_json")  # (null on every row made here)
            got = self._orders[joins] = itemgetter(*(at.get(n, null) for n in self.names))
        return got

    def row(self, row: dict[str, Any]) -> tuple[Any, ...]:
        """A dict row (the tree's) as a tuple row."""
        return tuple(map(row.get, self.names))


class _Route:
    """Where a struct's records are, from its layout: its fields that name a topic or a
    partition (an array element's name the records below it), and each field holding
    records (``records``) or a struct that does, with that struct's route (None: the
    records field itself). The walk then visits nothing else of a body."""

    __slots__ = ("names", "fields", "spec")
    names: tuple[str, ...]
    fields: tuple[tuple[str, _Route | None], ...]
    spec: tuple[Any, ...]

    def __init__(self, st: Struct):
        self.names = tuple(f.name for f in st.fields + st.tagged if f.name in _NAMES)
        fields: list[tuple[str, _Route | None]] = []
        for f in st.fields + st.tagged:
            if f.type == "records":
                fields.append((f.name, None))
            elif f.struct is not None and (sub := _Route(f.struct)).fields:
                fields.append((f.name, sub))
        self.fields = tuple(fields)
        # the same for the compiled walk (records_table.rs's follow): each name with
        # what _follow takes it for (0 a topic id, 1 a topic, 2 a partition)
        self.spec = (
            tuple((n, 0 if n == "topic_id" else 1 if n in TOPIC_FIELDS else 2) for n in self.names),
            tuple((name, sub.spec if sub is not None else None) for name, sub in self.fields),
        )


_NAMES = TOPIC_FIELDS | PARTITION_FIELDS | {"topic_id"}
# (api_key, api_version, direction) -> its body's route, the compiled reader that
# keeps only what the route reads (values.table_reader; None: none) and a request's
# first four bytes (its api key and version: None for a response), made once per kind
_ROUTES: dict[
    tuple[int, int, str], tuple[_Route | None, tuple[Any, bool] | None, bytes | None]
] = {}
forget_on_change(_ROUTES.clear)  # (its readers are compiled or not as the run chose)


def _route_of(
    api_key: int, api_version: int, direction: str
) -> tuple[_Route | None, tuple[Any, bool] | None, bytes | None]:
    k = (api_key, api_version, direction)
    got = _ROUTES.get(k)
    if got is None:
        st = schemas.layout(api_key, api_version, direction)
        route = _Route(st) if st is not None else None
        reader = table_reader(api_key, api_version, direction, _NAMES) if _TABLE else None
        head = _KEY_VERSION.pack(api_key, api_version) if direction == "request" else None
        got = _ROUTES[k] = (route, reader, head)
    return got


# whether records are read by the compiled table read (values.table_values) before the
# values decoder (tests turn it off: the two must give the same rows)
_TABLE = True


def _follow(
    node: dict[Any, Any],
    route: _Route | None,
    topic: Any,
    partition: Any,
    out: list[tuple[Any, Any, list[Any]]],
) -> None:
    """rows._walk_records on the values decoder's dicts, along ``route``: array elements
    name the topic and partition of the records below them (a struct of the carriers
    names one topic and one partition at most: their order does not matter)."""
    if route is None:
        return
    for name, sub in route.fields:
        v = node.get(name)
        if sub is None:  # the records field: its batches (or a partial batch's note)
            for batch in v or ():
                rows = batch.get("records")
                if type(rows) is _Rows:
                    if "control" in batch["attributes"]:
                        raise _Unsure  # control records: the tree reads their key and value
                    out.append((topic, partition, rows))
        elif type(v) is list:
            for e in v:
                if type(e) is dict:
                    t, p = topic, partition
                    for k in sub.names:
                        x = e.get(k)
                        if k == "topic_id":
                            if t is None and type(x) is str:
                                t = topic_of_id(x, {})
                        elif k in TOPIC_FIELDS:
                            if type(x) is str:
                                t = x
                        elif type(x) is int:
                            p = x
                    _follow(e, sub, t, p, out)
        elif type(v) is dict:
            _follow(v, sub, topic, partition, out)


class RecordBlock:
    """The tuple rows (RowShape) of one batch's records, held as one: the values they
    share (the message's and the batch's, and ``tail``: what follows a record's own),
    each record's own, and ``order`` (RowShape.order's). Held, sorted and spilled as one
    item (pipeline/spill.py); ``rows()`` makes the rows."""

    __slots__ = ("shared", "records", "tail", "order", "_first")

    def __init__(
        self,
        shared: tuple[Any, ...],
        records: list[tuple[Any, ...]],
        tail: tuple[Any, ...],
        order: Any,
    ):
        self.shared, self.records, self.tail, self.order = shared, records, tail, order
        self._first: tuple[Any, ...] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def first(self) -> tuple[Any, ...]:
        """The first record's row (what the block is sorted by: its columns but the
        record's own are every row's)."""
        if self._first is None:
            self._first = self.order(self.shared + self.records[0] + self.tail)
        return self._first

    def __getitem__(self, column: int) -> Any:
        """The first row's value of ``column``: a block is sorted by a row's key
        made in C (an itemgetter of columns), as the rows are."""
        return self.first()[column]

    __iter__ = None  # (not a sequence of its columns: iterating one is a mistake)

    def rows(self) -> list[tuple[Any, ...]]:
        shared, tail, order = self.shared, self.tail, self.order
        return [order(shared + record + tail) for record in self.records]

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled by spill.py)
        return RecordBlock, (self.shared, list(self.records), self.tail, self.order)


def batch_columns_py(
    data: Any, pos: int, end: int, count: int, base: int, ts0: int, fixed_ts: bool
) -> list[tuple[Any, ...]] | None:
    """The reference of the compiled walker on one batch: the values decoder's record
    loop, each record's columns as ``rows._record_row`` makes them (None: not clean)."""
    from ..protocol.reader import VarintTooLong
    from ..protocol.values import record_loop

    try:
        records, stop = record_loop(data, pos, end, count, base, ts0, fixed_ts, bytes)
    except (Bail, IndexError, VarintTooLong):
        return None
    if stop != end:
        return None
    return [
        (
            r["offset"],
            ms_micros(r["timestamp"]),
            text_or_hex(r["key"]),
            len(r["value"]) if r["value"] is not None else None,
            [{"key": h["key"], "value": text_or_hex(h["value"])} for h in r["headers"]],
        )
        for r in records
    ]
