"""Latency in a capture whose packets are out of order in the file (timestamps kept):
every exchange's latency is the source's, on real captures reordered locally, through
both packet paths (the compiled reader and reassembler, and the pure-Python ones)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kdissect.capture.native import PURE_ENV
from kdissect.capture.pcapfile import Packet, in_time_order
from kdissect.sources.pcap import exchanges_in
from tests.support.pcap_edit import copies_swapped, reordered, rewrite

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"compiled": "0", "pure": "1"}


def latencies(path: Path, path_kind: str) -> dict:
    """Each exchange's latency by (client, broker, correlation id, API), in order."""
    before = os.environ.get(PURE_ENV)
    os.environ[PURE_ENV] = PATHS[path_kind]
    try:
        sink = exchanges_in([str(path)])
    finally:
        if before is None:
            del os.environ[PURE_ENV]
        else:
            os.environ[PURE_ENV] = before
    found: dict = {}
    for ex in sink.exchanges:
        m = ex.request or ex.response
        found.setdefault((ex.client, ex.broker, m.correlation_id, m.api_key), []).append(
            (ex.request is not None, ex.response is not None, ex.latency)
        )
    return found


def _differ(a: dict, b: dict) -> list:
    return [(k, v, b.get(k)) for k, v in a.items() if b.get(k) != v] + [
        (k, None, v) for k, v in b.items() if k not in a
    ]


@pytest.mark.parametrize("path_kind", PATHS)
@pytest.mark.parametrize(
    "name,seed",
    [("kafka-clients.pcap", 3), ("kafka-broker-killed.pcap", 2), ("kafka-kraft-cluster.pcap", 3)],
)
def test_a_locally_reordered_capture_keeps_every_latency(name, seed, path_kind, tmp_path):
    """Before: connections whose broker answer came first in the file were dropped as
    "a server talking first" (kafka-clients seed 3: 11 exchanges; kraft-cluster: 70), and
    a retransmission read before its first copy gave the message its time."""
    src = ROOT / "captures" / name
    moved = []

    def change(packets):
        out, n = reordered(packets, seed, 0.3)
        moved.append(n)
        return out

    dst = rewrite(src, tmp_path / name, change)
    assert moved[0] > 100
    source = latencies(src, path_kind)
    assert sum(len(v) for v in source.values()) > 100
    assert sum(1 for v in source.values() for x in v if x[2] is not None) > 100
    assert _differ(source, latencies(dst, path_kind)) == []


@pytest.mark.parametrize("path_kind", PATHS)
def test_a_retransmission_read_first_takes_the_first_copy_time(path_kind, tmp_path):
    """kafka-broker-killed.pcap holds a request segment sent twice 4.5 ms apart: read in
    the other order, its ListOffsets took 5.4 ms instead of 9.8 ms."""
    src = ROOT / "captures/kafka-broker-killed.pcap"
    moved = []

    def change(packets):
        out, n = copies_swapped(packets)
        moved.append(n)
        return out

    dst = rewrite(src, tmp_path / "swapped.pcap", change)
    assert moved[0] >= 1
    source = latencies(src, path_kind)
    assert _differ(source, latencies(dst, path_kind)) == []


def _packets(times: list[float]) -> list[Packet]:
    return [Packet(i + 1, t, 1, b"", 0) for i, t in enumerate(times)]


def test_time_order_restores_a_local_swap_and_keeps_ties():
    got = [p.index for p in in_time_order(iter(_packets([1.0, 3.0, 2.0, 2.0, 4.0])), 4)]
    assert got == [1, 3, 4, 2, 5]


def test_a_clock_stepped_back_delays_no_packet_beyond_the_window():
    """Packets after a backward step go first only ``window`` places: the packets before
    the step are not held to the end of the file."""
    times = [100.0 + i for i in range(5)] + [float(i) for i in range(50)]
    got = [p.index for p in in_time_order(iter(_packets(times)), 4)]
    assert sorted(got) == list(range(1, 56))
    assert all(got.index(i) - (i - 1) <= 4 for i in range(1, 56))  # none later than 4 places
    assert got.index(5) < got.index(55)
