"""TLS in captures: the record layer, key logs and the key schedules, and the layer that
turns a TLS connection's encrypted byte streams into its plaintext streams (given the
session keys) or into an honest report of what it is (without them).

Sits between TCP reassembly and Kafka framing (``layer.TlsLayer``): everything after it
sees plaintext bytes as if the connection had none of TLS.

The names below load their module on first use (PEP 562): a capture without TLS never
loads the sessions and key schedules (hashlib, hmac), nor cryptography."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"KeyLog": "keylog", "KeyLogError": "keylog", "TlsLayer": "layer", "TlsFacts": "session"}

if TYPE_CHECKING:
    from .keylog import KeyLog, KeyLogError
    from .layer import TlsLayer
    from .session import TlsFacts

__all__ = ["KeyLog", "KeyLogError", "TlsLayer", "TlsFacts"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value
