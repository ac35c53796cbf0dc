"""The record a record filter (`record.key == "x"`, `record.value.id > 3`...) matched:
the capture screen opens it in the detail tree when the cursor comes to its exchange.
Each record of the exchange's trees is asked the filter as the exchange would be, its
own key, value and headers standing for the exchange's records (the other fields are
the exchange's)."""

from __future__ import annotations

from functools import partial

from ..stream.filter_values import OneRecord
from ..stream.filter_values import asks_records as filter_fields_ask_records
from ..filters import Filter
from ..protocol.node import Node
from ..render.records import record_json
from ..stream.fields import values

_MOST = 5_000  # records asked at most (the detail of a huge Fetch stays quick)


def asks_records(flt: Filter | None) -> bool:
    return flt is not None and filter_fields_ask_records(flt.fields)


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
            if flt(OneRecord(lambda name: values(view, name), partial(record_json, node))):
                return index, node
    return None
