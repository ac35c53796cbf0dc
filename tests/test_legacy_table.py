"""kdissect's own table for the versions kio lacks, checked against Kafka 3.9's message
definitions (in ../shared, present for developers and CI): the same fields, and random
messages written by an encoder built straight from those definitions decode exactly."""

from __future__ import annotations

import json
import random
import re
import struct
import uuid
from pathlib import Path

import pytest

from kdissect.protocol import Options, decode_request, decode_response, schemas
from kdissect.protocol.names import API_NAMES

SPECS = Path(__file__).resolve().parents[2] / "shared" / "reference" / "kafka-3.9-message-specs"


def load_specs() -> dict[tuple[int, str], dict]:
    assert SPECS.is_dir(), f"Kafka's message definitions are expected at {SPECS}"
    out = {}
    for p in SPECS.glob("*.json"):
        spec = json.loads(re.sub(r"^\s*//.*$", "", p.read_text(), flags=re.M))
        if spec["type"] in ("request", "response"):
            out[(spec["apiKey"], spec["type"])] = spec
    return out


def versions(text: str | None, top: int = 99) -> set[int]:
    if text in (None, "none"):
        return set()
    if text.endswith("+"):
        return set(range(int(text[:-1]), top + 1))
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return s.replace("k_raft", "kraft")


SPEC = load_specs()
LEGACY = sorted((k, d, v) for k, v in schemas.legacy_versions() for d in ("request", "response"))


def test_table_covers_what_kio_dropped():
    """59 versions over 28 API keys, 17 of them flexible (as DESIGN.md counts)."""
    pairs = schemas.legacy_versions()
    assert len(pairs) == 59
    assert len({k for k, _ in pairs}) == 28
    flexible = {(k, v) for k, v in pairs if schemas.layout(k, v, "request").flexible}
    assert len(flexible) == 17
    from kdissect.protocol import kio_schemas
    kio = kio_schemas.versions()
    for (key, direction), spec in SPEC.items():
        for v in versions(spec["validVersions"]):
            assert v in kio.get(key, ()) or (key, v) in pairs, (key, v)


class Writer:
    """Encodes random values for a spec's fields; returns the values it wrote."""

    def __init__(self, version: int, flexible: bool, common: dict, rng: random.Random):
        self.v, self.flex, self.common, self.rng = version, flexible, common, rng
        self.out = bytearray()

    def uvarint(self, n: int) -> None:
        while True:
            b = n & 0x7F
            n >>= 7
            if n:
                self.out.append(b | 0x80)
            else:
                self.out.append(b)
                return

    def length(self, n: int, wide: bool) -> None:
        if self.flex:
            self.uvarint(n + 1)
        else:
            self.out += struct.pack(">i" if wide else ">h", n)

    def fields(self, fields: list[dict]) -> dict:
        values, tagged = {}, []
        for f in fields:
            if self.v not in versions(f.get("versions", "0+")):
                continue
            if self.v in versions(f.get("taggedVersions")):
                tagged.append(f)
                continue
            values[snake(f["name"])] = self.field(f)
        if self.flex:
            chosen = [f for f in tagged if self.rng.random() < 0.5]
            self.uvarint(len(chosen))
            for f in chosen:
                inner = Writer(self.v, self.flex, self.common, self.rng)
                values[snake(f["name"])] = inner.field(f)
                self.uvarint(f["tag"])
                self.uvarint(len(inner.out))
                self.out += inner.out
        return values

    def field(self, f: dict):
        t = f["type"]
        nullable = self.v in versions(f.get("nullableVersions"))
        if t.startswith("[]"):
            if nullable and self.rng.random() < 0.2:
                self.length(-1, True)
                return None
            n = self.rng.randint(0, 3)
            self.length(n, True)
            sub = dict(f, type=t[2:], nullableVersions="none")
            return [self.field(sub) for _ in range(n)]
        if t[0].isupper():
            if nullable:
                if self.rng.random() < 0.3:
                    self.out += b"\xff"
                    return None
                self.out += b"\x01"
            return self.fields(f.get("fields") or self.common[t])
        return self.primitive(t, nullable)

    def primitive(self, t: str, nullable: bool):
        r = self.rng
        fixed = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H"}
        if t in fixed:
            bits = struct.calcsize(fixed[t]) * 8
            lo, hi = (0, 2**bits - 1) if t == "uint16" else (-2**(bits - 1), 2**(bits - 1) - 1)
            v = r.choice([lo, hi, 0, -1 if lo < 0 else 1, r.randint(lo, hi)])
            self.out += struct.pack(fixed[t], v)
            return v
        if t == "bool":
            v = r.random() < 0.5
            self.out.append(int(v))
            return v
        if t == "float64":
            v = r.uniform(-1e9, 1e9)
            self.out += struct.pack(">d", v)
            return v
        if t == "uuid":
            v = uuid.UUID(int=r.getrandbits(128))
            self.out += v.bytes
            return str(v)
        if nullable and r.random() < 0.2:
            self.length(-1, t != "string")
            return None
        if t == "string":
            v = "".join(r.choice("abcxyz-_.é€0123") for _ in range(r.randint(0, 12)))
            raw = v.encode()
            self.length(len(raw), False)
            self.out += raw
            return v
        raw = bytes(r.getrandbits(8) for _ in range(r.randint(0, 10)))
        if t == "records":
            raw = b""           # an empty record set; record decoding has its own tests
            self.length(0, True)
            return b""
        self.length(len(raw), True)
        self.out += raw
        return raw


@pytest.mark.parametrize("key,direction,version", LEGACY,
                         ids=[f"{API_NAMES[k]}-v{v}-{d}" for k, d, v in LEGACY])
def test_legacy_versions_decode_spec_encoded_messages(key, direction, version):
    spec = SPEC[(key, direction)]
    flexible = version in versions(spec["flexibleVersions"])
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    for seed in range(25):
        w = Writer(version, flexible, common, random.Random(seed * 1000 + version))
        values = w.fields(spec["fields"])
        corr = 1000 + seed
        if direction == "request":
            hv = schemas.request_header_version(key, version)
            head = struct.pack(">hhi", key, version, corr)
            if hv >= 1:
                head += struct.pack(">h", 3) + b"cli"
            if hv == 2:
                head += b"\x00"
            msg = decode_request(head + bytes(w.out), Options(records=False, embedded=False))
        else:
            head = struct.pack(">i", corr) + (b"\x00" if flexible else b"")
            msg = decode_response(head + bytes(w.out), key, version,
                                  Options(records=False, embedded=False))
        assert msg.problems == [], (seed, msg.problems)
        assert msg.correlation_id == corr
        assert msg.body.plain() == values, seed
