"""A record header's key that is not UTF-8. Kafka's protocol says a key is a string, and
Java's clients always write one, but the bytes are whatever a client sends (a Go or C
client may send any), the broker stores them unchecked, and Kafka's own classes read
them with U+FFFD. kdissect shows the key so too, and says on the key's node that its
bytes are not UTF-8: in a capture (JSON lines, the records table) and in the
broker's log, the compiled and the Python paths alike (both hand such a key to the tree).
(The summary line reads batches' heads and CRCs, not their records: it does not show it;
a filter on ``finding`` or ``severity`` reads the records, and finds it.)

The record is written by kafka-python, a real client, through its own encoder: its
header key is a str whose ``encode`` gives bytes that are not UTF-8."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kdissect.cli import main
from tests.support.apache_kafka import DUMP_LOG
from tests.support.capture import Tcpdump
from tests.support.kafka_scenarios import create_topic

pytestmark = pytest.mark.slow  # a broker

TOPIC = "kd-header-keys"
RAW_KEY = b"\xfftrace"  # 0xff never starts a UTF-8 sequence
SHOWN = "\ufffdtrace"


class _RawKey(str):
    """A header key kafka-python writes as ``RAW_KEY`` (its encoder calls ``encode``)."""

    def encode(self, *args, **kwargs) -> bytes:  # type: ignore[override]
        return RAW_KEY


def _cli(*args: str) -> str:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def produced(apache_kafka, tmp_path_factory):
    """A capture of one Produce whose first record has the raw key, and the broker."""
    from kafka import KafkaProducer

    bootstrap = apache_kafka.bootstrap()
    create_topic(bootstrap, TOPIC)
    path = tmp_path_factory.mktemp("hkeys") / "hkeys.pcap"
    with Tcpdump(path, apache_kafka.ports("PLAINTEXT")) as dump:
        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
        first = p.send(TOPIC, b"v1", key=b"k1", partition=0, headers=[(_RawKey("x"), b"1")])
        p.send(TOPIC, b"v2", key=b"k2", partition=0, headers=[("fine", b"2")])
        p.flush(timeout=20)
        assert first.get(timeout=20).offset >= 0  # the broker took it
        p.close(timeout=5)
        dump.stop()
    return path, apache_kafka


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_a_capture_says_the_key_is_not_utf8(produced, tmp_path, monkeypatch, pure):
    path, _ = produced
    if pure:
        monkeypatch.setenv("KDISSECT_PURE", "1")
    lines = [json.loads(x) for x in _cli("pcap", str(path), "--format", "jsonl").splitlines()]
    ours = [
        x
        for x in lines
        if x.get("api_name") == "Produce" and x["direction"] == "request" and TOPIC in json.dumps(x)
    ]
    assert ours
    findings = [f for x in ours for f in x.get("findings", [])]
    assert [f["code"] for f in findings] == ["bad_utf8"], findings
    assert "header key is not valid UTF-8" in findings[0]["detail"]
    assert SHOWN in json.dumps(ours, ensure_ascii=False)

    x, r = tmp_path / "x.parquet", tmp_path / "r.parquet"
    _cli("pcap", str(path), "--format", "parquet", "-o", str(x), "--records-output", str(r))
    rows = [row for row in pq.read_table(r).to_pylist() if row["topic"] == TOPIC]
    assert sorted((row["direction"], row["key"]) for row in rows) == [
        ("produce", "k1"),
        ("produce", "k2"),
    ]
    by_key = {row["key"]: row for row in rows}
    assert [h["key"] for h in by_key["k1"]["headers"]] == [SHOWN]
    assert any("not valid UTF-8" in p for p in by_key["k1"]["problems"])
    assert by_key["k2"]["problems"] == [] and [h["key"] for h in by_key["k2"]["headers"]] == [
        "fine"
    ]


def test_the_brokers_log_says_the_key_is_not_utf8_as_kafka_reads_it(produced):
    _, kafka = produced
    part = kafka.log_dirs[0] / f"{TOPIC}-0"
    segment = sorted(part.glob("*.log"))[0]
    dumped = kafka.run_tool(DUMP_LOG, "--files", str(segment), "--print-data-log").stdout
    assert f"headerKeys: [{SHOWN}]" in dumped  # Kafka's own reading of the key
    items = [
        json.loads(x) for x in _cli("log", str(part), "--format", "jsonl", "--records").splitlines()
    ]
    batches = [i for i in items if i["type"] == "batch"]
    assert [f["code"] for b in batches for f in b["findings"]] == ["bad_utf8"]
    records = [i for i in items if i["type"] == "record"]
    assert [[h["key"] for h in rec["headers"]] for rec in records] == [[SHOWN], ["fine"]]


def test_a_filter_on_findings_reads_the_records(produced):
    """``finding`` and ``severity`` see a record's finding, which the summary's enrichment
    (batches' heads and CRCs) does not read: the filter reads Produce's records."""
    path, _ = produced

    def matched(flt: str) -> list[dict]:
        out = _cli("pcap", str(path), "--format", "jsonl", "-Y", flt)
        return [json.loads(x) for x in out.splitlines()]

    found = matched("finding == bad_utf8")
    assert {(x["api_name"], x["direction"]) for x in found} == {
        ("Produce", "request"),
        ("Produce", "response"),
    }
    assert all(TOPIC in json.dumps(x) for x in found)
    assert {x["seq"] for x in found} <= {x["seq"] for x in matched("severity >= warn")}
    assert not [x for x in matched("finding != bad_utf8") if x["seq"] in {y["seq"] for y in found}]
