"""Display filters and --stats, on a real capture (confluent-kafka consumer group)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kdissect.filters import FilterError, parse_filter
from kdissect.stream.fields import ExchangeFields
from kdissect.stream.stats import Stats, percentile
from tests.support.cli import kdissect_text
from tests.test_captures import dissect

ROOT = Path(__file__).resolve().parents[1]
GROUP = ROOT / "captures" / "confluent-group.pcap"


@pytest.fixture(scope="module")
def views():
    exchanges, _, _ = dissect(GROUP)
    return [ExchangeFields(ex) for ex in exchanges]


def select(views, text: str) -> list:
    f = parse_filter(text)
    return [v for v in views if f(v)]


def test_filters_select_what_they_say(views):
    apis = lambda vs: sorted({v.ex.first.api_key for v in vs})
    assert apis(select(views, "api == JoinGroup")) == [11]
    assert select(views, "api == 11") == select(views, "api == joingroup")
    errors = select(views, "error != 0")
    assert len(errors) == 1 and errors[0].facts().errors == [79]  # MEMBER_ID_REQUIRED
    assert select(views, "error == MEMBER_ID_REQUIRED") == errors
    slow = select(views, "latency > 1s")
    assert [v.ex.first.api_key for v in slow] == [11]  # Tansu holds the join
    assert select(views, "latency > 1000ms") == slow == select(views, "latency > 1000000us")
    produce = select(views, 'api == Produce and topic == "ck-group" and records == 4')
    assert len(produce) == 1 and produce[0].field("partition") == [0]
    assert len(select(views, 'client_id ~ "^rdk"')) == len(
        [v for v in views if v.ex.request is not None]
    )
    assert (
        select(
            views,
            "not api in {Metadata, ApiVersions, FindCoordinator, ListOffsets, "
            "GetTelemetrySubscriptions, JoinGroup, Fetch, Produce, SyncGroup, "
            "Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup}",
        )
        == []
    )
    unanswered = select(views, 'status == "unanswered"')
    assert unanswered and all(v.ex.response is None for v in unanswered)
    assert select(views, "topic != ck-group") == [
        v for v in views if "ck-group" not in v.field("topic")
    ]


@pytest.mark.parametrize(
    "text,position,words",
    [
        ("", 0, "expected a filter"),
        ("api ==", 6, "expected a value for api"),
        ("api == Produce and", 18, "expected a field name"),
        ("latency > fast", 10, "duration like 50ms"),
        ("latency > 5xs", 10, "unexpected '5xs': a number is like 42 or 1.5, a duration like"),
        ("client == 10.0.0.1", 10, 'text goes in quotes ("10.0.0.1")'),
        ("topik == x", 0, "unknown field 'topik' (did you mean topic"),
        # kdissect log's fields of batches on disk: no value for exchanges (matched none)
        ("codec == lz4", 0, "'codec' is a field of batches on disk (`kdissect log`)"),
        ("producer_id == -1", 0, "not of exchanges"),
        ("api == Nope", 7, "unknown API"),
        ("(api == Fetch", 13, "expected ')'"),
        ("client_id ~ '('", 12, "bad regular expression"),
        ("api == Fetch Fetch", 13, "expected 'and', 'or'"),
        ("version == 1.5", 11, "whole number"),
        ("api == Produc", 7, "unknown API 'Produc' (did you mean Produce"),
        ("Produce", 0, "did you mean api == Produce?"),
        ("kafka.topic == x", 0, "did you mean kafka.topic_name"),
        ("error == MEMBER_ID", 9, "did you mean MEMBER_ID_REQUIRED"),
        ("finding == trailing", 11, "did you mean trailing_bytes"),
        ("severity >= bad", 12, "expected a severity (note, warn, error)"),
        # closed sets of values: one that can never be is a typo, not a filter of nothing
        ("status == weird", 10, "status is never 'weird'; its values: ok,"),
        ("status in {ok, unanswerd}", 15, "(did you mean unanswered?)"),
    ],
)
def test_filter_errors_say_where(text, position, words):
    with pytest.raises(FilterError) as e:
        parse_filter(text)
    assert e.value.position == position and words in str(e.value)


def test_closed_value_sets_take_what_can_be():
    from kdissect.stream.fields import LOG_NAMES

    with pytest.raises(FilterError) as e:
        parse_filter("codec == zstdd", list(LOG_NAMES))
    assert "codec is never 'zstdd' (did you mean zstd?)" in str(e.value)
    for text in (
        "status ~ weird",  # a pattern: anything
        'status == "truncated: 3 of 9 bytes not captured"',
        "status != unanswered",
        "status == 'no response expected (acks=0)'",
    ):
        parse_filter(text)
    parse_filter("codec in {lz4, zstd}", list(LOG_NAMES))
    # contains asks for a part of a value: refused only when no value can hold it
    parse_filter('status contains "acks"')
    parse_filter('status contains "budget"')  # ("truncated: the memory budget...")
    with pytest.raises(FilterError):
        parse_filter('codec contains "zz"', list(LOG_NAMES))
    parse_filter('codec contains "ap"', list(LOG_NAMES))  # snappy


def test_a_filter_that_matches_nothing_says_so():
    from click.testing import CliRunner

    from kdissect.cli import main

    capture = str(Path(__file__).parent.parent / "captures" / "kcat.pcap")
    run = CliRunner().invoke(main, ["pcap", "--no-tui", capture, "-Y", "api == CreateAcls"])
    assert run.exit_code == 0 and run.stdout == "" and "nothing matched" in run.stderr
    run = CliRunner().invoke(main, ["pcap", "--no-tui", capture, "-Y", "api == Fetch"])
    assert run.stdout and "nothing matched" not in run.stderr


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_a_log_filter_that_matches_nothing_says_so_in_every_format(tmp_path, fmt):
    from click.testing import CliRunner

    from kdissect.cli import main
    from tests.test_log import batch

    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"a", b"1")]))
    for flt, shown in (("aborted", False), ("not aborted", True)):
        run = CliRunner().invoke(main, ["log", str(part), "--format", fmt, "-Y", flt])
        assert run.exit_code == 0, run.output
        assert (
            bool(run.stdout) == shown and ("nothing matched the filter" in run.stderr) != shown
        ), (flt, run.stdout, run.stderr)


def test_stats_add_up(views):
    stats = Stats()
    for v in views:
        stats.add(v.ex, v)
    assert sum(stats.per_api.values()) == len(views)
    assert stats.per_api["JoinGroup"] == 2 and stats.errors == {"MEMBER_ID_REQUIRED": 1}
    p50, p90, p99, top = stats.latency_summary(stats.latency["JoinGroup"])
    assert top > 3.0 and p50 < 0.1  # one immediate answer, one held 3 s
    assert stats.bytes_requests == sum(
        len(m.data) + 4 for v in views for m in (v.ex.request,) if m is not None
    )
    assert len(stats.connections) == 5
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([5.0], 99) == 5.0


def test_cli_filter_and_stats():
    run = lambda *a: kdissect_text("pcap", str(GROUP), *a)
    res = run("-Y", "error != 0")
    assert (
        res.returncode == 0 and res.stdout.count("\n") == 1 and "MEMBER_ID_REQUIRED" in res.stdout
    )
    res = run("--stats")
    assert "Exchanges per API" in res.stdout and "MEMBER_ID_REQUIRED" in res.stdout
    assert "Consumer group kdissect-group" in res.stdout and "ck-group[0,1,2,3]" in res.stdout
    assert "127.0.0.1:9092" in res.stdout
    res = run("-Y", "api === x")
    assert res.returncode == 2 and "position" in res.stderr and "Traceback" not in res.stderr


def test_topic_ids_are_named_from_the_capture():
    """Fetch v16 names topics only by id; the Metadata exchanges before it say which."""
    run = lambda *a: kdissect_text("pcap", str(GROUP), *a)
    res = run("-Y", "api == Fetch and topic == ck-group")
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and all("Fetch v16" in ln and "ck-group[0,1,2,3]" in ln for ln in lines)
    assert "topic-id:" not in run().stdout


@pytest.mark.slow
def test_wireshark_field_names_are_aliases(views):
    pairs = [
        ("kafka.api_key == 11", "api == JoinGroup"),
        ("kafka.api_version == 5", "version == 5"),
        ("kafka.correlation_id == 3", "correlation_id == 3"),
        ('kafka.client_id == "rdkafka"', 'client_id == "rdkafka"'),
        ("kafka.error == 79", "error == MEMBER_ID_REQUIRED"),
        ('kafka.topic_name == "ck-group"', 'topic == "ck-group"'),
        ("kafka.partition_id == 2", "partition == 2"),
        ("kafka.request_frame == 60", "frame == 60"),
    ]
    for wireshark, ours in pairs:
        assert select(views, wireshark) == select(views, ours) != [], wireshark
    # the same frames as tshark's own filter finds
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(GROUP),
            "-Y",
            "kafka.api_key == 11 and tcp.dstport == 9092",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [str(v.ex.first.frame) for v in select(views, "kafka.api_key == 11")] == out


def test_anomaly_findings_and_waits(views):
    wrong = select(views, "anomaly")
    # the request never answered; not the MEMBER_ID_REQUIRED join (a normal step of
    # joining: expected_error, a note), the Fetch long poll (max_wait_ms 500, answered
    # empty) nor the JoinGroup held 3 s for the rebalance
    assert sorted(v.ex.first.api_key for v in wrong) == [3]
    assert select(views, "finding == unanswered") == [v for v in wrong if v.ex.response is None]
    expected = select(views, "finding == expected_error")
    assert [v.ex.first.api_key for v in expected] == [11]
    assert select(views, "finding == error_code") + expected == select(views, "error != 0")
    assert select(views, "severity >= warn") == select(views, "anomaly")
    # "warning", as the line output's legend says it
    assert select(views, "severity >= warning") == select(views, "severity >= warn")
    held = select(views, "api == Fetch and latency > 400ms")
    assert held and select(views, "api == Fetch and service_time > 400ms") == []
    assert select(views, "api == JoinGroup and service_time > 1s") == []
    assert select(views, "throttle > 0") == [] and len(select(views, "throttle == 0")) > 10


def test_record_filters_inside_compressed_batches():
    codecs = [
        ExchangeFields(ex) for ex in dissect(ROOT / "captures" / "kafka-python-codecs.pcap")[0]
    ]
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        hits = select(codecs, f'record.key == "kp-{codec}-key-2"')
        assert sorted(v.ex.first.api_key for v in hits) == [0, 1], codec  # Produce, Fetch
        assert select(codecs, f"record.header.codec == {codec}") == hits
        assert select(codecs, f'record.value ~ "^kp-{codec} value [0-9]"') == hits
        assert select(codecs, f'kafka.message_key == "kp-{codec}-key-2"') == hits
    compressed = select(codecs, 'record.key == "kp-gzip-key-2"')[0]
    assert b"kp-gzip-key-2" not in compressed.ex.request.data  # only in the decompressed bytes
    assert set(select(codecs, "record.header == codec")) == set(select(codecs, "records > 0"))


def test_stats_break_down_and_follow_the_group(views):
    stats = Stats()
    for v in views:
        stats.add(v.ex, v)
    assert list(stats.clients) == ["rdkafka"] and stats.clients["rdkafka"].exchanges == 30
    assert list(stats.brokers) == ["127.0.0.1:9092"]
    assert stats.topics["ck-group"].partitions == {0, 1, 2, 3}
    assert {p for t, p in stats.partitions} == {0, 1, 2, 3}
    assert stats.partitions[("ck-group", 0)].produce == 1 == stats.topics["ck-group"].produce
    assert stats.waited["Fetch"] == 1 and max(stats.service["Fetch"]) < 0.1
    assert max(stats.latency["Fetch"]) > 0.5
    group = stats.groups["kdissect-group"]
    events = [(e.api, e.generation, e.error or e.detail) for e in group.events]
    assert events[0] == ("JoinGroup", -1, "MEMBER_ID_REQUIRED")
    assert (
        events[1][:2] == ("JoinGroup", 0)
        and "leader" in events[1][2]
        and "waited 3.0 s" in events[1][2]
    )
    assert events[2] == ("SyncGroup", 0, "ck-group[0,1,2,3]")
    assert events[3][0] == "LeaveGroup" and group.rebalances == 1 and len(group.members) == 1


@pytest.mark.parametrize(
    "text,position,words",
    [
        ('client_id == "\\x"', 14, "\\x must be followed by 2 hex digits"),
        ('client_id == "\\u12"', 14, "\\u must be followed by 4 hex digits"),
        ('client_id == "\\U00110000"', 14, "beyond Unicode"),
        ('client_id == "\\N{NO SUCH}"', 14, "Unicode character name"),
        ("version == " + "1" * 5000, 11, "longer than 30 digits"),
        ("(" * 300 + "api" + ")" * 300, 64, "nested more than 64 deep"),
        ("error == 50ms", 9, "expected an error code or name"),
    ],
)
def test_hostile_filters_are_refused_with_where(text, position, words):
    with pytest.raises(FilterError) as e:
        parse_filter(text)
    assert e.value.position == position and words in str(e.value)
    assert len(str(e.value)) < 400  # a window of the text, not all of it


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_escapes_decode_strictly_and_long_filters_evaluate(views):
    assert parse_filter('client_id == "a\\x41\\u00e9\\N{DIGIT ONE}"').predicate is not None
    # an unknown escape stays as written: a regular expression reads as it looks
    assert select(views, 'client_id ~ "\\-"') == select(views, "client_id contains '-'")
    assert select(views, "not " * 1001 + "api") == select(views, "not api")
    assert select(views, " and ".join(["api"] * 5000)) == select(views, "api")
    assert select(views, " or ".join(["version == 99"] * 5000)) == []


def test_group_timeline_beyond_classic():
    """KIP-848 consumer groups, share groups and streams groups (real Apache Kafka
    captures of kafka-clients and Kafka Streams): their heartbeats' joins, epochs,
    assignments and leaves are the timeline; heartbeats that change nothing are counted."""
    from kdissect.stream.stats import Stats
    from kdissect.stream.fields import ExchangeFields
    from kdissect.sources.pcap import exchanges_in

    captures = Path(__file__).parent.parent / "captures"
    want = {
        "kafka-java-consumer-group": (
            "kd-kip848-group",
            "KIP-848 consumer group",
            [
                (2, "joined at epoch 2, assigned topic-id:36b7b0a9-97e5-469e-9a58-c51348bcf231[0]"),
                (-1, "left the group"),
            ],
        ),
        "kafka-java-share-group": (
            "kd-share-group",
            "share group",
            [
                (2, "joined at epoch 2, assigned nothing"),
                (3, "epoch 2 -> 3, assigned topic-id:3801642b-99af-4523-98a7-84a1c282e511[0]"),
                (-1, "left the group"),
            ],
        ),
        "kafka-java-streams-group": (
            "kd-streams-app",
            "streams group",
            [
                (1, "joined at epoch 1"),
                (2, "epoch 1 -> 2, assigned active subtopology 0[0]"),
                (-1, "left the group"),
            ],
        ),
    }
    for name, (group, kind, events) in want.items():
        stats = Stats()
        for ex in exchanges_in([str(captures / f"{name}.pcap")]).exchanges:
            stats.add(ex, ExchangeFields(ex))
        g = stats.groups[group]
        assert g.kind == kind
        assert [(e.generation, e.detail) for e in g.events] == events, name
        assert g.heartbeats >= 1


def test_wireshark_habits_read_as_wireshark_reads_them(views):
    """`kafka` alone (the protocol filter), blank-separated sets (`{0 1}`) and hex
    numbers (`0x0`), as Wireshark's display filters take them."""
    assert select(views, "kafka") == views
    assert select(views, "kafka and api == Fetch") == select(views, "api == Fetch")
    both = select(views, "kafka.api_key in {0, 1}")
    assert both and select(views, "kafka.api_key in {0 1}") == both
    assert select(views, "api in {Produce Fetch}") == both
    assert select(views, "kafka.api_key in {0x0 0x1}") == both
    assert select(views, "api == 0x0") == select(views, "api == Produce")
    assert select(views, "kafka.api_key == 0X1") == select(views, "api == Fetch")
    assert select(views, "error != 0x0") == select(views, "error != 0")
    with pytest.raises(FilterError, match="'kafka' alone selects every Kafka exchange"):
        parse_filter("kafka == 1")
    with pytest.raises(FilterError, match="expected ',', a value or '}'"):
        parse_filter("api in {0 1 ==")
    with pytest.raises(FilterError, match="longer than 30 digits"):
        parse_filter("api == 0x" + "f" * 40)


@pytest.mark.parametrize(
    "text,position,use",
    [
        ("tcp.port == 9092", 0, "use client or broker"),
        ("tcp.dstport == 9092", 0, "use client or broker"),
        ("ip.addr == 10.0.0.5", 0, "use client or broker"),
        ("api == 0 and ip.src == 10.0.0.5", 13, "use client or broker"),
        ("tcp.stream == 3", 0, "use stream"),
        ("frame.number == 7", 0, "use frame"),
    ],
)
def test_wireshark_fields_of_other_layers_name_the_kdissect_field(text, position, use):
    with pytest.raises(FilterError) as e:
        parse_filter(text)
    assert e.value.position == position and use in str(e.value), str(e.value)


def test_format_json_is_told_of_jsonl():
    res = kdissect_text("pcap", str(GROUP), "--format", "json")
    assert res.returncode == 2 and "did you mean jsonl?" in res.stderr
    res = kdissect_text("log", "--format", "json", str(GROUP))
    assert res.returncode == 2 and "did you mean jsonl?" in res.stderr


def _produce_capture(path: Path, header_key: bytes, cut: bool = False) -> Path:
    """One Produce v3 exchange whose record has a header named ``header_key`` (the batch
    by kafka-python's own encoder); ``cut``: ten bytes of the request lost (the capture
    cut it)."""
    import struct

    from kafka.record.default_records import DefaultRecordBatchBuilder

    from tests.support.tcp_mix import FIN, PSH_ACK, SYN, _packet

    class _Raw(str):
        def encode(self, *args, **kwargs) -> bytes:  # what kafka-python writes
            return header_key

    b = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 100_000)
    b.append(0, 1_700_000_000_000, b"k1", b"v1", [(_Raw("x"), b"1")])
    records = bytes(b.build())

    def text(t: str) -> bytes:
        return struct.pack(">h", len(t)) + t.encode()

    body = struct.pack(">hhi", 0, 3, 1) + text("cli") + struct.pack(">hhi", -1, 1, 1000)
    body += struct.pack(">i", 1) + text("t") + struct.pack(">iii", 1, 0, len(records)) + records
    request = struct.pack(">i", len(body)) + body
    answer = struct.pack(">ii", 1, 1) + text("t") + struct.pack(">iihqq", 1, 0, 0, 5, -1)
    answer = struct.pack(">i", len(answer) + 4) + answer + struct.pack(">i", 0)
    c, s = ([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 9092)
    at = len(request) - 30
    packets = [
        _packet(c, s, 999, 0, SYN, b""),
        _packet(s, c, 4999, 1000, SYN | 0x10, b""),
        *(
            [_packet(c, s, 1000, 5000, PSH_ACK, request[:at])]
            + [_packet(c, s, 1000 + at + 10, 5000, PSH_ACK, request[at + 10 :])]
            if cut
            else [_packet(c, s, 1000, 5000, PSH_ACK, request)]
        ),
        _packet(s, c, 5000, 1000 + len(request), PSH_ACK, answer),
        _packet(c, s, 1000 + len(request), 5000 + len(answer), FIN, b""),
        _packet(s, c, 5000 + len(answer), 1000 + len(request) + 1, FIN, b""),
    ]
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    for i, p in enumerate(packets):
        out += struct.pack("<IIII", 1_700_000_000, i * 1000, len(p), len(p)) + p
    path.write_bytes(out)
    return path


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_finding_and_severity_filters_read_the_records(tmp_path, monkeypatch, pure):
    """A record's finding (a header key that is not UTF-8) is not in what enrichment reads
    (batches' heads and CRCs): ``finding`` and ``severity`` read the records of Produce
    and Fetch for it; ``anomaly`` does not (documented). A message the capture cut keeps
    no finding blaming its layout, as enrichment keeps none."""
    if pure:
        monkeypatch.setenv("KDISSECT_PURE", "1")

    def count(path: Path, flt: str) -> int:
        run = kdissect_text("pcap", str(path), "-Y", flt)
        assert run.returncode in (0, 1), run.stderr  # (1: nothing matched)
        return len(run.stdout.splitlines())

    bad = _produce_capture(tmp_path / "bad.pcap", b"\xfftrace")
    good = _produce_capture(tmp_path / "good.pcap", b"trace")
    cut = _produce_capture(tmp_path / "cut.pcap", b"trace", cut=True)
    assert count(bad, "api == Produce") == 1 == count(good, "api == Produce")
    assert count(bad, "finding == bad_utf8") == 1
    assert count(bad, "severity >= warn") == 1
    assert count(bad, "finding != bad_utf8") == 0
    assert count(good, "finding == bad_utf8") == 0 and count(good, "severity >= warn") == 0
    assert count(cut, "finding == message_truncated") == 1
    assert count(cut, "finding in {bad_length, truncated, malformed_field}") == 0
