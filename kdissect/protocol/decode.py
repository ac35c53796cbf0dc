"""Walk a layout over bytes and build the field tree.

Tolerance: the first field that cannot be read is marked with the problem and covers
every byte that remains, and decoding of that region stops (``Abort``). Regions whose
size is known in advance (tagged fields, record batches) recover after a failure.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from .context import Abort, Decoding, charge_nodes, fail
from .layout import Field, Struct
from .node import Node
from .reader import DecodeError, Reader
from .wire import TYPES, codec, length


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Trees are acyclic (reference counting frees them), but building one allocates
    so many objects that the cyclic collector would rescan the growing tree again and
    again: pausing it halves decode time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_struct(
    r: Reader, st: Struct, name: str, ctx: Decoding, parent: Node | None = None
) -> Node:
    """Decode a struct; it joins ``parent`` first, so a failure inside stays visible."""
    node = Node(name, "struct", r.pos)
    if parent is not None:
        parent.add(node)
    _fill(r, st, node, ctx)
    return node


def _fill(r: Reader, st: Struct, node: Node, ctx: Decoding) -> None:
    """Read ``st``'s fields (and tagged section) into ``node``, which ends where they do."""
    try:
        for f in st.fields:
            read_field(r, f, st.flexible, node, ctx)
        if st.flexible:
            read_tagged(r, st, node, ctx)
    finally:
        node.length = r.pos - node.offset


def read_field(r: Reader, f: Field, flexible: bool, parent: Node, ctx: Decoding) -> Node:
    if f.array:
        return _read_array(r, f, flexible, parent, ctx)
    compact = flexible if f.compact is None else f.compact
    if f.type == "struct":
        if f.nullable:
            return _read_nullable_struct(r, f, parent, ctx)
        assert f.struct is not None, "a struct field has its layout"
        return read_struct(r, f.struct, f.name, ctx, parent)
    return read_value(r, f, f.name, compact, parent, ctx)


def read_value(r: Reader, f: Field, name: str, compact: bool, parent: Node, ctx: Decoding) -> Node:
    node = parent.add(Node(name, f.type, r.pos))
    try:
        c = TYPES.get(f.type) or codec(f.type)  # codec() raises for unknown types
        if c.plain is not None:
            node.value = c.plain(r)
        elif c.read is not None:
            c.read(r, f, compact, node, ctx)
    except DecodeError as e:
        raise fail(r, node, str(e), e.code) from None
    node.length = r.pos - node.offset
    node.hint = f.hint
    return node


def _read_array(r: Reader, f: Field, flexible: bool, parent: Node, ctx: Decoding) -> Node:
    # the count follows the struct's flexibility; string/bytes elements may say otherwise
    compact = flexible
    elem_compact = flexible if f.compact is None else f.compact
    node = parent.add(Node(f.name, "array", r.pos))
    try:
        count_node = node.add(Node("_count", "uvarint" if compact else "int32", r.pos))
        try:
            n = length(r, compact, True)
        except DecodeError as e:
            raise fail(r, count_node, str(e), e.code) from None
        count_node.value = n
        count_node.length = r.pos - count_node.offset
        if n < -1:
            raise fail(r, count_node, f"array count {n} is negative", "bad_length")
        if n == -1:
            node.value = None
            return node
        if n > r.remaining:  # every element takes at least one byte
            raise fail(
                r,
                count_node,
                f"array count {n} exceeds the {r.remaining} bytes left",
                "array_past_end",
            )
        node.value = n
        elem = Field(f.name, f.type, nullable=f.nullable, struct=f.struct, hint=f.hint)
        # what one element costs in nodes (nested arrays charge their own elements)
        struct = f.struct if f.type == "struct" else None
        cost = 1 + (len(struct.fields) if struct is not None else 0)
        for i in range(n):
            charge_nodes(r, node, ctx, cost)
            if struct is not None:
                read_struct(r, struct, f"[{i}]", ctx, node)
            else:
                read_value(r, elem, f"[{i}]", elem_compact, node, ctx)
    finally:
        node.length = r.pos - node.offset
    return node


def _read_nullable_struct(r: Reader, f: Field, parent: Node, ctx: Decoding) -> Node:
    start = r.pos
    marker = Node("_present", "int8", start)
    try:
        flag = r.int8()
    except DecodeError as e:
        parent.add(marker)
        raise fail(r, marker, str(e), e.code) from None
    marker.value, marker.length = flag, 1
    # Kafka's generated readers: -1 is null; inside a tagged field, 0 is null too
    if flag < 0 or (flag == 0 and f.tag is not None):
        marker.name, marker.ktype, marker.value, marker.note = f.name, "struct", None, "null"
        parent.add(marker)
        return marker
    node = Node(f.name, "struct", start)
    parent.add(node)
    node.add(marker)
    assert f.struct is not None, "a struct field has its layout"
    _fill(r, f.struct, node, ctx)
    return node


def read_tagged(r: Reader, st: Struct, parent: Node, ctx: Decoding) -> Node:
    section = parent.add(Node("_tagged_fields", "tagged_fields", r.pos))
    try:
        count = section.add(Node("_count", "uvarint", r.pos))
        try:
            n = r.uvarint("tagged field count")
        except DecodeError as e:
            missing = r.remaining == 0
            raise fail(
                r,
                count,
                "tagged-field section missing at the end of a flexible structure"
                if missing
                else str(e),
                "missing_tag_trailer" if missing else e.code,
            ) from None
        count.value, count.length = n, r.pos - count.offset
        section.value = n
        if n > r.remaining:
            raise fail(
                r,
                count,
                f"tagged field count {n} exceeds the {r.remaining} bytes left",
                "array_past_end",
            )
        for _ in range(n):
            charge_nodes(r, section, ctx, 4)
            entry = section.add(Node("?", "tagged", r.pos))
            tag_node = entry.add(Node("_tag", "uvarint", r.pos))
            try:
                tag = r.uvarint("tag")
                tag_node.value, tag_node.length = tag, r.pos - tag_node.offset
                size_node = entry.add(Node("_size", "uvarint", r.pos))
                size = r.uvarint("tag size")
                size_node.value, size_node.length = size, r.pos - size_node.offset
                r.need(size, f"tagged field {tag}")
            except DecodeError as e:
                entry.length = r.end - entry.offset
                raise fail(r, entry.children[-1], str(e), e.code) from None
            known = st.tag_field(tag)
            entry.name = known.name if known else f"tag_{tag}"
            entry.value = tag
            end = r.pos + size
            if known is None:
                entry.add(Node(entry.name, "bytes", r.pos, size, r.raw(size)))
            else:
                sub = Reader(r.buf, r.pos, end)
                try:
                    read_field(sub, known, st.flexible, entry, ctx)
                    if sub.remaining:
                        entry.add(
                            Node(
                                "_unread",
                                "bytes",
                                sub.pos,
                                sub.remaining,
                                r.buf[sub.pos : end],
                                problem=f"tagged field {tag} has {sub.remaining} "
                                f"bytes its type does not use",
                                code="tagged_field_leftover",
                            )
                        )
                except Abort:
                    pass  # the field's node says what went wrong; go on after it
                r.pos = end
            entry.length = r.pos - entry.offset
    finally:
        section.length = r.pos - section.offset
    return section


def decode_body(
    buf: bytes, start: int, st: Struct, name: str, ctx: Decoding, whole: bool = True
) -> Node:
    """Decode ``buf[start:]`` as ``st`` (``whole``: bytes left over are a problem);
    never raises DecodeError/Abort."""
    node, _complete = decode_prefix(buf, start, st, name, ctx, whole)
    return node


def decode_prefix(
    buf: bytes, start: int, st: Struct, name: str, ctx: Decoding, whole: bool = False
) -> tuple[Node, bool]:
    """Like ``decode_body``; also says whether decoding reached the struct's end."""
    r = Reader(buf, start)
    node = Node(name, "struct", start)
    complete = True
    try:
        _fill(r, st, node, ctx)
    except Abort:
        complete = False
    if whole and r.remaining:
        node.add(
            Node(
                "_trailing",
                "bytes",
                r.pos,
                r.remaining,
                buf[r.pos :],
                problem=f"{r.remaining} byte{'s' if r.remaining != 1 else ''} after the end "
                f"of the {name}",
                code="trailing_bytes",
            )
        )
        node.length = len(buf) - start
    return node, complete
