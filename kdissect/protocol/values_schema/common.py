"""What the value decoders share: a bounded cursor, the budget they charge, and how a
value that does not match its schema fails (``Mismatch``)."""

from __future__ import annotations

from ..budget import Budget
from ..node import Node
from ..reader import VarintTooLong, uvarint

MAX_DEPTH = 64  # nested records/messages/arrays inside one value


class Mismatch(Exception):
    """The bytes stop matching the schema at ``pos``: ``reason`` says how."""

    def __init__(self, pos: int, reason: str):
        super().__init__(reason)
        self.pos = pos
        self.reason = reason


class OutOfBudget(Exception):
    """The message's node budget is spent: the rest of the value stays raw."""


class Cursor:
    """Reads one value's bytes ``buf[pos:end]``; every read checks what remains, so no
    length in the bytes makes us slice or allocate past them. Also carries the budget and
    the nesting depth."""

    __slots__ = ("buf", "pos", "end", "budget", "depth")

    def __init__(self, buf: bytes, pos: int, end: int, budget: Budget | None):
        self.buf, self.pos, self.end, self.budget, self.depth = buf, pos, end, budget, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise Mismatch(self.pos, f"{what} needs {n} bytes, {self.end - self.pos} left")
        start = self.pos
        self.pos += n
        return self.buf[start : self.pos]

    def uvarint(self, what: str) -> int:
        """Unsigned LEB128 of at most 10 bytes (Avro longs, Protobuf varints)."""
        try:
            value, self.pos = uvarint(self.buf, self.pos, self.end, 10)
        except IndexError:
            raise Mismatch(self.pos, f"{what} runs past the end of the value") from None
        except VarintTooLong:
            raise Mismatch(self.pos, f"{what} is a varint longer than 10 bytes") from None
        return value

    def zigzag(self, what: str) -> int:
        v = self.uvarint(what)
        return (v >> 1) ^ -(v & 1)

    def charge(self, n: int = 1) -> None:
        budget = self.budget
        if budget is not None:
            budget.nodes -= n
            if budget.nodes < 0:
                budget.nodes = 0
                raise OutOfBudget()

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Mismatch(self.pos, f"nested more than {MAX_DEPTH} deep")

    def leave(self) -> None:
        self.depth -= 1


def rest_node(cur: Cursor, parent: Node, reason: str, code: str) -> Node:
    """The bytes from where decoding stopped to the end of the value, marked."""
    return parent.add(
        Node(
            "_rest",
            "raw",
            cur.pos,
            cur.end - cur.pos,
            cur.buf[cur.pos : cur.end],
            problem=reason,
            code=code,
        )
    )
