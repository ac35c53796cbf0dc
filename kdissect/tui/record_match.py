"""The record a record filter (`record.key == "x"`, `record.value.id > 3`...) matched:
the capture screen opens it in the detail tree when the cursor comes to its exchange.
Each record of the exchange's trees is asked the filter as the exchange would be, its
own key, value and headers standing for the exchange's records (the other fields are
the exchange's)."""

from __future__ import annotations

from ..stream.filter_values import NULL, is_value_path, of_records
from ..filters import Filter
from ..protocol.node import Node
from ..render.records import record_json
from ..stream.fields import values

_MOST = 5_000  # records asked at most (the detail of a huge Fetch stays quick)


def asks_records(flt: Filter | None) -> bool:
    return flt is not None and any(f.startswith("record.") for f in flt.fields)


class _OneRecord:
    """An exchange as a filter sees it, with one record for its records."""

    def __init__(self, view, record: Node):
        self.view, self.record = view, record
        self._json: dict | None = None

    def json(self) -> dict:
        if self._json is None:
            self._json = record_json(self.record)
        return self._json

    def values_of(self, name: str) -> list:
        if not name.startswith("record."):
            return values(self.view, name)
        r = self.json()
        if name in ("record.key", "record.value"):
            v = r[name[len("record.") :]]
            return [v] if isinstance(v, str) else [NULL] if v is None else []
        if name == "record.header":
            return [h["key"] for h in r["headers"]]
        if name.startswith("record.header."):
            want = name[len("record.header.") :]
            return [
                h["value"] for h in r["headers"] if h["key"] == want and isinstance(h["value"], str)
            ]
        if is_value_path(name) or name.endswith("_schema"):
            return of_records([r], name)
        return []


def first_match(flt: Filter, view, roots: list[Node]) -> tuple[int, Node] | None:
    """(the message's index, the record node) of the first record of ``roots`` (the
    request's and the response's trees) that passes ``flt``."""
    asked = 0
    for index, root in enumerate(roots):
        for node in root.walk():
            if node.ktype != "record" and not node.ktype.startswith("message_v"):
                continue
            if node.child("key") is None and node.child("value") is None:
                continue  # a compressed wrapper: its inner ones count
            asked += 1
            if asked > _MOST:
                return None
            if flt(_OneRecord(view, node)):
                return index, node
    return None
