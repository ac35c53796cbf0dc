"""The thread forwarder's check, in the compiled extension, that an answer names no
broker (native/src/quick.rs, from `skipscan.quick_check`'s program). "Names none" is the
one verdict that skips Python, so wherever it says so the skip-scanner must too: on every
answer of the repo's captures, on one given a leader hint, and on cut and flipped copies.
Any other verdict (a NodeEndpoints tag, even an empty one; bytes off the layout) sends the
answer to Python."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from kdissect.protocol.native_ext import compiled
from kdissect.protocol.reader import DecodeError
from kdissect.proxy.rewrite import uvarint
from kdissect.proxy.skipscan import endpoint_spans, quick_check
from kdissect.sources.pcap import exchanges_in

ROOT = Path(__file__).resolve().parents[1]
native = compiled("answer_names_brokers")
pytestmark = pytest.mark.skipif(native is None, reason="needs the compiled extension")


def python_says(body: bytes, key: int, version: int) -> bool | None:
    try:
        return any(sp.node_id >= 0 and sp.host for sp in endpoint_spans(body, key, version))
    except DecodeError:
        return None


def with_leader_hint(body: bytes) -> bytes:
    """``body`` (an answer ending in an empty top-level tag section) given a
    NodeEndpoints tagged field naming broker 7."""
    assert body.endswith(b"\x00")
    host = b"broker-7.internal"
    endpoint = struct.pack(">i", 7) + uvarint(len(host) + 1) + host + struct.pack(">i", 9092)
    value = uvarint(2) + endpoint + b"\x00" + b"\x00"  # rack null, no tags
    return body[:-1] + b"\x01" + uvarint(0) + uvarint(len(value)) + value


def answers() -> list[tuple[int, int, bytes]]:
    paths = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap"))
    return [
        (m.api_key, m.api_version, bytes(m.data))
        for ex in exchanges_in(paths).exchanges
        if (m := ex.response) is not None
        and m.api_key is not None
        and quick_check(m.api_key, m.api_version) is not None
    ]


def test_the_check_agrees_with_the_skip_scanner_on_real_and_damaged_answers():
    rng = random.Random(7)
    found = answers()
    kinds = {(key, python_says(body, key, version)) for key, version, body in found}
    assert {(0, False), (1, False)} <= kinds, kinds  # Produce and Fetch answers, walked
    checked = skipped = hints = 0
    for key, version, body in found:
        check = quick_check(key, version)
        said, scanned = native(check, body), python_says(body, key, version)
        assert scanned is not None and said is not None
        assert said or not scanned
        skipped += not said
        hinted = with_leader_hint(body) if body.endswith(b"\x00") else b""
        if python_says(hinted, key, version) is not True:
            continue  # (it had top-level tags: the hint cannot go there this way)
        assert native(check, hinted) is True
        hints += 1
        variants = [hinted[:cut] for cut in rng.sample(range(len(hinted)), min(40, len(hinted)))]
        for _ in range(40):
            flipped = bytearray(hinted)
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            variants.append(bytes(flipped))
        for v in variants:
            # "names none" is the one verdict that skips Python: it must be the scanner's
            if native(check, v) is False:
                assert python_says(v, key, version) is False, (key, version, v.hex())
                checked += 1
    assert checked > 100 and hints > 10
    # Produce and Fetch answers without leader hints (these captures: 606 of 1,260; the
    # rest are a three-node cluster's Fetch v18 answers, which carry them) need no Python
    assert skipped > 500
