"""Damaged real captures (tests/support/damage.py: segments dropped, packets reordered,
the snaplen cut, a mid-stream start): kdissect's loss accounting must equal exactly what
was removed, no finding may fire without evidence, no latency may be negative, and every
captured byte of a cut message must be kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kdissect.capture.pcapfile import CaptureReader
from kdissect.sources.pcap import CaptureDissector
from kdissect.stream.enrich import Enricher
from kdissect.stream.sink import Collect
from tests.support.damage import damage

CAPTURES = Path(__file__).parent.parent / "captures"
VARIANTS = {
    "drop": dict(drop=0.05, reorder=0, snaplen=None, start=0),
    "reorder": dict(drop=0, reorder=0.05, snaplen=None, start=0),
    "snaplen": dict(drop=0, reorder=0, snaplen=200, start=0),
    "midstream": dict(drop=0, reorder=0, snaplen=None, start=0.1),
    "all": dict(drop=0.02, reorder=0.05, snaplen=200, start=0.03),
}
# findings that need complete evidence: a damaged capture must not produce them
NEEDS_EVIDENCE = {
    "out_of_order",
    "version_not_advertised",
    "missing_tag_trailer",
    # the Kafka-level diagnoses: these four captures show none of them
    # (tests/test_diagnoses.py checks every repo capture's count)
    "removed_version",
    "no_api_versions",
    "clock_skew",
    "producer_sequence_gap",
    "producer_retry",
    "producer_epoch_bump",
    "leadership_storm",
    "slow_response",
    "consumer_lag",
    "consumer_rebalance",
    "empty_fetches",
    "commit_behind_fetch",
}


def dissect(data: bytes, tmp_path: Path):
    path = tmp_path / "damaged.pcap"
    path.write_bytes(data)
    sink = Collect()
    dissector = CaptureDissector(Enricher(sink))
    with CaptureReader(str(path)) as reader:
        for packet in reader.packets():
            dissector.packet(packet)
    dissector.finish()
    return sink, {i + 1: e for i, e in enumerate(dissector.streams)}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize(
    "capture", ["mtu1500", "confluent-group", "sasl-scram", "kafka-python-codecs"]
)
def test_damaged_capture(tmp_path, capture, variant):
    for seed in (1, 2):
        data, removed = damage(
            (CAPTURES / f"{capture}.pcap").read_bytes(), seed=seed, **VARIANTS[variant]
        )
        sink, streams = dissect(data, tmp_path)
        # loss: each hole once, exactly the bytes removed, where they were removed
        where = streams
        reported: dict = {}
        unread: dict = {}
        for g in sink.gaps:
            k = where[g.stream]
            d = (k.client, k.broker) if g.direction == "request" else (k.broker, k.client)
            (unread if g.unread else reported).setdefault(d, []).append((g.offset, g.length))
        assert reported == removed.holes, (seed, removed)
        # bytes read past in search of a boundary: right after a hole, or from the first
        # byte of a stream seen without its start, and never inside a hole
        for d, stretches in unread.items():
            ends = {o + n for o, n in reported.get(d, [])}
            assert all(o in ends or o == 0 for o, _ in stretches), (d, stretches, ends)
        for ex in sink.exchanges:
            codes = {f.code for f in ex.findings}
            assert not codes & NEEDS_EVIDENCE, (seed, ex.stream, ex.findings)
            assert ex.latency is None or ex.latency >= 0
            if ex.request and ex.response and ex.response.ts < ex.request.ts:
                assert "impossible_latency" in codes
            for m in ex.messages:
                if m.holes is None:
                    continue
                # every captured byte of a cut message is kept, each hole marked once
                size = int(re.search(r"of (\d+) bytes", m.status).group(1))
                kept = len(m.data) + sum(len(p) for _, p in m.pieces)
                lost = sum(n for _, n in m.holes)
                assert kept + lost == size or "capture ended" in m.status, m.status
                tree = m.decoded().tree
                shown = [n for n in tree.children if n.name == "_captured_after_hole"]
                assert sum(n.length for n in shown) == kept - len(m.data)
        if variant in ("reorder", "midstream"):
            assert not [g for g in sink.gaps if not g.unread]  # nothing was lost
        if variant in ("drop", "snaplen", "all"):
            assert removed.hole_count > 0  # the damage did something


def test_record_batches_after_a_hole_are_decoded(tmp_path):
    """In a Produce or Fetch cut by holes, the record batches captured whole after a hole
    are found (length fits, CRC32C matches) and decoded; the bytes around them stay raw,
    marked, and the pieces' nodes cover their bytes exactly."""
    located = 0
    # mtu1500's batches are 40 KB: a hole in one of 1 % of segments leaves some whole
    for seed in (4, 6):
        data, _ = damage(
            (CAPTURES / "mtu1500.pcap").read_bytes(),
            seed=seed,
            drop=0.01,
            reorder=0,
            snaplen=None,
            start=0,
        )
        sink, _ = dissect(data, tmp_path)
        for m in (m for ex in sink.exchanges for m in ex.messages if m.holes):
            for piece in (
                n
                for n in m.decoded().tree.children
                if n.name == "_captured_after_hole" and n.children
            ):
                assert m.api_key in (0, 1)
                pos = 0
                for c in piece.children:
                    assert c.offset == pos and c.ktype in ("record_batch", "bytes")
                    pos += c.length
                    if c.ktype == "record_batch":
                        located += 1
                        assert not any(n.problem for n in c.walk())
                assert pos == piece.length
    assert located == 3


def test_locating_batches_in_noise_is_linear_and_claims_nothing():
    import time
    from kdissect.protocol import Options
    from kdissect.protocol.context import Decoding
    from kdissect.protocol.records import locate_batches

    # every byte says "magic 2" and every length fits: the CRC work must stay bounded
    hostile = bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0] * 4 + [2] * 200_000)
    started = time.process_time()
    found = locate_batches(hostile, Decoding(Options()))
    assert time.process_time() - started < 2
    assert [(n.name, n.offset, n.length) for n in found] == [("_unlocated", 0, len(hostile))]
