"""JSON text, located: objects, arrays and scalars each keep their byte span. Values are
what ``json.loads`` returns (it is the oracle in tests)."""

from __future__ import annotations

import re
import sys

# CPython's JSON string scanner (C-accelerated); typeshed does not declare it
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from ..node import Node
from .common import Cursor, Mismatch

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_SPACE = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}
# Python's own bound on int(str) (quadratic past it): json.loads refuses longer integers
_MAX_DIGITS = sys.get_int_max_str_digits() or 4300


def _skip_space(text: str, i: int) -> int:
    """The index after the white space starting at ``i``."""
    m = _SPACE.match(text, i)
    return i if m is None else m.end()  # never None: the pattern matches ""


def decode(cur: Cursor, parent: Node, name: str) -> Node:
    """Parse the JSON text ``cur.buf[cur.pos:cur.end]`` (UTF-8); one value, then only
    white space. Raises Mismatch where the text stops being JSON."""
    raw = cur.buf[cur.pos : cur.end]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Mismatch(cur.pos + e.start, f"not UTF-8 ({e.reason})") from None
    base = cur.pos
    if len(text) == len(raw):

        def at(i: int) -> int:
            return base + i
    else:  # characters to byte offsets, computed once
        starts = [0] * (len(text) + 1)
        b = 0
        for i, ch in enumerate(text):
            starts[i] = b
            b += len(ch.encode("utf-8"))
        starts[len(text)] = b

        def at(i: int) -> int:
            return base + starts[i]

    parser = _Parser(text, at, cur)
    i = _skip_space(text, 0)
    node, i = parser.value(i, parent, name)
    i = _skip_space(text, i)
    cur.pos = at(i)
    return node


class _Parser:
    def __init__(self, text: str, at: Any, cur: Cursor):
        self.text, self.at, self.cur = text, at, cur

    def fail(self, i: int, reason: str) -> Mismatch:
        return Mismatch(self.at(i), reason)

    def value(self, i: int, parent: Node, name: str) -> tuple[Node, int]:
        text, cur = self.text, self.cur
        cur.charge()
        if i >= len(text):
            raise self.fail(i, "JSON ends where a value should start")
        ch = text[i]
        if ch == "{" or ch == "[":
            return self.container(i, parent, name, ch == "{")
        if ch == '"':
            try:
                s, j = scanstring(text, i + 1)
            except ValueError as e:
                raise self.fail(i, f"bad JSON string: {e.args[0].split(':')[0]}") from None
            return self._leaf(parent, name, "string", i, j, s), j
        m = _NUMBER.match(text, i)
        if m and m.end() > i:
            s = m.group(0)
            if not (m.group(1) or m.group(2)) and len(s) > _MAX_DIGITS:
                raise self.fail(
                    i, f"an integer of {len(s)} digits (json.loads takes at most {_MAX_DIGITS})"
                )
            v: Any = float(s) if m.group(1) or m.group(2) else int(s)
            return self._leaf(parent, name, "number", i, m.end(), v), m.end()
        for word, v in _LITERALS.items():
            if text.startswith(word, i):
                kind = "null" if v is None else "boolean"
                return self._leaf(parent, name, kind, i, i + len(word), v), i + len(word)
        raise self.fail(i, f"not JSON: unexpected {ch!r}")

    def _leaf(self, parent: Node, name: str, kind: str, i: int, j: int, v: Any) -> Node:
        start = self.at(i)
        return parent.add(Node(name, kind, start, self.at(j) - start, v))

    def container(self, i: int, parent: Node, name: str, is_object: bool) -> tuple[Node, int]:
        text, cur = self.text, self.cur
        node = parent.add(
            Node(
                name, "struct" if is_object else "array", self.at(i), value=None if is_object else 0
            )
        )
        close = "}" if is_object else "]"
        cur.enter()
        seen: dict[str, int] = {}  # this object's keys -> their child's index
        i = _skip_space(text, i + 1)
        try:
            if text.startswith(close, i):
                return node, i + 1
            while True:
                if is_object:
                    if not text.startswith('"', i):
                        raise self.fail(i, "JSON object key must be a string")
                    try:
                        key, i = scanstring(text, i + 1)
                    except ValueError:
                        raise self.fail(i, "bad JSON string") from None
                    i = _skip_space(text, i)
                    if not text.startswith(":", i):
                        raise self.fail(i, "JSON object needs ':' after a key")
                    i = _skip_space(text, i + 1)
                    at = seen.get(key)
                    _, i = self.value(i, node, key)
                    if at is None:
                        seen[key] = len(node.children) - 1
                    else:  # json.loads keeps the last, in the first's place
                        node.supersede(at)
                else:
                    _, i = self.value(i, node, f"[{node.value}]")
                    node.value += 1
                i = _skip_space(text, i)
                if text.startswith(",", i):
                    i = _skip_space(text, i + 1)
                    continue
                if text.startswith(close, i):
                    return node, i + 1
                raise self.fail(
                    i, f"JSON {'object' if is_object else 'array'} needs ',' or '{close}'"
                )
        finally:
            node.length = self.at(min(i + 1, len(text))) - node.offset
            cur.leave()
