"""The compiled extension (``kdissect._native``, built from native/ in Rust when a Rust
compiler is at hand at install time) as every compiled path finds it: the packet path
(capture/native.py), the message values (values_native.py) and the Avro reader. One
switch turns them all off: ``KDISSECT_PURE=1`` runs the pure-Python references."""

from __future__ import annotations

import os
import sys
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


# (module, global, function, fallback): the compiled functions modules hold as globals
# for speed (a lookup per call costs ~1-3 µs), chosen again by refresh()
_BOUND: list[tuple[str, str, str, Any]] = []


def bind(module: str, name: str, function: str, fallback: Any = None) -> Any:
    """``compiled(function)``, else ``fallback``, for a module to keep as its global
    ``name``; ``refresh()`` chooses again, so ``KDISSECT_PURE`` set in a running process
    (a test, an embedding program) reaches these functions at the next run's start."""
    _BOUND.append((module, name, function, fallback))
    return compiled(function) or fallback


# the extension as chosen at import and by the last refresh(): what modules make and
# keep per message kind (compiled readers, facts plans) is made from it, and forgotten
# when refresh() chooses otherwise
_CHOSEN: list[Any | None] = [extension()]
_FORGET: list[Callable[[], None]] = []


def chosen() -> Any | None:
    """The extension module as the running program chose it (at import, then as each
    run starts: ``refresh``), or None: for what a module makes once and keeps."""
    return _CHOSEN[0]


def forget_on_change(forget: Callable[[], None]) -> None:
    """Have ``refresh()`` call ``forget`` when it chooses otherwise than before
    (``KDISSECT_PURE`` set or cleared in a running process), so that a module's cache
    of what it made from ``chosen()`` is made again."""
    _FORGET.append(forget)


def refresh() -> None:
    """Choose every bound function again (``KDISSECT_PURE`` read anew): called as a run
    starts (``stream.engine.Engine``, ``sources.logunits.walk``)."""
    for module, name, function, fallback in _BOUND:
        held = sys.modules.get(module)
        if held is not None:
            setattr(held, name, compiled(function) or fallback)
    now = extension()
    if (now is None) != (_CHOSEN[0] is None):
        _CHOSEN[0] = now
        for forget in _FORGET:
            forget()
