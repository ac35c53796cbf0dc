"""Strings from the input (client ids, topic names, group and member ids, file names)
made safe for a text line: control characters -- C0 (newlines, ESC), DEL and C1 -- are
written as ``\\xNN`` escapes, so a hostile client id can neither forge a line nor send a
terminal escape sequence (title changes, colours, cursor moves). JSON lines keep the
true string (JSON escapes it)."""

from __future__ import annotations

_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def printable(text: str) -> str:
    """``text`` with its control characters escaped (unchanged, and fast, when it has
    none: the common case)."""
    if text.isprintable():
        return text
    return text.translate(_ESCAPES)
