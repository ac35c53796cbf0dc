"""What unframed bytes without a schema look like: JSON, UTF-8 text, Protobuf wire
format, or unknown; and how sure that is. The guess is a note and a ``guessed`` tree,
never a finding (the bytes are not wrong, only unexplained)."""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import Budget
from ..node import Node
from . import jsonv
from .common import Cursor, Mismatch, OutOfBudget


@dataclass
class Guess:
    kind: str  # json, text, protobuf, binary
    confidence: str  # certain, likely, possible, none
    tree: Node | None

    @property
    def summary(self) -> str:
        what = {
            "json": "JSON",
            "text": "UTF-8 text",
            "protobuf": "Protobuf wire format",
            "binary": "binary",
        }[self.kind]
        if self.kind == "binary":
            return "binary, format unknown (no schema)"
        return f"looks like {what} ({self.confidence}; no schema)"


def guess(buf: bytes, pos: int, end: int, budget: Budget | None) -> Guess:
    data = buf[pos:end]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.lstrip()[:1] in ("{", "["):
        holder = Node("", "struct", pos)
        cur = Cursor(buf, pos, end, budget)
        try:
            tree = jsonv.decode(cur, holder, "guessed")
            if cur.pos == end:
                return Guess("json", "certain", tree)
        except (Mismatch, OutOfBudget):
            pass
    if text is not None and (
        text.isprintable()
        or text.replace("\n", " ").replace("\t", " ").replace("\r", " ").isprintable()
    ):
        return Guess("text", "certain", Node("guessed", "string", pos, end - pos, text))
    holder = Node("guessed", "struct", pos, end - pos)
    cur = Cursor(buf, pos, end, budget)
    try:
        fields = _wire(cur, holder, end)
    except (Mismatch, OutOfBudget):
        fields = 0
    if fields and cur.pos == end:
        numbers = {int(c.name[1:]) for c in holder.children}
        sure = "likely" if fields >= 2 and max(numbers) < 1000 else "possible"
        return Guess("protobuf", sure, holder)
    return Guess("binary", "none", None)


def _wire(cur: Cursor, holder: Node, end: int) -> int:
    """Read Protobuf fields without a schema: ``#number`` nodes (varints as numbers,
    length-delimited as bytes, fixed as raw). Raises Mismatch on anything impossible."""
    count = 0
    while cur.pos < end:
        at = cur.pos
        key = cur.uvarint("tag")
        number, wire = key >> 3, key & 7
        if number == 0 or number > 536870911 or wire not in (0, 1, 2, 5):
            raise Mismatch(at, "not a Protobuf tag")
        cur.charge()
        if wire == 0:
            value: object = cur.uvarint("varint")
        elif wire == 1:
            value = cur.take(8, "fixed64")
        elif wire == 5:
            value = cur.take(4, "fixed32")
        else:
            value = cur.take(cur.uvarint("length"), "bytes")
        holder.add(Node(f"#{number}", "varint" if wire == 0 else "bytes", at, cur.pos - at, value))
        count += 1
    return count
