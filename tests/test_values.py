"""The three walkers of a layout agree: the values-only decoder with the located tree, value
for value, and the proxy's skip-scanner on where every clean message ends: on every
message of every repo capture, on damaged copies of them (where the values path must step
aside whenever the located tree finds a problem), and on random messages kio encodes for
every API version (the newest of each API in the fast tier, every version in the slow)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kdissect.protocol import Options, decode_request, decode_response, schemas
from kdissect.protocol.internal import RECORD_CARRIERS, mentions_internal_topic
from kdissect.protocol.values import body_values
from kdissect.proxy.skipscan import skip_body
from kdissect.render.records import json_bytes, plain_json
from kdissect.sources.pcap import read_captures
from kdissect.stream.enrich import _values_body as enrich_values_body, enrich
from kdissect.stream.facts import SUMMARY, facts
from kdissect.stream.sink import Collect
from tests.test_roundtrip_kio import CASE_PARAMS, encode, kio_class, request_header, response_header

CAPTURES = sorted((Path(__file__).parent.parent / "captures").glob("*.pcap"))
FULL = Options()


def located(data: bytes, direction: str, key: int, version: int, options: Options = FULL):
    msg = (
        decode_request(data, options)
        if direction == "request"
        else decode_response(data, key, version, options)
    )
    return msg


def as_json(value) -> str:
    return json.dumps(value, default=str)


def messages(path: Path) -> list[tuple[bytes, str, int, int]]:
    """(data, direction, api key, version) of every message whose API is known."""
    sink = Collect()
    read_captures([str(path)], sink)
    return [
        (m.data, m.direction, m.api_key, m.api_version)
        for ex in sink.exchanges
        for m in ex.messages
        if m.direction != "sasl" and m.api_key is not None
    ]


def agree(data: bytes, direction: str, key: int, version: int, options: Options = FULL) -> bool:
    """The decoders agree; returns whether the values path took the message."""
    values = body_values(data, direction, key, version, options, json_bytes)
    msg = located(data, direction, key, version, options)
    layout = schemas.layout(key, version, direction)
    if not msg.problems and layout is not None:
        # a clean message: the skip-scanner, reading lengths only, ends where it does
        assert skip_body(data, msg.body.offset, layout) == len(data)
    if values is None:
        return False
    assert msg.problems == [], "the values path took a message the located tree faults"
    assert as_json(values) == as_json(plain_json(msg.body, True))  # unmasked
    # what enrichment learns from a body without record batches (the ones it reads
    # with the values decoder): the same from either decoder
    if not schemas.has_records(key, version, direction):
        assert same_facts(facts(values), facts(msg.body))
    return True


def same_facts(a, b) -> bool:
    return a == b and list(a.topics) == list(b.topics)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_enrichment_from_values_equals_enrichment_from_trees(path):
    """Summaries enrich bodies without record batches from the values decoder: every
    exchange gets the same facts, findings and status as from located trees."""
    raw = Collect()
    read_captures([str(path)], raw)
    state = [({}, {}), ({}, {})]  # (topic ids, advertised) per path
    took = 0
    for ex in raw.exchanges:
        fast, slow = copy.deepcopy(ex), copy.deepcopy(ex)
        enrich(fast, SUMMARY, *state[0])
        enrich(slow, SUMMARY, *state[1], keep=True)
        assert same_facts(fast.facts, slow.facts), (fast.first.frame, fast.first.api_name)
        assert fast.findings == slow.findings and fast.status == slow.status
        took += any(enrich_values_body(m, SUMMARY) is not None for m in ex.messages)
    assert state[0][0] == state[1][0]
    if any(ex.first.api_key == 3 for ex in raw.exchanges):
        assert took  # Metadata answers take the values path


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_capture_message_agrees(path):
    taken = clean = 0
    for data, direction, key, version in messages(path):
        taken += agree(data, direction, key, version)
        msg = located(data, direction, key, version)
        clean += (
            msg.problems == []
            and key not in (11, 14, 15, 36, 58)
            and not (
                (key, direction) in RECORD_CARRIERS
                and mentions_internal_topic(data)
                and any(
                    n.ktype == "records" and any(c.name != "_length" for c in n.children)
                    for n in msg.body.walk()
                )
            )
        )
        # embedded structures (and Envelope's request) and internal topics' records (by
        # schema) take the located path (a message that may name an internal topic and
        # holds no record: the fast way)
    # every clean message without embedded structures goes the fast way (message sets v0/v1
    # are the exception: the legacy captures' Produce and Fetch take the located path)
    if "legacy" not in path.stem:
        assert taken == clean > 0


def test_record_batches_of_every_codec_take_the_values_path():
    """The codec capture's Produce and Fetch bodies: records decoded, not left raw."""
    seen = set()
    for data, direction, key, version in messages(
        Path(__file__).parent.parent / "captures" / "kafka-python-codecs.pcap"
    ):
        if key in (0, 1) and agree(data, direction, key, version):
            text = as_json(body_values(data, direction, key, version, FULL, json_bytes))
            for attrs in ("none", "gzip", "snappy", "lz4", "zstd"):
                if f'"attributes": "{attrs}' in text:
                    seen.add(attrs)
    assert seen == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_damaged_messages_step_aside_or_agree():
    """Bit flips, truncations and length changes in real messages: whenever the values
    path answers, the located tree is clean and says the same."""
    rng = random.Random(13)
    corpus = [m for p in CAPTURES for m in messages(p)]
    answered = 0
    for _ in range(3000):
        data, direction, key, version = rng.choice(corpus)
        b = bytearray(data)
        how = rng.randrange(3)
        if how == 0 and len(b) > 8:  # flip one byte after the header
            i = rng.randrange(8, len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif how == 1:  # cut short
            del b[rng.randrange(4, len(b)) :]
        else:  # a byte more or less somewhere
            i = rng.randrange(4, len(b))
            if rng.random() < 0.5:
                b.insert(i, rng.randrange(256))
            else:
                del b[i]
        answered += agree(bytes(b), direction, key, version)
    assert answered > 100  # flips inside values (names, numbers) keep messages clean


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_enrichment_reads_each_kind_as_body_values():
    """Enrichment reads a body through what it asked once of the message's kind
    (``_kind``: ``values.plain_reader``, else ``body_values``): the same dict as
    ``body_values`` (keys in order, types), on every message of every capture and on
    damaged copies (where the compiled read steps aside), with the options a summary,
    JSON lines and raw records use."""
    from kdissect.protocol.values import NO_BYTES
    from kdissect.stream.enrich import _kind
    from kdissect.stream.model import KafkaMessage
    from tests.fuzz.msgvalues_target import damaged, same

    rng = random.Random(43)
    corpus = [m for p in CAPTURES for m in messages(p)]
    corpus += [(damaged(rng, d), *rest) for d, *rest in rng.choices(corpus, k=3000)]
    read = 0
    for options in (SUMMARY, Options(records="batches", embedded=False), Options(records=False)):
        kinds: dict = {}
        for data, direction, key, version in corpus:
            m = KafkaMessage(0, 1, direction, 0.0, 0, 0, data, key, version)
            kind = kinds.setdefault((key, version, direction), _kind(m, options))
            for conv in (NO_BYTES, json_bytes):
                got = enrich_values_body(m, options, conv, kind)
                assert same(got, enrich_values_body(m, options, conv)), (key, version)
                if kind is None:
                    assert got is None
                    continue
                want = body_values(data, direction, key, version, options, conv)
                assert same(got, want), (key, version, direction)
                read += got is not None
    assert read > 10_000


def test_raw_records_and_small_budgets():
    """Options change both paths alike: records left raw, tight budgets (decompressed
    bytes, nodes): a message the located decoder cuts short never takes the values path."""
    opts = [
        Options(records=False),
        Options(max_decompressed=100),
        Options(max_decompressed=3000),
        Options(max_nodes=40),
        Options(max_nodes=400),
    ]
    for data, direction, key, version in messages(
        Path(__file__).parent.parent / "captures" / "kafka-python-codecs.pcap"
    ):
        for o in opts:
            agree(data, direction, key, version, o)


@pytest.mark.parametrize("key,version,direction", CASE_PARAMS)  # newest versions: fast
def test_random_kio_messages_agree(key, version, direction):
    cls = kio_class(key, version, direction)
    raw_records = Options(records=False)

    @settings(max_examples=4, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls), st.integers(0, 2**31 - 1))
    def check(instance, corr):
        head = (
            request_header(key, version, corr)
            if direction == "request"
            else response_header(key, version, corr)
        )
        data = encode(head, instance)
        # random record bytes are not batches: records raw, so the values path is used
        assert agree(data, direction, key, version, raw_records) or (
            raw_records.embedded and key in (11, 14, 15, 36, 58)
        )

    check()


def test_bare_values_leave_records_out_and_step_aside_when_unclean():
    """``bare_values`` (what orphan guesses and broker listeners read): the fields of a
    clean message, its records left out; None for a message cut short."""
    from kdissect.protocol.values import bare_values

    got = messages(CAPTURES[0].parent / "kcat.pcap")
    data, _, _, v = next(m for m in got if m[1:3] == ("request", 0))  # Produce
    body = bare_values(data, "request", 0, v)
    assert body is not None and body["acks"] == -1
    assert [p["records"] for t in body["topic_data"] for p in t["partition_data"]] == [None]
    # a Fetch answer with records: read in full they are there, bare they are left out
    data, _, _, v = next(
        m
        for m in got
        if m[1:3] == ("response", 1)
        and body_values(m[0], "response", 1, m[3], FULL, json_bytes)["responses"][0]["partitions"][
            0
        ]["records"]
    )
    body = bare_values(data, "response", 1, v)
    assert body is not None and body["responses"][0]["partitions"][0]["records"] is None
    assert body["responses"][0]["partitions"][0]["high_watermark"] == 4
    assert bare_values(data[:-3], "response", 1, v) is None
