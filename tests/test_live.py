"""`kdissect live`: sniffing the loopback interface while a real client talks to a real
broker, and a clear answer when capturing is not allowed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.broker import Broker
from tests.support.capture import wait_sniffing

pytestmark = pytest.mark.slow  # captures on the loopback interface (root)

ROOT = Path(__file__).resolve().parents[1]


def test_live_decodes_what_passes_on_loopback():
    from kafka import KafkaProducer

    broker = Broker()
    try:
        sniffer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "live",
                "-i",
                "lo",
                "-p",
                str(broker.port),
                "--no-detect",
                "--no-tui",
                "--format",
                "jsonl",
                "--duration",
                "12",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        wait_sniffing(sniffer.pid)
        producer = KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{broker.port}", client_id="live-test"
        )
        for i in range(3):
            producer.send("live-topic", key=b"k%d" % i, value=b"seen live")
        producer.flush()
        producer.close()
        out, err = sniffer.communicate(timeout=60)
    finally:
        broker.stop()
    assert sniffer.returncode == 0, err
    messages = [json.loads(line) for line in out.splitlines()]
    produce = [m for m in messages if m["api_name"] == "Produce" and m["direction"] == "request"]
    assert produce and produce[0]["client_id"] == "live-test"
    topics = produce[0]["body"]["topic_data"]
    assert topics[0]["name"] == "live-topic"
    answered = {m["correlation_id"] for m in messages if m["direction"] == "response"}
    assert produce[0]["correlation_id"] in answered  # paired live, not orphaned
    assert all(m["status"] == "ok" for m in messages)  # each packet seen once, in order


def test_live_says_what_to_do_without_capture_rights():
    res = subprocess.run(
        [
            "capsh",
            "--drop=cap_net_raw,cap_net_admin",
            "--",
            "-c",
            f"{sys.executable} -m kdissect live -i lo --no-tui --duration 1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 1
    assert "not allowed for this user" in res.stderr and "setcap" in res.stderr
    assert "Traceback" not in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "kdissect", "live", "-i", "no-such0", "--no-tui"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 1 and "no interface 'no-such0'" in res.stderr and "lo" in res.stderr
