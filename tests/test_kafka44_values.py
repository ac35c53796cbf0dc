"""Kafka 4.4 captures read value by value against Kafka's own classes: every message of
captures/kafka44-cluster.pcap (Java 4.4 clients on three 4.4 brokers, and the brokers'
replication) and of captures/tls/kafka44-tls.pcap (franz-go over TLS, decrypted with its
key log, found without -p) and captures/tls/kafka44-java-tls.pcap (Java 4.4 clients over
TLS, decrypted with the key log of the kdissect proxy they talked to) decoded by kdissect and by Kafka's generated message classes
(tests/support/java/KafkaDecode.java through tests/support/oracle.py), every field of
every message compared; none of them unread, malformed or of an unknown API. And the TLS
captures read without -p gives the messages it gives with -p and tshark gives with the key
log."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections import Counter
from pathlib import Path

import pytest

from click.testing import CliRunner

from kdissect.capture.tls import KeyLog
from kdissect.cli import main
from kdissect.protocol import Options, schemas
from kdissect.protocol.layout import Struct
from kdissect.sources.pcap import exchanges_in
from tests.support import oracle

CAPTURES = Path(__file__).parent.parent / "captures"
RAW = Options(records=False, embedded=False)  # records and embedded bytes as Kafka has them


def _key(name: str) -> str:
    """Kafka's JSON names (topicId) and kdissect's (topic_id) alike."""
    return name.replace("_", "").lower()


def _uuid(text: str) -> str:
    """Kafka's JSON of a Uuid (URL-safe base64, unpadded) as kdissect shows it."""
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))


def compare(kafka, ours, layout: Struct | None, path: str, diffs: list[str]) -> int:
    """Every value Kafka's JSON holds against kdissect's: the number of values compared;
    what differs appended to ``diffs``. A field kdissect does not show must be a tagged
    field (absent on the wire: Kafka's JSON shows its default)."""
    if isinstance(kafka, dict):
        if not isinstance(ours, dict):
            diffs.append(f"{path}: Kafka {kafka!r}, kdissect {ours!r}")
            return 1
        mine = {_key(k): v for k, v in ours.items()}
        fields = (
            {} if layout is None else {_key(f.name): f for f in (*layout.fields, *layout.tagged)}
        )
        n = 0
        for name, value in kafka.items():
            if name.startswith("_"):  # what the oracle adds (_batches, _client): not fields
                continue
            k = _key(name)
            if k == "recordssizeinbytes":  # records: Kafka tells their size
                got = mine.pop("records", None)
                n += 1
                if (0 if got is None else len(got)) != value:
                    diffs.append(
                        f"{path}.records: Kafka {value} bytes, kdissect "
                        f"{None if got is None else len(got)}"
                    )
                continue
            f = fields.get(k)
            if k not in mine:
                if f is None or f.tag is None:
                    diffs.append(f"{path}.{name}: not in kdissect's reading")
                continue
            n += compare(
                value, mine.pop(k), f.struct if f is not None else None, f"{path}.{name}", diffs
            )
        diffs.extend(f"{path}.{k}: only kdissect has it" for k in mine)
        return n
    if isinstance(kafka, list):
        if not isinstance(ours, list) or len(ours) != len(kafka):
            diffs.append(f"{path}: Kafka {len(kafka)} items, kdissect {ours!r:.80}")
            return 1
        return sum(
            compare(a, b, layout, f"{path}[{i}]", diffs)
            for i, (a, b) in enumerate(zip(kafka, ours))
        )
    if isinstance(ours, (bytes, bytearray)) and isinstance(kafka, str):
        kafka = base64.b64decode(kafka)
    elif isinstance(kafka, str) and isinstance(ours, str) and len(kafka) == 22 and len(ours) == 36:
        kafka = _uuid(kafka)
    if kafka != ours:
        diffs.append(f"{path}: Kafka {kafka!r:.80}, kdissect {ours!r:.80}")
    return 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,least", [("kafka44-cluster", 400), ("tls/kafka44-tls", 50), ("tls/kafka44-java-tls", 30)]
)
def test_every_value_equals_kafkas(name, least):
    keys = KeyLog()
    if name.startswith("tls/"):
        keys.add_file(str(CAPTURES / f"{name}.keys"))
    got = exchanges_in([str(CAPTURES / f"{name}.pcap")], keys=keys)
    assert not got.gaps
    exchanges = got.exchanges
    assert all(e.tls is not None for e in exchanges) == name.startswith("tls/")
    messages = [m for e in exchanges for m in e.messages]
    truth = oracle.kafka_decoded(exchanges)
    assert len(messages) > least
    assert [m.index for m in messages if m.status != "ok" or m.holes] == []
    assert sorted(m.index for m in messages) == sorted(truth)  # Kafka read every one
    diffs: list[str] = []
    values = confirmed = 0
    for m in messages:
        body = dict(truth[m.index])
        assert "_unread" not in body
        api = body.pop("_api", None)
        if api is not None:
            assert (api[0], api[1], api[2]) == (m.api_key, m.api_version, True)
        decoded = m.decoded(RAW)
        # the one problem allowed: bytes after the body that Kafka's classes leave too
        # (librdkafka's Metadata v13 request ends with 3 of them)
        trailing = body.pop("_trailing", None)
        plural = "" if trailing == 1 else "s"
        want = [] if trailing is None else [f"{trailing} byte{plural} after the end of the body"]
        assert [r for p, r in decoded.problems] == want, (m.index, decoded.problems)
        assert all(p.endswith("body._trailing") for p, _ in decoded.problems)
        confirmed += trailing is not None
        values += compare(
            body,
            decoded.body.plain(),
            schemas.layout(m.api_key, m.api_version, m.direction),
            f"#{m.index} {m.api_name} v{m.api_version} {m.direction}",
            diffs,
        )
    assert diffs == [], diffs[:20]
    assert values > 10 * len(messages)
    print(
        f"{name}: {len(messages)} messages, {values} values equal, "
        f"{confirmed} trailing-bytes problems Kafka's classes confirm"
    )


def _server_ports(pcap: Path) -> set[int]:
    """The ports the capture's connections were opened to (tshark reads the SYNs)."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-Y",
            "tcp.flags.syn==1 && tcp.flags.ack==0",
            "-T",
            "fields",
            "-e",
            "tcp.dstport",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return {int(p) for p in out.split()}


def _jsonl(pcap: Path, connections: int, *args: str) -> list[dict]:
    """kdissect's JSON lines of the capture decrypted with its key log; all
    ``connections`` TLS connections decrypted, no record failed."""
    r = CliRunner().invoke(
        main,
        ["pcap", str(pcap), "--keylog", str(pcap.with_suffix(".keys")), "--format", "jsonl", *args],
    )
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]
    tls = [o["tls_connection"] for o in rows if "tls_connection" in o]
    assert len(tls) == connections and all(
        t["state"] == "decrypted" and t["records_failed"] == 0 for t in tls
    )
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,connections,least",
    [
        # franz-go, its own key log; one port
        ("kafka44-tls", 8, 50),
        # Java 4.4 clients (Java writes no key log: the secrets are those of the kdissect proxy
        # the clients talked TLS to, scripts/make_kafka_captures.py); two ports, the
        # proxy's bootstrap listener and the one standing for the broker
        ("kafka44-java-tls", 7, 30),
    ],
)
def test_tls_without_port_equals_with_port_and_tshark(name, connections, least):
    """A client over TLS to a 4.4 broker on ports kdissect does not know: its messages
    found by how the connections start are those -p finds, and those tshark finds with the
    key log (each message by frame and correlation id; the requests' API and version
    sequence)."""
    pcap = CAPTURES / "tls" / f"{name}.pcap"
    ports = _server_ports(pcap)
    assert ports and 9092 not in ports
    rows = _jsonl(pcap, connections)
    assert rows == _jsonl(pcap, connections, *(a for p in sorted(ports) for a in ("-p", str(p))))
    # (frame, correlation id, API key, version, direction) of every message, in their order
    found = [
        (o["frame"], o["correlation_id"], o["api_key"], o["api_version"], o["direction"])
        for o in rows
        if "frame" in o
    ]
    decode = [a for p in sorted(ports) for a in ("-d", f"tls.port=={p},kafka")]
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-o",
            f"tls.keylog_file:{pcap.with_suffix('.keys')}",
            *decode,
            "-Y",
            "kafka",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "kafka.correlation_id",
            "-e",
            "kafka.request_key",
            "-e",
            "kafka.request.version",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    theirs: Counter = Counter()
    requests = []
    for line in out.splitlines():
        frame, corrs, key, version = line.split("\t")
        for c in corrs.split(","):
            theirs[(int(frame), int(c))] += 1
        if key:
            requests += [
                (int(frame), int(k), int(v)) for k, v in zip(key.split(","), version.split(","))
            ]
    assert len(found) > least
    assert Counter((f, c) for f, c, *_ in found) == theirs
    # in frame order (JSON lines come exchange by exchange)
    assert sorted((f, k, v) for f, _, k, v, d in found if d == "request") == sorted(requests)
    print(f"{name}: {len(found)} messages without -p, with -p {sorted(ports)}, and by tshark")
