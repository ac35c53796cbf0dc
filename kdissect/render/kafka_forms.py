"""Kafka's own renderings beside ours, where its tools print them: a Uuid in Kafka's
base64 (url-safe, unpadded: ``Uuid.toString``, as kafka-topics and kafka-dump-log print
topic ids) beside the dashed form, and a transaction's state by its name
(``TransactionState``: Ongoing, PrepareCommit...) beside its number."""

from __future__ import annotations

import base64
import re
import uuid
from typing import Any

from ..protocol.node import Node

# org.apache.kafka.coordinator.transaction.TransactionState, by id
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
_STATE_FIELDS = frozenset({"transaction_status"})  # TransactionLogValue's
_DASHED = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def uuid_base64(dashed: str) -> str | None:
    """Kafka's form of a Uuid given dashed (None if it is not one, or the zero Uuid:
    Kafka's "no id", whose base64 says nothing more)."""
    try:
        raw = uuid.UUID(dashed).bytes
    except ValueError:
        return None
    if not any(raw):
        return None
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def state_name(number: Any) -> str | None:
    if (
        isinstance(number, int)
        and not isinstance(number, bool)
        and 0 <= number < len(TRANSACTION_STATES)
    ):
        return TRANSACTION_STATES[number]
    return None


def kafka_form(node: Node) -> str | None:
    """What Kafka's tools print for this field, when it differs from our rendering."""
    if node.ktype == "uuid" and isinstance(node.value, str):
        b64 = uuid_base64(node.value)
        return f"base64 {b64}" if b64 is not None else None
    if node.name in _STATE_FIELDS:
        return state_name(node.value)
    return None


def readable(value: Any, name: str = "") -> Any:
    """A decoded record (JSON values) for a line of text: Uuids as ``dashed (base64)``,
    transaction states as ``number (Name)``."""
    stack: list = []
    out = _one(value, name, stack)
    while stack:  # iterative: decoded values may nest deep
        target, key, v, n = stack.pop()
        target[key] = _one(v, n, stack)
    return out


def _one(value: Any, name: str, stack: list) -> Any:
    if isinstance(value, dict):
        copy = dict(value)
        stack.extend((copy, k, v, k) for k, v in value.items())
        return copy
    if isinstance(value, list):
        items = list(value)
        stack.extend((items, i, v, name) for i, v in enumerate(value))
        return items
    if isinstance(value, str) and _DASHED.match(value) and uuid_base64(value) is not None:
        return f"{value} ({uuid_base64(value)})"
    if name in _STATE_FIELDS and state_name(value) is not None:
        return f"{value} ({state_name(value)})"
    return value
