"""Plain value classes: what ``@dataclass`` gave the classes every run makes at import
(tables, findings, segments, layouts), without its cost.

``@dataclass`` writes each class's methods as source text and compiles them when the
module is imported: 0.5-1.5 ms a class, a fifth of a small capture's run once there were
thirty of them (docs/guide/pcap.md, "Start-up"). These bases give the same repr and equality,
by the fields a class lists in ``_fields``, from methods compiled once with this module;
each class writes its own ``__init__`` (as fast per object as a dataclass's).
"""

from __future__ import annotations

from typing import Any, ClassVar


class Plain:
    """repr by the fields; equality and hashing by identity (``@dataclass(eq=False)``)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({pairs})"


class Compared(Plain):
    """Equal when of the same class with equal fields; unhashable (``@dataclass``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]


class Frozen(Compared):
    """Equal by fields and hashable by them (``@dataclass(frozen=True)``): its fields are
    not changed once made (by convention: nothing enforces it)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())
