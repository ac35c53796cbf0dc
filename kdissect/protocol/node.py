"""The field tree: every decoded value knows where its bytes are."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


# hint -> function(value) -> note: registered by the decoders, so a note (an ISO time,
# an error's name and meaning) is computed only when somebody looks at it
NOTE_MAKERS: dict[str, Callable[[Any], str | None]] = {}
_LEAF: tuple[Node, ...] = ()  # shared by every leaf until it gets a child


class Node:
    """One field of a decoded message.

    ``offset``/``length`` locate the field's bytes in the message, or, below a node
    whose ``buffer`` is set (decompressed records), in that buffer.
    ``problem`` is None for a clean field, else a human-readable reason; ``code`` is
    its registered finding code (``findings.REGISTRY``; None reads as malformed_field).
    ``note`` interprets the value (an error name, a time in UTC...); set it directly, or
    set ``hint`` to have it derived from the value on demand.
    ``secret`` marks bytes that are masked in displays unless secrets are shown.
    """

    __slots__ = (
        "name",
        "ktype",
        "offset",
        "length",
        "value",
        "children",
        "problem",
        "_note",
        "hint",
        "buffer",
        "secret",
        "code",
    )

    def __init__(
        self,
        name: str,
        ktype: str,
        offset: int,
        length: int = 0,
        value: Any = None,
        children: list[Node] | None = None,
        problem: str | None = None,
        note: str | None = None,
        code: str | None = None,
    ):
        self.name = name
        self.ktype = ktype
        self.offset = offset
        self.length = length
        self.value = value
        self.children: list[Node] | tuple[Node, ...] = children if children is not None else _LEAF
        self.problem = problem
        self._note = note
        self.hint: str | None = None
        self.buffer: bytes | None = None
        self.secret = False
        self.code = code

    @property
    def note(self) -> str | None:
        if self._note is None and self.hint is not None:
            maker = NOTE_MAKERS.get(self.hint)
            if maker is not None and self.value is not None:
                self._note = maker(self.value)
        return self._note

    @note.setter
    def note(self, text: str | None) -> None:
        self._note = text

    def __repr__(self) -> str:
        extra = f" problem={self.problem!r}" if self.problem else ""
        return (
            f"Node({self.name!r}, {self.ktype}, @{self.offset}+{self.length}, "
            f"value={self.value!r}{extra})"
        )

    @property
    def end(self) -> int:
        return self.offset + self.length

    def add(self, child: Node) -> Node:
        if isinstance(self.children, list):
            self.children.append(child)
        else:
            self.children = [child]
        return child

    def supersede(self, index: int) -> None:
        """The last child added takes the place of child ``index``: a later occurrence of
        a key replaces an earlier one where it stood (as ``json.loads`` keeps a dict's
        keys), in constant time (a search and removal per occurrence was quadratic)."""
        if isinstance(self.children, list):
            self.children[index] = self.children.pop()

    def child(self, name: str) -> Node | None:
        for c in self.children:
            if c.name == name:
                return c
        return None

    def walk(self) -> Iterator[Node]:
        """Depth-first, parents before children."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def path_to(self, target: Node) -> list[Node] | None:
        """The nodes from this one down to ``target`` (both included), or None."""
        path: list[Node] = []

        def visit(node: Node) -> bool:
            path.append(node)
            if node is target or any(visit(c) for c in node.children):
                return True
            path.pop()
            return False

        return path if visit(self) else None

    def own_leaves(self) -> Iterator[Node]:
        """The leaves located in this node's own buffer, in order: a node holding a
        decompressed buffer counts as a leaf here (its children live in that buffer)."""
        stack = [self]
        while stack:
            node = stack.pop()
            if node is not self and (node.buffer is not None or not node.children):
                if node.length > 0:
                    yield node
                continue
            stack.extend(reversed(node.children))

    def findings(self) -> list[tuple[str, str, str]]:
        """(path, code, reason) for every node with a problem, in tree order."""
        # a loop, not a recursive closure (the closure's reference to itself is a cycle
        # only the cyclic collector frees, one per call). A node's path is written only
        # when it has a problem: a big tree has millions of clean nodes, and formatting
        # each one's path was most of a budget-sized Fetch response's JSON line
        found: list[tuple[str, str, str]] = []
        stack: list[tuple[Node, tuple[Any, ...] | None]] = [(self, None)]
        pop, push = stack.pop, stack.append
        while stack:
            node, parent = pop()
            if node.problem:
                found.append(
                    (_path(node.name, parent), node.code or "malformed_field", node.problem)
                )
            children = node.children
            if children:
                here = (node.name, parent)  # the path as a chain, shared by siblings
                for c in reversed(children):
                    push((c, here))
        return found

    def problems(self) -> list[tuple[str, str]]:
        """(path, reason) for every node with a problem."""
        return [(path, reason) for path, _, reason in self.findings()]

    def find(self, name: str) -> Iterator[Node]:
        return (n for n in self.walk() if n.name == name)

    def plain(self) -> Any:
        """The decoded values as plain Python data (dicts, lists, scalars); bookkeeping
        nodes (names starting with ``_``: counts, length prefixes) are left out and known
        tagged fields appear beside the struct's other fields."""
        kind = self.ktype
        if kind == "array":
            return None if self.value is None else [c.plain() for c in self._data_children()]
        if kind == "records":
            if self.value is None or isinstance(self.value, bytes):
                return self.value  # null, or left undecoded
            return [c.plain() for c in self._data_children()]
        if kind == "struct" and self.note == "null" and not self.children:
            return None  # a nullable struct's -1 marker
        if kind == "tagged":
            return self.children[-1].plain() if self.children else None
        if (
            kind in ("struct", "message", "record", "record_batch")
            or kind.startswith("message_v")
            or self.children
        ):
            out: dict[str, Any] = {}
            for c in self.children:
                if c.ktype == "tagged_fields":
                    for t in c.children:
                        if t.ktype == "tagged":
                            out[t.name] = t.plain()
                elif not c.name.startswith("_"):
                    out[c.name] = c.plain()
            return out
        return self.value

    def _data_children(self) -> list[Node]:
        return [c for c in self.children if not c.name.startswith("_")]

    def to_json(self, show_secrets: bool = False) -> dict[str, Any]:
        """The tree as JSON-ready dicts (see docs/guide/json.md)."""
        out = self._json_fields(show_secrets)
        if self.children:
            out["children"] = [c.to_json(show_secrets) for c in self.children]
        return out

    def iter_json(
        self, show_secrets: bool = False, level: int = 0, chunk: int = 1 << 16
    ) -> Iterator[str]:
        """``to_json`` as indented JSON text, in pieces of about ``chunk`` characters: a
        tree of a million fields is written without its million dicts existing at once."""
        import json
        from json.encoder import encode_basestring_ascii as quote

        dumps = json.JSONEncoder(default=str).encode

        def value(v: Any) -> str:  # the common types without the encoder's setup
            kind = type(v)
            if kind is str:
                return quote(v)
            if kind is int:
                return int.__repr__(v)
            return dumps(v)

        parts: list[str] = []
        size = 0
        # a stack of (node, level, last sibling?) to open, and closing texts (str)
        stack: list[Any] = [(self, level, True)]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                parts.append(item)
                size += len(item)
            else:
                node, depth, last = item
                inner = "  " * (depth + 1)
                fields = node._json_fields(show_secrets)
                text = ",".join(f'\n{inner}"{k}": {value(v)}' for k, v in fields.items())
                comma = "" if last else ","
                if node.children:
                    parts.append(f'{{{text},\n{inner}"children": [')
                    stack.append(f"\n{inner}]\n{'  ' * depth}}}{comma}")
                    n = len(node.children)
                    for i in range(n - 1, -1, -1):
                        stack.append((node.children[i], depth + 2, i == n - 1))
                        stack.append(f"\n{inner}  ")
                else:
                    parts.append(f"{{{text}\n{'  ' * depth}}}{comma}")
                size += len(parts[-1])
            if size >= chunk:
                yield "".join(parts)
                parts, size = [], 0
        yield "".join(parts)

    def _json_fields(self, show_secrets: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.ktype,
            "offset": self.offset,
            "length": self.length,
        }
        value = self.value
        if self.secret and not show_secrets:
            value = "<redacted>"
        elif isinstance(value, (bytes, bytearray, memoryview)):
            value = {"hex": bytes(value).hex()}
        if value is not None or self.ktype not in ("struct", "array", "message", "records"):
            out["value"] = value
        if self.note:
            out["note"] = self.note
        if self.problem:
            out["problem"] = self.problem
            out["code"] = self.code or "malformed_field"
        if self.buffer is not None:
            out["decompressed_length"] = len(self.buffer)
        return out


def _path(name: str, parent: tuple[Any, ...] | None) -> str:
    """The dotted path from a chain of (name, parent) links; an empty name adds no dot
    where nothing precedes it (as paths always read)."""
    names = [name]
    while parent is not None:
        names.append(parent[0])
        parent = parent[1]
    path = ""
    for n in reversed(names):
        path = f"{path}.{n}" if path else n
    return path
