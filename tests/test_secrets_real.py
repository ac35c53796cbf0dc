"""Every secret kind through a real Apache Kafka 4.4 broker (issue 39): SCRAM
credentials, config passwords (IncrementalAlterConfigs, CreateTopics), the broker's own
sensitive JAAS config (DescribeConfigs), delegation tokens (create, describe, renew,
expire), sent by the Java admin client through `kdissect proxy -w` while tcpdump
captures the broker's side. None of them may appear -- as text, hex, hex-dump columns
or base64 -- in any output or file without --show-secrets: the proxy's JSON lines, its
recording (raw bytes and every view of it), every view of the capture, and every view of
the broker's log dir (KRaft keeps the SCRAM keys in __cluster_metadata)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
from pathlib import Path

import pytest

from tests.support.apache_kafka import ApacheKafka, classpath
from tests.support.capture import Tcpdump
from tests.support.cli import kdissect
from tests.support.javac import java_command
from tests.test_proxy import ProxyProcess
from tests.test_secrets_outputs import _forms, _parquet_text

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "support" / "java" / "SecretScenarios.java"

pytestmark = pytest.mark.slow


def kd(*args: str) -> str:
    run = kdissect(*args)
    assert run.returncode == 0, (args, run.stderr.decode()[-2000:])
    assert b"Traceback" not in run.stderr
    return run.stdout.decode("utf-8", "replace") + run.stderr.decode("utf-8", "replace")


def _scram_keys(salted: bytes) -> tuple[bytes, bytes]:
    """RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    HMAC(SaltedPassword, "Server Key") (SHA-256)."""
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return (
        hashlib.sha256(client_key).digest(),
        hmac.new(salted, b"Server Key", hashlib.sha256).digest(),
    )


def _salted_password(pcap: Path) -> bytes:
    for line in kd(
        "pcap", "--no-tui", "--show-secrets", "--format", "jsonl", str(pcap)
    ).splitlines():
        if line.startswith("{") and '"salted_password"' in line:
            body = json.loads(line)["body"]
            if "request_data" in body:  # the same request, forwarded in an Envelope
                body = body["request_data"]["body"]
            value = body["upsertions"][0]["salted_password"]
            return (
                bytes.fromhex(value["hex"]) if isinstance(value, dict) else value.encode("latin-1")
            )
    raise AssertionError("no AlterUserScramCredentials request in the capture")


def _envelope_answers(jsonl: str) -> dict:
    """The fields of the answers inside Envelope responses (JSON lines), by name."""
    out: dict = {}
    for line in jsonl.splitlines():
        obj = json.loads(line) if line.startswith("{") else {}
        data = (obj.get("body") or {}).get("response_data") if obj.get("api_key") == 58 else None
        if isinstance(data, dict):
            out.update(data["body"])
    return out


def test_no_secret_in_any_output_or_file(tmp_path):
    kafka = ApacheKafka(
        nodes=1,
        listeners=("PLAINTEXT", "SASL_PLAINTEXT"),
        start=False,
        extra={"delegation.token.secret.key": "DtSecretKey-4490"},
    )
    try:
        kafka.start()
        upstream = kafka.bootstrap("SASL_PLAINTEXT")
        recording = tmp_path / "proxy.pcapng"
        # (and the CONTROLLER listener: the broker forwards the admin requests to the
        # controller in Envelopes, the answers come back in Envelope responses)
        with Tcpdump(tmp_path / "broker.pcap", kafka.ports("SASL_PLAINTEXT", "CONTROLLER")) as dump:
            proxy = ProxyProcess(upstream, "-w", str(recording))
            try:
                run = subprocess.run(
                    # C1 only, as the suite's other Java clients (kafka_scenarios.py)
                    java_command(SOURCE, classpath(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
                    + [proxy.bootstrap],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
            finally:
                rows, proxy_err = proxy.stop()
            assert run.returncode == 0, run.stderr[-3000:]
            dump.stop()
        made = dict(
            line.split("=", 1)
            for line in run.stdout.splitlines()
            if "=" in line and not line.startswith("#")
        )
        capture = tmp_path / "broker.pcap"
        salted = _salted_password(capture)
        stored, server = _scram_keys(salted)
        secrets = [made[k].encode() for k in ("scram", "jaas", "keystore", "truststore")]
        secrets += [
            base64.b64decode(made["hmac"]),
            salted,
            stored,
            server,
            b"admin-secret",
            b"alice-secret",
        ]  # SASL PLAIN, the broker's JAAS
        forms = [f for s in secrets for f in _forms(s)]

        def clean(text: str, where: str) -> None:
            found = [f for f in forms if f in text]
            assert not found, (where, found)

        clean("\n".join(json.dumps(r) for r in rows) + proxy_err, "proxy JSON lines")
        raw = recording.read_bytes()
        for s in secrets:
            assert s not in raw, ("recording bytes", s)
        assert recording.stat().st_mode & 0o077 == 0  # 0600
        for source in (recording, capture):
            for view in ([], ["-V"], ["--format", "jsonl"], ["--format", "tsv"], ["--stats"]):
                clean(kd("pcap", "--no-tui", *view, str(source)), f"{source.name} {view}")
            kd(
                "pcap",
                "--format",
                "parquet",
                "-o",
                str(tmp_path / f"pq-{source.stem}"),
                str(source),
            )
            clean(_parquet_text(tmp_path / f"pq-{source.stem}"), f"{source.name} parquet")
        shown = kd("pcap", "--no-tui", "--show-secrets", "--format", "jsonl", str(capture))
        assert made["keystore"] in shown and made["scram"] not in shown  # (a salted form only)
        # Kafka 4.4 forwards CreateDelegationToken to the controller: the token's HMAC comes
        # back inside an Envelope response, read as CreateDelegationToken's answer
        forwarded = _envelope_answers(kd("pcap", "--no-tui", "--format", "jsonl", str(capture)))
        assert forwarded.get("hmac") == "<redacted>", sorted(forwarded)
        value = _envelope_answers(shown)["hmac"]
        got = bytes.fromhex(value["hex"]) if isinstance(value, dict) else value.encode("latin-1")
        assert got == base64.b64decode(made["hmac"])
        log_dir = kafka.log_dirs[0]
        kafka.stop_node(1)
        logs = ""
        for view in ([], ["-V"], ["--records"], ["--format", "jsonl", "--records"]):
            out = kd("log", "--no-tui", *view, str(log_dir))
            clean(out, f"log {view}")
            logs += out
        assert "UserScramCredentialRecord" in logs and "<redacted>" in logs
        kd("log", "--format", "parquet", "-o", str(tmp_path / "pq-log"), str(log_dir))
        clean(_parquet_text(tmp_path / "pq-log"), "log parquet")
    finally:
        kafka.close()
