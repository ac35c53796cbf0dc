"""kafka-python's protocol classes as an independent decoder of a Kafka message: the
truth of the real-paste corpus (tests/data/real_pastes) is checked with them, never with
kdissect's own output."""

from __future__ import annotations

import importlib
import io
import pkgutil
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _classes() -> dict[tuple[int, str], Any]:
    for package in ("admin", "consumer", "metadata", "producer"):
        pk = importlib.import_module(f"kafka.protocol.{package}")
        for m in pkgutil.iter_modules(pk.__path__):
            importlib.import_module(f"kafka.protocol.{package}.{m.name}")
    from kafka.protocol.api_message import ApiMessage

    found: dict[tuple[int, str], Any] = {}

    def walk(cls):
        for sub in cls.__subclasses__():
            if getattr(sub, "_class_version", None) is None and getattr(sub, "_json", None):
                found[(sub.API_KEY, sub.type)] = sub
            walk(sub)

    walk(ApiMessage)
    return found


def decode(data: bytes, api: int, version: int, direction: str, body: bool = False):
    """The message kafka-python reads from ``data`` (no size prefix): it must take every
    byte (it writes the same bytes back). Raises if it cannot."""
    cls = _classes()[(api, direction)]
    start = 0
    if not body:  # how many bytes the header takes
        head = io.BytesIO(data)
        cls.parse_header(head, version=version)
        start = head.tell()
    msg = cls.decode(data, version=version, header=not body)
    header = msg.header if not body else None
    msg._header = None  # write the body back alone
    again = msg.encode(version=version)
    msg._header = header
    if bytes(again) != data[start:]:
        raise AssertionError(
            f"kafka-python reads {len(data)} bytes but writes back {len(again)} different ones"
        )
    return msg


def field(msg, path: str):
    """A header field (correlation_id, client_id) or a dotted path into the body
    (topics.0.name)."""
    if path in ("correlation_id", "client_id"):
        return getattr(msg.header, path)
    value = msg
    for part in path.split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return value
