"""Every (api_key, version, direction) kio defines: random instances written by kio's own
serializer decode to equal values, and the tree's leaves tile the message exactly."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kio.index import load_payload_module
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.static.constants import EntityType
from kio.static.primitive import Records

from kdissect.protocol import Options, decode_request, decode_response
from kdissect.protocol import kio_schemas, schemas

# records are opaque bytes to kio; kdissect's record decoding is tested on real batches
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

CASES = [
    (key, version, direction)
    for key, versions in kio_schemas.versions().items()
    for version in versions
    for direction in ("request", "response")
]
RAW_RECORDS = Options(records=False, embedded=False)
# The fast tier checks each key's newest version; the full suite checks every version.
_NEWEST = {key: max(versions) for key, versions in kio_schemas.versions().items()}
CASE_PARAMS = [
    pytest.param(k, v, d, id=f"{k}-v{v}-{d}", marks=() if v == _NEWEST[k] else pytest.mark.slow)
    for k, v, d in CASES
]


def kio_class(key: int, version: int, direction: str) -> type:
    entity = EntityType.request if direction == "request" else EntityType.response
    module = load_payload_module(key, version, entity)
    suffix = direction.title()
    return next(
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and getattr(obj, "__type__", None) == entity
        and obj.__name__.endswith(suffix)
    )


def expected(value):
    """kio values as kdissect shows them: integers in ms, uuids as text, enums as codes."""
    if dataclasses.is_dataclass(value):
        return {
            kio_schemas._kafka_name(f): expected_field(f, getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not omitted(f, getattr(value, f.name))
        }
    if isinstance(value, tuple):
        return [expected(v) for v in value]
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return value


def kafka_names(value, kio, ours):
    """kio's values under kdissect's field names: where the pinned release renamed a field
    that kio still has under its old name (recent.bnf, e.g. TxnOffsetCommit v3-5's
    generation_id_or_member_epoch), the wire is the same and kdissect follows Kafka
    (tests/test_kafka_schemas.py); fields pair up by position, tagged ones by tag."""
    if isinstance(value, list):
        return [kafka_names(v, kio, ours) for v in value]
    if not isinstance(value, dict) or kio is None or ours is None or kio == ours:
        return value
    pairs = {
        **{a.name: b for a, b in zip(kio.fields, ours.fields)},
        **{a.name: ours.tag_field(a.tag) for a in kio.tagged},
    }
    out = {}
    for name, v in value.items():
        mine = pairs.get(name)
        out[name if mine is None else mine.name] = (
            v
            if mine is None
            else kafka_names(
                v, next(f.struct for f in (*kio.fields, *kio.tagged) if f.name == name), mine.struct
            )
        )
    return out


def omitted(f: dataclasses.Field, value) -> bool:
    """A tagged field at its default is not written at all."""
    if "tag" not in f.metadata:
        return False
    return value == get_tagged_field_default(f)


def expected_field(f: dataclasses.Field, value):
    if value is None and f.metadata.get("kafka_type") == "datetime_i64":
        return -1  # kio writes "no time" as -1
    if f.metadata.get("kafka_type") == "uuid":  # uuids have no null on the wire
        zero = "00000000-0000-0000-0000-000000000000"
        if isinstance(value, tuple):
            return [zero if v is None else str(v) for v in value]
        if value is None:
            return zero
    return expected(value)


def encode(header_bytes: bytes, instance) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(instance))(buf, instance)
    return header_bytes + buf.getvalue()


def request_header(key: int, version: int, corr: int) -> bytes:
    hv = schemas.request_header_version(key, version)
    out = key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big") + corr.to_bytes(4, "big")
    if hv >= 1:
        out += len(b"kdissect-test").to_bytes(2, "big") + b"kdissect-test"
    if hv == 2:
        out += b"\x00"
    return out


def response_header(key: int, version: int, corr: int) -> bytes:
    hv = schemas.response_header_version(key, version)
    return corr.to_bytes(4, "big") + (b"\x00" if hv == 1 else b"")


def assert_tiles(tree, size: int) -> None:
    leaves = sorted(
        (n for n in tree.walk() if not n.children and n.length > 0), key=lambda n: n.offset
    )
    pos = 0
    for leaf in leaves:
        assert leaf.offset == pos, f"gap or overlap at {pos}: {leaf}"
        pos = leaf.end
    assert pos == size


@pytest.mark.slow
@pytest.mark.parametrize("key,version,direction", CASE_PARAMS)
def test_kio_roundtrip(key, version, direction):
    cls = kio_class(key, version, direction)

    # the newest version 8 examples, older ones (mostly its layout with fewer fields) 4: the
    # 630 cases took 278 s of the suite, most of it making the instances
    examples = 8 if version == _NEWEST[key] else 4

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.from_type(cls), st.integers(0, 2**31 - 1))
    def check(instance, corr):
        if direction == "request":
            data = encode(request_header(key, version, corr), instance)
            msg = decode_request(data, RAW_RECORDS)
        else:
            data = encode(response_header(key, version, corr), instance)
            msg = decode_response(data, key, version, RAW_RECORDS)
        assert msg.problems == []
        assert msg.correlation_id == corr
        assert msg.body.plain() == kafka_names(
            expected(instance),
            kio_schemas.layout(key, version, direction),
            schemas.layout(key, version, direction),
        )
        assert_tiles(msg.tree, len(data))

    check()
