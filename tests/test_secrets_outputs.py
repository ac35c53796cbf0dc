"""One secrets policy in every output (issue 39; issue 38's redaction by sensitivity):
Kafka's PASSWORD-type configs (by name, prefixes allowed, never by substring) and what
the broker calls sensitive (DescribeConfigs' is_sensitive), SCRAM keys in KRaft's
metadata records, and the request an Envelope forwards -- through the real CLI, in
text, -V, --records, JSON lines, TSV, --stats and Parquet, as text, hex and hex-dump
columns. The real-broker version of this is test_secrets_real.py."""

from __future__ import annotations

import base64
import glob
import os
import struct
from pathlib import Path

import pytest

from tests.support.cli import kdissect
from tests.test_hostile_files import _uvarint as _uv, _varint, mh, tcp_pcap

JAAS_PW = "JaasPw-7781"
KEYSTORE_PW = "KeystorePw-4411"
ENVELOPE_PW = "EnvPw-9931"
STORED = bytes(range(0xA0, 0xC0))
SERVER = bytes(range(0xC0, 0xE0))
NOT_SECRET = "86400000"  # delegation.token.expiry.time.ms: "token" in the name only


def _cstr(s: str) -> bytes:
    b = s.encode()
    return _uv(len(b) + 1) + b


def _config_record(name: str, value: str) -> bytes:
    # frame version 1, ConfigRecord (type 4) v0: resource type, resource name, name, value
    return _uv(1) + _uv(4) + _uv(0) + b"\x04" + _cstr("1") + _cstr(name) + _cstr(value) + b"\0"


def _scram_record() -> bytes:
    # UserScramCredentialRecord (type 11) v0
    return (
        _uv(1)
        + _uv(11)
        + _uv(0)
        + _cstr("alice")
        + b"\x01"
        + _uv(9)
        + b"saltsalt"
        + _uv(len(STORED) + 1)
        + STORED
        + _uv(len(SERVER) + 1)
        + SERVER
        + struct.pack(">i", 4096)
        + b"\0"
    )


def metadata_batch() -> bytes:
    values = [
        _config_record(
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
            f"org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="a" password="{JAAS_PW}";',
        ),
        _config_record("ssl.keystore.password", KEYSTORE_PW),
        _config_record("delegation.token.expiry.time.ms", NOT_SECRET),
        _scram_record(),
    ]
    recs = b""
    for i, v in enumerate(values):
        body = b"\0" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        recs += _varint(len(body)) + body
    return mh.record_batch(recs, len(values))


def _request(key: int, version: int, body: bytes, flexible: bool) -> bytes:
    head = (
        struct.pack(">hhi", key, version, 7)
        + mh.kstr("kdissect-test")
        + (b"\0" if flexible else b"")
    )
    return head + body


def _sized(msg: bytes) -> bytes:
    return struct.pack(">i", len(msg)) + msg


def produce_to_metadata() -> bytes:
    records = metadata_batch()
    body = (
        struct.pack(">h", -1)
        + struct.pack(">hi", 1, 1000)
        + struct.pack(">i", 1)
        + mh.kstr("__cluster_metadata")
        + struct.pack(">ii", 1, 0)
        + struct.pack(">i", len(records))
        + records
    )
    return _sized(_request(0, 3, body, False))


def envelope() -> bytes:
    """Envelope v0 forwarding AlterConfigs v0 (a password and a duration)."""
    configs = [
        ("ssl.keystore.password", ENVELOPE_PW),
        ("delegation.token.expiry.time.ms", NOT_SECRET),
    ]
    inner_body = struct.pack(">i", 1) + b"\x04" + mh.kstr("0") + struct.pack(">i", len(configs))
    for name, value in configs:
        inner_body += mh.kstr(name) + mh.kstr(value)
    inner = _request(33, 0, inner_body + b"\0", False)
    body = _uv(len(inner) + 1) + inner + _uv(2) + b"p" + _uv(5) + b"\x7f\0\0\x01" + b"\0"
    return _sized(_request(58, 0, body, True))


def describe_configs_response() -> bytes:
    """DescribeConfigs v0 response: one sensitive config by the broker's word (a name no
    list knows), one not sensitive though its name says "token"."""
    entries = [
        ("custom.plugin.secret.thing", "CustomPw-5151", True),
        ("delegation.token.expiry.time.ms", NOT_SECRET, False),
    ]
    body = (
        struct.pack(">ii", 7, 0)
        + struct.pack(">i", 1)
        + struct.pack(">h", 0)
        + mh.kstr("")
        + b"\x04"
        + mh.kstr("0")
        + struct.pack(">i", len(entries))
    )
    for name, value, sensitive in entries:
        body += mh.kstr(name) + mh.kstr(value) + bytes([0, 0, int(sensitive)])
    return _sized(body)


def _forms(secret: bytes) -> list[str]:
    """A secret as text, hex, hex-dump columns and base64."""
    h = secret.hex()
    return [
        secret.decode("latin-1"),
        h,
        " ".join(h[i : i + 2] for i in range(0, 16, 2)),
        base64.b64encode(secret).decode(),
    ]


SECRETS = [s.encode() for s in (JAAS_PW, KEYSTORE_PW, ENVELOPE_PW, "CustomPw-5151")] + [
    STORED,
    SERVER,
]


def assert_clean(text: str, where: str) -> None:
    for secret in SECRETS:
        for form in _forms(secret):
            assert form not in text, (where, form)


def _run(args: list[str], tmp_path: Path) -> str:
    run = kdissect(*args)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    return run.stdout.decode("utf-8", "replace") + run.stderr.decode("utf-8", "replace")


def _parquet_text(directory: Path) -> str:
    return "".join(
        open(f, "rb").read().decode("latin-1")
        for f in glob.glob(str(directory / "**"), recursive=True)
        if os.path.isfile(f)
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("secrets")
    (d / "logs" / "__cluster_metadata-0").mkdir(parents=True)
    (d / "logs" / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(metadata_batch())
    (d / "requests.pcap").write_bytes(tcp_pcap(produce_to_metadata() + envelope()))
    return d


LOG_VIEWS = [[], ["-V"], ["--records"], ["--format", "jsonl"], ["--format", "jsonl", "--records"]]


@pytest.mark.parametrize("view", LOG_VIEWS, ids=lambda v: " ".join(v) or "text")
def test_log_metadata_secrets_masked(inputs, tmp_path, view):
    out = _run(["log", "--no-tui", *view, str(inputs / "logs")], tmp_path)
    assert_clean(out, f"log {view}")
    if "-V" in view or "--records" in view:
        assert "redacted" in out
    if "-V" in view or view == ["--format", "jsonl", "--records"]:  # (--records: raw hex)
        assert NOT_SECRET in out


def test_log_parquet_masked(inputs, tmp_path):
    _run(["log", "--format", "parquet", "-o", str(tmp_path / "pq"), str(inputs / "logs")], tmp_path)
    text = _parquet_text(tmp_path / "pq")
    assert_clean(text, "log parquet")
    assert NOT_SECRET in text


PCAP_VIEWS = [[], ["-V"], ["--format", "jsonl"], ["--format", "tsv"], ["--stats"]]


@pytest.mark.parametrize("view", PCAP_VIEWS, ids=lambda v: " ".join(v) or "text")
def test_pcap_metadata_records_and_envelope_masked(inputs, tmp_path, view):
    out = _run(["pcap", "--no-tui", *view, str(inputs / "requests.pcap")], tmp_path)
    assert_clean(out, f"pcap {view}")
    if view in (["-V"], ["--format", "jsonl"]):
        assert "redacted" in out and NOT_SECRET in out  # the forwarded request read
        assert "AlterConfigs" in out or '"request_api_key": 33' in out
    shown = _run(
        ["pcap", "--no-tui", "--show-secrets", *view, str(inputs / "requests.pcap")], tmp_path
    )
    if view in (["-V"], ["--format", "jsonl"]):
        assert ENVELOPE_PW in shown and KEYSTORE_PW in shown


def test_pcap_parquet_masked(inputs, tmp_path):
    _run(
        ["pcap", "--format", "parquet", "-o", str(tmp_path / "pq"), str(inputs / "requests.pcap")],
        tmp_path,
    )
    assert_clean(_parquet_text(tmp_path / "pq"), "pcap parquet")


def test_sensitive_by_the_brokers_word_not_by_name(tmp_path):
    """is_sensitive masks a config no list knows; delegation.token.expiry.time.ms stays."""
    blob = tmp_path / "dc.hex"
    blob.write_text(describe_configs_response().hex())
    for view in ([], ["--json"]):
        out = _run(
            ["blob", "--api", "DescribeConfigs", "--version", "0", "--response", *view, str(blob)],
            tmp_path,
        )
        assert "CustomPw-5151" not in out, view
        assert NOT_SECRET in out, view


def test_envelope_response_masked(tmp_path):
    """The controller's answer inside an Envelope response (it may hold a delegation
    token's HMAC) is read without its request's API: masked whole."""
    inner = b"\0\0\0\x07" + b"HmacInside-7731"
    body = struct.pack(">i", 7) + b"\0" + _uv(len(inner) + 1) + inner + b"\0\0" + b"\0"
    blob = tmp_path / "env.hex"
    blob.write_text(_sized(body).hex())
    for view in ([], ["--json"]):
        out = _run(
            ["blob", "--api", "Envelope", "--version", "0", "--response", *view, str(blob)],
            tmp_path,
        )
        assert "HmacInside" not in out and "486d6163" not in out.replace(" ", ""), view
    shown = _run(
        [
            "blob",
            "--api",
            "Envelope",
            "--version",
            "0",
            "--response",
            "--json",
            "--show-secrets",
            str(blob),
        ],
        tmp_path,
    )
    assert "486d6163" in shown.replace(" ", "")


def test_envelope_response_read_as_its_forwarded_request_answer(tmp_path):
    """An Envelope response's response_data is the answer to the request its Envelope
    request forwarded (Kafka writes it with its header): read as that API's response,
    its secrets masked as in any answer (a config the broker calls sensitive), the rest
    readable. (Envelope forwarding is real, captures/kafka-kraft-*.pcap and
    test_secrets_real; a sensitive value in one is hand-built here.)"""
    describe = struct.pack(">i", 1) + b"\x04" + mh.kstr("0") + struct.pack(">i", -1)
    inner = _request(32, 0, describe, False)  # DescribeConfigs v0, corr 7
    body = _uv(len(inner) + 1) + inner + _uv(2) + b"p" + _uv(5) + b"\x7f\0\0\x01" + b"\0"
    request = _sized(_request(58, 0, body, True))
    answer = describe_configs_response()[4:]  # header (corr 7) and body
    response = _sized(
        struct.pack(">i", 7) + b"\0" + _uv(len(answer) + 1) + answer + b"\0\0" + b"\0"
    )
    shake = [
        mh._frame(1, 40000, 999, b"", True, 0x02),
        mh._frame(1, 40000, 4999, b"", False, 0x12, ack=1000),
        mh._frame(1, 40000, 1000, b"", True, 0x10, ack=5000),
    ]
    pcap = tmp_path / "envelope.pcap"
    pcap.write_bytes(
        mh.pcap(
            shake
            + [
                mh._frame(1, 40000, 1000, request, True, ack=5000),
                mh._frame(1, 40000, 5000, response, False, ack=1000 + len(request)),
            ]
        )
    )
    for view in PCAP_VIEWS:
        out = _run(["pcap", "--no-tui", *view, str(pcap)], tmp_path)
        assert "CustomPw-5151" not in out and b"CustomPw".hex() not in out.replace(" ", ""), view
        if view in (["-V"], ["--format", "jsonl"]):
            assert NOT_SECRET in out and "custom.plugin.secret.thing" in out, view
    assert "DescribeConfigsResponse" in _run(["pcap", "--no-tui", "-V", str(pcap)], tmp_path)
    _run(["pcap", "--format", "parquet", "-o", str(tmp_path / "pq"), str(pcap)], tmp_path)
    assert "CustomPw" not in _parquet_text(tmp_path / "pq")
    shown = _run(["pcap", "--no-tui", "--show-secrets", "--format", "jsonl", str(pcap)], tmp_path)
    assert "CustomPw-5151" in shown


def test_the_byte_search_does_not_confirm_a_masked_secret():
    """The TUI's search (stream/content.py) found `alice-secret` in the SASL/PLAIN
    exchange and selected the `<redacted>` password: a masked secret confirmed, or guessed
    piece by piece. It searches around the secrets unless they are shown."""
    from kdissect.protocol import Options
    from kdissect.sources.pcap import exchanges_in
    from kdissect.stream.content import find_bytes, holds_bytes

    capture = str(Path(__file__).resolve().parents[1] / "captures" / "kafka-sasl.pcap")
    exchanges = exchanges_in([capture]).exchanges
    shown = Options(show_secrets=True)
    for needle in (b"alice-secret", b"e-secr"):
        assert not any(holds_bytes(ex.messages, needle) for ex in exchanges)
        assert not any(find_bytes(ex.messages, needle) for ex in exchanges)
        assert any(holds_bytes(ex.messages, needle, shown) for ex in exchanges)
    # what is not secret in the same message is still found (the user name)
    sasl = [ex for ex in exchanges if holds_bytes(ex.messages, b"alice-secret", shown)]
    assert all(find_bytes(ex.messages, b"alice") is not None for ex in sasl)


def test_a_masked_token_in_hex_shows_its_secret_bytes_as_stars():
    """A SASL/PLAIN token's value in -V showed its masked password as `2a 2a ...`, the
    bytes of `*`: as if they had been sent. They show as `**`, as in the dump."""
    capture = Path(__file__).resolve().parents[1] / "captures" / "kafka-sasl.pcap"
    out = kdissect("pcap", str(capture), "-V").stdout.decode()
    line = next(x for x in out.splitlines() if "auth_bytes" in x and "SASL/PLAIN" in x)
    assert "2a 2a" not in line and "** **" in line and "secrets masked" in line, line
    shown = kdissect("pcap", str(capture), "-V", "--show-secrets").stdout.decode()
    line = next(x for x in shown.splitlines() if "auth_bytes" in x and "SASL/PLAIN" in x)
    assert "**" not in line and "masked" not in line, line
