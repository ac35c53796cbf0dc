"""Rewriting a response whose first bytes are already on their way (a large Fetch answer
passed on as it comes): its size must not change. Leader hints of the same length are
rewritten in place; others are hidden under a tag the version does not define (clients
skip it), never passed with a broker's own address. Real Fetch v16 bytes (the kcat
capture) given a KIP-951 hint by hand, checked with the full decoder."""

from __future__ import annotations

import struct
from pathlib import Path

from kdissect.protocol import decode_response
from kdissect.proxy.rewrite import rewrite_same_size, uvarint
from kdissect.proxy.skipscan import endpoint_spans, top_error_code

ROOT = Path(__file__).resolve().parents[1]


def _fetch_with_hint(host: bytes) -> tuple[bytes, int]:
    """(a Fetch v16 answer with one leader hint for broker 7 at ``host``:9092, the
    offset where the records end)"""
    from kdissect.sources.pcap import exchanges_in

    fetch = next(
        ex.response
        for ex in exchanges_in([str(ROOT / "captures/kcat.pcap")]).exchanges
        if ex.response is not None
        and ex.response.api_key == 1
        and ex.response.api_version == 16
        and len(ex.response.data) > 200
    )
    assert fetch.data.endswith(b"\x01\x00\x01\x01")  # tag 0, size 1, empty array
    endpoint = (
        struct.pack(">i", 7)
        + uvarint(len(host) + 1)
        + host
        + struct.pack(">i", 9092)
        + b"\x00"
        + b"\x00"
    )
    value = uvarint(2) + endpoint
    return fetch.data[:-4] + b"\x01" + uvarint(0) + uvarint(len(value)) + value, len(fetch.data) - 4


def _hints(data: bytes) -> list[tuple[int, str, int]]:
    tree = decode_response(data, 1, 16).tree
    out = []
    for node in tree.walk():
        host, port = node.child("host"), node.child("port")
        ident = node.child("node_id")
        if host is not None and port is not None and ident is not None:
            out.append((ident.value, host.value, port.value))
    return out


def test_a_hint_of_the_same_length_is_rewritten_in_place():
    data, records_end = _fetch_with_hint(b"10.0.0.7")
    spans = endpoint_spans(data, 1, 16)
    new, first = rewrite_same_size(data, spans, lambda sp: ("1.2.3.4.", 19007))
    assert len(new) == len(data) and first >= records_end
    assert _hints(new) == [(7, "1.2.3.4.", 19007)]
    assert not decode_response(new, 1, 16).problems


def test_a_hint_of_another_length_is_hidden_not_leaked():
    data, records_end = _fetch_with_hint(b"broker-7.internal")
    spans = endpoint_spans(data, 1, 16)
    new, first = rewrite_same_size(data, spans, lambda sp: ("127.0.0.1", 19007))
    assert len(new) == len(data) and first >= records_end
    assert new[:records_end] == data[:records_end]  # records untouched
    assert _hints(data) and not _hints(new)  # no address left for clients
    assert b"broker-7.internal" in new  # (the bytes, under an unknown tag)
    assert endpoint_spans(new, 1, 16) == []  # the tag is not node_endpoints
    assert not decode_response(new, 1, 16).problems


def test_nothing_to_change_keeps_the_bytes():
    data, _ = _fetch_with_hint(b"127.0.0.1")
    spans = endpoint_spans(data, 1, 16)
    assert rewrite_same_size(data, spans, lambda sp: (sp.host, sp.port)) == (data, len(data))


def test_the_top_level_error_code_is_read_where_the_layout_puts_it():
    data, _ = _fetch_with_hint(b"x")
    assert top_error_code(data, 1, 16) == 0
    bad = data[:9] + struct.pack(">h", 6) + data[11:]  # header 4+1, throttle 4
    assert top_error_code(bad, 1, 16) == 6
    assert top_error_code(data, 0, 9) is None  # Produce: no top-level code
    assert top_error_code(b"\0\0\0\1", 1, 16) is None  # too short: unknown


def test_api_keys_kafka_does_not_define_share_one_metrics_series():
    """A client sending random API keys must not grow the metrics by a series each."""
    from kdissect.proxy.metrics import Metrics

    m = Metrics()
    assert m.api(30000) is m.api(-7) is m.api(31000)
    assert m.api(0) is not m.api(30000)
    assert len(m.apis) == 2


def test_an_answer_newer_than_the_tables_is_read_with_the_newest_layout_checked_to_its_end():
    """Every answer in the repo's captures that names brokers, in a version the tables
    hold as their newest, read as if it were the next version: the same brokers at the
    same bytes. Given one more byte, or cut by one, that reading fails (the answer is then
    forwarded unchanged) where the known version's walk, which stops after the last
    broker, would not notice."""
    from kdissect.protocol import schemas
    from kdissect.protocol.apis import NAMES_BROKERS
    from kdissect.protocol.reader import DecodeError
    from kdissect.proxy.skipscan import assumed
    from kdissect.sources.pcap import exchanges_in
    from tests.support.repo_captures import every_capture

    newest = {k: schemas.all_versions()[k][-1] for k in NAMES_BROKERS}
    seen = set()
    for ex in exchanges_in([str(p) for p in every_capture()]).exchanges:
        m = ex.response
        if m is None or m.api_key not in NAMES_BROKERS or m.api_version != newest[m.api_key]:
            continue
        body, key = bytes(m.data), m.api_key
        spans = endpoint_spans(body, key, m.api_version)
        if not spans:
            continue
        seen.add(key)
        assert assumed(key, m.api_version + 1) == m.api_version
        assert assumed(key, m.api_version) is None
        assert endpoint_spans(body, key, m.api_version + 1) == spans
        for damaged in (body + b"\0", body[:-1]):
            try:
                endpoint_spans(damaged, key, m.api_version + 1)
            except DecodeError:
                continue
            raise AssertionError(f"API {key}: a damaged answer read as fitting")
    assert {3, 10} <= seen, seen  # Metadata and FindCoordinator answers at least
