"""Kafka's own protocol definitions as the oracle for kdissect's tables.

scripts/kafka/KafkaSchemas.java, compiled against the fetched kafka-clients jar, dumps
every API key, version and field of the pinned release from Kafka's runtime Schema objects,
its error codes, and messages that Kafka's generated classes wrote with a non-default value
in every field (tagged fields included); on all the release's jars, the same for the
records of internal topics (__consumer_offsets, __cluster_metadata...). kafka-clients 3.9
does the same for the versions Kafka 4.0 dropped, which kdissect keeps in legacy.bnf.
kdissect must know every key, version, record type and error code of the release, have the
same layouts, field for field, and decode the messages value for value. scripts/kafka/update
writes the tables from the same dumps."""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from kdissect.protocol import Options, decode_request, decode_response, schemas
from kdissect.protocol.names import API_NAMES
from tests.support.apache_kafka import LEGACY_CLIENTS, VERSION

SCHEMAS = Path(__file__).resolve().parents[1] / "scripts" / "kafka" / "schemas"
UPDATE = SCHEMAS.with_name("update")
SAMPLES = 4  # messages per key, version and direction
RAW_RECORDS = Options(records=False, embedded=False)
Case = tuple[int, int, str]  # api key, version, direction


@lru_cache(maxsize=None)
def kafka_dump(release: str, mode: str) -> list[dict]:
    """Run KafkaSchemas on one kafka-clients jar: its JSON lines."""
    legacy = [] if release == VERSION else ["--legacy"]
    args = [mode, str(SAMPLES)] if mode.endswith("samples") else [mode]
    out = subprocess.run(
        [str(SCHEMAS), *legacy, *args], check=True, capture_output=True, text=True, timeout=300
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def by_case(lines: list[dict]) -> dict[Case, dict]:
    return {(d["key"], d["version"], d["direction"]): d for d in lines}


def current() -> dict[Case, dict]:
    return by_case(kafka_dump(VERSION, "schemas"))


def dropped() -> dict[Case, dict]:
    """What kafka-clients 3.9 defines and the pinned release no longer does."""
    now = current()
    return {
        c: unknown_struct_nulls(d)
        for c, d in by_case(kafka_dump(LEGACY_CLIENTS, "schemas")).items()
        if c not in now
    }


def unknown_struct_nulls(d):
    """3.9's runtime Schema has no nullable struct (NullableSchema came in 4.0), though its
    generated classes write the -1/1 marker: there, "not nullable" means "unknown"."""
    if isinstance(d, dict):
        d = {k: unknown_struct_nulls(v) for k, v in d.items()}
        if d.get("type") == "STRUCT" and not d["nullable"]:
            d["nullable"] = None
    elif isinstance(d, list):
        d = [unknown_struct_nulls(v) for v in d]
    return d


# --- layouts -----------------------------------------------------------------------------
_PRIMITIVE = {"BOOLEAN": "bool", "UNSIGNED_VARINT": "uvarint"}


def kafka_type(d: dict, flexible: bool) -> tuple:
    """(type, array, nullable, compact, struct) of one Kafka type."""
    t = d["type"]
    if t in ("ARRAY", "COMPACT_ARRAY"):
        elem = kafka_type(d["element"], flexible)
        return elem[0], True, d["nullable"], t == "COMPACT_ARRAY", elem[4]
    if t == "STRUCT":
        return "struct", False, d["nullable"], None, kafka_struct(d["struct"])
    compact = t.startswith("COMPACT_")
    base = t.removeprefix("COMPACT_").removeprefix("NULLABLE_")
    if base in ("STRING", "BYTES", "RECORDS"):
        # RECORDS says nullable in every version at runtime; the wire is the same
        nullable = d["nullable"] if base != "RECORDS" else None
        return base.lower(), False, nullable, compact, None
    return _PRIMITIVE.get(base, base.lower()), False, None, None, None


def kafka_struct(d: dict) -> tuple:
    flexible = any(f["type"] == "TAGGED_FIELDS" for f in d["fields"])
    fields = []
    for f in d["fields"]:
        if f["type"] == "TAGGED_FIELDS":
            continue
        kind, array, nullable, compact, sub = kafka_type(f, flexible)
        fields.append((f["name"], kind, array, nullable, compact, f.get("tag"), sub))
    return flexible, tuple(sorted(fields, key=lambda f: (f[5] is not None, f[5] or 0)))


def differences(kafka: tuple, ours: tuple, path: str = "") -> list[str]:
    """Readable differences between two normalized structs."""
    out = []
    if kafka[0] != ours[0]:
        out.append(f"{path or '<top>'}: flexible Kafka={kafka[0]} kdissect={ours[0]}")
    kf, of = {f[0]: f for f in kafka[1]}, {f[0]: f for f in ours[1]}
    if [f[0] for f in kafka[1]] != [f[0] for f in ours[1]]:
        out.append(
            f"{path or '<top>'}: fields Kafka={[f[0] for f in kafka[1]]} "
            f"kdissect={[f[0] for f in ours[1]]}"
        )
    for name in kf.keys() & of.keys():
        k, o = kf[name], of[name]
        for i, what in enumerate(("type", "array", "nullable", "compact", "tag"), start=1):
            if k[i] != o[i] and not (what == "nullable" and None in (k[i], o[i])):
                out.append(f"{path}{name}: {what} Kafka={k[i]} kdissect={o[i]}")
        if k[6] is not None and o[6] is not None:
            out += differences(k[6], o[6], f"{path}{name}.")
    return out


def layout_differences(cases: dict[Case, dict]) -> list[str]:
    out = []
    for (key, version, direction), d in sorted(cases.items()):
        st = schemas.layout(key, version, direction)
        where = f"{d['name']} v{version} {direction}"
        if st is None:
            out.append(f"{where}: kdissect has no layout")
            continue
        out += [
            f"{where}: {x}" for x in differences(kafka_struct(d["schema"]), schemas.wire_shape(st))
        ]
    return out


def test_legacy_table_counts():
    """59 versions over 28 API keys, 17 of them flexible (as DESIGN.md counts)."""
    pairs = schemas.legacy_versions()
    assert len(pairs) == 59 and len({k for k, _ in pairs}) == 28
    assert len({p for p in pairs if schemas.layout(*p, "request").flexible}) == 17


def test_recent_layouts_read_like_the_version_before():
    """recent.bnf comes from Kafka's runtime schemas, which have no hints: its layouts take
    kio's ("duration", "time") from the newest version kio has, field by field."""
    from kdissect.protocol.layout import Field, Struct

    def bare(st: Struct) -> Struct:
        def one(f: Field) -> Field:
            return Field(
                f.name,
                f.type,
                f.array,
                f.nullable,
                f.tag,
                bare(f.struct) if f.struct is not None else None,
                None,
                f.compact,
            )

        return Struct(st.name, tuple(map(one, st.fields)), tuple(map(one, st.tagged)), st.flexible)

    def hints(st: Struct) -> dict:
        return {f.name: f.hint for f in (*st.fields, *st.tagged)}

    kio = schemas._kio()
    fetch = kio.layout(1, max(kio.versions()[1]), "response")  # durations, nested structs
    assert schemas._hinted(bare(fetch), fetch) == fetch
    assert hints(fetch)["throttle_time_ms"] == "duration"
    for key, version in schemas.recent_versions():
        for direction in ("request", "response"):
            before = schemas._kio_before(key, version, direction)
            if before is not None:
                new = hints(schemas.layout(key, version, direction))
                assert {n: new[n] for n in hints(before).keys() & new.keys()} == {
                    n: h for n, h in hints(before).items() if n in new
                }


@pytest.mark.slow
def test_api_keys_and_names_are_the_pinned_release():
    kafka = {d["key"]: d["name"] for d in kafka_dump(VERSION, "schemas")}
    assert {k: API_NAMES.get(k) for k in kafka} == kafka
    known = schemas.all_versions()
    missing = [c for c in current() if c[1] not in known.get(c[0], ())]
    assert missing == []
    # nothing decoded that neither the pinned release nor 3.9 defines
    old = {d["key"] for d in kafka_dump(LEGACY_CLIENTS, "schemas")}
    assert set(known) <= set(kafka) | old


@pytest.mark.slow
def test_every_layout_of_the_pinned_release_is_kafkas():
    assert layout_differences(current()) == []


@pytest.mark.slow
def test_legacy_table_is_what_kafka_4_dropped():
    """legacy.bnf holds exactly the versions kafka-clients 3.9 defines and the pinned release
    does not, each as 3.9 defines it."""
    old = dropped()
    assert schemas.legacy_versions() == {(k, v) for k, v, _ in old}
    assert layout_differences(old) == []


# --- messages written by Kafka's own classes ---------------------------------------------
def expected(value):
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(value["$bytes"])
        return {k: expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expected(v) for v in value]
    return value


def header(key: int, version: int, direction: str, corr: int) -> bytes:
    if direction == "response":
        return corr.to_bytes(4, "big") + (
            b"\x00" if schemas.response_header_version(key, version) == 1 else b""
        )
    out = key.to_bytes(2, "big") + version.to_bytes(2, "big") + corr.to_bytes(4, "big")
    hv = schemas.request_header_version(key, version)
    if hv >= 1:
        out += b"\x00\x04java"
    return out + (b"\x00" if hv == 2 else b"")


def decode_failures(samples: list[dict], cases: set[Case]) -> list[str]:
    out = []
    for s in samples:
        case = (s["key"], s["version"], s["direction"])
        if case not in cases:
            continue
        where = f"{s['name']} v{s['version']} {s['direction']} seed {s['seed']}"
        if "error" in s:
            out.append(f"{where}: Kafka could not write it: {s['error']}")
            continue
        corr = 7000 + s["seed"]
        data = header(*case, corr) + bytes.fromhex(s["hex"])
        if s["direction"] == "request":
            msg = decode_request(data, RAW_RECORDS)
        else:
            msg = decode_response(data, s["key"], s["version"], RAW_RECORDS)
        if msg.problems:
            out.append(f"{where}: {msg.problems}")
        elif msg.correlation_id != corr or msg.body.plain() != expected(s["values"]):
            out.append(f"{where}: values differ")
    return out


@pytest.mark.slow
def test_messages_written_by_kafka_decode_value_for_value():
    samples = kafka_dump(VERSION, "samples")
    assert len(samples) == len(current()) * SAMPLES
    assert decode_failures(samples, set(current())) == []


@pytest.mark.slow
def test_dropped_versions_written_by_kafka_3_9_decode_value_for_value():
    old = dropped()
    samples = kafka_dump(LEGACY_CLIENTS, "samples")
    failures = decode_failures(samples, set(old))
    # Kafka 3.9 disagrees with itself here: its runtime Schema writes the nullable struct
    # `assignment` without the -1/1 marker its generated class reads (4.0 added NullableSchema)
    defect = "ShareGroupHeartbeat v0 response"
    assert [f for f in failures if not f.startswith(defect)] == []
    assert all("Kafka could not write it" in f for f in failures)


# --- error codes and internal records ----------------------------------------------------
@pytest.mark.slow
def test_every_error_code_of_the_pinned_release_is_named_as_kafka_names_it():
    from kdissect.protocol.names import error_info

    kafka = {d["code"]: (d["name"], d["retriable"]) for d in kafka_dump(VERSION, "errors")}
    assert len(kafka) > 130 and kafka[129][0] == "REBOOTSTRAP_REQUIRED"
    ours = {c: (error_info(c).name, error_info(c).retriable) for c in kafka if c != 0}
    assert ours == {c: v for c, v in kafka.items() if c != 0}


def internal_index() -> dict[str, list]:
    """name -> [family, record type, lowest, highest version] of every internal record
    class in the release's jars (what internal_schemas.MESSAGES must say)."""
    out: dict[str, list] = {}
    for s in kafka_dump(VERSION, "internal-samples"):
        row = out.setdefault(s["name"], [s["family"], s["type"], s["version"], s["version"]])
        row[2], row[3] = min(row[2], s["version"]), max(row[3], s["version"])
    return out


@pytest.mark.slow
def test_every_internal_record_type_of_the_pinned_release_is_known():
    from kdissect.protocol.internal_schemas import MESSAGES

    kafka = internal_index()
    assert {n: tuple(v) for n, v in kafka.items()} == MESSAGES
    # the families kdissect decodes, each with its record types (4.4: metadata type 29)
    assert {"group", "transaction", "share", "metadata", "remote", "control"} == {
        v[0] for v in kafka.values()
    }
    assert kafka["UnregisterControllerRecord"][:2] == ["metadata", 29]


@pytest.mark.slow
def test_internal_records_written_by_kafka_decode_value_for_value():
    """Every version of every internal record (__consumer_offsets, __transaction_state,
    __share_group_state, __cluster_metadata, __remote_log_metadata, KRaft control records),
    written by its generated class, decodes with kdissect's layout to Kafka's values."""
    from kdissect.protocol.context import Decoding
    from kdissect.protocol.decode import decode_prefix
    from kdissect.protocol.internal import internal_layout

    samples = kafka_dump(VERSION, "internal-samples")
    failures, seen = [], set()
    for s in samples:
        where = f"{s['name']} v{s['version']} seed {s['seed']}"
        if "error" in s:
            failures.append(f"{where}: Kafka could not write it: {s['error']}")
            continue
        st = internal_layout(s["name"], s["version"])
        if st is None:
            failures.append(f"{where}: kdissect has no layout")
            continue
        tree, complete = decode_prefix(
            bytes.fromhex(s["hex"]), 0, st, s["name"], Decoding(RAW_RECORDS), whole=True
        )
        if not complete or tree.problems():
            failures.append(f"{where}: {tree.problems()}")
        elif tree.plain() != expected(s["values"]):
            failures.append(f"{where}: values differ")
        seen.add(s["name"])
    assert failures == []
    assert len(samples) == SAMPLES * sum(v[3] - v[2] + 1 for v in internal_index().values())
    assert {
        "UnregisterControllerRecord",
        "StreamsGroupMetadataValue",
        "OffsetCommitValue",
        "StreamsGroupTopologyValue",
        "VotersRecord",
    } <= seen


@pytest.mark.slow
def test_generated_tables_are_current_for_the_pinned_release():
    """scripts/kafka/update --check: recent.bnf, the new API rows, the error codes, the
    internal layouts and the values readers are what the pinned release's jars give."""
    res = subprocess.run([str(UPDATE), "--check"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:] + res.stdout[-2000:]
