"""Record values for bulk output (JSON lines), without located nodes: a reader built
per Avro schema (avro_fast.py), ``json.loads`` for JSON. Only for values the located decoder would
decode cleanly to the same result (tests/test_values_schema.py shows both agree with
these libraries); anything else raises ``Unfit`` and the message takes the located path,
whose tree says what is wrong.

Hostile values cannot amplify here either: an Avro schema qualifies only when it is not
recursive (bounded nesting) and every array item takes at least one byte (a count of
2^40 zero-byte items would otherwise build 2^40 values); the caller charges the budget
by the value's size."""

from __future__ import annotations

import json
import os
import re
import weakref
from collections import OrderedDict
from typing import Any

from . import Schema


class Unfit(Exception):
    """This value needs the located decoder."""


# Schema -> its reader (closures), None if the schema does not qualify; weak, so a Schema
# unpickled per chunk in a jsonl worker does not accumulate (nor can an id be reused)
_READERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


class _Recent:
    """The values last decoded by one schema, by their bytes: a capture holds most
    records at least twice (the Produce request, then each consumer's Fetch response), and
    decoding is most of what JSON lines spend on a value. Bounded: values of at most
    ``LARGEST`` bytes, at most ``VALUES`` JSON values (the node tally: a value's objects)
    and ``BYTES`` bytes of values kept in all (some 100 MB at worst, a few tens for
    typical values), the oldest dropped first. A consumer reads what was produced a
    while ago: keeping fewer (1,100 of the benchmark's Order values) missed nearly every
    Fetch of a tailing consumer. Readers only: a cached value is shared by the records it
    stands for, and nothing downstream changes values."""

    LARGEST = 2048
    VALUES = 1 << 20
    BYTES = 32 << 20

    __slots__ = ("entries", "held", "held_bytes")

    def __init__(self) -> None:
        self.entries: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()
        self.held = self.held_bytes = 0

    def add(self, raw: bytes, value: Any, count: int) -> None:
        if len(raw) > self.LARGEST or count > self.VALUES or raw in self.entries:
            return
        entries = self.entries
        entries[raw] = (value, count)
        self.held += count
        self.held_bytes += len(raw)
        while self.held > self.VALUES or self.held_bytes > self.BYTES:
            old, (_, n) = entries.popitem(last=False)  # OrderedDict: the oldest at once
            self.held -= n
            self.held_bytes -= len(old)


_RECENT: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _reader(parsed: Any, named: dict[str, Any]) -> Any:
    from .avro_fast import Unsupported, compile_reader

    if _qualifies(parsed, named, set()) is None:
        return None
    try:
        return compile_reader(parsed, named)
    except Unsupported:
        return None


def _schema(source: Any, raw: bytes) -> tuple[Schema, int]:
    """The schema of a framed value and its id; Unfit when not framed or not known."""
    if len(raw) < 5 or raw[0] != 0:
        raise Unfit  # unframed: the caller knows what to do
    schema_id = int.from_bytes(raw[1:5], "big")
    schema: Schema | None = source.by_id(schema_id)
    if schema is None:
        raise Unfit
    return schema, schema_id


def _avro_reader(schema: Schema) -> Any:
    """The closures reading ``schema`` (None: it does not qualify); made on first use."""
    reader = _READERS.get(schema, False)
    if reader is False:
        parsed, named = schema.parsed
        reader = _READERS[schema] = _reader(parsed, named)
    return reader


def _kept(
    kept: weakref.WeakKeyDictionary[Any, Any], schema: Schema, raw: bytes, tally: list[int] | None
) -> Any:
    """The value ``raw`` was last decoded to by ``schema`` (None: not kept), its values
    counted into ``tally``."""
    recent = kept.get(schema)
    hit = recent.entries.get(raw) if recent is not None else None
    if hit is None:
        return None
    if tally is not None:
        tally[0] += hit[1]
    return hit[0]


def _read_avro(schema: Schema, raw: bytes) -> tuple[Any, int]:
    """(value, values it holds) by avro_fast's reader; Unfit where it does not read."""
    reader = _avro_reader(schema)
    if reader is None:
        raise Unfit
    count = [0]
    try:
        value, end = reader(raw, 5, count)
    except Exception:  # whatever it is, the located path says it
        raise Unfit from None
    if end != len(raw):
        raise Unfit  # trailing bytes: a finding
    return value, count[0]


def value_json(
    source: Any, raw: bytes, role: str, tally: list[int] | None = None
) -> tuple[Any, int | None]:
    """(the value as JSON, its schema id) for a framed value whose schema ``source``
    knows; raises Unfit otherwise. ``tally[0]`` counts the values made."""
    schema, schema_id = _schema(source, raw)
    if schema.kind == "avro":
        hit = _kept(_RECENT, schema, raw, tally)
        if hit is not None:
            return hit, schema_id
        value, count = _read_avro(schema, raw)
        if tally is not None:
            tally[0] += count
        _RECENT.setdefault(schema, _Recent()).add(raw, value, count)
        return value, schema_id
    if schema.kind == "json":
        try:
            value = json.loads(raw[5:].decode("utf-8"))
            if tally is not None:
                # at least the values the located tree holds (one a value: the first,
                # then one after each ':', ',' or '['; in strings these only add), and
                # never more than one a byte
                tally[0] += 1 + raw.count(b":") + raw.count(b",") + raw.count(b"[")
            return value, schema_id
        except (ValueError, RecursionError):
            raise Unfit from None
    raise Unfit


class JsonText:
    """A value already encoded as JSON (``json.dumps``'s spelling), for JSON lines to
    splice in (``dumps``)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


# Schema -> the compiled Avro reader (avro_text.py), None without one
_COMPILED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_RECENT_TEXT: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def value_text(
    source: Any, raw: bytes, role: str, tally: list[int] | None = None
) -> tuple[Any, int | None]:
    """``value_json`` for a writer of JSON text: an Avro value comes as ``JsonText``
    (from the compiled reader when there is one, else ``json.dumps`` of avro_fast's
    value: the same text), other kinds as values. JSON lines encode records with
    ``dumps``. Raises Unfit where value_json does."""
    schema, schema_id = _schema(source, raw)
    if schema.kind != "avro":
        return value_json(source, raw, role, tally)
    hit = _kept(_RECENT_TEXT, schema, raw, tally)
    if hit is not None:
        return hit, schema_id
    if _avro_reader(schema) is None:  # not qualified: nor for the compiled one
        raise Unfit
    compiled = _COMPILED.get(schema, False)
    if compiled is False:
        from .avro_text import compiled_reader

        parsed, named = schema.parsed
        compiled = _COMPILED[schema] = compiled_reader(parsed, named)
    text = None
    if compiled is not None:
        try:
            text, end, count = compiled.read(raw, 5)
        except ValueError:  # declined: avro_fast decides (and says Unfit)
            pass
        else:
            if end != len(raw):
                raise Unfit  # trailing bytes: a finding
    if text is None:
        value, count = _read_avro(schema, raw)
        text = json.dumps(value)
    if tally is not None:
        tally[0] += count
    out = JsonText(text)
    _RECENT_TEXT.setdefault(schema, _Recent()).add(raw, out, count)
    return out, schema_id


# stands in ``dumps``'s first text for a JsonText (the nonce keeps data from matching it)
_SLOT = f"@@kdissect-value-{os.urandom(8).hex()}-"
_SLOT_RE = re.compile('"' + re.escape(_SLOT) + r'(\d+)@@"')


def dumps(obj: Any) -> str:
    """``json.dumps(obj, default=str)`` with each ``JsonText`` in ``obj`` as its text."""
    texts: list[str] = []

    def default(o: Any) -> str:
        if isinstance(o, JsonText):
            texts.append(o.text)
            return f"{_SLOT}{len(texts) - 1}@@"
        return str(o)

    out = json.dumps(obj, default=default)
    return _SLOT_RE.sub(lambda m: texts[int(m[1])], out) if texts else out


def _qualifies(schema: Any, named: dict[str, Any], seen: set[str]) -> int | None:
    """The least bytes a value of ``schema`` takes, or None when the schema may amplify
    (recursive, or an array of zero-byte items)."""
    if isinstance(schema, str):
        if schema == "null":
            return 0
        if schema in ("float",):
            return 4
        if schema == "double":
            return 8
        if schema in named:  # a record checks ``seen`` itself
            return _qualifies(named[schema], named, seen)
        return 1
    if isinstance(schema, list):
        sizes = [_qualifies(b, named, seen) for b in schema]
        return None if None in sizes else 1
    kind = schema.get("type")
    if kind in ("record", "error"):
        name = schema.get("name")
        if name in seen:
            return None
        total = 0
        for f in schema["fields"]:
            n = _qualifies(f["type"], named, seen | {name})
            if n is None:
                return None
            total += n
        return total
    if kind == "array":
        n = _qualifies(schema["items"], named, seen)
        return None if not n else 1
    if kind == "map":
        return None if _qualifies(schema["values"], named, seen) is None else 1
    if kind == "fixed":
        size: int = schema["size"]
        return size
    return _qualifies(kind, named, seen)
