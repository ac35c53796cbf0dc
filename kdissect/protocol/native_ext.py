"""The compiled extension (``kdissect._native``, built from native/ in Rust when a Rust
compiler is at hand at install time) as every compiled path finds it: the packet path
(capture/native.py), the message values (values_native.py) and the Avro reader. One
switch turns them all off: ``KDISSECT_PURE=1`` runs the pure-Python references."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

PURE_ENV = "KDISSECT_PURE"


def extension() -> Any | None:
    """The extension module, or None (not built, or ``KDISSECT_PURE`` set)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from .. import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _native


def compiled(name: str) -> Callable[..., Any] | None:
    """A function of the extension by name, or None (not built, too old to have it, or
    ``KDISSECT_PURE`` set): its caller then runs the pure-Python reference."""
    ext = extension()
    return getattr(ext, name, None) if ext is not None else None
