"""The message-layout model every schema source is turned into (kio, the legacy table,
user grammars): structs of typed fields, in wire order."""

from __future__ import annotations

from .plain import Frozen

# Wire types the decoder understands. "string"/"bytes"/"records"/arrays are compact
# (uvarint length + 1) in flexible structs and classic (int16/int32 length) otherwise,
# unless a field forces one encoding with ``compact``.
PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "bool",
        "float64",
        "uuid",
        "varint",
        "varlong",
        "uvarint",
        "string",
        "bytes",
        "records",
    }
)
# the fixed-width ones' struct formats (big-endian), and the varints' longest encodings
FIXED_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
}
VARINT_BYTES = {"varint": 5, "varlong": 10, "uvarint": 5}


class Field(Frozen):
    """One field of a struct, in wire order."""

    __slots__ = _fields = ("name", "type", "array", "nullable", "tag", "struct", "hint", "compact")

    def __init__(
        self,
        name: str,
        type: str,  # a PRIMITIVES member, or "struct"
        array: bool = False,
        nullable: bool = False,
        tag: int | None = None,  # set for tagged fields (flexible versions only)
        struct: Struct | None = None,  # element/struct layout when type == "struct"
        hint: str | None = None,  # "error", "time", "api"...: how to annotate (NOTE_MAKERS)
        compact: bool | None = None,
    ):  # None: follow the enclosing struct's flexibility
        self.name, self.type, self.array, self.nullable = name, type, array, nullable
        self.tag, self.struct, self.hint, self.compact = tag, struct, hint, compact


class Struct(Frozen):
    """A struct's fields in wire order, and its tagged fields (flexible versions)."""

    __slots__ = _fields = ("name", "fields", "tagged", "flexible")

    def __init__(
        self,
        name: str,
        fields: tuple[Field, ...],
        tagged: tuple[Field, ...] = (),
        flexible: bool = False,
    ):
        self.name, self.fields, self.tagged, self.flexible = name, fields, tagged, flexible

    def tag_field(self, tag: int) -> Field | None:
        for f in self.tagged:
            if f.tag == tag:
                return f
        return None


def default_hint(name: str, type_: str) -> str | None:
    """Annotations that follow from Kafka's naming conventions alone."""
    if type_ == "int16" and (name == "error_code" or name.endswith("_error_code")):
        return "error"
    if type_ == "int16" and name in ("api_key", "request_api_key"):
        return "api"  # (ApiVersions' list, headers: 18 says nothing to most readers)
    if type_ == "int64" and (name.endswith("timestamp") or name.endswith("timestamp_ms")):
        return "time"
    return None


_RESOURCE_FIELDS = frozenset({"resource_type", "resource_type_filter", "resource_types"})


def resource_hints(st: Struct, kind: str) -> Struct:
    """``st`` with its resource types' numbers named as ``kind``'s enum ("config" or
    "acl": context.py's RESOURCE_TYPES): which enum they are depends on the API or the
    record (apis.py's ``resources``), not on the field's name."""

    def one(f: Field) -> Field:
        sub = resource_hints(f.struct, kind) if f.struct is not None else None
        named = f"{kind}_resource" if f.name in _RESOURCE_FIELDS and f.type == "int8" else f.hint
        return Field(f.name, f.type, f.array, f.nullable, f.tag, sub, named, f.compact)

    return Struct(st.name, tuple(map(one, st.fields)), tuple(map(one, st.tagged)), st.flexible)
