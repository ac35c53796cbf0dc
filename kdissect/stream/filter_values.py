"""Display-filter fields into record keys and values (docs/guide/values.md, docs/guide/filters.md):

    record.value.customer.id == "c-3"     a field of the value, as JSON lines show it
    record.value.items.sku == "A-1"       through arrays: any element
    record.value.items.0.sku == "A-1"     or one element, by index
    record.value_schema == 2              the Schema Registry id of the value
    record.key.id > 100, record.key_schema

A path reads the value decoded by its schema (``--schemas``, ``--registry``,
``--value-schema``), an internal topic's value by Kafka's schema, or else a value whose
text is a JSON document. A path that ends at a record or array matches nothing; at an
array of scalars, any element. kdissect/filters.py hooks these fields in; this module
says which names they are, what a literal means for them, and their values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any


class _Null:
    """A null key or value (a tombstone's) among a filter's values: only the literal
    ``null`` equals it; it is no text (contains, ~ skip it) and false alone."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "null"


NULL = _Null()
PATHS = ("record.value.", "record.key.")
SCHEMA_IDS = {"record.value_schema": "value", "record.key_schema": "key"}
_DEPTH = 64  # JSON nesting read from a plain value's text


def is_value_path(name: str) -> bool:
    """``record.value.X`` / ``record.key.X`` (with something after the dot)."""
    return name.startswith(PATHS) and not name.endswith(".") and len(name) > len("record.key.")


def needs_records(name: str) -> bool:
    return name in SCHEMA_IDS or is_value_path(name)


def literal(kind: str, text: str) -> Any:
    """A filter literal compared with decoded values: numbers as numbers, true/false as
    booleans, anything else (quoted or a bare word) as text."""
    if kind == "num":
        return float(text) if "." in text else int(text)
    if kind == "word" and text in ("true", "false"):
        return text == "true"
    return text


def values(view: Any, name: str) -> list[Any]:
    """The values of ``name`` over every record of an exchange view (Produce requests,
    Fetch and ShareFetch responses)."""
    return of_records(exchange_records(view), name)


def of_records(records: Iterable[dict[Any, Any]], name: str) -> list[Any]:
    """The values of ``name`` over records as JSON lines show them (``protocol.json_view
    .record_json`` or the values-only decoder): ``key``/``value`` decoded, ``*_schema``
    the schema ids, ``*_decoded`` an internal topic's structures."""
    if name in SCHEMA_IDS:
        field = f"{SCHEMA_IDS[name]}_schema"
        return [r[field] for r in records if type(r.get(field)) is int]
    role, _, path = name[len("record.") :].partition(".")
    parts = path.split(".")
    out: list[Any] = []
    for r in records:
        value = r.get(f"{role}_decoded")  # an internal topic's
        if isinstance(value, dict) and len(value) == 1 and parts[0] not in value:
            # by the struct's fields (record.key.group), its name left out
            value = next(iter(value.values()))
        if value is None:
            value = r.get(role)
            if isinstance(value, str) and f"{role}_schema" not in r:
                value = _json_text(value)  # plain JSON text
        if isinstance(value, (dict, list)):
            _pick(value, parts, out)
    return out


def of_record(r: dict[Any, Any], name: str) -> list[Any]:
    """The values of a ``record.*`` field for one record as JSON lines show it (a
    record filter asked record by record: the TUI's match, ``log --records``)."""
    if name in ("record.key", "record.value"):
        v = r.get(name[len("record.") :])
        return [v] if isinstance(v, str) else [NULL] if v is None else []
    headers = r.get("headers") or ()
    if name == "record.header":
        return [h["key"] for h in headers]
    if name.startswith("record.header."):
        want = name[len("record.header.") :]
        return [h["value"] for h in headers if h["key"] == want and isinstance(h["value"], str)]
    if needs_records(name):
        return of_records([r], name)
    return []


class OneRecord:
    """Something a filter is asked of (an exchange's view, a log batch) with one record
    standing for its records: ``record.*`` fields are that record's, the others its
    holder's (``rest``)."""

    def __init__(
        self,
        rest: Callable[[str], list[Any]],
        record: dict[Any, Any] | Callable[[], dict[Any, Any]],
    ):
        """``record``: as JSON shows it, or what makes that (only if a record field is
        asked)."""
        self._rest, self._record = rest, record

    def values_of(self, name: str) -> list[Any]:
        if not name.startswith("record."):
            return self._rest(name)
        if not isinstance(self._record, dict):
            self._record = self._record()  # (made once)
        return of_record(self._record, name)


def asks_records(fields: Iterable[str]) -> bool:
    """Whether a filter of these fields reads records' fields."""
    return any(f.startswith("record.") for f in fields)


def _json_text(text: str) -> Any:
    if text[:1] not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _pick(value: Any, parts: list[str], out: list[Any]) -> None:
    """Append to ``out`` the scalars at ``parts`` under ``value``; an array on the way
    (not indexed) stands for each of its elements. Iterative: values may nest deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, i = stack.pop()
        if i == len(parts):
            if isinstance(v, list):
                out.extend(x for x in v if _scalar(x))
            elif _scalar(v):
                out.append(v)
            continue
        part = parts[i]
        if isinstance(v, dict):
            if part in v:
                stack.append((v[part], i + 1))
        elif isinstance(v, list):
            if part.isdigit():
                if int(part) < len(v):
                    stack.append((v[int(part)], i + 1))
            else:
                stack.extend((x, i) for x in reversed(v) if isinstance(x, dict))


def _scalar(v: Any) -> bool:
    return v is not None and not isinstance(v, (dict, list))


# what the records of the last exchange asked about gave: a filter naming several value
# fields decodes each exchange once (one entry: memory stays bounded). Keyed by the view and
# its messages: a live exchange gains its response after a first look
_last: tuple[tuple[Any, Any, Any], list[dict[Any, Any]], list[str]] | None = None


def exchange_records(view: Any) -> list[dict[Any, Any]]:
    """Every record of the exchange as JSON lines show it (decoded by schema when the
    view's options carry schemas): the values-only decoder for clean messages, the
    located tree otherwise."""
    return _read_records(view)[0]


def record_findings(view: Any) -> list[str]:
    """The finding codes of the exchange's messages read with their records (a header key
    not UTF-8, a record that does not decode...): the full trees of its Produce request
    or Fetch response, kept as enrichment keeps a tree's (which reads batches' heads and
    CRCs only). Empty for clean messages and for exchanges without records."""
    return _read_records(view)[1]


def _read_records(view: Any) -> tuple[list[dict[Any, Any]], list[str]]:
    global _last
    last, ex = _last, view.ex
    if (
        last is not None
        and last[0][0] is view
        and last[0][1] is ex.request
        and last[0][2] is ex.response
    ):
        return last[1], last[2]
    from ..protocol import Options
    from ..protocol.apis import CARRY_RECORDS
    from ..protocol.json_view import json_bytes, records_of
    from ..protocol.values import body_values
    from .content import full_tree
    from .model import tree_findings

    options = view.options or Options()
    out: list[dict[Any, Any]] = []
    codes: list[str] = []
    if view.ex.first.api_key in CARRY_RECORDS:
        for m in (view.ex.request, view.ex.response):
            if m is None or m.direction == "sasl" or not m.data:
                continue
            found: list[dict[Any, Any]] = []
            body = body_values(
                m.data,
                m.direction,
                m.api_key,
                m.api_version,
                options,
                json_bytes,
                found.extend,
                topic_ids=view.topic_ids,
            )
            if body is None:  # not clean: the located tree says where and why
                tree = full_tree(m, options, view.topic_ids)
                found = records_of(tree) if tree is not None else []
                if tree is not None:
                    codes += [code for _, code, _ in tree_findings(m, tree)]
            out += found
    _last = ((view, ex.request, ex.response), out, codes)
    return out, codes
