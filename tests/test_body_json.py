"""JSON lines' body text written compiled (native/src/body_json.rs through
``protocol.values.body_json``) against its reference, the generated readers' values
encoded by ``json`` as the lines encode them: on every message of every capture under
captures/ and on damaged copies, the same text or None (never a text where the readers
hand the message over), and the record carriers of real traffic written this way."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from kdissect.protocol import Options
from kdissect.protocol.apis import FETCH, PRODUCE
from kdissect.protocol.internal import mentions_internal_topic
from tests.fuzz.msgvalues_target import damaged, messages, reference_json, written_json
from tests.support.repo_captures import every_capture

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = every_capture()
_MESSAGES: list = []


def captured() -> list:
    if not _MESSAGES:
        _MESSAGES.extend(messages(CAPTURES))
    return _MESSAGES


def test_every_captured_body_is_written_as_the_reference_writes_it():
    written: Counter = Counter()
    carriers: Counter = Counter()
    internal = 0  # written with internal topics' records decoded by schema
    for data, direction, key, version in captured():
        got = written_json(data, direction, key, version)
        want = reference_json(data, direction, key, version)
        if got is not None:
            assert got == want, (key, version, direction)
            written[key] += 1
            internal += mentions_internal_topic(data) and '_decoded": ' in got
        carrier = (key, direction) in ((PRODUCE, "request"), (FETCH, "response"))
        if carrier and want:
            carriers[key] += got is not None
            carriers[-key - 1] += 1  # (how many the reference reads)
    assert sum(written.values()) > 3000 and len(written) > 40, written
    # the record carriers (most of a JSON line's cost) are written here, not handed over
    # (but compressed batches), those that may carry internal topics' records too
    for key in (PRODUCE, FETCH):
        assert carriers[key] > 0.9 * carriers[-key - 1] > 300, (key, carriers)
    assert internal > 300, internal


def test_damaged_bodies_are_written_as_the_reference_writes_them_or_not_at_all():
    rng = random.Random(4343)
    pool = captured()
    carriers = [m for m in pool if (m[2], m[1]) in ((PRODUCE, "request"), (FETCH, "response"))]
    sample = rng.sample(pool, min(1500, len(pool))) + rng.sample(carriers, min(1500, len(carriers)))
    written = 0
    for data, direction, key, version in sample:
        for _ in range(3):
            d = damaged(rng, data)
            got = written_json(d, direction, key, version)
            if got is not None:
                assert got == reference_json(d, direction, key, version), (key, d.hex())
                written += 1
    assert written > 1000, written


def test_what_it_leaves_to_the_reference():
    """Options it does not write for: records raw or as heads, schemas for values."""
    data, direction, key, version = next(
        m for m in captured() if m[2] == PRODUCE and m[1] == "request"
    )
    assert written_json(data, direction, key, version) is not None
    for options in (Options(records="batches"), Options(records=False)):
        assert written_json(data, direction, key, version, options) is None


def test_internal_records_need_the_located_reading():
    """A message that may carry an internal topic's records is written only with the
    located reading of its records fields (``json_view.internal_records_json``)."""
    from kdissect.protocol.values import body_json

    data, direction, key, version = next(
        m
        for m in captured()
        if m[2] == FETCH
        and m[1] == "response"
        and mentions_internal_topic(m[0])
        and (written_json(*m) or "").count('_decoded": ')
    )
    assert body_json(data, direction, key, version, Options()) is None


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _batch(records: list[tuple[bytes, bytes]]) -> bytes:
    """A clean uncompressed v2 batch of (key, value) records."""
    import struct

    from kdissect.protocol.batch import computed_crc

    body = b""
    for i, (k, v) in enumerate(records):
        rec = b"\0" + _varint(0) + _varint(i) + _varint(len(k)) + k + _varint(len(v)) + v
        body += _varint(len(rec) + 1) + rec + _varint(0)  # (no headers)
    n = len(records)
    tail = struct.pack(">hiqqqhii", 0, max(n - 1, 0), 0, 0, -1, -1, -1, n) + body
    head = bytearray(struct.pack(">qiibI", 0, 9 + len(tail), 0, 2, 0) + tail)
    head[17:21] = struct.pack(">I", computed_crc(bytes(head), 0, len(head)))
    return bytes(head)


def _produce_v3(topics: list[tuple[str, bytes]]) -> bytes:
    import struct

    def s16(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    out = struct.pack(">hhi", PRODUCE, 3, 7) + s16("t") + struct.pack(">hhii", -1, 1, 1000, 1)
    out = out[:-4] + struct.pack(">i", len(topics))  # (no transactional id, acks 1)
    for name, records in topics:
        out += s16(name) + struct.pack(">iii", 1, 0, len(records)) + records
    return out


def test_internal_records_never_hide_the_budget_the_whole_decode_spends():
    """An internal topic's records decoded by schema are charged where the whole-message
    decode would charge them last: at every budget, the text is the reference's or None
    (found by review: a later batch's unchecked charge hid the located tree's
    node_budget finding)."""
    import struct

    key = struct.pack(">h", 5) + b"\0\x01g\0\x01m"  # a ConsumerGroupMemberMetadata key
    names = b"".join(b"\x03t%d" % (i % 10) for i in range(50))
    value = struct.pack(">h", 0) + b"\0\0\x02c\x02h" + bytes([51]) + names
    value += b"\0" + struct.pack(">i", 1000) + b"\0\0"
    data = _produce_v3([("__consumer_offsets", _batch([(key, value)])), ("x", _batch([]))])
    whole = reference_json(data, "request", PRODUCE, 3)
    assert whole is not None and '"value_decoded": ' in whole  # decoded by schema
    assert written_json(data, "request", PRODUCE, 3) == whole
    texts = 0
    for budget in range(1, 400):
        options = Options(max_nodes=budget)
        got = written_json(data, "request", PRODUCE, 3, options)
        if got is not None:
            assert got == reference_json(data, "request", PRODUCE, 3, options), budget
            texts += 1
    assert texts > 100  # (a budget big enough for it is written)


def test_internal_topics_named_by_learned_ids():
    """Fetch v13+ names topics by id: with the ids a capture taught (its Metadata
    answers), replication Fetches of __consumer_offsets and the like are written with
    their records decoded by schema, as the located tree decodes them."""
    from kdissect.sources.pcap import CaptureFiles
    from kdissect.stream.engine import Engine
    from kdissect.stream.sink import CallbackSink

    decoded = 0
    for name in ("kafka44-cluster.pcap",):
        capture = ROOT / "captures" / name
        engine = Engine(CaptureFiles([str(capture)]), CallbackSink(lambda ex: None))
        engine.run()
        ids = dict(engine.topic_ids)
        assert any(n == "__consumer_offsets" for n in ids.values()), name
        for data, direction, key, version in messages([capture]):
            if (key, direction) != (FETCH, "response"):
                continue
            got = written_json(data, direction, key, version, None, ids)
            if got is not None:
                assert got == reference_json(data, direction, key, version, None, ids)
                decoded += '"key_schema": "OffsetCommitKey' in got
    assert decoded > 0


def _uncompressed_batch(data: bytes) -> int | None:
    """Where an uncompressed v2 batch starts in a message (its CRC checks out), if any."""
    from kdissect.protocol import batch
    from kdissect.protocol.crc import crc32c_of

    for pos in range(len(data) - batch.HEAD_SIZE):
        end = pos + 12 + batch.length_at(data, pos)
        if (
            data[pos + batch.MAGIC_AT] == 2
            and pos + batch.HEAD_SIZE <= end <= len(data)
            and data[pos + 22] & batch.CODEC_MASK == 0
            and crc32c_of(data, pos + 21, end) == int.from_bytes(data[pos + 17 : pos + 21], "big")
        ):
            return pos
    return None


def test_a_batch_with_attribute_bits_no_kafka_defines_is_left_to_the_reference():
    """Real Produce requests whose uncompressed batch has bit 0x100 set (CRC made again):
    the reference reads such a batch located, to note the bits (unknown_attribute_bits);
    the compiled writer wrote it as a clean batch ("none")."""
    from kdissect.protocol import batch
    from kdissect.protocol.crc import crc32c_of

    done = 0
    for data, direction, key, version in captured():
        if (key, direction) != (PRODUCE, "request") or done == 20:
            continue
        pos = _uncompressed_batch(data)
        if pos is None:
            continue
        end = pos + 12 + batch.length_at(data, pos)
        b = bytearray(data)
        b[pos + 21] |= 0x01  # the attributes' high byte: bit 0x100
        b[pos + 17 : pos + 21] = crc32c_of(b, pos + 21, end).to_bytes(4, "big")
        odd = bytes(b)
        assert written_json(odd, direction, key, version) is None
        assert written_json(data, direction, key, version) is not None
        done += 1
    assert done == 20
