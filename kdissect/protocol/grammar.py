"""Layouts written in the BNF notation of Kafka's protocol guide.

    Metadata Response (Version: 0) => [brokers] [topics]
      brokers => node_id host port
        node_id => INT32
      ...

A rule's right-hand side is either one type (``INT32``, ``COMPACT_STRING``...) or a
sequence of items, which makes it a struct. Items: ``name`` (a field), ``[name]`` (an
array), ``TAG_BUFFER`` (the struct is flexible: tagged fields follow). Names resolve in
the rules indented under the current one, then under its ancestors, then at the top
level, so the guide's nested, indented layout and flat grammars (``Broker => NodeId Host
Port`` on its own line) both work. kdissect's extensions, for what the guide cannot say:
``?name`` a nullable struct (int8 -1/1 marker), ``?[name]`` a nullable array (length -1
is null), ``name@N`` (or ``[name]@N``) a tagged field with tag N.
Lines starting with ``#`` are comments.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .layout import Field, Struct, default_hint
from .plain import Compared, Plain

# type token -> (wire type, nullable, compact)
TYPES: dict[str, tuple[str, bool, bool | None]] = {
    "BOOLEAN": ("bool", False, None),
    "BOOL": ("bool", False, None),
    "INT8": ("int8", False, None),
    "INT16": ("int16", False, None),
    "INT32": ("int32", False, None),
    "INT64": ("int64", False, None),
    "UINT16": ("uint16", False, None),
    "UINT32": ("uint32", False, None),
    "VARINT": ("varint", False, None),
    "VARLONG": ("varlong", False, None),
    "UNSIGNED_VARINT": ("uvarint", False, None),
    "UVARINT": ("uvarint", False, None),
    "UUID": ("uuid", False, None),
    "FLOAT64": ("float64", False, None),
    "STRING": ("string", False, False),
    "NULLABLE_STRING": ("string", True, False),
    "COMPACT_STRING": ("string", False, True),
    "COMPACT_NULLABLE_STRING": ("string", True, True),
    "BYTES": ("bytes", False, False),
    "NULLABLE_BYTES": ("bytes", True, False),
    "COMPACT_BYTES": ("bytes", False, True),
    "COMPACT_NULLABLE_BYTES": ("bytes", True, True),
    "RECORDS": ("records", True, False),
    "COMPACT_RECORDS": ("records", True, True),
}

_HEADER = re.compile(
    r"^(?P<api>[A-Za-z0-9]+) (?P<dir>[A-Za-z]+) "
    r"\(Version: (?P<ver>\d+)\)$"
)
_ITEM = re.compile(
    r"(?P<optarr>\?)?\[\s*(?P<arr>[A-Za-z_][\w.]*)\s*\](?:@(?P<atag>\d+))?"
    r"|(?P<opt>\?)?(?P<name>[A-Za-z_][\w.]*)(?:@(?P<tag>\d+))?"
)


MAX_DEPTH = 64  # structs inside structs: deeper grammars are refused, so decoding and
# rendering (which recurse per level) stay far from Python's stack limit


class GrammarError(ValueError):
    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line


class _Rule(Plain):
    """One rule line, in its place among the others (shown without its relatives)."""

    __slots__ = ("lhs", "rhs", "line", "indent", "parent", "children")
    _fields = ("lhs", "rhs", "line", "indent")

    def __init__(self, lhs: str, rhs: str, line: int, indent: int, parent: _Rule | None = None):
        self.lhs, self.rhs, self.line, self.indent, self.parent = lhs, rhs, line, indent, parent
        self.children: dict[str, _Rule] = {}


class Grammar(Compared):
    """A parsed grammar: its first rule's layout and the messages it names."""

    _fields = ("root", "messages")

    def __init__(
        self, root: Struct, messages: dict[tuple[str, str, int], Struct]
    ):  # (api name, "request"/"response"..., version)
        self.root, self.messages = root, messages


def parse_grammar(text: str) -> Grammar:
    rules = _read_rules(text)
    top = {r.lhs: r for r in rules if r.parent is None}
    if not rules:
        raise GrammarError(1, "no rules found; expected lines like 'Message => field1 [field2]'")
    cache: dict[int, Struct] = {}

    def resolve(name: str, scope: _Rule | None, line: int) -> _Rule:
        rule = scope
        while rule is not None:
            if name in rule.children:
                return rule.children[name]
            rule = rule.parent
        if name in top:
            return top[name]
        raise GrammarError(
            line, f"'{name}' is used but never defined (expected a line '{name} => TYPE or fields')"
        )

    def build(rule: _Rule, stack: tuple[int, ...]) -> Struct:
        if id(rule) in cache:
            return cache[id(rule)]
        if id(rule) in stack:
            raise GrammarError(rule.line, f"'{rule.lhs}' contains itself")
        if len(stack) >= MAX_DEPTH:
            raise GrammarError(
                rule.line,
                f"'{rule.lhs}' is nested more than {MAX_DEPTH} "
                f"structs deep; kdissect decodes at most that",
            )
        items = rule.rhs.split()
        flexible = "TAG_BUFFER" in items
        fields: list[Field] = []
        pos = 0
        text_rhs = rule.rhs
        while pos < len(text_rhs):
            if text_rhs[pos].isspace():
                pos += 1
                continue
            if text_rhs.startswith("TAG_BUFFER", pos):
                pos += len("TAG_BUFFER")
                continue
            m = _ITEM.match(text_rhs, pos)
            if not m:
                what = text_rhs[pos:].split()[0]
                raise GrammarError(
                    rule.line,
                    f"unexpected '{what}'; expected a field "
                    f"name, [name], ?name, ?[name], name@TAG or TAG_BUFFER",
                )
            pos = m.end()
            name = m.group("arr") or m.group("name")
            try:
                target = resolve(name, rule, rule.line)
            except GrammarError:
                if name.upper() in TYPES:
                    raise GrammarError(
                        rule.line,
                        f"type {name} used as a field; give it a name ('my_field => {name}')",
                    ) from None
                raise
            fields.append(
                _field_for(
                    name,
                    target,
                    array=m.group("arr") is not None,
                    nullable_struct=bool(m.group("opt")),
                    nullable_array=bool(m.group("optarr")),
                    tag=_number(m["tag"] or m["atag"], rule.line, "tag", 2**31 - 1)
                    if (m["tag"] or m["atag"])
                    else None,
                    build=lambda t: build(t, stack + (id(rule),)),
                )
            )
        st = Struct(
            rule.lhs,
            tuple(f for f in fields if f.tag is None),
            tuple(f for f in fields if f.tag is not None),
            flexible,
        )
        cache[id(rule)] = st
        return st

    messages = {}
    for r in rules:
        if r.parent is None:
            m = _HEADER.match(r.lhs)
            if m:
                version = _number(m["ver"], r.line, "version", 2**15 - 1)
                messages[(m["api"], m["dir"].lower(), version)] = build(r, ())
    return Grammar(build(rules[0], ()), messages)


def message_headers(text: str) -> list[tuple[str, str, int]]:
    """(api name, direction, version) of each message rule at the left margin, read from
    its header line alone (``Produce Request (Version: 0) => ...``): which messages a
    well-formed table defines, without building any layout."""
    out = []
    for raw in text.splitlines():
        if raw[:1].isspace() or "=>" not in raw:
            continue
        m = _HEADER.match(raw.split("=>", 1)[0].strip())
        if m:
            out.append((m["api"], m["dir"].lower(), int(m["ver"])))
    return out


def _number(digits: str, line: int, what: str, limit: int) -> int:
    """A version or tag number, refused beyond what the wire can carry (int16 versions,
    int32 tags) before int() meets thousands of digits."""
    if len(digits.lstrip("0")) > len(str(limit)) or int(digits) > limit:
        raise GrammarError(
            line,
            f"{what} {digits[:12]}{'…' if len(digits) > 12 else ''} "
            f"is out of range (at most {limit})",
        )
    return int(digits)


def _field_for(
    name: str,
    target: _Rule,
    array: bool,
    nullable_struct: bool,
    tag: int | None,
    build: Callable[[_Rule], Struct],
    nullable_array: bool = False,
) -> Field:
    token = target.rhs.strip()
    spec = TYPES.get(token.upper()) if " " not in token else None
    if spec is not None:
        if nullable_struct:
            raise GrammarError(
                target.line, f"'?{name}' marks a nullable struct, but {name} is {token}"
            )
        wire, nullable, compact = spec
        return Field(
            name,
            wire,
            array=array,
            nullable=nullable or nullable_array,
            tag=tag,
            compact=compact,
            hint=default_hint(name, wire),
        )
    return Field(
        name,
        "struct",
        array=array,
        nullable=nullable_struct or nullable_array,
        tag=tag,
        struct=build(target),
    )


def _read_rules(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    stack: list[_Rule] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if "=>" not in stripped:
            raise GrammarError(lineno, f"expected 'name => definition', found {stripped!r}")
        lhs, rhs = (s.strip() for s in stripped.split("=>", 1))
        if not lhs:
            raise GrammarError(lineno, "missing rule name before '=>'")
        if not rhs:
            raise GrammarError(
                lineno,
                f"'{lhs} =>' has no definition; expected a type "
                f"(INT32, STRING, ...) or field names",
            )
        if not (_HEADER.match(lhs) or re.fullmatch(r"[A-Za-z_][\w.]*", lhs)):
            raise GrammarError(
                lineno,
                f"bad rule name {lhs!r}; expected a name like "
                f"'Broker' or 'Metadata Response (Version: 0)'",
            )
        if "|" in rhs:
            raise GrammarError(
                lineno, "unexpected '|': alternatives are not supported; write one rule per message"
            )
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1].indent >= indent:
            stack.pop()
        rule = _Rule(lhs, rhs, lineno, indent, stack[-1] if stack else None)
        if rule.parent is not None:
            rule.parent.children.setdefault(lhs, rule)
        rules.append(rule)
        stack.append(rule)
    return rules
