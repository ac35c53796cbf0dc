"""Pure decoding of Kafka bytes into located field trees: no I/O, no global state.

Entry points: ``decode_request``, ``decode_response``, ``peek_request_header``, ``guess``.

The names below are loaded from their modules when first asked for: importing one module
of the package (``protocol.findings``, ``protocol.plain``) does not load the decoder,
the guesser and the schemas with it (start-up, docs/guide/pcap.md).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (``X as X``: exported, for mypy's no_implicit_reexport)
    from .context import Options as Options
    from .guess import Candidate as Candidate, guess as guess
    from .message import (
        Message as Message,
        RequestHeader as RequestHeader,
        decode as decode,
        decode_request as decode_request,
        decode_response as decode_response,
        peek_request_header as peek_request_header,
    )
    from .names import (
        api_key_of as api_key_of,
        api_name as api_name,
        error_info as error_info,
        error_name as error_name,
    )
    from .node import Node as Node

_WHERE = {
    "Options": "context",
    "Candidate": "guess",
    "guess": "guess",
    "Message": "message",
    "RequestHeader": "message",
    "decode": "message",
    "decode_request": "message",
    "decode_response": "message",
    "peek_request_header": "message",
    "api_key_of": "names",
    "api_name": "names",
    "error_info": "names",
    "error_name": "names",
    "Node": "node",
}

__all__ = list(_WHERE)


class _Package(ModuleType):
    """``guess`` and ``decode`` name submodules as well as the functions exported here:
    the import system sets a submodule on its package when it first loads it, which would
    hide the function; the package keeps the function (as when it loaded them eagerly)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name in _WHERE and isinstance(value, ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # asked once
    return value
