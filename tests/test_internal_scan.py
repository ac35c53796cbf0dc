"""The compiled search for internal topics' names and ids (native/src/scan.rs, behind
``internal.mentions_internal_topic``) against its Python reference
(``mentions_internal_topic_py``): every message of every capture under captures/, with
and without learned topic ids, and seeded blobs with the names and ids planted at every
kind of place (block edges, the very start and end, cut by a byte) in the data that made
the Python search slow (JSON values, zero padding, runs of ``_``)."""

from __future__ import annotations

import random
import uuid

import pytest


from kdissect.protocol import internal
from tests.fuzz.msgvalues_target import messages

from tests.support.native_check import require_compiled
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()
OFFSETS_ID = str(uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF))
IDS = {OFFSETS_ID: "__consumer_offsets", str(uuid.UUID(int=7)): "orders"}


@pytest.fixture(autouse=True)
def _compiled():
    require_compiled(internal, "_Needles")


def same(data: bytes, ids=None) -> bool:
    got = internal.mentions_internal_topic(data, ids)
    assert got == internal.mentions_internal_topic_py(data, ids), (data[:64], ids)
    # the compiled search reads a bytes as it is and anything else through its buffer:
    # both answer the same
    for other in (bytearray(data), memoryview(data)):
        assert internal.mentions_internal_topic(other, ids) == got, (data[:64], ids)
    return got


def test_every_message_of_every_capture():
    found = [same(d) for d, _, _, _ in messages(CAPTURES)]
    assert len(found) > 4000
    # the KRaft captures' replication Fetches name __cluster_metadata by its id; others none
    assert 0 < sum(found) < len(found)
    for d, _, _, _ in messages(CAPTURES):
        same(d, IDS)


def test_planted_names_and_ids_in_hostile_data():
    rng = random.Random(2026)
    fillers = [
        b'{"order_id": "o_1", "customer_name": "x", "pad": "' + bytes(14) + b'"}',
        bytes(64),
        b"_" * 64,
        bytes(range(256)),
    ]
    needles = [*internal._NAMES, internal._METADATA_ID_BYTES, uuid.UUID(OFFSETS_ID).bytes]
    planted = 0
    for _ in range(3000):
        filler = rng.choice(fillers)
        size = rng.choice([0, 1, 15, 16, 17, 31, 32, 33, rng.randrange(200)])
        data = bytearray((filler * (size // len(filler) + 1))[:size])
        if rng.random() < 0.8:
            needle = rng.choice(needles)
            if rng.random() < 0.3:
                needle = needle[:-1] if rng.random() < 0.5 else needle[1:]  # cut: no match
            at = rng.choice([0, len(data), rng.randrange(len(data) + 1)])
            data[at:at] = needle
        data_bytes = bytes(data)
        planted += same(data_bytes, IDS)
        same(data_bytes)
    assert 1000 < planted < 3000  # both answers were asked for often


def test_learned_ids_are_searched_as_they_change():
    """The needles made from learned topic ids are kept while the ids stay as they were:
    an id named, renamed to an internal topic's name, or forgotten is searched so at once
    (the caller's dict changed in place, as enrichment changes it)."""
    tid = str(uuid.UUID(int=0x4243))
    data = b"\x00\x01" + uuid.UUID(tid).bytes + b"\x02"
    ids = {OFFSETS_ID: "__consumer_offsets"}
    assert not same(data, ids)
    ids[tid] = "orders"
    assert not same(data, ids)
    ids[tid] = "__transaction_state"  # renamed: the same size and keys
    assert same(data, ids)
    del ids[tid]
    assert not same(data, ids)


def test_the_search_holds_when_the_extension_is_bound_after_import(monkeypatch):
    """Imported under KDISSECT_PURE, then bound (native_ext.refresh): the base search made
    at import is missing, and the check makes it as it makes one for learned ids."""
    require_compiled(internal, "_Needles")
    monkeypatch.setattr(internal, "_BASE_SEARCH", None)
    for data in (b"xx__consumer_offsetsyy", b"nothing here", b""):
        assert internal.mentions_internal_topic(data) == internal.mentions_internal_topic_py(
            data, None
        )
