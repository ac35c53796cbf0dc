"""Kafka framing on a connection: resync after a gap, on long garbage, with real
messages from a repo capture around it."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from kdissect.stream.connection import KafkaConnection
from kdissect.stream.framing import RESYNC_TAIL
from tests.test_captures import dissect, messages

CAPTURE = Path(__file__).resolve().parents[1] / "captures" / "confluent-group.pcap"


def connection():
    exchanges, gaps = [], []
    counter = iter(range(10**9))
    k = KafkaConnection(
        1,
        ("10.0.0.1", 50000),
        ("10.0.0.2", 9092),
        exchanges.append,
        gaps.append,
        lambda: next(counter),
    )
    return k, exchanges, gaps


def test_resync_after_a_gap_through_long_garbage():
    real = [m for m in messages(dissect(CAPTURE)[0]) if m.direction == "request"][:3]
    framed = [struct.pack(">i", len(m.data)) + m.data for m in real]
    k, exchanges, gaps = connection()
    k.data(0, 0, framed[0], 0.0, 1)
    k.gap(0, len(framed[0]), 100, 0.0, 2)  # the next message's start is lost
    offset = len(framed[0]) + 100
    # implausible sizes, then noise (noises whose last 4 bytes read as a size are tested
    # below)
    garbage = b"\xff" * 200_000 + random.Random(2026).randbytes(300_000)
    for i in range(0, len(garbage), 1400):
        k.data(0, offset + i, garbage[i : i + 1400], 0.0, 3)
        assert k.framers[0].pending <= RESYNC_TAIL + 1400
    offset += len(garbage)
    k.data(0, offset, framed[1] + framed[2], 0.0, 4)
    k.close()
    got = [ex.request.data for ex in exchanges if ex.request is not None]
    assert real[0].data in got and real[1].data in got and real[2].data in got
    lost = [g for g in gaps if not g.unread]
    assert len(lost) == 1 and lost[0].length == 100
    # the garbage was read past in search of a boundary, and that is said to the byte
    assert [(g.offset, g.length) for g in gaps if g.unread] == [
        (offset - len(garbage), len(garbage))
    ]


def _after_noise(noise: bytes, then: list[bytes], hole: int | None = None, more=()):
    """A connection whose request stream is lost after its first message and resumes
    inside ``noise``, then the messages ``then`` (1400-byte chunks); with ``hole``, a
    50-byte hole after that many bytes of them and ``more`` after it. The requests
    decoded and the unread stretches (offset from the noise's start, length)."""
    first = struct.pack(">i", len(REAL[0].data)) + REAL[0].data
    k, exchanges, gaps = connection()
    k.data(0, 0, first, 0.0, 1)
    k.gap(0, len(first), 100, 0.0, 2)
    at = len(first) + 100
    stream = noise + b"".join(then)
    stop = len(stream) if hole is None else len(noise) + hole
    for i in range(0, stop, 1400):
        k.data(0, at + i, stream[i : min(i + 1400, stop)], 0.0, 3)
    if hole is not None:
        k.gap(0, at + stop, 50, 0.0, 4)
        k.data(0, at + stop + 50, b"".join(more), 0.0, 5)
    k.close()
    got = [ex.request.data for ex in exchanges if ex.request is not None]
    unread = sorted((g.offset - at, g.length) for g in gaps if g.unread)
    return got, unread


def _covered(stretches: list[tuple[int, int]]) -> tuple[int, int]:
    """Adjacent stretches as one (start, length); they must leave no byte out."""
    start, length = stretches[0]
    for offset, n in stretches[1:]:
        assert offset == start + length, stretches
        length += n
    return start, length


REAL = [m for m in messages(dissect(CAPTURE)[0]) if m.direction == "request"]
FRAMED = [struct.pack(">i", len(m.data)) + m.data for m in REAL]


def test_noise_whose_end_reads_as_a_size_does_not_swallow_the_real_messages():
    """Resynchronisation inside noise: when the noise's last 4 bytes read as a size (of at
    most 100 MiB), the real message's own size after them reads as a plausible header
    (api key 0, version 48), and that false start was taken, swallowing every message
    after it. 300 noises (about 7 of them end so), each before a real Metadata and
    Produce request: both are decoded, and every byte of the noise is reported unread."""
    then = FRAMED[1:3]
    assert REAL[1].api_key == 3 and len(REAL[1].data) == 48  # the shape said above
    false_starts = 0
    for seed in range(300):
        noise = random.Random(seed).randbytes(3000)
        false_starts += noise[-4] <= 6
        got, unread = _after_noise(noise, then)
        assert REAL[1].data in got and REAL[2].data in got, seed
        assert _covered(unread) == (0, len(noise)), seed
    assert false_starts >= 5  # the case tested is among them


def test_a_false_size_at_the_end_of_noise_is_refuted_wherever_its_end_falls():
    """The false start's size chosen: its claimed end inside the real messages after it
    (the start inside it chains, its end does not), beyond the capture's end, or beyond
    a hole that cuts the stream: each time every real message is decoded."""
    noise = random.Random(1).randbytes(3000)[:-4]
    for size in (100, 1000, 5000, 10**7):
        got, unread = _after_noise(noise + struct.pack(">i", size), FRAMED[1:])
        assert [m.data for m in REAL[1:]] == got[1:], size
        assert _covered(unread) == (0, len(noise) + 4), size
        cut = sum(map(len, FRAMED[1:11]))  # a hole after 10 of them
        got, unread = _after_noise(
            noise + struct.pack(">i", size), FRAMED[1:11], cut, FRAMED[11:14]
        )
        assert [m.data for m in REAL[1:11] + REAL[11:14]] == got[1:], size
        assert _covered(unread) == (0, len(noise) + 4), size


def test_gap_inside_a_known_message_reports_it_truncated():
    real = [m for m in messages(dissect(CAPTURE)[0]) if m.direction == "request"]
    big = max(real, key=lambda m: len(m.data))
    framed = struct.pack(">i", len(big.data)) + big.data
    k, exchanges, gaps = connection()
    k.data(0, 0, framed[:40], 0.0, 1)
    k.gap(0, 40, 20, 0.0, 2)
    k.data(0, 60, framed[60:], 0.0, 3)  # the rest of it: kept after the hole
    after = real[0]
    k.data(0, len(framed), struct.pack(">i", len(after.data)) + after.data, 0.0, 4)
    k.close()
    first, second = [ex.request for ex in exchanges]
    # only the hole is missing: the bytes after it belong to the message (issue 23)
    assert first.status == f"truncated: 20 of {len(big.data)} bytes not captured (20 in 1 hole)"
    assert first.pieces and first.pieces[0][1] == framed[60:]
    assert first.api_key == big.api_key and first.correlation_id == big.correlation_id
    assert second.data == after.data and exchanges[1].has("unanswered")
    assert exchanges[0].has("message_truncated")
