"""Bad bytes never raise, never allocate by a length field, and lose nothing: the tree
still covers every byte, with the problem marked where decoding stopped."""

from __future__ import annotations

import struct
from pathlib import Path
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kdissect.protocol import decode_request, decode_response, guess
from kdissect.protocol.context import Decoding, Options as DecodeOptions
from kdissect.protocol.node import Node
from kdissect.protocol.records import read_records
from tests.test_real_clients import kafka_python_fetch, kafka_python_produce, settle


def leaves_tile(tree: Node, size: int) -> bool:
    pos = 0
    for leaf in sorted(tree.own_leaves(), key=lambda n: n.offset):
        if leaf.offset != pos:
            return False
        pos = leaf.end
    return pos == size


@pytest.fixture(scope="module")
def real_messages(kafka):
    """(bytes, direction, api_key, api_version) of real traffic, records included."""
    kafka.reset()
    kafka_python_produce(kafka.bootstrap, "bad-input", "gzip", headers=True)
    kafka_python_fetch(kafka.bootstrap, "bad-input")
    out = []
    for e in settle(kafka):
        out.append((e.request.data, "request", e.request.api_key, e.request.api_version))
        if e.response is not None:
            out.append((e.response.data, "response", e.request.api_key, e.request.api_version))
    assert len(out) >= 10
    return out


def _decode(data: bytes, direction: str, key: int, version: int):
    if direction == "request":
        return decode_request(data)
    return decode_response(data, key, version)


def test_truncation_at_every_byte(real_messages):
    for data, direction, key, version in real_messages:
        full = _decode(data, direction, key, version)
        assert full.problems == []
        for cut in range(len(data)):
            msg = _decode(data[:cut], direction, key, version)
            assert msg.problems, (full.title, cut)
            assert leaves_tile(msg.tree, cut), (full.title, cut)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_mutations(real_messages, data):
    raw, direction, key, version = data.draw(st.sampled_from(real_messages))
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    msg = _decode(bytes(buf), direction, key, version)
    assert leaves_tile(msg.tree, len(buf))


@pytest.mark.slow  # (seconds: kept out of the fast tier)
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(min_size=0, max_size=200))
def test_garbage_as_any_api(blob):
    for key, version in [(0, 9), (1, 12), (3, 0), (3, 12), (11, 5), (18, 3), (4, 7)]:
        for msg in (decode_response(blob, key, version), decode_request(blob)):
            assert leaves_tile(msg.tree, len(blob))
    guess(blob)


def _bounded(fn, limit_mb: float = 20):
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit_mb * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"
    return result


@pytest.mark.parametrize("where", ["string", "array", "bytes", "compact"])
def test_absurd_lengths(where):
    # Metadata v0 response: correlation id, brokers count, broker: node_id, host...
    if where == "string":
        data = struct.pack(">iii", 7, 1, 1) + struct.pack(">h", 0x7FFF) + b"ab"
        msg = _bounded(lambda: decode_response(data, 3, 0))
    elif where == "array":
        data = struct.pack(">ii", 7, 2**31 - 1) + b"\x00" * 8
        msg = _bounded(lambda: decode_response(data, 3, 0))
    elif where == "bytes":
        # SaslAuthenticate v0 response: error_code, error_message (null), auth_bytes
        data = struct.pack(">ihhi", 7, 0, -1, 2**31 - 1) + b"xyz"
        msg = _bounded(lambda: decode_response(data, 36, 0))
    else:
        # Metadata v12 response (flexible): throttle, compact array count of 2^35
        data = struct.pack(">i", 7) + b"\x00" + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x7f"
        msg = _bounded(lambda: decode_response(data, 3, 12))
    reasons = " ".join(r for _, r in msg.problems)
    assert "exceeds" in reasons or "longer than" in reasons or "length" in reasons
    assert leaves_tile(msg.tree, len(data))


def _batch(codec: int, value: bytes) -> bytes:
    """A real RecordBatch v2, written by kafka-python's own builder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    b.append(0, timestamp=1700000000000, key=b"k", value=value, headers=[])
    return bytes(b.build())


@pytest.mark.parametrize("codec,name", [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_decompression_bomb_is_a_problem(codec, name):
    batch = _batch(codec, b"\x00" * (8 * 1024 * 1024))
    assert len(batch) < 1024 * 1024
    holder = Node("records", "records", 0, len(batch))
    options = DecodeOptions(max_decompressed=1024 * 1024)
    _bounded(lambda: read_records(batch, holder, 0, len(batch), Decoding(options)), limit_mb=12)
    findings = holder.findings()
    assert findings and findings[0][1] == "decompressed_budget" and "budget" in findings[0][2]
    # with a cap that fits, the same batch decodes to its one record
    roomy = Node("records", "records", 0, len(batch))
    roomy_options = DecodeOptions(max_decompressed=16 * 1024 * 1024)
    read_records(batch, roomy, 0, len(batch), Decoding(roomy_options))
    assert roomy.problems() == []
    record = next(n for n in roomy.walk() if n.ktype == "record")
    assert record.child("value").value == b"\x00" * (8 * 1024 * 1024)


def test_sasl_fields_spend_the_node_budget_and_a_cut_keeps_secrets_masked():
    """A SCRAM token of many attributes stops at the field budget (node_budget), and a
    secret after the cut stays masked in the raw rest (the recording masks by it)."""
    from kdissect.protocol.context import Options
    from kdissect.protocol.message import sasl_token_message

    token = b"c=biws,r=nonce," + b"a=," * 300 + b"p=c2VjcmV0"
    msg = sasl_token_message(token, Options(max_nodes=100))
    node = msg.tree.child("token")
    rest = node.children[-1]
    assert rest.name == "_rest" and rest.code == "node_budget"
    assert len(node.children) <= 102 and rest.secret
    assert b"c2VjcmV0" not in bytes(rest.value) and b"c2VjcmV0" not in bytes(node.value)
    shown = sasl_token_message(token, Options(max_nodes=100, show_secrets=True))
    assert b"c2VjcmV0" in bytes(shown.tree.child("token").children[-1].value)


def test_options_carry_no_run_state_each_message_has_its_own_budget():
    """``Options`` is configuration (compared and hashed by value, the same after a run):
    each message decoded with it gets a fresh budget, so a message that spends its field
    budget decodes the same after others as alone (real messages of a KRaft cluster)."""
    from kdissect.protocol import decode_request, decode_response
    from kdissect.protocol.context import Options
    from kdissect.sources.pcap import exchanges_in

    capture = Path(__file__).resolve().parents[1] / "captures" / "kafka-kraft-cluster.pcap"
    messages = [m for ex in exchanges_in([str(capture)]).exchanges for m in ex.messages]
    options = Options(max_nodes=40)

    def tree(m, options):
        if m.direction == "request":
            return decode_request(m.data, options).tree
        return decode_response(m.data, m.api_key, m.api_version, options).tree

    shared = [tree(m, options) for m in messages if m.direction != "sasl"]
    alone = [tree(m, Options(max_nodes=40)) for m in messages if m.direction != "sasl"]
    spent = sum(1 for t in shared if any(n.code == "node_budget" for n in t.walk()))
    assert 0 < spent < len(shared)  # some messages spend the budget, not all
    assert [t.plain() for t in shared] == [t.plain() for t in alone]
    assert options == Options(max_nodes=40) and hash(options) == hash(Options(max_nodes=40))
    assert options != Options(max_nodes=41)
