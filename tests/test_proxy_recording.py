"""`kdissect proxy` as an operator relies on it after the fact: its -w recording survives
SIGKILL up to the last second and can be followed live, holds answers that came after
the client left, and is readable by its owner only; its metrics agree with its exit
summary; a client repeating a mistake gets one note, then a count."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kdissect.proxy.server import STREAM_TAIL
from tests.support.apache_kafka import USERS
from tests.test_proxy import FORWARDERS, ROOT, ProxyProcess, metric, scrape
from tests.test_proxy_limits import api_versions, call
from tests.support.broker import Broker, free_port

pytestmark = pytest.mark.slow


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _decoded(path: Path, port: int) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "kdissect", "pcap", str(path), "-p", str(port), "--format", "jsonl"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def _fetch_v4(topic: str, max_wait_ms: int, corr: int) -> bytes:
    raw = topic.encode()
    return (
        struct.pack(">hhih", 1, 4, corr, 4)
        + b"late"
        + struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
        + struct.pack(">ih", 1, len(raw))
        + raw
        + struct.pack(">iiqi", 1, 0, 0, 1 << 20)
    )


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_a_sigkilled_proxy_leaves_a_readable_recording_followed_live(
    apache_kafka, tmp_path, forwarder
):
    from confluent_kafka.admin import AdminClient, NewTopic

    port = apache_kafka.node(1).ports["PLAINTEXT"]
    admin = AdminClient({"bootstrap.servers": apache_kafka.bootstrap()})
    topic = f"late-answers-{forwarder}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    recording = tmp_path / "rec.pcapng"
    proxy = ProxyProcess(apache_kafka.bootstrap(), "-w", str(recording), "--forwarder", forwarder)
    follower = None
    try:
        assert stat.S_IMODE(recording.stat().st_mode) == 0o600
        # followed live: tshark reads the growing file through a pipe
        follower = subprocess.Popen(
            f"tail -c +1 -f {recording} | tshark -l -r - -T fields -e frame.number",
            shell=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        for corr in range(20):  # 20 sessions
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
                assert call(s, api_versions(corr))[:4] == struct.pack(">i", corr)
        # a Fetch the broker answers 1.5 s later, from a client gone at once
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
        fetch = _fetch_v4(topic, 1500, 77)
        s.sendall(struct.pack(">i", len(fetch)) + fetch)
        s.close()
        first = follower.stdout.readline()  # a packet, while the proxy runs
        assert first.strip() == "1"
        time.sleep(4)  # the answer came; a flush followed
        forwarder = _children(proxy.proc.pid)
        assert forwarder
        for pid in forwarder + [proxy.proc.pid]:
            os.kill(pid, signal.SIGKILL)
        proxy.proc.wait(30)
    finally:
        proxy.proc.kill()
        if follower is not None:
            os.killpg(follower.pid, signal.SIGKILL)
            follower.wait(10)
    checked = subprocess.run(
        ["tshark", "-r", str(recording), "-T", "fields", "-e", "frame.number"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr  # whole blocks: not cut short
    rows = _decoded(recording, port)
    answered = [r for r in rows if r["api_name"] == "ApiVersions" and r["direction"] == "response"]
    assert len(answered) == 20
    late = [r for r in rows if r["api_name"] == "Fetch" and r["direction"] == "response"]
    assert [r["correlation_id"] for r in late] == [77]


def test_the_keylog_is_created_for_its_owner_only(tmp_path):
    from tests.support.tls import self_signed

    cert, key = self_signed(tmp_path)
    keylog = tmp_path / "keys.log"
    broker = Broker()
    proxy = ProxyProcess(
        f"127.0.0.1:{broker.port}",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--keylog",
        str(keylog),
    )
    try:
        assert stat.S_IMODE(keylog.stat().st_mode) == 0o600
        proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_metrics_count_what_the_summary_says_the_display_did_not_show(forwarder):
    """The display is stopped while a producer floods: the forwarder sheds exchanges
    (its buffer is small) and the display, resumed far behind, leaves a share out. The
    metric's two counts are the numbers of the exit summary."""
    from kafka import KafkaProducer

    broker = Broker()
    metrics_port = free_port()
    proxy = ProxyProcess(
        f"127.0.0.1:{broker.port}",
        "--display-buffer",
        "256K",
        "--display-lag",
        "0.5",
        "--metrics",
        f"127.0.0.1:{metrics_port}",
        "--forwarder",
        forwarder,
    )
    try:
        os.kill(proxy.proc.pid, signal.SIGSTOP)  # the display (the forwarder goes on)
        producer = KafkaProducer(
            bootstrap_servers=proxy.bootstrap, linger_ms=0, max_in_flight_requests_per_connection=1
        )
        for i in range(200):
            producer.send("shed", bytes([i % 256]) * 20000).get(timeout=30)
        producer.close()
        time.sleep(1)  # what is queued is now old
        os.kill(proxy.proc.pid, signal.SIGCONT)
        proxy.settle()
        text = scrape(metrics_port)
        shed = metric(text, "kdissect_proxy_display_dropped_exchanges_total", reason="shed")
        left_out = metric(text, "kdissect_proxy_display_dropped_exchanges_total", reason="left_out")
        rows, err = proxy.stop()
    finally:
        if proxy.proc.poll() is None:
            os.kill(proxy.proc.pid, signal.SIGCONT)
            proxy.proc.kill()
        broker.stop()
    summary = next(line for line in err.splitlines() if line.startswith("display: "))
    assert shed > 0 and f"{int(shed)} shed by the forwarder" in summary, (shed, summary)
    assert left_out > 0 and f"{int(left_out)} exchanges left out" in summary, (left_out, summary)
    assert f"; {int(shed)} exchanges shed" in err


def test_a_plaintext_client_retrying_on_a_tls_listener_is_told_once(apache_kafka, tmp_path):
    """Told once per hint, then counted; the hint says SASL_SSL once clients
    authenticate with SASL through this proxy."""
    from confluent_kafka.admin import AdminClient
    from tests.support.tls import self_signed

    cert, key = self_signed(tmp_path)
    proxy = ProxyProcess(
        apache_kafka.bootstrap("SASL_PLAINTEXT"), "--tls-cert", str(cert), "--tls-key", str(key)
    )

    def plaintext_attempts(n: int) -> None:
        for corr in range(n):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
                s.sendall(struct.pack(">i", 10) + api_versions(corr)[:10])
                try:
                    assert s.recv(10) == b""
                except ConnectionResetError:
                    pass

    try:
        plaintext_attempts(10)
        admin = AdminClient(
            {
                "bootstrap.servers": proxy.bootstrap,
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(cert),
                "ssl.endpoint.identification.algorithm": "none",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": USERS["alice"],
            }
        )
        assert admin.list_topics(timeout=30).brokers
        del admin
        plaintext_attempts(10)
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
    told = [line for line in err.splitlines() if "a plaintext client on a TLS listener" in line]
    assert len(told) == 2, told
    assert "security.protocol=SSL, or SASL_SSL if it authenticates" in told[0]
    assert "security.protocol=SASL_SSL)" in told[1]
    assert "9 more times" in err  # the repeats, counted


def _sent_to_broker(recording: Path, proxy_port: int) -> list[bytes]:
    """The TCP payloads of the recording towards the broker, per connection."""
    from scapy.all import TCP, rdpcap

    streams: dict[int, bytes] = {}
    for p in rdpcap(str(recording)):
        if TCP in p and bytes(p[TCP].payload) and p[TCP].sport not in (proxy_port,):
            streams[p[TCP].sport] = streams.get(p[TCP].sport, b"") + bytes(p[TCP].payload)
    return list(streams.values())


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_the_recording_holds_bytes_forwarded_that_never_made_a_message(tmp_path, forwarder):
    """Requests are forwarded as they come: a client that sends part of one and resets
    had those bytes reach the broker but not the recording, which says it holds
    everything forwarded. A partial request of an API that carries secrets is recorded
    with only its header readable; bytes that are not Kafka are not forwarded (the
    connection is closed), so not recorded either (an HTTP request's Authorization
    header must not land in the recording)."""
    broker = Broker()
    recording = tmp_path / "r.pcapng"
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "-w", str(recording), "--forwarder", forwarder)
    request = struct.pack(">hhih", 18, 3, 5, 4) + b"part" + b"\x00" * 10
    framed = struct.pack(">i", len(request)) + request
    plain_sasl = (
        struct.pack(">hhih", 36, 2, 6, 4) + b"part" + b"\x00\x00\x00\x10\x00alice\x00s3cret!"
    )
    # a large one, cut after 200 KB of its 300
    large = struct.pack(">ihhih", 300_000, 1, 4, 7, 4) + b"part" + os.urandom(200_000)
    try:
        for first_bytes in (
            framed[:7],
            large,
            b"GET / HTTP/1.1\r\nAuthorization: Basic dXNlcjpodW50ZXIy\r\n\r\n",
            struct.pack(">i", len(plain_sasl) + 40) + plain_sasl,  # never finished
        ):
            s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
            s.sendall(first_bytes)
            time.sleep(0.3)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # a reset
            time.sleep(0.3)
        proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    sent = _sent_to_broker(recording, proxy.port)
    assert framed[:7] in sent
    assert large in sent
    assert not any(b"dXNlcjpodW50ZXIy" in s for s in sent)
    masked = [s for s in sent if s[4:6] == struct.pack(">h", 36)]
    assert masked and b"s3cret" not in masked[0] and masked[0][12:] == b"*" * (len(masked[0]) - 12)


class _CuttingBroker:
    """A broker that answers its first Fetch with ``size`` bytes announced and ends the
    connection after ``cut`` of them (size prefix included): a broker dying in the middle
    of an answer, which no real broker can be timed to do."""

    def __init__(self, size: int, cut: int):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.size, self.cut = size, cut
        self.sent = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.server.accept()
            with conn:
                head = _read(conn, 4)
                if len(head) < 4:
                    continue  # (a probe of the upstream)
                request = _read(conn, struct.unpack(">i", head)[0])
                if request[:2] != struct.pack(">h", 1):
                    continue
                answer = struct.pack(">i", self.size) + request[4:8]
                answer += os.urandom(self.size - 4)
                self.sent = answer[: self.cut]
                conn.sendall(self.sent)
                time.sleep(0.3)
                return

    def close(self) -> None:
        # (shut down first: closing alone does not wake a thread blocked in accept)
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.thread.join(10)


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n and (piece := conn.recv(n - len(data))):
        data += piece
    return data


def _received_from(recording: Path, port: int) -> bytes:
    """The TCP payload of the recording from ``port`` (one connection)."""
    from scapy.all import TCP, rdpcap

    packets = rdpcap(str(recording))
    return b"".join(bytes(p[TCP].payload) for p in packets if TCP in p and p[TCP].sport == port)


@pytest.mark.parametrize("forwarder", FORWARDERS)
@pytest.mark.parametrize(
    "size, cut",
    [
        (300_000, 200_004),  # passed on as it came (larger than the 64 KiB held whole)
        (5_000_000, 4_500_000),  # past the first 4 MiB buffer of the event loop's
        (300_000, 6),  # inside its correlation id
        (40_000, 30_000),  # small: held whole until its end
    ],
)
def test_an_answer_the_broker_ended_inside_is_recorded_as_far_as_it_came(
    tmp_path, forwarder, size, cut
):
    """The client gets the part of a large answer passed on as it came; the recording
    holds every byte the broker sent (the event-loop forwarder once recorded none of a
    large answer cut so)."""
    broker = _CuttingBroker(size, cut)
    recording = tmp_path / "cut.pcapng"
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "-w", str(recording), "--forwarder", forwarder)
    fetch = _fetch_v4("t", 100, 9)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            s.sendall(struct.pack(">i", len(fetch)) + fetch)
            got = b""
            while piece := s.recv(1 << 20):
                got += piece
        proxy.stop()
    finally:
        proxy.proc.kill()
        broker.close()
    assert len(broker.sent) == cut
    # the client: an answer that names no broker (Fetch v4) as far as it came once its
    # header is whole, from the threads as they read it; the event loop holds a small
    # answer whole for its end (none of it comes)
    if cut < 8:
        assert broker.sent.startswith(got)
    elif forwarder == "threads" or size > STREAM_TAIL:
        assert got == broker.sent
    else:
        assert got == b""
    assert _received_from(recording, broker.port) == broker.sent
    if cut >= 8:  # read back, the answer is paired and said to be cut where it was
        answers = [m for m in _decoded(recording, broker.port) if m["direction"] == "response"]
        assert [m["correlation_id"] for m in answers] == [9]
        missing = f"{size - (cut - 4)} of {size} bytes not captured"
        assert answers[0]["status"].startswith("truncated: " + missing), answers[0]["status"]
