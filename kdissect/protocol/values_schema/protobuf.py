"""Protobuf binary against a descriptor, located: every field occurrence keeps its span.

The schema is a ``ProtoSchema``: the messages and enums of a FileDescriptorSet
(``google.protobuf.descriptor_pb2``, parsed by the protobuf library) indexed by full
name. Values follow the protobuf library's reading (last scalar wins, repeated fields and
maps gather; enum values as their names), so it serves as the oracle in tests.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ..node import Node
from .common import Cursor, Mismatch

_FIXED64 = {1: ("<d", "double"), 6: ("<Q", "fixed64"), 16: ("<q", "sfixed64")}
_FIXED32 = {2: ("<f", "float"), 7: ("<I", "fixed32"), 15: ("<i", "sfixed32")}
_VARINT = {
    3: "int64",
    4: "uint64",
    5: "int32",
    8: "bool",
    13: "uint32",
    14: "enum",
    17: "sint32",
    18: "sint64",
}
_WIRE = {
    **{t: 0 for t in _VARINT},
    **{t: 1 for t in _FIXED64},
    **{t: 5 for t in _FIXED32},
    9: 2,
    11: 2,
    12: 2,
}
_REPEATED = 3  # FieldDescriptorProto.LABEL_REPEATED


@dataclass
class ProtoSchema:
    """The message types of one schema (its file and the files it imports)."""

    messages: dict[str, Any] = field(default_factory=dict)  # ".pkg.Msg" -> DescriptorProto
    enums: dict[str, Any] = field(default_factory=dict)  # ".pkg.E" -> EnumDescriptorProto
    top: list[str] = field(default_factory=list)  # the main file's top-level messages, in order
    # made once per message or enum type, not per occurrence: a repeated field of a
    # message of 3,000 fields rebuilt its index per element (160 KB: 42 CPU-s)
    _fields: dict[str, dict[int, Any]] = field(default_factory=dict, repr=False, compare=False)
    _names: dict[str, dict[int, str]] = field(default_factory=dict, repr=False, compare=False)

    def fields_of(self, message: str) -> dict[int, Any] | None:
        """``message``'s fields by number (None: the schema has no such message)."""
        fields = self._fields.get(message)
        if fields is None:
            desc = self.messages.get(message)
            if desc is None:
                return None
            fields = self._fields[message] = {f.number: f for f in desc.field}
        return fields

    def enum_names(self, enum: str) -> dict[int, str]:
        """The names of ``enum``'s values by number (empty if the schema lacks it)."""
        names = self._names.get(enum)
        if names is None:
            desc = self.enums.get(enum)
            names = self._names[enum] = (
                {e.number: e.name for e in desc.value} if desc is not None else {}
            )
        return names

    def message_for(self, indexes: list[int]) -> str:
        """The full name Confluent's message-index path picks (``[0]``: the first)."""
        if not indexes or not self.top or not 0 <= indexes[0] < len(self.top):
            raise KeyError(f"message index {indexes} is not in the schema")
        name = self.top[indexes[0]]
        for i in indexes[1:]:
            nested = self.messages[name].nested_type
            if not 0 <= i < len(nested):
                raise KeyError(f"message index {indexes} is not in the schema")
            name = f"{name}.{nested[i].name}"
        return name


def from_file_set(fds: Any, main: str | None = None) -> ProtoSchema:
    """Index a ``FileDescriptorSet``; ``main`` names the schema's own file (default: the
    last, which protoc writes after its imports)."""
    out = ProtoSchema()

    def add(prefix: str, msg: Any) -> None:
        name = f"{prefix}.{msg.name}"
        out.messages[name] = msg
        for e in msg.enum_type:
            out.enums[f"{name}.{e.name}"] = e
        for n in msg.nested_type:
            add(name, n)

    files = list(fds.file)
    for f in files:
        prefix = f".{f.package}" if f.package else ""
        for e in f.enum_type:
            out.enums[f"{prefix}.{e.name}"] = e
        for m in f.message_type:
            add(prefix, m)
    own = next((f for f in files if f.name == main), files[-1] if files else None)
    if own is not None:
        prefix = f".{own.package}" if own.package else ""
        out.top = [f"{prefix}.{m.name}" for m in own.message_type]
    return out


def decode(
    cur: Cursor, schema: ProtoSchema, message: str, parent: Node, name: str, end: int | None = None
) -> Node:
    """Read the fields of ``message`` up to ``end`` (default: the cursor's end)."""
    cur.charge()
    fields = schema.fields_of(message)
    if fields is None:
        raise Mismatch(cur.pos, f"schema has no message {message}")
    stop = cur.end if end is None else end
    node = parent.add(Node(name, "struct", cur.pos, note=message.lstrip(".")))
    repeated: dict[int, Node] = {}
    singular: dict[int, int] = {}  # field number -> its node's index in node.children
    keys: dict[int, dict[str, int]] = {}  # map field -> key -> its entry's index
    cur.enter()
    try:
        while cur.pos < stop:
            tag_at = cur.pos
            key = cur.uvarint("field tag")
            number, wire = key >> 3, key & 7
            if number == 0:
                raise Mismatch(tag_at, "field number 0 is not allowed")
            f = fields.get(number)
            if f is None:
                _unknown(cur, node, number, wire, tag_at, stop)
                continue
            if f.label == _REPEATED:
                holder = repeated.get(number)
                if holder is None:
                    entry = schema.messages.get(f.type_name)
                    is_map = entry is not None and entry.options.map_entry
                    holder = node.add(
                        Node(
                            f.name,
                            "struct" if is_map else "array",
                            tag_at,
                            value=None if is_map else 0,
                        )
                    )
                    repeated[number] = holder
                if f.type == 11 and holder.ktype == "struct":
                    _map_entry(
                        cur, schema, f, wire, holder, keys.setdefault(number, {}), tag_at, stop
                    )
                elif wire == 2 and _WIRE.get(f.type) in (0, 1, 5):
                    _packed(cur, schema, f, holder, stop)
                else:
                    _field(cur, schema, f, wire, holder, f"[{holder.value}]", tag_at, stop)
                    holder.value += 1
                holder.length = cur.pos - holder.offset
            else:
                _field(cur, schema, f, wire, node, f.name, tag_at, stop)
                at = singular.get(number)
                if at is None:
                    singular[number] = len(node.children) - 1
                else:  # a later occurrence wins
                    node.supersede(at)
        if cur.pos != stop:
            raise Mismatch(cur.pos, "a field runs past the end of its message")
    finally:
        node.length = cur.pos - node.offset
        cur.leave()
    return node


def _field(
    cur: Cursor,
    schema: ProtoSchema,
    f: Any,
    wire: int,
    parent: Node,
    name: str,
    tag_at: int,
    stop: int,
) -> Node:
    want = _WIRE.get(f.type)
    if want is None:
        raise Mismatch(tag_at, f"field {f.name}: groups are not supported")
    if wire != want:
        raise Mismatch(
            tag_at, f"field {f.name} (#{f.number}) has wire type {wire}, its type needs {want}"
        )
    cur.charge()
    if want == 2:
        n = cur.uvarint(f"{f.name} length")
        if n > stop - cur.pos:
            raise Mismatch(tag_at, f"field {f.name} says {n} bytes, {stop - cur.pos} left")
        if f.type == 11:
            node = decode(cur, schema, f.type_name, parent, name, cur.pos + n)
            node.offset = tag_at
            node.length = cur.pos - tag_at
            return node
        raw = cur.take(n, f.name)
        value: Any = raw
        kind = "bytes"
        if f.type == 9:
            kind = "string"
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Mismatch(tag_at, f"field {f.name} is not UTF-8 ({e.reason})") from None
        return parent.add(Node(name, kind, tag_at, cur.pos - tag_at, value))
    value, kind, note = _scalar(cur, schema, f, stop)
    return parent.add(Node(name, kind, tag_at, cur.pos - tag_at, value, note=note))


def _scalar(cur: Cursor, schema: ProtoSchema, f: Any, stop: int) -> tuple[Any, str, str | None]:
    if f.type in _FIXED64 or f.type in _FIXED32:
        fmt, kind = _FIXED64.get(f.type) or _FIXED32[f.type]
        size = 8 if f.type in _FIXED64 else 4
        if size > stop - cur.pos:
            raise Mismatch(cur.pos, f"field {f.name} needs {size} bytes")
        return struct.unpack(fmt, cur.take(size, f.name))[0], kind, None
    kind = _VARINT[f.type]
    v = cur.uvarint(f.name)
    if cur.pos > stop:
        raise Mismatch(cur.pos, f"field {f.name} runs past its message")
    if kind in ("int64", "enum", "int32"):
        v = v - (1 << 64) if v >= 1 << 63 else v
        if kind != "int64":
            v = ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    elif kind == "uint32":
        v &= 0xFFFFFFFF
    elif kind in ("sint32", "sint64"):
        v = (v >> 1) ^ -(v & 1)
    elif kind == "bool":
        v = v != 0
    if kind == "enum":
        names = schema.enum_names(f.type_name)
        if v in names:
            return names[v], kind, f"{f.type_name.lstrip('.')} = {v}"
    return v, kind, None


def _packed(cur: Cursor, schema: ProtoSchema, f: Any, holder: Node, stop: int) -> None:
    n = cur.uvarint(f"{f.name} length")
    end = cur.pos + n
    if end > stop:
        raise Mismatch(cur.pos, f"packed field {f.name} says {n} bytes, {stop - cur.pos} left")
    while cur.pos < end:
        cur.charge()
        at = cur.pos
        value, kind, note = _scalar(cur, schema, f, end)
        holder.add(Node(f"[{holder.value}]", kind, at, cur.pos - at, value, note=note))
        holder.value += 1


def _map_entry(
    cur: Cursor,
    schema: ProtoSchema,
    f: Any,
    wire: int,
    holder: Node,
    keys: dict[str, int],
    tag_at: int,
    stop: int,
) -> None:
    """One entry of a map field; ``keys`` (the map's keys so far -> their index in
    ``holder``) lets a later entry of a key replace the earlier one in constant time."""
    scratch = Node("entry", "struct", tag_at)
    entry = _field(cur, schema, f, wire, scratch, "entry", tag_at, stop)
    key, value = entry.child("key"), entry.child("value")
    label = "" if key is None else str(key.value)
    if value is None:  # proto3 leaves a default value out
        holder.add(Node(label, "unset", tag_at, entry.length))
    else:
        value.name, value.offset, value.length = label, tag_at, entry.length
        holder.add(value)
    at = keys.get(label)
    if at is None:
        keys[label] = len(holder.children) - 1
    else:
        holder.supersede(at)


def _unknown(cur: Cursor, node: Node, number: int, wire: int, tag_at: int, stop: int) -> None:
    """A field the descriptor does not know: kept, located, as raw bytes."""
    cur.charge()
    if wire == 0:
        cur.uvarint(f"field #{number}")
    elif wire == 1:
        cur.take(8, f"field #{number}")
    elif wire == 5:
        cur.take(4, f"field #{number}")
    elif wire == 2:
        cur.take(cur.uvarint(f"field #{number} length"), f"field #{number}")
    else:
        raise Mismatch(tag_at, f"field #{number} has wire type {wire} (groups are not supported)")
    if cur.pos > stop:
        raise Mismatch(tag_at, f"field #{number} runs past its message")
    node.add(
        Node(
            f"_unknown_{number}",
            "raw",
            tag_at,
            cur.pos - tag_at,
            cur.buf[tag_at : cur.pos],
            note=f"field #{number} the schema does not know",
        )
    )
