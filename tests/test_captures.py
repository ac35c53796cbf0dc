"""`kdissect pcap` on the repo's real captures (scripts/make_captures.py): every message
framed and paired, records as produced, agreement with tshark, damaged captures."""

from __future__ import annotations

import json
import random
import subprocess
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

from kdissect.capture.pcapfile import CaptureReader
from kdissect.render.records import records_of
from kdissect.sources.pcap import exchanges_in
from kdissect.stream.facts import facts
from tests.support.cli import kdissect_text
from tests.support.scenarios import SCENARIOS, records

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"


def dissect(path: Path, **kw):
    """(enriched exchanges, gaps, notes) of a capture, through the whole engine."""
    got = exchanges_in([str(path)], **kw)
    return got.exchanges, got.gaps, [text for _level, text in got.notes]


def messages(exchanges):
    out = []
    for ex in exchanges:
        for m in (ex.request, ex.response):
            if m is not None and m not in out:
                out.append(m)
    return out


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_message_framed_and_paired(name):
    exchanges, gaps, warnings = dissect(CAPTURES / f"{name}.pcap")
    assert gaps == [] and warnings == []
    assert exchanges
    orphans = [ex for ex in exchanges if ex.request is None and ex.response.direction != "sasl"]
    assert orphans == []
    for ex in exchanges:
        for m in (ex.request, ex.response):
            if m is not None:
                assert m.decoded().problems == [], (name, m.decoded().title)
    # a request left unanswered is a long poll or a request in flight when the client closed
    last = {}
    for ex in exchanges:
        if ex.request is not None:
            last[ex.stream] = max(last.get(ex.stream, -1), ex.request.index)
    for ex in exchanges:
        if ex.has("unanswered"):
            assert ex.request.api_key in (1, 3) or ex.request.index == last[ex.stream]
    acks0 = [ex for ex in exchanges if not ex.expected]
    assert bool(acks0) == (name == "acks0")
    # each request is one exchange, even an acks=0 Produce the broker answered anyway
    requests = [ex.request.index for ex in exchanges if ex.request is not None]
    assert len(requests) == len(set(requests))
    answered = [ex for ex in acks0 if ex.response is not None]
    assert all(ex.has("acks0_answered") for ex in answered)
    assert all(ex.status == "no response expected (acks=0)" for ex in acks0 if ex.response is None)


EXPECTED_TOPICS = {
    "kafka-python-codecs": [f"kp-{c or 'none'}" for c in (None, "gzip", "snappy", "lz4", "zstd")],
    "confluent-group": ["ck-group"],
    "aiokafka": ["aio"],
    "kcat": ["kcat"],
    "acks0": ["acks0"],
    "legacy-0.8.2": ["legacy-0-8-2"],
    "legacy-0.10.0": ["legacy-0-10-0"],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_TOPICS))
def test_produced_records_decode_as_sent(name):
    exchanges, _, _ = dissect(CAPTURES / f"{name}.pcap")
    for topic in EXPECTED_TOPICS[name]:
        produced = [
            r
            for m in messages(exchanges)
            if m.direction == "request"
            and m.api_key == 0
            and topic in facts(m.decoded().body).topics
            for r in records_of(m.decoded().body)
        ]
        assert sorted((r["key"], r["value"]) for r in produced) == sorted(
            (k.decode(), v.decode()) for k, v in records(topic)
        )
        if name == "kafka-python-codecs":
            codec = topic.split("-")[1]
            assert all(r["headers"] == [{"key": "codec", "value": codec}] for r in produced)


def test_big_messages_span_segments():
    exchanges, gaps, _ = dissect(CAPTURES / "mtu1500.pcap")
    produce = [ex.request for ex in exchanges if ex.request and ex.request.api_key == 0]
    values = sorted(r["value"] for m in produce for r in records_of(m.decoded().body))
    assert values == sorted(v.decode() for _, v in records("big", n=3, size=40000))
    with CaptureReader(str(CAPTURES / "mtu1500.pcap")) as reader:
        assert max(len(p.data) for p in reader.packets()) <= 1514


# -- tshark cross-check -------------------------------------------------------------------

TSHARK_BODY = {0: 8, 1: 11, 3: 9}  # API key -> highest version tshark 4.0 decodes


def tshark_rows(path: Path) -> dict[int, dict]:
    fields = [
        "frame.number",
        "kafka.api_key",
        "kafka.api_version",
        "kafka.correlation_id",
        "kafka.client_id",
        "kafka.topic_name",
        "kafka.partition_id",
        "kafka.error",
    ]
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-d",
            "tcp.port==9092,kafka",
            "-T",
            "fields",
            "-E",
            "separator=\t",
            "-E",
            "occurrence=a",
            *sum((["-e", f] for f in fields), []),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split("\t")
        if len(cols) < len(fields) or not cols[3]:
            continue
        split = [c.split(",") if c else [] for c in cols]
        rows[int(cols[0])] = {
            "corr": [int(x) for x in split[3]],
            "api_key": [int(x) for x in split[1]],
            "client_id": [x for x in split[4] if x],
            "topics": {x for x in split[5] if x and x != "[ Null ]"},
            "partitions": {int(x) for x in split[6]},
            "errors": {int(x) for x in split[7] if x and int(x)},
        }
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_agrees_with_tshark(name):
    path = CAPTURES / f"{name}.pcap"
    exchanges, _, _ = dissect(path)
    theirs = tshark_rows(path)
    ours: dict[int, list] = defaultdict(list)
    for m in messages(exchanges):
        ours[m.frame].append(m)
    # raw SASL tokens (after SaslHandshake v0) carry no Kafka header: tshark reads them
    # as Kafka messages anyway and reports made-up correlation ids
    sasl = {frame for frame, ms in ours.items() if all(m.direction == "sasl" for m in ms)}
    assert sasl <= set(theirs)
    assert set(theirs) - sasl == set(ours) - sasl, "frames holding Kafka messages differ"
    compared = 0
    for frame, row in theirs.items():
        if frame in sasl:
            continue
        mine = ours[frame]
        assert sorted(row["corr"]) == sorted(m.correlation_id for m in mine), frame
        assert set(row["api_key"]) <= {m.api_key for m in mine}, frame
        assert row["client_id"] == [
            m.client_id for m in mine if m.direction == "request" and m.client_id
        ], frame
        for m in mine:
            if m.api_key in TSHARK_BODY and m.api_version <= TSHARK_BODY[m.api_key]:
                f = facts(m.decoded().body)
                assert f.topics.keys() == row["topics"], (frame, m.api_name)
                assert set().union(*f.topics.values()) == row["partitions"], (frame, m.api_name)
                assert set(f.errors) == row["errors"], (frame, m.api_name)
                compared += 1
    if name in ("aiokafka", "legacy-0.8.2", "legacy-0.10.0"):
        assert compared >= 4


# -- damaged captures --------------------------------------------------------------------


def _rewrite(src: Path, dst: Path, change) -> None:
    from scapy.utils import PcapReader, PcapWriter

    packets = list(PcapReader(str(src)))
    with PcapWriter(str(dst), linktype=1, sync=True) as w:
        for p in change(packets):
            w.write(p)


def _fingerprint(exchanges):
    return sorted(
        repr(
            (
                ex.client,
                m.direction,
                m.api_key,
                m.api_version,
                m.correlation_id,
                json.dumps(m.decoded().body.plain() if m.decoded().body else None, default=str),
            )
        )
        for ex in exchanges
        for m in (ex.request, ex.response)
        if m is not None
    )


def test_reordered_and_pcapng_give_the_same_result(tmp_path):
    src = CAPTURES / "kafka-python-codecs.pcap"
    original, _, _ = dissect(src)
    rng = random.Random(7)

    def reorder(packets):
        packets = list(packets)
        for i in range(1, len(packets) - 1, 3):  # swap neighbours, keep SYNs first
            if rng.random() < 0.5 and i > 2:
                packets[i], packets[i + 1] = packets[i + 1], packets[i]
        return packets

    _rewrite(src, tmp_path / "reordered.pcap", reorder)
    subprocess.run(["editcap", "-F", "pcapng", str(src), str(tmp_path / "x.pcapng")], check=True)
    for variant in ("reordered.pcap", "x.pcapng"):
        got, gaps, warnings = dissect(tmp_path / variant)
        assert gaps == [] and warnings == []
        assert _fingerprint(got) == _fingerprint(original), variant


def _count_decoded(exchanges) -> int:
    """Messages recovered: fully decoded, or truncated by the capture with their header."""
    return sum(
        1
        for m in messages(exchanges)
        if m.direction != "sasl" and (not m.decoded().problems or m.status.startswith("truncated"))
    )


def _tshark_real(path: Path, real: set[tuple[int, int]]) -> int:
    """Messages tshark finds in ``path`` that really exist: on damaged streams it also
    reads segment payloads as new messages, with made-up correlation ids."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-d",
            "tcp.port==9092,kafka",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "frame.number",
            "-e",
            "kafka.correlation_id",
        ],
        capture_output=True,
        text=True,
    ).stdout
    found = 0
    for line in out.splitlines():
        frame, _, corrs = line.partition("\t")
        found += sum(1 for c in corrs.split(",") if c and (int(frame), int(c)) in real)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["mid-stream", "drop-2pct", "truncated", "snaplen-200"])
def test_damaged_captures(tmp_path, damage):
    src = CAPTURES / "mtu1500.pcap" if damage != "mid-stream" else CAPTURES / "confluent-group.pcap"
    out = tmp_path / f"{damage}.pcap"
    rng = random.Random(11)
    if damage == "mid-stream":
        _rewrite(src, out, lambda ps: ps[len(ps) // 3 :])
    elif damage == "drop-2pct":
        _rewrite(
            src, out, lambda ps: [p for i, p in enumerate(ps) if i < 10 or rng.random() >= 0.02]
        )
    elif damage == "truncated":
        data = src.read_bytes()
        out.write_bytes(data[: len(data) * 2 // 3 + 7])
    else:
        subprocess.run(["editcap", "-s", "200", str(src), str(out)], check=True)
    exchanges, gaps, warnings = dissect(out)
    original = messages(dissect(src)[0])
    real = {(m.frame, m.correlation_id) for m in original}
    if damage == "truncated":
        assert warnings and "ends inside" in warnings[0]
    if damage in ("drop-2pct", "snaplen-200"):
        assert gaps, "lost bytes are reported as gaps"
    assert _count_decoded(exchanges) >= _tshark_real(out, real)
    # nothing decoded from a damaged stream invents a message: every clean message we
    # report exists in the undamaged capture
    full = {(m.stream, m.direction, m.correlation_id, m.data) for m in original}
    if damage in ("drop-2pct", "snaplen-200", "truncated"):
        for m in messages(exchanges):
            if not m.decoded().problems and m.direction != "sasl":
                assert (m.stream, m.direction, m.correlation_id, m.data) in full


def test_json_lines_do_not_blame_the_broker_for_the_end_a_capture_cut(tmp_path):
    """A message the capture ends inside is decoded as far as it goes; the decoder running
    out of bytes is the cut's doing (message_truncated), not a malformed layout: the JSON
    lines say what the exchanges themselves say (they once added `bad_length`)."""
    data = (CAPTURES / "mtu1500.pcap").read_bytes()
    cut_capture = tmp_path / "cut.pcap"
    cut_capture.write_bytes(data[: len(data) * 2 // 3 + 7])
    res = kdissect_text("pcap", str(cut_capture), "--format", "jsonl")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    exchanges, _, _ = dissect(cut_capture)
    by_index = {m.index: (ex, m) for ex in exchanges for m in ex.messages}
    cut = [r for r in rows if by_index[r["index"]][1].status.startswith("truncated")]
    assert cut and all(r["problems"] for r in cut)  # (it does run out of bytes)
    for r in cut:
        ex, m = by_index[r["index"]]
        said = sorted(f.code for f in ex.findings if f.where.startswith(m.direction))
        assert sorted(f["code"] for f in r["findings"]) == said == ["message_truncated"]


@pytest.mark.parametrize("keep", [14, 12])
def test_a_request_the_capture_ends_inside_its_header_is_named_and_dated(tmp_path, keep):
    """A capture that ends (or a client that resets) inside a request's header: the
    request is named by the bytes that came (API, version, and with 8 of them its
    correlation id) and dated by its packet, not 1970-01-01 and frame 0; only the cut is
    said (message_truncated), no malformed header."""
    from scapy.utils import PcapReader

    from tests.support.pcap_edit import ended_inside_first_request, rewrite

    src = CAPTURES / "kafka-clients.pcap"
    exchanges, _, _ = dissect(src)
    first = next(ex.request for ex in exchanges if ex.request is not None)
    cut_number = []

    def cut(packets):
        kept, number = ended_inside_first_request(packets, 57019, keep)
        cut_number.append(number)
        return kept

    edited = rewrite(src, tmp_path / "cut.pcap", cut)
    when = float(list(PcapReader(str(edited)))[-1].time)
    res = kdissect_text("pcap", str(edited), "--format", "jsonl", "-p", "57019")
    assert res.returncode == 0, res.stderr
    (row,) = [json.loads(line) for line in res.stdout.splitlines()]
    assert (row["api_key"], row["api_version"]) == (first.api_key, first.api_version)
    assert row["correlation_id"] == first.correlation_id and row["api_name"] != "Unknown"
    assert row["frame"] == cut_number[0] and row["status"].startswith("truncated")
    assert abs(datetime.fromisoformat(row["ts"].replace("Z", "+00:00")).timestamp() - when) < 1e-3
    assert [f["code"] for f in row["findings"]] == ["message_truncated"]


def test_cli_on_a_capture_and_on_bad_files(tmp_path):
    run = lambda *a: kdissect_text("pcap", *a)
    res = run(str(CAPTURES / "confluent-group.pcap"))
    assert res.returncode == 0
    assert "JoinGroup v5" in res.stdout and "MEMBER_ID_REQUIRED" in res.stdout
    assert "Produce v10" in res.stdout and "ck-group[0]  4 records" in res.stdout
    res = run(str(CAPTURES / "aiokafka.pcap"), "--format", "jsonl")
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    by_index = {r["index"]: r for r in rows}
    for r in rows:
        assert {
            "frame",
            "stream",
            "direction",
            "ts",
            "api_key",
            "api_name",
            "api_version",
            "correlation_id",
            "pair",
            "status",
            "problems",
            "body",
        } <= r.keys()
        if r["pair"] is not None:
            assert by_index[r["pair"]]["pair"] == r["index"]
    fetched = [
        rec
        for r in rows
        if r["api_name"] == "Fetch" and r["direction"] == "response"
        for t in r["body"]["responses"]
        for p in t["partitions"]
        for b in p["records"]
        for rec in b["records"]
    ]
    assert [(x["key"], x["value"]) for x in fetched] == [
        (k.decode(), v.decode()) for k, v in records("aio")
    ]
    junk = tmp_path / "junk.pcap"
    junk.write_text("hello, not a capture")
    res = run(str(junk))
    assert res.returncode == 1 and "not a pcap or pcapng file" in res.stderr
    assert "Traceback" not in res.stderr
    res = run(str(tmp_path / "missing.pcap"))
    assert res.returncode == 2 and "does not exist" in res.stderr


# -- link types, IP versions, file formats -----------------------------------------------

MAC = "02:00:00:00:00:01"  # explicit, or scapy tries to resolve one for every packet


def _relink(src: Path, dst: Path, kind: str) -> None:
    """The same traffic under another link layer / IP version (rewritten with scapy)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Dot1Q, Ether, Loopback
    from scapy.utils import PcapReader, PcapWriter

    linktypes = {"sll": 113, "sll2": 276, "null": 0, "raw": 101, "vlan": 1, "ipv6": 1}
    with PcapWriter(str(dst), linktype=linktypes[kind], sync=True) as w:
        for p in PcapReader(str(src)):
            ip = p[IP]
            if kind == "ipv6":
                tcp = ip[TCP]
                del tcp.chksum
                broker, client = "fd00::9092", "fd00::1"
                src, dst = (broker, client) if tcp.sport == 9092 else (client, broker)
                ip = IPv6(src=src, dst=dst) / tcp
            layer = {
                "sll": lambda: CookedLinux(proto=0x0800) / ip,
                "sll2": lambda: CookedLinuxV2(proto=0x0800) / ip,
                "null": lambda: Loopback(type=2) / ip,
                "raw": lambda: ip,
                "vlan": lambda: Ether(src=MAC, dst=MAC) / Dot1Q(vlan=42) / ip,
                "ipv6": lambda: Ether(src=MAC, dst=MAC, type=0x86DD) / ip,
            }[kind]()
            layer.time = p.time
            w.write(layer)


@pytest.mark.parametrize("kind", ["sll", "sll2", "null", "raw", "vlan", "ipv6", "gzip", "nsec"])
def test_link_types_and_formats_give_the_same_result(tmp_path, kind):
    src = CAPTURES / "aiokafka.pcap"
    out = tmp_path / f"{kind}.pcap"
    if kind == "gzip":
        import gzip

        out.write_bytes(gzip.compress(src.read_bytes()))
    elif kind == "nsec":
        subprocess.run(["editcap", "-F", "nsecpcap", str(src), str(out)], check=True)
    else:
        _relink(src, out, kind)
    original, _, _ = dissect(src)
    got, gaps, warnings = dissect(out)
    assert gaps == [] and warnings == []
    strip = lambda fp: [f.split(", ", 1)[1] for f in fp]  # addresses differ for ipv6
    assert strip(_fingerprint(got)) == strip(_fingerprint(original))
    if kind == "ipv6":
        assert got[0].broker == ("fd00::9092", 9092)
    if kind == "nsec":
        assert [ex.first.ts for ex in got] == pytest.approx([ex.first.ts for ex in original])


def test_a_gzip_capture_cut_short_gives_the_packets_before_the_cut(tmp_path):
    """Packets are read in blocks: a compressed stream that breaks off inside a block
    still gives every whole packet decompressed before the break, and says so."""
    import gzip
    from kdissect.capture.pcapfile import CaptureReader

    src = CAPTURES / "kcat.pcap"
    cut = tmp_path / "cut.pcap.gz"
    cut.write_bytes(gzip.compress(src.read_bytes())[:-200])
    with CaptureReader(str(src)) as r:
        whole = [p.data for p in r.packets()]
    with CaptureReader(str(cut)) as r:
        got = [p.data for p in r.packets()]
        warnings = r.warnings
    assert 0 < len(got) < len(whole) and got == whole[: len(got)]
    assert "compressed data ends early" in warnings[0]
    assert f"file ends inside packet {len(got) + 1}" in warnings[1]


@pytest.mark.parametrize("pure", ["0", "1"], ids=["compiled", "pure"])
def test_a_record_claiming_more_than_its_capture_holds_is_damage_not_the_end(tmp_path, pure):
    """A record header whose length was damaged claims bytes past the end of the file:
    said as damage at that record, not as a capture cut short (which a length no record
    of the capture could have rules out); a record cut by the end of the file still is."""
    import struct

    src = (CAPTURES / "confluent-group.pcap").read_bytes()
    at = 24
    for _ in range(4):  # to the fifth record
        at += 16 + struct.unpack_from("<I", src, at + 8)[0]
    fifth = at
    env = {"KDISSECT_PURE": pure}
    damaged = bytearray(src)
    struct.pack_into("<I", damaged, fifth + 8, 100_000_000)
    (tmp_path / "damaged.pcap").write_bytes(damaged)
    run = kdissect_text("pcap", str(tmp_path / "damaged.pcap"), env=env)
    assert run.returncode == 0, run.stderr
    assert (
        f"packet 5 claims 100000000 bytes, more than its capture's records hold (snapshot "
        f"length 262144), and the file ends {len(src) - fifth - 16} bytes later: the file is "
        f"damaged from byte {fifth} on" in run.stderr
    )
    (tmp_path / "cut.pcap").write_bytes(src[: fifth + 40])
    run = kdissect_text("pcap", str(tmp_path / "cut.pcap"), env=env)
    assert f"file ends inside packet 5 at byte {fifth} (24 of " in run.stderr


@pytest.mark.parametrize("pure", ["0", "1"], ids=["compiled", "pure"])
def test_a_file_that_is_no_capture_is_named_with_what_to_do(tmp_path, pure):
    """A TLS key log or an xz-compressed capture given as the capture: said as what it
    is, with what to do instead."""
    import lzma

    xz = tmp_path / "kcat.pcap.xz"
    xz.write_bytes(lzma.compress((CAPTURES / "kcat.pcap").read_bytes(), format=lzma.FORMAT_XZ))
    env = {"KDISSECT_PURE": pure}
    keys = kdissect_text("pcap", str(CAPTURES / "tls" / "kafka-tls.keys"), env=env)
    assert keys.returncode != 0 and "this is a TLS key log: give it with --keylog" in keys.stderr
    packed = kdissect_text("pcap", str(xz), env=env)
    assert packed.returncode != 0 and "xz -dc FILE | kdissect pcap -" in packed.stderr


def test_unsupported_link_type_is_reported(tmp_path):
    from scapy.utils import PcapWriter

    out = tmp_path / "usb.pcap"
    with PcapWriter(str(out), linktype=189, sync=True) as w:  # USB: not IP
        w.write(b"\x00" * 64)
    res = kdissect_text("pcap", str(out))
    # nothing Kafka could be found: said, and exit status 1
    assert res.returncode == 1 and "unsupported link types: link type 189 (1 packets)" in res.stderr
    assert "no Kafka traffic found in 1 packets" in res.stderr


def test_sequence_wrap_around_in_a_real_capture(tmp_path):
    """Every direction's sequence numbers moved to wrap 2^32 a few KB in."""
    from scapy.layers.inet import IP, TCP

    src = CAPTURES / "mtu1500.pcap"
    first: dict[tuple, int] = {}

    def shift(packets):
        for p in packets:
            ip, tcp = p[IP], p[TCP]
            first.setdefault((ip.src, tcp.sport), tcp.seq)
        delta = {k: (2**32 - 5000 - v) for k, v in first.items()}
        for p in packets:
            ip, tcp = p[IP], p[TCP]
            tcp.seq = (tcp.seq + delta[(ip.src, tcp.sport)]) % 2**32
            if (ip.dst, tcp.dport) in delta:
                tcp.ack = (tcp.ack + delta[(ip.dst, tcp.dport)]) % 2**32
            del tcp.chksum
        return packets

    _rewrite(src, tmp_path / "wrapped.pcap", shift)
    got, gaps, _ = dissect(tmp_path / "wrapped.pcap")
    assert gaps == [] and _fingerprint(got) == _fingerprint(dissect(src)[0])


def test_orphans_are_identified_by_guessing(tmp_path):
    """A capture started mid-connection: responses whose request is missing get their
    API guessed, and the guess matches what the full capture knows."""
    src = CAPTURES / "kafka-python-codecs.pcap"
    truth = {m.data: m.api_key for m in messages(dissect(src)[0])}
    out = tmp_path / "late.pcap"
    _rewrite(src, out, lambda ps: [p for i, p in enumerate(ps) if i % 40 >= 6])
    exchanges, _, _ = dissect(out)
    orphans = [ex.response for ex in exchanges if ex.request is None]
    assert orphans
    checked = 0
    for m in orphans:
        m.decoded()
        if m.data in truth and m.how and m.how.startswith("guessed"):
            assert m.api_key == truth[m.data], m.how
            checked += 1
    assert checked >= len(orphans) // 2


@pytest.mark.parametrize("name", ["kafka-java-consumer-group.pcap", "kcat.pcap"])
def test_an_orphan_answer_gets_the_version_its_connection_speaks(tmp_path, name):
    """Three Fetch requests lost from a capture: their answers read cleanly as several
    Fetch versions (v12 and v18 differ by tagged fields only), and each is given the
    version the connection's other Fetch requests use, not the lowest that reads."""
    import struct

    from scapy.all import TCP, Raw

    src = CAPTURES / name
    truth = {
        bytes(ex.response.data): (ex.response.api_key, ex.response.api_version)
        for ex in dissect(src)[0]
        if ex.request is not None and ex.response is not None
    }

    def without_some_fetches(packets):
        out, fetches = [], 0
        for p in packets:
            raw = bytes(p[Raw]) if TCP in p and Raw in p else b""
            whole = len(raw) >= 8 and struct.unpack(">i", raw[:4])[0] == len(raw) - 4
            if whole and raw[4:6] == b"\x00\x01":  # a Fetch request in one packet
                fetches += 1
                if fetches in (3, 4, 5):
                    continue
            out.append(p)
        return out

    _rewrite(src, tmp_path / "lost.pcap", without_some_fetches)
    orphans = [ex.response for ex in dissect(tmp_path / "lost.pcap")[0] if ex.request is None]
    assert orphans
    for m in orphans:
        m.decoded()
        assert truth[bytes(m.data)][0] == 1
        assert (m.api_key, m.api_version) == truth[bytes(m.data)], m.how
        assert "the connection's own requests" in m.how


def test_sasl_tokens_after_handshake_v0_are_recognised():
    exchanges, gaps, _ = dissect(CAPTURES / "sasl-v0.pcap")
    assert gaps == []
    tokens = [m for m in messages(exchanges) if m.direction == "sasl"]
    kinds = [m.decoded().tree.children[0].note for m in tokens]
    assert kinds[:4] == [
        "SASL/SCRAM client-first",
        "SASL/SCRAM server-first",
        "SASL/SCRAM client-final",
        "SASL/SCRAM server-error",
    ]
    handshakes = [m for m in messages(exchanges) if m.api_key == 17]
    assert handshakes and all(m.api_version == 0 for m in handshakes)
    final = next(m for m in tokens if "client-final" in m.decoded().tree.children[0].note)
    proof = final.decoded().tree.children[0].child("proof")
    assert proof.value == "<redacted>" and proof.secret
    res = kdissect_text("pcap", str(CAPTURES / "sasl-v0.pcap"), "--format", "jsonl")
    raw_proof = final.data.split(b",p=")[1].decode()
    assert raw_proof not in res.stdout and '"proof": "<redacted>"' in res.stdout


def test_sasl_authenticate_scram():
    exchanges, _, _ = dissect(CAPTURES / "sasl-scram.pcap")
    auth = [m for m in messages(exchanges) if m.api_key == 36]
    notes = {m.decoded().body.child("auth_bytes").note for m in auth}
    assert {
        "SASL/SCRAM client-first",
        "SASL/SCRAM client-final",
        "SASL/SCRAM server-first",
    } <= notes
    proofs = 0
    for m in auth:
        assert m.decoded().problems == []
        for n in m.decoded().tree.walk():
            if n.name == "proof":
                proofs += 1
                holder = m.decoded().body.child("auth_bytes")
                assert n.value == "<redacted>" and b",p=****" in holder.value
    assert proofs


def test_kafka_found_on_any_port_and_verbose_trees(tmp_path):
    """The same traffic moved to port 19093: found by how it starts, or with -p; not with
    --no-detect alone."""
    from scapy.layers.inet import TCP

    src = CAPTURES / "aiokafka.pcap"
    moved = tmp_path / "port19093.pcap"

    def move(packets):
        for p in packets:
            t = p[TCP]
            t.sport = 19093 if t.sport == 9092 else t.sport
            t.dport = 19093 if t.dport == 9092 else t.dport
            del t.chksum
        return packets

    _rewrite(src, moved, move)
    strip = lambda fp: [f.split(", ", 1)[1] for f in fp]
    original = strip(_fingerprint(dissect(src)[0]))
    assert strip(_fingerprint(dissect(moved)[0])) == original
    got = dissect(moved, ports={19093}, detect=False)[0]
    assert strip(_fingerprint(got)) == original and got[0].broker[1] == 19093
    assert dissect(moved, detect=False)[0] == []
    run = lambda *a: kdissect_text("pcap", str(moved), *a)
    res = run("--no-detect")
    assert "no Kafka traffic found" in res.stderr and "add others with -p" in res.stderr
    res = run("-V", "-Y", "api == Produce")
    assert res.stdout.count("ProduceRequest") == 4 and "record_batch" in res.stdout
    assert "aio-key-0" in res.stdout and "partition_responses" in res.stdout


def test_an_unknown_apis_header_says_its_version_is_not_known():
    """A request of an API key kdissect lacks (a real flexible request, its key changed
    to 95) had its header read without tagged fields, silently: the header's tagged-fields
    byte became the body's first. The header now says its version cannot be known and
    how it was read (the response's too)."""
    from kdissect.protocol.message import decode_request, decode_response

    exchanges, _, _ = dissect(CAPTURES / "kafka-java-admin.pcap")
    ex = next(ex for ex in exchanges if ex.request.api_key == 32 and ex.response is not None)
    req, resp = ex.request, ex.response
    assert req.data[:2] == b"\x00\x20"  # DescribeConfigs, a flexible version (v4)
    tree = decode_request(b"\x00\x5f" + req.data[2:]).tree
    header, body = tree.child("header"), tree.child("body")
    assert header.child("_tagged_fields") is None and body.value[:1] == b"\x00"
    assert "version unknown" in header.note and "read as v1" in header.note
    assert body.code == "unknown_api"
    answer = decode_response(resp.data, 95, req.api_version).tree.child("header")
    assert "version unknown" in answer.note and "read as v0" in answer.note
    # an API kdissect knows reads its header as its version says: no such note
    assert decode_request(req.data).tree.child("header").note is None


def _tree_text(*args: str) -> str:
    from click.testing import CliRunner

    from kdissect.cli import main

    res = CliRunner().invoke(main, ["pcap", "--no-tui", "-V", *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output[-2000:]
    return res.stdout


def test_an_envelopes_forwarded_message_and_principal_are_shown_as_what_they_are():
    """An Envelope (KRaft: a broker forwarding a client's CreateTopics to the controller)
    showed its request_data and response_data as "<redacted>" (hex with --show-secrets)
    above the messages decoded in them, and its request_principal as raw bytes: the
    messages are shown by their size, and the principal as Kafka's DefaultPrincipalData
    (what DefaultKafkaPrincipalBuilder.serialize writes)."""
    capture = str(CAPTURES / "kafka-kraft-cluster.pcap")
    for secrets in ([], ["--show-secrets"]):
        text = _tree_text(capture, "-Y", "api == Envelope", *secrets)
        assert "request_data  bytes  @12+59  = 58 bytes  (CreateTopicsRequest)" in text
        assert "response_data  bytes  @5+35  = 34 bytes  (CreateTopicsResponse)" in text
        assert "<redacted>" not in text
    assert "(DefaultPrincipalData v0: User:ANONYMOUS)" in text
    for field in ("type  string  @74+5  = 'User'", "name  string  @79+10  = 'ANONYMOUS'"):
        assert field in text
    assert "token_authenticated  bool  @89+1  = False" in text


def test_resource_types_are_named_by_their_apis_enum():
    """resource_type numbers were left bare: a config resource's (ConfigResource.Type:
    2 TOPIC, 4 BROKER, 32 GROUP) and an ACL's (ResourceType: 2 TOPIC, 3 GROUP) share the
    name, so each is named by its API's (or KRaft record's) enum."""
    from kdissect.protocol import schemas
    from kdissect.protocol.context import RESOURCE_TYPES
    from kdissect.protocol.node import Node

    admin = _tree_text(str(CAPTURES / "kafka-java-admin.pcap"), "-Y", "api == DescribeConfigs")
    assert "resource_type  int8  @20+1  = 2  (TOPIC)" in admin
    kraft = _tree_text(str(CAPTURES / "kafka-kraft-cluster.pcap"))
    assert "resource_type  int8  @363+1  = 4  (BROKER)" in kraft  # a ConfigRecord
    acl = schemas.layout(30, 3, "request").fields[0].struct.fields[0]  # CreateAcls
    assert acl.name == "resource_type" and acl.hint == "acl_resource"
    node = Node("resource_type", "int8", 0, 1, 3)
    node.hint = acl.hint
    assert node.note == RESOURCE_TYPES["acl"][3] == "GROUP"
