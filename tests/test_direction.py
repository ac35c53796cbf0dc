"""How a capture's connections are read at the edge of kdissect's knowledge: a request
version newer than its tables (a marked assumption, never an error, never a connection
read backwards), which side is the client (from the strongest evidence there is),
responses whose requests were not captured (guessed cheaply), and captures that begin
inside a TLS record or inside a Kafka message. The captures are the repository's real
ones (Apache Kafka and real clients on port 57019, not 9092), edited as a capture begun
later, filtered to one direction, or sent by a client newer than the tables."""

from __future__ import annotations

import importlib
import json
import struct
from collections import Counter
from pathlib import Path

import pytest

from kdissect.capture.pcapng_writer import ACK, PSH, Recorder, _packet
from kdissect.protocol import schemas
from kdissect.sources.pcap import exchanges_in
from kdissect.stream import orphans
from kdissect.stream.framing import UNSURE, UNSURE_MAX, Framer
from kdissect.stream.connection import plausible_request
from tests.support.cli import kdissect_text as kdissect
from tests.support.pcap_edit import (
    begun_later,
    first_requests_as,
    one_way,
    rewrite,
    without_handshakes,
)

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"
JAVA = CAPTURES / "kafka-java-consumer-group.pcap"  # Java 4.3 clients, broker on 57019
PORT = 57019
NEWER = 99  # a request version no release has (what a client newer than the tables sends)


def dissect(path: Path, **kw):
    return exchanges_in([str(path)], **kw)


def reading(got) -> list[tuple]:
    """Every message as (client, direction, api, correlation id, size): the reading that
    a connection read backwards would change."""
    return sorted(
        (ex.client, m.direction, m.api_key, m.correlation_id, m.size)
        for ex in got.exchanges
        for m in ex.messages
    )


def sides(got) -> Counter:
    return Counter({ex.stream: ex.side_by for ex in got.exchanges}.values())


# -- a version newer than the tables ----------------------------------------------------


def _with_tag(message: bytes, section: int, tag: int, value: bytes) -> bytes:
    """``message`` (no size prefix) whose tagged-field section at ``section`` (it ends the
    message; fewer than 127 fields) gets one more field."""
    count = message[section]
    assert count < 127 and section < len(message)
    return (
        message[:section]
        + bytes([count + 1])
        + message[section + 1 :]
        + bytes([tag, len(value)])
        + value
    )


def _api_versions_v6():
    """A real ApiVersions v4 exchange of a Java 4.3 client and Apache Kafka, made v6: the
    version rewritten and a tagged field (99) added to the request and to the answer, as
    Kafka adds fields to a flexible version; and the Metadata exchange after it."""
    got = dissect(JAVA)
    api, meta = got.exchanges[0], got.exchanges[1]
    assert (api.request.api_key, api.request.api_version) == (18, 4)
    req = api.request.data
    body = api.request.decoded().body
    tags = next(c for c in body.children if c.name == "_tagged_fields")
    req6 = _with_tag(req[:2] + struct.pack(">h", 6) + req[4:], tags.offset, 99, b"4.5")
    resp_tags = next(c for c in api.response.decoded().body.children if c.name == "_tagged_fields")
    resp6 = _with_tag(api.response.data, resp_tags.offset, 99, b"\x00\x01")
    return [(0, req6), (1, resp6), (0, meta.request.data), (1, meta.response.data)]


def _write(
    path: Path, exchanges, syn: bool, client=("10.0.0.7", 51515), broker=("10.0.0.9", PORT)
) -> None:
    """One connection carrying ``exchanges`` ((side, message) in order), with its
    handshake (the project's pcapng writer) or as seen without it."""
    rec = Recorder(str(path), show_secrets=True)
    ts = 1_700_000_000.0
    if syn:
        conn = rec.connection(client, broker, ts)
        for side, msg in exchanges:
            ts += 0.001
            conn.data(side, struct.pack(">i", len(msg)) + msg, ts)
        conn.close(ts)
    else:
        seq = [7000, 90000]
        for side, msg in exchanges:
            ts += 0.001
            src, dst = (client, broker) if side == 0 else (broker, client)
            payload = struct.pack(">i", len(msg)) + msg
            rec.packet(_packet(src, dst, seq[side], seq[1 - side], PSH | ACK, payload), ts)
            seq[side] += len(payload)
    rec.close()


@pytest.mark.parametrize("syn", [True, False], ids=["with-syn", "no-syn"])
def test_a_newer_api_versions_decodes_with_an_assumption_and_no_error(tmp_path, syn):
    path = tmp_path / "api-versions-v6.pcapng"
    _write(path, _api_versions_v6(), syn)
    res = kdissect("pcap", "--no-tui", str(path), "--format", "jsonl")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(m["direction"], m["api_name"], m["api_version"]) for m in lines] == [
        ("request", "ApiVersions", 6),
        ("response", "ApiVersions", 6),
        ("request", "Metadata", 13),
        ("response", "Metadata", 13),
    ]
    codes = [f["code"] for m in lines for f in m["findings"]]
    assert all(not m["problems"] and m["status"] == "ok" for m in lines)
    assert codes.count("assumed_version") == 2
    assert set(codes) <= {"assumed_version", "client_side_guessed"}
    assert all(f["severity"] == "note" for m in lines for f in m["findings"])
    assumed = next(f for f in lines[1]["findings"] if f["code"] == "assumed_version")
    newest = schemas.all_versions()[18][-1]  # ApiVersions' newest known layout
    assert assumed["detail"].startswith(f"v6 read as v{newest}")
    # the answer's fields read as Kafka sent them; the unknown tag is kept, not an error
    answer = lines[1]["body"]
    assert answer["error_code"] == 0 and len(answer["api_keys"]) > 50
    text = kdissect("pcap", "--no-tui", str(path))
    assert text.returncode == 0 and "ApiVersions v6" in text.stdout and "problem" not in text.stdout


def test_what_the_newest_layout_cannot_explain_is_one_note(tmp_path):
    """A newer version whose answer carries bytes the newest known layout lacks: they are
    shown as unexplained bytes with one note, not as errors."""
    exchanges = _api_versions_v6()
    side, resp = exchanges[1]
    exchanges[1] = (side, resp + b"\x00\x00\x00\x2a\x01")  # a field v6 added at the end
    path = tmp_path / "api-versions-v6-longer.pcapng"
    _write(path, exchanges, True)
    got = dissect(path)
    answer = got.exchanges[0]
    assert answer.status == "ok"
    assumed = [f for f in answer.findings if f.code == "assumed_version"]
    assert len(assumed) == 2 and [f.code for f in answer.findings] == ["assumed_version"] * 2
    assert "5 bytes it does not explain" in assumed[1].detail
    tree = answer.response.decoded()
    assert tree.problems == []
    left = tree.body.child("_unexplained")
    assert left is not None and left.length == 5 and left.end == len(answer.response.data)


def test_what_the_broker_advertised_backs_an_assumed_version(tmp_path):
    """The connection's ApiVersions answer says the broker speaks Metadata up to one
    version more than the tables know: the Metadata request in that version after it is
    read as the newest known, with the broker's word in the note, and no
    version_not_advertised."""
    exchanges = _api_versions_v6()
    side, resp = exchanges[1]
    tree = dissect(JAVA).exchanges[0].response.decoded()
    entry = next(
        e
        for e in tree.body.child("api_keys").children
        if e.child("api_key") is not None and e.child("api_key").value == 3
    )
    top = entry.child("max_version")
    newest = max(schemas.all_versions()[3])
    assert top.value == newest  # Apache Kafka 4.3 speaks the newest we know
    at = top.offset  # the answer's bytes up to it are unchanged
    exchanges[1] = (side, resp[:at] + struct.pack(">h", newest + 1) + resp[at + 2 :])
    side, meta = exchanges[2]
    exchanges[2] = (side, meta[:2] + struct.pack(">h", newest + 1) + meta[4:])
    path = tmp_path / "metadata-newer.pcapng"
    _write(path, exchanges, True)
    got = dissect(path)
    meta_ex = got.exchanges[1]
    assert (meta_ex.request.api_key, meta_ex.request.api_version) == (3, newest + 1)
    notes = [f for f in meta_ex.findings if f.code == "assumed_version"]
    assert len(notes) == 2 and [f.code for f in meta_ex.findings] == ["assumed_version"] * 2
    assert f"the broker advertised v0-v{newest + 1} on this connection" in notes[0].detail


def test_a_request_header_is_recognised_by_its_shape():
    head = struct.pack(">ihhih", 30, 18, NEWER, 7, 3) + b"abc" + b"\x00" * 17
    assert plausible_request(head)  # any version up to 127
    assert not plausible_request(struct.pack(">ihhih", 30, 18, 300, 7, 3) + b"abc" + b"\0" * 17)
    assert not plausible_request(struct.pack(">ihhih", 30, 999, 1, 7, 3) + b"abc" + b"\0" * 17)
    assert not plausible_request(struct.pack(">ihhih", 30, 18, 4, -5, 3) + b"abc" + b"\0" * 17)
    assert not plausible_request(struct.pack(">ihhih", 30, 18, 4, 7, 3) + b"a\x01c" + b"\0" * 17)


# -- which side is the client -------------------------------------------------------------


def test_the_client_side_comes_from_the_strongest_evidence(tmp_path):
    original = dissect(JAVA)
    assert sides(original) == {"SYN (certain)": 7}
    # begun after every connection opened: the first by the request's shape (its
    # correlation id answered), the others by the broker port the Metadata answer named
    late = rewrite(JAVA, tmp_path / "late.pcap", without_handshakes)
    got = dissect(late)
    assert reading(got) == reading(original)
    assert sides(got) == {
        "request shape: answered by its correlation id (high)": 1,
        "listener port (high)": 6,
    }
    # and with -p on the broker's port, the port says it
    got = dissect(late, ports={PORT})
    assert reading(got) == reading(original) and sides(got) == {"Kafka port (high)": 7}


def test_a_first_request_newer_than_the_tables_does_not_flip_the_connection(tmp_path):
    """Java clients open every connection with ApiVersions; rewritten to a version the
    tables lack, in a capture begun after the connections opened, off port 9092: the
    broker's answer must not be taken for the request (it read every message backwards)."""
    original = dissect(JAVA)

    def newer(packets):
        packets, n = first_requests_as(without_handshakes(packets), PORT, NEWER, api_key=18)
        assert n == 7
        return packets

    got = dissect(rewrite(JAVA, tmp_path / "newer.pcap", newer))
    assert reading(got) == reading(original)
    assert sides(got)["request shape: answered by its correlation id (high)"] == 1
    codes = Counter(f.code for ex in got.exchanges for f in ex.findings)
    assert codes == {"assumed_version": 14}  # request and answer, 7 connections
    assert all(ex.status == "ok" for ex in got.exchanges)
    stats = kdissect("pcap", "--no-tui", str(tmp_path / "newer.pcap"), "--stats")
    assert "Client side decided by" in stats.stdout and "listener port (high)" in stats.stdout


def test_tls_client_hello_decides_without_the_syn(tmp_path):
    keys = CAPTURES / "tls" / "kafka-tls.keys"
    src = CAPTURES / "tls" / "kafka-tls.pcap"
    original = dissect(src, keys=_keys(keys))
    late = dissect(rewrite(src, tmp_path / "late-tls.pcap", without_handshakes), keys=_keys(keys))
    assert original.exchanges and reading(late) == reading(original)
    assert set(sides(late)) == {"TLS ClientHello (certain)"}


def _keys(path: Path):
    from kdissect.capture.tls import KeyLog

    keys = KeyLog()
    keys.add_text(path.read_bytes())
    return keys


def test_shape_alone_is_flagged_as_a_guess(tmp_path):
    """A broker's answers alone, without the SYN-ACK, on no known port: nothing but the
    shape speaks, and the reading says it is a guess."""
    src = CAPTURES / "kafka-java-admin.pcap"
    lone = rewrite(src, tmp_path / "lone.pcap", lambda ps: without_handshakes(one_way(ps, PORT)))
    got = dissect(lone)
    for stream in {ex.stream for ex in got.exchanges}:
        first = next(ex for ex in got.exchanges if ex.stream == stream)
        assert first.side_by.startswith("request shape") and first.has("client_side_guessed")


# -- responses whose requests were not captured --------------------------------------------


def test_one_way_capture_orphans_are_guessed_boundedly(tmp_path, monkeypatch):
    """The broker's answers only (kafka-clients.pcap: five client libraries): each is an
    orphan; the full guesses are few (the rest read as kinds already seen), and the
    guesses agree with the two-way capture as often as guessing each one did."""
    src = CAPTURES / "kafka-clients.pcap"
    two_way = [ex.response for ex in dissect(src).exchanges if ex.response is not None]
    truth = {m.data: m.api_key for m in two_way}
    guesser = importlib.import_module("kdissect.protocol.guess")
    full = []
    real = guesser.guess
    monkeypatch.setattr(guesser, "guess", lambda data, d: full.append(data) or real(data, d))
    got = dissect(
        rewrite(src, tmp_path / "one-way.pcap", lambda ps: one_way(ps, PORT)), ports={PORT}
    )
    answers = [ex.response for ex in got.exchanges]
    assert len(answers) == len(two_way) and all(ex.request is None for ex in got.exchanges)
    right = sum(m.api_key == truth[m.data] for m in answers)
    wrong = sum(m.api_key is not None and m.api_key != truth[m.data] for m in answers)
    assert right >= 0.9 * len(answers) and wrong <= 0.06 * len(answers), (right, wrong)
    kinds = {(m.api_key, m.api_version) for m in answers if m.api_key is not None}
    assert len(full) <= len(kinds) + 5 < len(answers) // 4


def test_full_guesses_are_bounded_per_capture():
    o = orphans.Orphans()
    noise = [bytes([i % 251, (i * 7) % 256]) * 20 for i in range(3000)]
    calls = 0
    for i, data in enumerate(noise):
        before = o.full_guesses
        o.guess(i % 50, struct.pack(">i", i) + data)
        calls += o.full_guesses - before
    assert calls <= orphans.FULL_FREE + len(noise) // orphans.FULL_EVERY


# -- captures begun inside a TLS record or a Kafka message -----------------------------------


@pytest.mark.parametrize("ports", [None, {57655}], ids=["detected", "with-p"])
def test_a_capture_begun_inside_a_tls_record_is_reported_as_tls(tmp_path, ports):
    src = CAPTURES / "tls" / "kafka-tls.pcap"
    inside = rewrite(src, tmp_path / "inside.pcap", lambda ps: begun_later(ps, 4, 7))
    got = dissect(inside, **({"ports": ports} if ports else {}))
    assert got.exchanges == []  # no Kafka message made of ciphertext
    notes = [text for _, text in got.notes]
    assert any("began inside a TLS record" in n and "bytes of TLS records" in n for n in notes), (
        notes
    )


@pytest.mark.parametrize(
    "name,skip,cut",
    [("kafka-python-codecs.pcap", 3, 9), ("mtu1500.pcap", 5, 700), ("kafka-clients.pcap", 2, 5)],
)
def test_a_capture_begun_inside_messages_never_makes_one_bigger_than_a_broker_takes(
    tmp_path, name, skip, cut
):
    got = dissect(
        rewrite(CAPTURES / name, tmp_path / "inside.pcap", lambda ps: begun_later(ps, skip, cut)),
        ports={9092, PORT},
    )
    assert got.exchanges
    for ex in got.exchanges:
        for m in ex.messages:
            assert m.size <= UNSURE_MAX
            if m.status.startswith("truncated") and m.size > len(m.data) and m.offset < 100_000:
                assert UNSURE in m.status or m.holes, m.status


@pytest.mark.parametrize("skip,cut", [(0, 5), (1, 5), (0, 40), (2, 5), (5, 40)])
def test_both_sides_begun_inside_messages_on_no_kafka_port_read_the_right_way(tmp_path, skip, cut):
    """captures/kafka-clients.pcap (librdkafka, kafka-python, aiokafka against Apache
    Kafka on port 57019, which is no Kafka port to kdissect) begun inside a message of
    each direction of every connection, without its SYN. An answer's tail can start
    like a request (its bytes read as a size of 256, then ShareGroupHeartbeat v0) while
    the client's first bytes end a request: the shape alone read every connection of
    these cuts backwards but two (41 of 41 at (0, 5)), and paired no exchange. Now a
    side begun inside a message is no evidence against it and answers are found by
    their correlation ids: at most one connection (of three packets, at (5, 40)) is
    read backwards, flagged as a guess, none decided with certainty is, and the
    connections' exchanges are paired."""
    src = CAPTURES / "kafka-clients.pcap"
    got = dissect(rewrite(src, tmp_path / "inside.pcap", lambda ps: begun_later(ps, skip, cut)))
    firsts = {}
    for ex in got.exchanges:
        firsts.setdefault(ex.stream, ex)
    backwards = [ex for ex in firsts.values() if ex.broker[1] != PORT]
    assert not [ex.side_by for ex in backwards if ex.side_by.endswith("(high)")]
    assert all(ex.has("client_side_guessed") for ex in backwards)
    assert len(backwards) <= (1 if (skip, cut) == (5, 40) else 0), [ex.side_by for ex in backwards]
    paired = [
        ex
        for ex in got.exchanges
        if ex.request is not None and ex.response is not None and ex.broker[1] == PORT
    ]
    assert len(paired) >= len(firsts) > 1


def test_resync_and_a_mid_message_start_never_take_an_oversized_size():
    """The bytes of the false 137,967,921-byte Produce v0: a Produce v0 header after a size
    beyond what a broker accepts, at the start of a connection seen without it, or found
    by resynchronisation; the real request after them is framed."""
    false = struct.pack(">ihhih", 137_967_921, 0, 0, 1, 16) + b"rdkafka-producer" + b"\x00" * 40
    real = struct.pack(">hhih", 18, 3, 5, 3) + b"abc" + b"\x00\x00\x00"
    stream = false + struct.pack(">i", len(real)) + real
    framer = Framer(plausible_request)
    framer.begun_inside(check=True)
    frames = framer.feed(stream, 0)
    assert [f.data for f in frames] == [real]
    assert framer.unread == [(0, len(false))]  # passed over, and said so
    framer = Framer(plausible_request)
    framer.gap(0, 10)  # lost bytes: search from here
    frames = framer.feed(stream[10:], 10)
    assert [f.data for f in frames] == [real]
    assert framer.unread == [(10, len(false) - 10)]
    framer = Framer(plausible_request)  # no boundary before the end
    framer.begun_inside(check=True)
    assert framer.feed(false, 0) == [] and framer.close() == []
    assert framer.unread == [(0, len(false))]
    # an answer cannot be told by its start: taken, but marked at the end of the capture
    framer = Framer(lambda buf, pos: False)
    framer.begun_inside(check=False)
    assert framer.feed(struct.pack(">i", 5000) + b"\x00" * 100, 0) == []
    [cut] = framer.close()
    assert UNSURE in (cut.truncated or "")


# -- a real broker and client, captured after the connections opened ------------------------


@pytest.mark.slow
def test_a_real_capture_begun_after_the_connections_opened(tmp_path):
    """Tansu on a free port (not 9092) and kafka-python: the producer's and consumer's
    connections are open (ApiVersions, Metadata, a first produce) before tcpdump starts,
    so the capture holds no SYN of them. Read without -p, every connection is read in the
    right direction (the broker is the listening side) from other evidence, with the same
    exchanges as with -p."""
    from kafka import KafkaConsumer, KafkaProducer

    from tests.support.broker import Broker
    from tests.support.capture import Tcpdump

    broker = Broker()
    try:
        boot = f"127.0.0.1:{broker.port}"
        producer = KafkaProducer(bootstrap_servers=boot, linger_ms=0)
        consumer = KafkaConsumer(
            bootstrap_servers=boot, auto_offset_reset="earliest", consumer_timeout_ms=1500
        )
        producer.send("late", b"before the capture").get(timeout=30)
        consumer.topics()
        with Tcpdump(tmp_path / "late.pcap", [broker.port]) as dump:
            for i in range(20):
                producer.send("late", f"during {i}".encode()).get(timeout=30)
            consumer.subscribe(["late"])
            seen = [m.value for m in consumer]
            producer.close()
            consumer.close()
        dump.stop()
    finally:
        broker.stop()
    assert b"during 19" in seen
    detected = dissect(tmp_path / "late.pcap")
    by_port = dissect(tmp_path / "late.pcap", ports={broker.port})
    assert detected.exchanges and reading(detected) == reading(by_port)
    assert all(ex.broker[1] == broker.port for ex in detected.exchanges)
    assert not any(
        ex.has("orphan_response") or ex.has("malformed_header") for ex in detected.exchanges
    )
    evidence = sides(detected)
    assert any(not by.startswith("SYN") for by in evidence), evidence
    produced = [ex for ex in detected.exchanges if ex.first.api_key == 0]
    assert len(produced) >= 20


def _tail_of(src: Path, dst: Path, first: int) -> Path:
    """The capture as if begun at its ``first`` packet (0-based), as `editcap -r` cuts."""
    return rewrite(src, dst, lambda packets: packets[first:])


@pytest.mark.slow  # (~10 s: 19 captures read)
def test_a_capture_begun_at_any_packet_reads_each_connection_the_right_way(tmp_path):
    """A Kafka 4.4 cluster on ports other than 9092 (captures/kafka44-cluster.pcap),
    the capture begun at 19 places. Connections seen without their SYN lost every
    exchange when the broker spoke first (the tail of an answer: the side talking alone
    was taken for no Kafka) or when a raft client's first request was a Fetch v18, and
    a connection whose both sides start like requests (a small correlation id reads as
    a Produce header) could be read backwards. Now each is read as in the whole capture:
    every exchange whose messages are all in the tail, none that is not there."""
    src = CAPTURES / "kafka44-cluster.pcap"
    whole = exchanges_in([str(src)]).exchanges

    def answered(exchanges, shift: int) -> set:
        return {
            (ex.broker[1], ex.request.api_key, ex.request.correlation_id, ex.response.frame - shift)
            for ex in exchanges
            if ex.request is not None and ex.response is not None
        }

    for first in range(25, 1411, 75):
        cut = exchanges_in([str(_tail_of(src, tmp_path / f"from-{first}.pcap", first))])
        expected = answered(
            [ex for ex in whole if ex.request is not None and ex.request.frame > first], first
        )
        got = answered(cut.exchanges, 0)
        assert expected <= got, (first, sorted(expected - got)[:5])
        assert got <= answered(whole, first), (first, sorted(got - answered(whole, first))[:5])
        # (bytes before a connection's first whole message are said unread, never framed)
        assert not [m for ex in cut.exchanges for m in ex.messages if m.api_key is None]


@pytest.mark.slow  # (~2 s: the capture read whole and cut)
def test_a_capture_begun_just_before_a_large_answer_reads_the_connection_right(tmp_path):
    """captures/kafka-kraft-snapshot.pcap begun just before a FetchSnapshot answer of
    2,071 bytes, off port 9092, without the connection's SYN. The answer is longer than
    the 2 KiB once held while deciding, and its correlation id 6 reads as a Produce v6
    header: the broker was taken for the client and the connection read backwards (27
    exchanges lost). The silent side's next request, and its answer, now tell: every
    exchange after the cut pairs as in the whole capture, at the same packets."""
    assert _pairs_as_in_the_whole(tmp_path, CAPTURES / "kafka-kraft-snapshot.pcap", 4250) > 20


def _pairs_as_in_the_whole(tmp_path, src: Path, first: int) -> int:
    """Every exchange whose request comes after the cut pairs as in the whole capture, at
    the same packet and time, and nothing pairs otherwise; how many such exchanges."""
    whole = exchanges_in([str(src)]).exchanges
    cut = exchanges_in([str(_tail_of(src, tmp_path / f"cut-{first}.pcap", first))]).exchanges

    def answered(exchanges, shift: int) -> set:
        return {
            (ex.client, ex.request.correlation_id, ex.response.frame - shift, ex.response.ts)
            for ex in exchanges
            if ex.request is not None and ex.response is not None
        }

    expected = answered([ex for ex in whole if ex.request and ex.request.frame > first], first)
    got = answered(cut, 0)
    assert expected <= got, (first, sorted(expected - got)[:5])
    assert got <= answered(whole, first), (first, sorted(got - answered(whole, first))[:5])
    return len(expected)


@pytest.mark.slow  # (~3 s: the capture read whole and cut twice)
def test_an_answers_tail_read_as_a_size_of_megabytes_holds_no_later_answer(tmp_path):
    """captures/kafka44-cluster.pcap begun inside Fetch answers: their tails' first bytes
    read as a size of 16 MB (a search from the tail took a start in bytes captured
    before its request; at 589 the tail's own first bytes read as a 48 KB answer
    nobody asked for). Every later answer on the connection was held until the capture
    ended, then paired at frame 0 with the last packet's time (a live capture never
    showed them). A start inside the unconfirmed one that answers a pending request and
    chains is now taken as it arrives, and only in bytes captured after its request."""
    for first in (456, 589):
        _pairs_as_in_the_whole(tmp_path, CAPTURES / "kafka44-cluster.pcap", first)


@pytest.mark.slow  # (~1 s: the capture read whole and cut)
def test_a_tail_captured_before_a_request_is_not_its_answer(tmp_path):
    """captures/kafka44-cluster.pcap begun at 616, inside a Fetch answer: 26 bytes of its
    tail read as an answer to the next Fetch (sent after they were captured), and the
    framing after them was lost (4 answers unanswered). An answer found by search must
    start in bytes captured no earlier than its request (told by their timestamps: bytes
    held behind a hole are delivered after later requests)."""
    _pairs_as_in_the_whole(tmp_path, CAPTURES / "kafka44-cluster.pcap", 616)


@pytest.mark.slow  # (~3 s: the capture damaged, moved and read whole and cut)
def test_chunks_held_while_a_connection_is_decided_are_replayed_in_stream_order(tmp_path):
    """captures/kafka-kraft-cluster.pcap with 3 % of its data segments dropped and 5 % of
    its packets moved 1-4 places later, begun at its 513th packet. Held while the
    connection was decided, a direction's chunks were replayed sorted by frame: a segment
    captured late but earlier in the stream was fed after the bytes that follow it, the
    answers were framed out of order, and 18 exchanges lost their answers."""
    from tests.support.damage import damage
    from tests.support.pcap_edit import reordered, rewrite

    data, _ = damage(
        (CAPTURES / "kafka-kraft-cluster.pcap").read_bytes(),
        seed=2,
        drop=0.03,
        reorder=0.0,
        snaplen=None,
        start=0.0,
    )
    (tmp_path / "damaged.pcap").write_bytes(data)
    src = rewrite(
        tmp_path / "damaged.pcap", tmp_path / "moved.pcap", lambda ps: reordered(ps, 2, 0.05)[0]
    )
    first, port = 512, 47152
    whole = exchanges_in([str(src)]).exchanges
    cut = exchanges_in([str(_tail_of(src, tmp_path / "cut.pcap", first))]).exchanges

    def answered(exchanges, shift: int) -> set:
        return {
            (ex.request.correlation_id, ex.response.frame - shift, ex.response.ts)
            for ex in exchanges
            if ex.request is not None and ex.response is not None and ex.client[1] == port
        }

    expected = answered(
        [
            ex
            for ex in whole
            if ex.request and ex.response and ex.request.frame > first and ex.response.frame > first
        ],
        first,
    )
    got = answered(cut, 0)
    assert len(expected) > 30
    assert expected <= got, sorted(expected - got)[:5]
    assert got <= answered(whole, first), sorted(got - answered(whole, first))[:5]


def test_an_unconfirmed_start_smaller_than_a_correlation_id_is_no_message():
    """The first bytes of an answer's tail (zeros read as a size of 0 or 1) were framed as
    messages of no bytes ("ApiKey-1Response ✗ truncated"); they are passed over."""
    framer = Framer(lambda buf, pos: False)
    framer.begun_inside(check=False)
    tail = bytes(4) + struct.pack(">i", 1) + b"\x00\x00\x01\x3e" + bytes(40)
    assert framer.feed(tail, 0) == []
    assert framer.resync


def _request(key: int, version: int, corr: int, client: bytes = b"cli") -> bytes:
    m = struct.pack(">hhih", key, version, corr, len(client)) + client
    return struct.pack(">i", len(m)) + m


def _answer(corr: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), corr) + body


def test_a_listener_a_client_opened_is_that_address_not_its_port_anywhere():
    """An address a Kafka client opened a connection to (its SYN) is a listener. Matched
    by its port alone, a client elsewhere whose own port happened to be it was read
    backwards, and a connection that is no Kafka was taken for Kafka."""
    from kdissect.stream import direction

    servers = {("10.0.0.2", 45678)}
    answer = _answer(7, struct.pack(">hi", 0, 1) + struct.pack(">hhh", 18, 0, 3))
    common = dict(syn=False, hello=None, ports=frozenset({9092}), listeners=set())
    client, broker = ("10.0.0.1", 45678), ("10.0.0.3", 39092)
    got = direction.decide(
        client,
        broker,
        [_request(18, 0, 7), answer],
        servers=servers,
        detect=True,
        held=64,
        ending=True,
        **common,
    )
    assert got is not None and got.client == 0 and got.by == "request shape", got
    http = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]
    got = direction.decide(
        ("10.0.0.5", 45678),
        ("10.0.0.6", 8080),
        http,
        servers=servers,
        detect=True,
        held=64,
        ending=True,
        **common,
    )
    assert got is direction.NOT_KAFKA
    got = direction.decide(
        ("10.0.0.7", 51000),
        ("10.0.0.2", 45678),
        [b"", b""],
        servers=servers,
        detect=True,
        held=0,
        ending=False,
        **common,
    )
    assert got is not None and got.client == 0 and got.by == "listener port"
