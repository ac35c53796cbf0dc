"""`kdissect live`: sniffing the loopback interface while a real client talks to a real
broker, and a clear answer when capturing is not allowed."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.broker import Broker, free_port
from tests.support.capture import stopped_when, wait_sniffing
from tests.support.sockets import recv_exactly

pytestmark = pytest.mark.slow  # captures on the loopback interface (root)

ROOT = Path(__file__).resolve().parents[1]


def test_live_decodes_what_passes_on_loopback():
    from kafka import KafkaProducer

    broker = Broker()
    sniffer = None
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
        # the producer is closed: its last exchange, the Produce, shown answered
        out, err = stopped_when(
            sniffer,
            lambda shown: any(
                m["api_name"] == "Produce" and m["direction"] == "response" for m in shown
            ),
        )
    finally:
        if sniffer is not None and sniffer.poll() is None:
            sniffer.kill()
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


def test_live_lines_reach_a_pipe_as_they_happen_and_sigterm_keeps_the_rest():
    """Python holds up to 8 KiB of output for a pipe, and SIGTERM ended the process
    without writing it: `kdissect live | grep` showed nothing of light traffic, and
    `timeout 60 kdissect live > file` left an empty file. Without PYTHONUNBUFFERED
    (which some environments set and hid it), each line arrives while it runs, and
    SIGTERM stops as Ctrl-C does."""
    broker = Broker()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    lines: list[str] = []
    try:
        sniffer = subprocess.Popen(
            [sys.executable, "-m", "kdissect", "live", "-i", "lo", "-p", str(broker.port)]
            + ["--no-detect", "--no-tui"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        reader = threading.Thread(target=lambda: lines.extend(iter(sniffer.stdout.readline, "")))
        reader.start()
        wait_sniffing(sniffer.pid)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            request = struct.pack(">hhih", 18, 0, 41, 4) + b"pipe"
            sock.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", recv_exactly(sock, 4))[0]
            recv_exactly(sock, size)
            deadline = time.monotonic() + 60
            while not any("#41" in line for line in lines) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert any("ApiVersions v0  #41  pipe" in line for line in lines), lines
            assert sniffer.poll() is None  # shown while it runs, not at its end
            # a request whose answer is not captured: shown when SIGTERM stops the run
            request = struct.pack(">hhih", 18, 0, 42, 4) + b"pipe"
            sock.sendall(struct.pack(">i", len(request)) + request)
            time.sleep(1)
            sniffer.send_signal(signal.SIGTERM)
            _, err = sniffer.communicate(timeout=60)
        reader.join(10)
    finally:
        broker.stop()
    assert sniffer.returncode == 0 and "Traceback" not in err, err
    assert any("#42" in line for line in lines), lines


@pytest.mark.parametrize("iface", ["lo", "any"])  # any: libpcap's, every interface
def test_live_keeps_whole_packets_of_64_kib(iface):
    """Loopback's packets (MTU 65536) are up to 65,550 bytes, and an interface merging
    segments (GRO) makes such packets too: scapy's capture length of 65,535 bytes cut
    14 bytes off each, and a message longer than a packet was never whole. A request of
    300 kB between sockets with large buffers (64 KiB segments, as Apache Kafka's)."""
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    server.bind(("127.0.0.1", port))
    server.listen()
    sniffer = subprocess.Popen(
        [sys.executable, "-m", "kdissect", "live", "-i", iface, "-p", str(port)]
        + ["--no-detect", "--no-tui", "--duration", "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        wait_sniffing(sniffer.pid, every_interface=iface == "any")
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        client.connect(("127.0.0.1", port))
        peer, _ = server.accept()
        request = struct.pack(">hhih", 18, 3, 9, 4) + b"big1" + b"\x00" * 300_000
        client.sendall(struct.pack(">i", len(request)) + request)
        assert len(recv_exactly(peer, 4 + len(request))) == 4 + len(request)
        client.close()
        peer.close()
        out, err = sniffer.communicate(timeout=60)
    finally:
        server.close()
        sniffer.kill()
    assert "ApiVersions v3  #9  big1" in out, out + err
    assert "truncated" not in out and "gap:" not in err, out + err


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
