"""Layouts from kio's generated dataclasses (kio is schema data only: its parser raises on
unknown tags and error codes, so it is never used to read bytes)."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import lru_cache
from typing import Any

from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from .layout import Field, Struct, default_hint

# kio turns durations and instants into timedelta/datetime and drops Kafka's "_ms"
# suffix; kdissect shows raw integers under Kafka's own names.
_KIO_TYPES = {
    "error_code": ("int16", "error"),
    "timedelta_i32": ("int32", "duration"),
    "timedelta_i64": ("int64", "duration"),
    "datetime_i64": ("int64", "time"),
}


def _kafka_name(field: dataclasses.Field[Any]) -> str:
    name = field.name.rstrip("_")  # kio appends "_" to Python keywords (id_)
    name = name.replace("k_raft", "kraft")  # kio splits KRaft; Kafka's schema says kraft_
    if field.metadata.get("kafka_type", "").startswith(("timedelta", "datetime")):
        if not name.endswith("_ms"):
            name += "_ms"
    return name


def _unwrap_optional(tp: typing.Any) -> tuple[typing.Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _field(f: dataclasses.Field[Any]) -> Field:
    tp, nullable = _unwrap_optional(f.type)
    array = False
    if typing.get_origin(tp) is tuple:
        array = True
        tp, _ = _unwrap_optional(typing.get_args(tp)[0])
    name = _kafka_name(f)
    tag = f.metadata.get("tag")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return Field(name, "struct", array=array, nullable=nullable, tag=tag, struct=struct_of(tp))
    ktype = f.metadata["kafka_type"]
    ktype, hint = _KIO_TYPES.get(ktype, (ktype, None))
    return Field(
        name, ktype, array=array, nullable=nullable, tag=tag, hint=hint or default_hint(name, ktype)
    )


@lru_cache(maxsize=None)
def struct_of(cls: type) -> Struct:
    fields = [_field(f) for f in dataclasses.fields(cls)]
    return Struct(
        name=cls.__name__,
        fields=tuple(f for f in fields if f.tag is None),
        tagged=tuple(f for f in fields if f.tag is not None),
        flexible=bool(getattr(cls, "__flexible__", False)),
    )


def versions() -> dict[int, list[int]]:
    """API key -> the versions kio defines."""
    return {
        key: sorted(schema_name_map[name])
        for key, name in api_key_map.items()
        if name in schema_name_map
    }


@lru_cache(maxsize=None)
def layout(api_key: int, version: int, direction: str) -> Struct | None:
    entity: typing.Literal[EntityType.request, EntityType.response] = (
        EntityType.request if direction == "request" else EntityType.response
    )
    try:
        module = load_payload_module(api_key, version, entity)
    except Exception:  # kio raises its own index errors for unknown key/version
        return None
    suffix = "Request" if direction == "request" else "Response"
    for obj in vars(module).values():
        if (
            isinstance(obj, type)
            and dataclasses.is_dataclass(obj)
            and getattr(obj, "__type__", None) == entity
            and obj.__name__.endswith(suffix)
        ):
            return struct_of(obj)
    return None
