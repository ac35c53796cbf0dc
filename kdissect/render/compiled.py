"""The render layer's compiled helpers (``kdissect._native``, built from native/ when a
Rust compiler was at hand at install time): a function by name, or None when it was
not built or ``KDISSECT_PURE=1`` asks for the pure-Python references."""

from __future__ import annotations

import os
from collections.abc import Callable


def compiled(name: str) -> Callable | None:
    if os.environ.get("KDISSECT_PURE", "") not in ("", "0"):
        return None
    try:
        from .. import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(_native, name, None)
