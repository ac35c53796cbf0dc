"""`kdissect proxy` between real clients and a real broker (Tansu): clients work through
it, stay on it because of the address rewriting, and every byte passes unchanged except
the rewritten responses."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from kdissect.protocol import decode_response
from kdissect.proxy.skipscan import response_layout
from tests.support.broker import Broker, free_port
from tests.support.relay import Relay
from tests.support.sockets import recv_exactly, serve_each

pytestmark = pytest.mark.slow  # a broker and the proxy in front of it

ROOT = Path(__file__).resolve().parents[1]
# the proxy's two forwarders (--forwarder): the tests that say what forwarding keeps run on
# both
FORWARDERS = ("event-loop", "threads")


class ProxyProcess:
    def __init__(self, upstream: str, *args: str, listen_host: str = "127.0.0.1", **popen):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kdissect",
                "proxy",
                "--upstream",
                upstream,
                "--listen",
                f"{listen_host}:{self.port}",
                "--no-tui",
                "--format",
                "jsonl",
                # the tests count exchanges: no sampling when a busy machine slows the display
                *(() if "--display-lag" in args else ("--display-lag", "0")),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            **popen,
        )
        # read its output as it comes, as a terminal or a pipe would
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(
                target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")), daemon=True
            )
            for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()
        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(self.stop()[1])

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def settle(self, timeout: float = 150) -> None:
        """Wait until the display has shown what it was given: SIGTERM promises only
        what is shown within a second (on a busy machine the low-priority display may
        be behind), so a test that counts exchanges waits for it to sleep on an empty
        channel first."""
        asleep, deadline = 0, time.monotonic() + timeout
        while asleep < 25 and time.monotonic() < deadline:  # longer than a gate pause
            try:
                state = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return
            asleep = asleep + 1 if state == "S" else 0
            time.sleep(0.05)

    def wait_for(self, done, timeout: float = 150) -> None:
        """Wait until the rows shown so far satisfy ``done`` (on a machine whose cores are
        busy the display, at nice 10, can be many seconds behind the traffic)."""
        deadline = time.monotonic() + timeout
        while (
            not done([json.loads(line) for line in list(self.out)]) and time.monotonic() < deadline
        ):
            time.sleep(0.1)

    def stop(self) -> tuple[list[dict], str]:
        self.settle()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        for reader in self.readers:  # the last lines, up to the end of output
            reader.join(10)
        return [json.loads(line) for line in self.out], "".join(self.err)


def _chain(forwarder: str, *options: str):
    """client → relay A → proxy → relay B → broker (which advertises relay B): the relays
    record each side of the proxy."""
    relay_b = Relay()
    broker = Broker(advertised_port=relay_b.port)
    relay_b.upstream = ("127.0.0.1", broker.port)
    proxy = ProxyProcess(f"127.0.0.1:{relay_b.port}", "--forwarder", forwarder, *options)
    relay_a = Relay()
    relay_a.upstream = ("127.0.0.1", proxy.port)
    yield relay_a, proxy, relay_b
    proxy.proc.kill()
    relay_a.close()
    relay_b.close()
    broker.stop()


@pytest.fixture(params=FORWARDERS)
def chain(tmp_path, request):
    """`_chain`, the proxy recording to tmp_path/proxy.pcapng."""
    recording = tmp_path / "proxy.pcapng"
    for relay_a, proxy, relay_b in _chain(request.param, "--write", str(recording)):
        proxy.recording = recording
        yield relay_a, proxy, relay_b


@pytest.fixture(params=FORWARDERS)
def chain_small_display(request):
    """`_chain`, the display's buffer far smaller than the answers (no recording), and
    the forwarder's name."""
    for relay_a, proxy, relay_b in _chain(request.param, "--display-buffer", "256K"):
        yield relay_a, proxy, relay_b, request.param


def endpoints(tree) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every broker in a response, from the full decoder: the
    reference the proxy's skip-scanner is held to."""
    found = []
    for node in tree.walk():
        host, port = node.child("host"), node.child("port")
        ident = next((c for c in node.children if c.name in ("node_id", "broker_id")), None)
        if host is not None and port is not None and ident is not None and host.ktype == "string":
            found.append((ident.value, host.value, port.value))
    return found


def frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def read_recording(proxy: ProxyProcess, relay_b: Relay) -> list[dict]:
    """The rows ``kdissect pcap`` reads from the proxy's recording (the broker's side of
    it at relay B's port)."""
    res = subprocess.run(
        [sys.executable, "-m", "kdissect", "pcap", str(proxy.recording)]
        + ["-p", str(relay_b.port), "--format", "jsonl"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def assert_bytes_pass_unchanged(relay_a: Relay, relay_b: Relay) -> int:
    """For each connection through relay A (client side of the proxy): what the client
    sent reached the broker unchanged, and what the broker sent reached the client
    unchanged except rewritten responses, which differ only in broker addresses.
    Returns how many responses were rewritten."""
    b_conns = relay_b.snapshot()
    rewritten = 0
    for a in relay_a.snapshot():
        b = next(c for c in b_conns if bytes(c.to_broker) == bytes(a.to_broker))
        asked = {}
        for req in frames(bytes(a.to_broker)):
            if len(req) >= 8:
                key, version, corr = struct.unpack_from(">hhi", req)
                asked[corr] = (key, version)
        sent, got_frames = frames(bytes(b.to_client)), frames(bytes(a.to_client))
        assert len(sent) == len(got_frames)
        for original, received in zip(sent, got_frames):
            if original == received:
                continue
            key, version = asked[struct.unpack_from(">i", original)[0]]
            assert response_layout(key, version) is not None
            before = decode_response(original, key, version)
            after = decode_response(received, key, version)
            assert not after.problems
            assert [e[0] for e in endpoints(after.tree)] == [e[0] for e in endpoints(before.tree)]
            assert all(e[2] != relay_b.port for e in endpoints(after.tree))
            rewritten += 1
    return rewritten


def test_clients_work_through_the_proxy_and_bytes_pass_unchanged(chain):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer

    relay_a, proxy, relay_b = chain
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{relay_a.port}",
        compression_type="gzip",
        client_id="kp-through-proxy",
    )
    for i in range(5):
        producer.send("through-proxy", key=b"k%d" % i, value=b"kafka-python %d" % i)
    producer.flush()
    # the client was told the proxy's address for the broker, not relay B's
    assert {(b.host, b.port) for b in producer._metadata.brokers()} != {("127.0.0.1", relay_b.port)}
    assert all(
        b.host == "127.0.0.1" and b.port not in (relay_b.port, relay_a.port)
        for b in producer._metadata.brokers()
    )
    producer.close()
    ck = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{relay_a.port}",
            "compression.type": "lz4",
            "client.id": "ck-through-proxy",
        }
    )
    for i in range(5):
        ck.produce("through-proxy", key=b"c%d" % i, value=b"confluent %d" % i)
    assert ck.flush(10) == 0
    consumer = KafkaConsumer(
        "through-proxy",
        bootstrap_servers=f"127.0.0.1:{relay_a.port}",
        auto_offset_reset="earliest",
        group_id="through-proxy",
        session_timeout_ms=6000,
        max_poll_interval_ms=6000,
    )
    got, deadline = [], time.monotonic() + 60  # joining takes long on a busy machine
    while len(got) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [m.value for m in records]
    values = sorted(got)
    consumer.close()
    assert values == sorted(
        [b"kafka-python %d" % i for i in range(5)] + [b"confluent %d" % i for i in range(5)]
    )
    ck_consumer = Consumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "group.id": "ck-g",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 6000,
        }
    )  # Tansu holds joins that long
    ck_consumer.subscribe(["through-proxy"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = ck_consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    ck_consumer.close()
    assert sorted(got) == values
    rows, err = proxy.stop()

    # the proxy decoded what passed
    seen = Counter((r["api_name"], r["direction"]) for r in rows)
    assert seen[("Produce", "request")] >= 2 and seen[("Fetch", "response")] >= 2
    clients = {r.get("client_id") for r in rows if r["direction"] == "request"}
    assert {"kp-through-proxy", "ck-through-proxy"} <= clients
    assert "is reached through" in err
    assert "(uvloop, forwarding at normal priority" in err  # installed with the test extra

    # bytes: every byte passed unchanged except broker addresses
    assert assert_bytes_pass_unchanged(relay_a, relay_b) >= 1

    # the recording opens with kdissect pcap and with tshark, and holds what was shown
    recorded = read_recording(proxy, relay_b)
    key = lambda r: (r["api_name"], r["direction"], r["correlation_id"], r["status"])
    assert sorted(map(key, recorded)) == sorted(map(key, rows))
    assert all(not r["problems"] for r in recorded)
    tshark = subprocess.run(
        [
            "tshark",
            "-r",
            str(proxy.recording),
            "-d",
            f"tcp.port=={relay_b.port},kafka",
            "-T",
            "fields",
            "-e",
            "kafka.correlation_id",
            "-Y",
            "kafka",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tshark.returncode == 0, tshark.stderr
    tshark_ids = sorted(int(c) for line in tshark.stdout.split() for c in line.split(",") if c)
    assert tshark_ids == sorted(r["correlation_id"] for r in rows)


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_tls_on_a_plaintext_listener_and_a_vanished_broker_close_cleanly(forwarder):
    """(On plain asyncio: the other tests run on uvloop.)"""
    broker = Broker()
    proxy = ProxyProcess(
        f"127.0.0.1:{broker.port}", "--event-loop", "asyncio", "--forwarder", forwarder
    )
    try:
        hello = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        hello.sendall(bytes.fromhex("16030100f8010000f40303") + b"\x00" * 40)
        assert hello.recv(100) == b""  # closed, not hung
        # a request goes through; then the broker dies: the client is disconnected
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        request = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
        client.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", client.recv(4))[0]
        assert size > 4
        broker.stop()
        client.settimeout(10)
        data = b""
        while True:
            chunk = client.recv(65536)
            if not chunk:
                break
            data += chunk
        rows, err = proxy.stop()
    finally:
        broker.stop()
        proxy.proc.kill()
    assert "TLS handshake" in err and "plaintext listener" in err
    assert "(asyncio, forwarding at normal priority" in err
    assert any(r["api_name"] == "ApiVersions" and r["direction"] == "response" for r in rows)


def _is_produce_request(row: dict) -> bool:
    return row["api_name"] == "Produce" and row["direction"] == "request"


def test_tls_towards_clients_and_towards_brokers(tmp_path):
    """kafka-python speaks TLS to the proxy (which checks nothing of it), and the proxy
    speaks TLS to a TLS "broker", checking its certificate against --ca-file."""
    from kafka import KafkaConsumer, KafkaProducer
    from tests.support.tls import TlsTerminator, self_signed

    cert, key = self_signed(tmp_path)
    broker = Broker()
    terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port))
    # the broker must advertise the TLS port: run a second broker advertising it
    broker.stop()
    broker = Broker(advertised_port=terminator.port)
    terminator.upstream = ("127.0.0.1", broker.port)
    proxy = ProxyProcess(
        f"127.0.0.1:{terminator.port}",
        "--upstream-tls",
        "--ca-file",
        str(cert),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
    )
    try:
        tls = dict(security_protocol="SSL", ssl_cafile=str(cert), ssl_check_hostname=True)
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, **tls)
        producer.send("tls-both-ways", b"secret payload").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(
            "tls-both-ways",
            bootstrap_servers=proxy.bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=4000,
            **tls,
        )
        assert [m.value for m in consumer] == [b"secret payload"]
        consumer.close()
        # a plaintext client on the TLS listener is told and closed, not left hanging
        plain = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        request = struct.pack(">hhih", 18, 0, 1, 1) + b"x"
        plain.sendall(struct.pack(">i", len(request)) + request)
        try:
            assert plain.recv(4096) == b""
        except ConnectionResetError:  # closed with its request unread
            pass
        proxy.wait_for(lambda rows: any(_is_produce_request(r) for r in rows))
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        terminator.close()
        broker.stop()
    produce = [r for r in rows if _is_produce_request(r)]
    assert produce, "the proxy decoded the traffic it carried over TLS"
    assert "a plaintext client on a TLS listener" in err


def test_broker_certificates_are_checked(tmp_path):
    from tests.support.tls import TlsTerminator, self_signed

    cert, key = self_signed(tmp_path)
    broker = Broker()
    terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port))
    proxy = ProxyProcess(f"127.0.0.1:{terminator.port}", "--upstream-tls")  # system CAs
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        request = struct.pack(">hhih", 18, 0, 1, 1) + b"x"
        client.sendall(struct.pack(">i", len(request)) + request)
        assert client.recv(100) == b""  # refused upstream: the client is closed
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        terminator.close()
        broker.stop()
    assert "cannot reach broker" in err and "CERTIFICATE_VERIFY_FAILED" in err


def test_the_recording_masks_sasl_secrets_at_the_same_length(tmp_path):
    """Real SCRAM and SASL v0 traffic from the repo captures, through the recorder."""
    from kdissect.capture.pcapng_writer import Recorder
    from kdissect.sources.pcap import exchanges_in

    captures = ROOT / "captures"
    exchanges = exchanges_in(
        [str(captures / "sasl-scram.pcap"), str(captures / "sasl-v0.pcap")]
    ).exchanges
    recorder = Recorder(str(tmp_path / "r.pcapng"))
    masked_any = 0
    for ex in exchanges:
        for m in (ex.request, ex.response):
            if m is None:
                continue
            frame = struct.pack(">i", len(m.data)) + m.data
            side = (
                0
                if m.direction in ("request",) or (m.direction == "sasl" and ex.request is m)
                else 1
            )
            out = recorder.mask(frame, side, m.direction == "sasl")
            assert len(out) == len(frame)
            if out != frame:
                masked_any += 1
                secret = [n for n in m.decoded().tree.walk() if n.secret]
                assert secret
                for n in secret:
                    assert out[4 + n.offset : 4 + n.end] == b"*" * n.length
                assert b"p=" not in out or b"p=*" in out  # SCRAM proofs are gone
    recorder.close()
    assert masked_any >= 2
    shown = Recorder(str(tmp_path / "s.pcapng"), show_secrets=True)
    frame = b"\x00\x00\x00\x04abcd"
    assert shown.mask(frame, 0, True) == frame
    shown.close()


def api_versions(sock: socket.socket, corr: int) -> bytes:
    request = struct.pack(">hhih", 18, 0, corr, 4) + b"many"
    sock.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def read_big(topic: str, bootstrap: str) -> list[bytes]:
    """Every record value of ``topic`` from the start, with fetches big enough for
    records of tens of MB: up to 60 s for the first (on a busy machine the first fetch
    of MBs through the proxy came after 8 s about one run in five; in one full run on
    both cores, with Spark's tests beside it, none came in 30 s; four runs beside two
    busy loops took 11-13 s in all), then until 8 s pass without more."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        fetch_max_bytes=64 << 20,
        max_partition_fetch_bytes=64 << 20,
    )
    values: list[bytes] = []
    quiet_until = time.monotonic() + 60
    while time.monotonic() < quiet_until:
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
            quiet_until = time.monotonic() + 8
    consumer.close()
    return values


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_many_clients_large_messages_acks0_and_clients_that_vanish(forwarder):
    from kafka import KafkaConsumer, KafkaProducer

    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "--forwarder", forwarder)
    try:
        # 200 connections at once, each answered on its own connection
        socks = [
            socket.create_connection(("127.0.0.1", proxy.port), timeout=30) for _ in range(200)
        ]
        for i, s in enumerate(socks):
            assert struct.unpack_from(">i", api_versions(s, 1000 + i))[0] == 1000 + i
        for s in socks:
            s.close()
        # a client that dies in the middle of a request does not hurt the others
        half = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        half.sendall(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
        half.close()
        # acks=0 (pipelined, never answered) and a 20 MB message
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, acks=0, linger_ms=5)
        for i in range(50):
            producer.send("acks0-through-proxy", b"fire and forget %d" % i)
        producer.flush()
        producer.close()
        big = KafkaProducer(bootstrap_servers=proxy.bootstrap, max_request_size=32 << 20)
        payload = bytes(range(256)) * (20 * 4096)  # 20 MiB
        big.send("big-through-proxy", payload).get(timeout=60)
        big.close()
        consumer = KafkaConsumer(
            "acks0-through-proxy",
            bootstrap_servers=proxy.bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=4000,
        )
        assert len([m for m in consumer]) == 50
        consumer.close()
        assert read_big("big-through-proxy", proxy.bootstrap) == [payload]
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    answered = [r for r in rows if r["api_name"] == "ApiVersions" and r["direction"] == "response"]
    assert len(answered) >= 200
    produce = [r for r in rows if r["api_name"] == "Produce" and r["direction"] == "request"]
    assert any(r["size"] > 20 << 20 for r in produce)
    # acks=0: one exchange per request, whether Tansu answers it (it does) or not
    assert any(
        r["status"].startswith(("no response expected", "answer to acks=0")) for r in produce
    )
    assert "Traceback" not in err


def test_clients_succeed_only_because_addresses_are_rewritten():
    """The broker advertises a name no client can resolve (as brokers behind NAT or in a
    container network do). Direct, clients fail after bootstrap; through the proxy
    (told where that name really is) aiokafka and kcat produce and consume."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from tests.support.scenarios import kcat_env

    env = kcat_env()
    broker = Broker(advertised_host="kafka-internal.invalid")
    advertised = f"kafka-internal.invalid:{broker.port}"
    proxy = ProxyProcess(
        f"127.0.0.1:{broker.port}", "--map", f"{advertised}=127.0.0.1:{broker.port}"
    )
    try:
        direct = subprocess.run(
            ["kcat", "-b", f"127.0.0.1:{broker.port}", "-P", "-t", "unreachable", "-m", "5"],
            input="lost\n",
            text=True,
            capture_output=True,
            timeout=60,
            env=env,
        )
        assert (
            direct.returncode != 0 and "Failed to resolve 'kafka-internal.invalid" in direct.stderr
        )  # direct, the advertised name is useless
        # kcat through the proxy
        subprocess.run(
            ["kcat", "-b", proxy.bootstrap, "-P", "-t", "rewritten"],
            input="kcat one\nkcat two\n",
            text=True,
            check=True,
            timeout=60,
            env=env,
        )
        got = subprocess.run(
            ["kcat", "-b", proxy.bootstrap, "-C", "-t", "rewritten", "-o", "beginning", "-e", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert sorted(got.stdout.split()) == ["kcat", "kcat", "one", "two"]

        async def aio():
            producer = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap, compression_type="zstd")
            await producer.start()
            await producer.send_and_wait("rewritten-aio", b"aiokafka value")
            await producer.stop()
            consumer = AIOKafkaConsumer(
                "rewritten-aio", bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest"
            )
            await consumer.start()
            try:
                message = await asyncio.wait_for(consumer.getone(), 30)
            finally:
                await consumer.stop()
            return message.value

        assert asyncio.run(aio()) == b"aiokafka value"
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    assert f"({advertised} at 127.0.0.1:{broker.port})" in err
    assert {"Produce", "Fetch"} <= {r["api_name"] for r in rows}


# -- the Java client ----------------------------------------------------------------------


def java_client(*args: str) -> subprocess.CompletedProcess:
    """tests/support/java/JavaClient.java with kafka-clients 3.9.1 (the jars of the
    shigawire-apache-flink-libraries wheel)."""
    import importlib.util

    lib = Path(next(iter(importlib.util.find_spec("pyflink").submodule_search_locations)), "lib")
    jars = [
        lib / f"{name}.jar"
        for name in ("kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api")
    ]
    assert all(j.exists() for j in jars), jars
    from tests.support.javac import java_command

    return subprocess.run(
        [
            # C1 only, as the suite's other Java clients (tests/support/kafka_scenarios.py):
            # a short-lived client spends its CPU compiling, not running
            *java_command(
                ROOT / "tests/support/java/JavaClient.java",
                ":".join(map(str, jars)),
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_java_client_through_the_proxy_byte_exact(chain):
    relay_a, proxy, relay_b = chain
    bootstrap = f"127.0.0.1:{relay_a.port}"
    produced = java_client("produce", bootstrap, "java-through-proxy", "5")
    assert produced.returncode == 0, produced.stderr[-3000:]
    consumed = java_client("consume", bootstrap, "java-through-proxy", "5")
    assert consumed.returncode == 0, consumed.stderr[-3000:]
    assert sorted(consumed.stdout.split("\n")[:-1]) == [f"java {i}" for i in range(5)]
    rows, err = proxy.stop()
    # the Java client follows the rewritten addresses: it reached the broker only
    # through the proxy, and every byte passed unchanged except broker addresses
    assert assert_bytes_pass_unchanged(relay_a, relay_b) >= 1
    assert {r.get("client_id") for r in rows if r["direction"] == "request"} == {
        "java-through-proxy"
    }
    apis = {r["api_name"] for r in rows}
    assert {"Produce", "Fetch", "FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit"} <= apis
    assert not [r for r in rows if r["problems"]]


def _megabytes_through(relay_a: Relay, relay_b: Relay) -> None:
    """Six records of 700 KiB produced and read back through relay A (Fetch answers of
    megabytes): every record comes back, and every byte passed unchanged."""
    import random

    from kafka import KafkaProducer

    bootstrap = f"127.0.0.1:{relay_a.port}"
    rng = random.Random(44)
    payloads = [rng.randbytes(700 << 10) for _ in range(6)]  # (not compressible)
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20)
    for payload in payloads:
        producer.send("megabytes-through-proxy", payload)
    producer.flush()
    producer.close()
    assert sorted(read_big("megabytes-through-proxy", bootstrap)) == sorted(payloads)
    assert assert_bytes_pass_unchanged(relay_a, relay_b) >= 1


def test_answers_of_megabytes_pass_byte_exact_and_are_shown_and_recorded_whole(chain):
    """Answers this large are read straight into their own buffers by the threads
    forwarder (relay.rs's `read_in_place`) and pass on as they come: the client gets
    them unchanged, and the display and the recording have them whole."""
    relay_a, proxy, relay_b = chain
    _megabytes_through(relay_a, relay_b)
    rows, err = proxy.stop()
    large = [
        r
        for r in rows
        if r["api_name"] == "Fetch" and r["direction"] == "response" and r["size"] > 2 << 20
    ]
    assert large and not [r for r in large if r["problems"]]
    recorded = read_recording(proxy, relay_b)
    recorded_large = [r for r in recorded if r["api_name"] == "Fetch" and r["size"] > 2 << 20]
    key = lambda r: (r["correlation_id"], r["size"])
    assert sorted(map(key, recorded_large)) == sorted(map(key, large))
    assert not [r for r in recorded if r["problems"]]
    assert "Traceback" not in err


def test_answers_of_megabytes_the_display_has_no_room_for_pass_byte_exact(chain_small_display):
    """A Fetch answer is collected whole all the same, to check its leader hints for broker
    addresses: with no room in the display's budget its buffer starts smaller than the
    answer and grows as the bytes come (relay.rs's `Msg::in_place`). The client gets every
    answer unchanged; the display leaves the answers out (or shows their first bytes,
    saying why), never blaming their cut ends on the broker."""
    relay_a, proxy, relay_b, forwarder = chain_small_display
    _megabytes_through(relay_a, relay_b)
    answers = [f for c in relay_b.snapshot() for f in frames(bytes(c.to_client))]
    large = {len(f) for f in answers if len(f) > 2 << 20}
    assert large  # (what this test is about)
    rows, err = proxy.stop()
    fetches = [r for r in rows if r["api_name"] == "Fetch"]
    assert [r for r in fetches if r["direction"] == "request"]
    assert not [r for r in fetches if r["direction"] == "response" and r["size"] > 2 << 20]
    # an answer shown by its first bytes says why, and its end is not blamed on the broker
    assert not [f for r in rows for f in r["findings"] if f["group"] == "malformed"]
    cut = [r for r in fetches if r["direction"] == "response" and "not shown" in r["status"]]
    assert all([f["code"] for f in r["findings"]] == ["message_truncated"] for r in cut)
    cut_sizes = {int(re.search(r"of (\d+) bytes", r["status"]).group(1)) for r in cut}
    assert cut_sizes <= {len(f) for f in answers}
    if forwarder == "event-loop":  # (the thread forwarder sheds such exchanges whole)
        assert cut_sizes & large
    assert "Traceback" not in err


# -- the skip-scanner ---------------------------------------------------------------------


def _reference_endpoints(ex) -> list:
    m = ex.response
    return endpoints(decode_response(m.data, m.api_key, m.api_version).tree)


def test_the_skip_scanner_finds_what_the_full_decoder_finds_on_real_captures():
    from kdissect.proxy.rewrite import rewrite
    from kdissect.proxy.skipscan import endpoint_spans
    from kdissect.sources.pcap import exchanges_in

    exchanges = exchanges_in(sorted(str(p) for p in (ROOT / "captures").glob("*.pcap"))).exchanges
    scanned = Counter()
    for ex in exchanges:
        m = ex.response
        if m is None or m.api_key is None or response_layout(m.api_key, m.api_version) is None:
            continue
        spans = endpoint_spans(m.data, m.api_key, m.api_version)
        assert [(s.node_id, s.host, s.port) for s in spans] == _reference_endpoints(ex)
        scanned[(m.api_key, len(spans) > 0)] += 1
        if spans:
            new = rewrite(m.data, spans, lambda s: ("proxy.example.com", 19000 + s.node_id))
            after = decode_response(new, m.api_key, m.api_version)
            assert not after.problems
            assert endpoints(after.tree) == [
                (s.node_id, "proxy.example.com", 19000 + s.node_id) for s in spans
            ]
    # Metadata (old and new versions) and FindCoordinator name brokers; Produce v10 and
    # Fetch v16 answers were walked to their end and named none
    assert scanned[(3, True)] >= 4 and scanned[(10, True)] >= 1
    assert scanned[(0, False)] >= 1 and scanned[(1, False)] >= 1
    # versions that cannot name brokers are not parsed at all
    assert response_layout(1, 15) is None and response_layout(0, 9) is None
    assert response_layout(18, 3) is None and response_layout(3, 0) is not None


def test_leader_hints_in_a_tagged_field_are_rewritten_and_its_size_follows():
    """A real Fetch v16 answer (from the kcat capture, where Tansu sends an empty
    `node_endpoints` tagged field) given one KIP-951 leader hint by hand: the records are
    skipped, the hint is found, and after rewriting the tagged field's size covers the
    longer host."""
    from kdissect.proxy.rewrite import rewrite, uvarint
    from kdissect.proxy.skipscan import endpoint_spans
    from kdissect.sources.pcap import exchanges_in

    fetch = next(
        ex.response
        for ex in exchanges_in([str(ROOT / "captures/kcat.pcap")]).exchanges
        if ex.response is not None
        and ex.response.api_key == 1
        and ex.response.api_version == 16
        and len(ex.response.data) > 200
    )
    # one tagged field: tag 0, size 1, an empty compact array
    assert fetch.data.endswith(b"\x01\x00\x01\x01")
    host = b"broker-7.internal"
    endpoint = (
        struct.pack(">i", 7)
        + uvarint(len(host) + 1)
        + host
        + struct.pack(">i", 9092)
        + b"\x00"
        + b"\x00"
    )  # rack null, no tags
    value = uvarint(2) + endpoint  # a compact array of one
    data = fetch.data[:-4] + b"\x01" + uvarint(0) + uvarint(len(value)) + value
    spans = endpoint_spans(data, 1, 16)
    assert [(s.node_id, s.host, s.port) for s in spans] == [(7, "broker-7.internal", 9092)]
    assert len(spans[0].tagged) == 1
    new = rewrite(data, spans, lambda s: ("a-much-longer-proxy-host-name.example.com", 19007))
    after = decode_response(new, 1, 16)
    assert not after.problems
    assert endpoints(after.tree)[-1] == (7, "a-much-longer-proxy-host-name.example.com", 19007)
    assert new[: len(fetch.data) - 4] == data[: len(fetch.data) - 4]  # records untouched


# -- operations ---------------------------------------------------------------------------


def scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + ("{" if labels else " ")) and all(
            f'{k}="{v}"' in line for k, v in labels.items()
        ):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not in the metrics")


def test_bootstrap_list_wildcard_listen_metrics_and_a_clean_stop():
    from kafka import KafkaProducer

    broker = Broker()
    dead = free_port()  # nothing listens there
    metrics_port = free_port()
    proxy = ProxyProcess(
        f"127.0.0.1:{dead},127.0.0.1:{broker.port}",
        "--metrics",
        f"127.0.0.1:{metrics_port}",
        listen_host="0.0.0.0",
    )
    try:
        # the first bootstrap broker is down: the second is used; the listener is a
        # wildcard, and the client is handed the address it connected to, not 0.0.0.0
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="ops")
        producer.send("ops", b"through the second bootstrap broker").get(timeout=30)
        assert {b.host for b in producer._metadata.brokers()} == {"127.0.0.1"}
        # (the thread forwarder counts a message once the event loop takes it from the
        # relay's queue, after it passed: on a loaded machine, a moment later)
        deadline = time.monotonic() + 10
        text = scrape(metrics_port)
        while (
            metric(text, "kdissect_proxy_responses_total", api="Produce") < 1
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
            text = scrape(metrics_port)
        # per API, never per connection unless asked (bounded label cardinality)
        assert metric(text, "kdissect_proxy_requests_total", api="Produce") >= 1
        assert metric(text, "kdissect_proxy_requests_total", api="Metadata") >= 1
        assert metric(text, "kdissect_proxy_responses_total", api="Produce") >= 1
        assert metric(text, "kdissect_proxy_rewritten_responses_total", api="Metadata") >= 1
        assert metric(text, "kdissect_proxy_bytes_total", direction="to_client") > 0
        assert metric(text, "kdissect_proxy_request_latency_seconds_count", api="Produce") >= 1
        # measured finer than uvloop's clock, which counts whole milliseconds (a sum of
        # such latencies is a whole number of them)
        took = metric(text, "kdissect_proxy_request_latency_seconds_sum", api="Metadata") * 1e3
        assert abs(took - round(took)) > 1e-6, took
        assert metric(text, "kdissect_proxy_connections_open") >= 1
        assert "kdissect_proxy_connection_requests_total" not in text
        assert metric(text, "kdissect_proxy_display_dropped_exchanges_total", reason="shed") == 0
        # SIGTERM with connections open (the producer's, and one mid-request)
        half = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        half.sendall(struct.pack(">i", 100) + b"\x00\x12")
        proxy.settle()  # the display has shown the Produce
        proxy.proc.terminate()
        assert proxy.proc.wait(timeout=30) == 0
        assert half.recv(10) == b""  # closed, not left hanging
        half.close()
        producer.close(timeout=1)
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    assert "Traceback" not in err
    assert f"cannot reach broker 127.0.0.1:{dead}" not in err  # the next one answered
    assert "proxy: " in err and "connections" in err and "requests" in err
    assert any(r["api_name"] == "Produce" for r in rows)


def test_ctrl_c_with_a_consumer_connected_exits_cleanly():
    from kafka import KafkaConsumer

    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}")
    try:
        consumer = KafkaConsumer("idle", bootstrap_servers=proxy.bootstrap, consumer_timeout_ms=500)
        assert list(consumer) == []  # connected, fetching, nothing there
        proxy.proc.send_signal(signal.SIGINT)
        assert proxy.proc.wait(timeout=30) == 0
        consumer.close()
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "proxy: " in err


def test_insecure_keeps_sni():
    from tests.support.tls import TlsTerminator, self_signed
    import tempfile

    broker = Broker()
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = self_signed(Path(tmp))
        terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port))
        proxy = ProxyProcess(f"localhost:{terminator.port}", "--upstream-tls", "--insecure")
        try:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
                assert struct.unpack_from(">i", api_versions(s, 77))[0] == 77
            rows, err = proxy.stop()
        finally:
            proxy.proc.kill()
            terminator.close()
            broker.stop()
    assert terminator.server_names and set(terminator.server_names) == {"localhost"}
    assert "--insecure" in err


def test_a_display_that_falls_behind_sheds_whole_exchanges_not_clients():
    """The display process is stopped (as a display that cannot keep up): clients go on
    at full speed, the display misses whole exchanges, and says how many."""
    from kafka import KafkaProducer

    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "--display-buffer", "256K")
    try:
        os.kill(proxy.proc.pid, signal.SIGSTOP)  # the display (the forwarder goes on)
        producer = KafkaProducer(
            bootstrap_servers=proxy.bootstrap, linger_ms=0, max_in_flight_requests_per_connection=1
        )
        start = time.monotonic()
        for i in range(300):
            producer.send("shed", bytes([i % 256]) * 20000).get(timeout=30)
        elapsed = time.monotonic() - start
        producer.close()
        os.kill(proxy.proc.pid, signal.SIGCONT)
        rows, err = proxy.stop()
    finally:
        if proxy.proc.poll() is None:
            os.kill(proxy.proc.pid, signal.SIGCONT)
            proxy.proc.kill()
        broker.stop()
    assert elapsed < 60
    produce = [r for r in rows if r["api_name"] == "Produce"]
    requests = {(r["stream"], r["correlation_id"]) for r in produce if r["direction"] == "request"}
    responses = {
        (r["stream"], r["correlation_id"]) for r in produce if r["direction"] == "response"
    }
    assert responses == requests  # whole exchanges, nothing half shown
    assert 0 < len(requests) < 300
    assert "exchanges not shown: the display could not keep up" in err
    assert "Traceback" not in err


@pytest.mark.alone
def test_the_display_pauses_briefly_while_every_core_is_busy_then_goes_on_sampling():
    """Decoding for the display waits while the rest of the machine leaves no core free
    (the forwarder then sheds), but never more than MAX_PAUSE in a row: a load that
    lasts must not keep the display dark, so it then goes on (busy: it samples), and
    when a core is free again it neither pauses nor samples."""
    from kdissect.proxy.backoff import MAX_PAUSE, CpuGate

    gate = CpuGate()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(gate.cores)
    ]

    def stop_burning():
        for b in burners:
            b.kill()
            b.wait()

    timer = threading.Timer(3.0, stop_burning)
    timer.start()
    try:
        time.sleep(0.3)
        start = time.monotonic()
        longest, busy = 0.0, []
        while time.monotonic() - start < 2.0:
            t = time.monotonic()
            busy.append(gate.check())
            longest = max(longest, time.monotonic() - t)
    finally:
        timer.cancel()
        stop_burning()
    assert MAX_PAUSE - 0.05 <= gate.paused <= MAX_PAUSE + 0.15
    assert longest < 1.0 and busy[-1]
    time.sleep(0.3)
    from kdissect.proxy.backoff import _busy_seconds

    before, end = gate.paused, time.monotonic() + 1.0
    busy_before, own_before, t0 = _busy_seconds(), time.process_time(), time.monotonic()
    while time.monotonic() < end:
        gate.check()
    busy = _busy_seconds()
    others = (
        ((busy - busy_before) - (time.process_time() - own_before)) / (time.monotonic() - t0)
        if busy is not None and busy_before is not None
        else 0.0
    )
    if others <= gate.busy_above - 0.25:  # a core was free: neither pause nor sample
        assert gate.paused - before <= 0.2, others
    else:  # the rest of the suite left no core free: at most one pause again, as above
        assert gate.paused - before <= MAX_PAUSE + 0.15, others


@pytest.mark.alone
def test_busy_past_the_pause_the_display_decodes_on_a_ration_never_dark():
    """While every core stays busy past MAX_PAUSE, the display goes on with a tenth of one
    core, not more (decoding at full speed took a core from clients and brokers that had
    none to spare) and not much less (its naps count towards its ration), and it never
    stops: every half second it still works."""
    from kdissect.proxy.backoff import MAX_PAUSE, RATION, RATION_BURST, CpuGate

    gate = CpuGate()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(gate.cores)
    ]
    try:
        time.sleep(0.3)
        deadline = time.monotonic() + 5
        while gate.paused < MAX_PAUSE - 0.05 and time.monotonic() < deadline:
            gate.check()  # the first pause, then the ration
        start, cpu = time.monotonic(), time.process_time()
        worked = [0.0] * 6  # CPU-seconds of "decoding" per half second
        while (now := time.monotonic() - start) < 3.0:
            gate.check()
            t = time.thread_time()
            while time.thread_time() - t < 0.001:  # a message's decoding
                pass
            worked[int(now / 0.5)] += time.thread_time() - t
        used, elapsed = time.process_time() - cpu, time.monotonic() - start
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert gate.rationed > 1.0
    assert 0.5 * RATION * elapsed <= used <= RATION * elapsed + RATION_BURST + 0.1, (used, elapsed)
    assert min(worked) > 0, worked


@pytest.mark.alone
def test_one_look_finding_a_core_free_does_not_end_a_lasting_load():
    """/proc/stat counts in 10 ms ticks, so a 50 ms look may find a core free on a
    machine that has none: that must not start another pause within a lasting load
    (a full suite saw 1.0 s of pauses in 2 s of burning); several such looks do end it."""
    from kdissect.proxy.backoff import MAX_PAUSE, PAUSE, QUIET_LOOKS, WINDOW, CpuGate

    gate = CpuGate(cores=2)
    gate.enabled = True
    busy, free = 2.0, 0.0
    # the first check pauses through MAX_PAUSE of busy looks, then goes on (loaded)
    first = round(MAX_PAUSE / PAUSE) + 1
    looks = iter([busy] * (first + 1) + [free] + [busy] * 3 + [free] * QUIET_LOOKS)
    gate._others = lambda: next(looks)  # type: ignore[method-assign]
    gate._sleep = lambda seconds: None  # type: ignore[method-assign]
    answers = []
    for _ in range(1 + 1 + 1 + 3 + QUIET_LOOKS):
        gate.wall = time.monotonic() - 1.5 * WINDOW  # one window since the last look
        answers.append(gate.check())
    assert gate.paused == pytest.approx(MAX_PAUSE)  # one pause, not one per false look
    assert answers[:-1] == [True] * (len(answers) - 1) and answers[-1] is False


@pytest.mark.alone
def test_on_one_core_the_display_runs_while_the_rest_leaves_it_half(monkeypatch):
    """The line is "others leave under 1¼ cores free", which a 1-core machine never
    meets: there the display runs while the others use under half the core, and
    pauses while they use more."""
    from kdissect.proxy.backoff import CpuGate

    for others, pauses in ((0.4, False), (0.6, True)):
        monkeypatch.setattr(CpuGate, "_others", lambda self, v=others: v)
        gate = CpuGate(cores=1)

        def display():
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                gate.check()

        t = threading.Thread(target=display, daemon=True)
        t.start()
        t.join(timeout=2)
        assert (t.is_alive() or gate.paused > 0) == pauses


@pytest.fixture
def display_signals():
    """Leave the process's SIGALRM handler and output streams as they were."""
    handler, out, err = signal.getsignal(signal.SIGALRM), sys.stdout, sys.stderr
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, handler)
    sys.stdout, sys.stderr = out, err


def test_the_display_offers_its_core_while_it_decodes_and_not_while_it_waits(
    display_signals, monkeypatch
):
    """While the display decodes it gives its core away every few hundred µs (a timer
    signal: on a busy machine woken forwarding tasks waited for whole decoding bursts);
    while it waits for data, and once it is done, no timer wakes it."""
    from kdissect.proxy import feed
    from kdissect.proxy.backoff import YIELD_EVERY
    from kdissect.proxy.display import FeedDisplay
    from kdissect.sources.pcap import exchanges_in
    from kdissect.stream.enrich import Enricher
    from kdissect.stream.sink import CallbackSink

    ex = next(
        e
        for e in exchanges_in([ROOT / "captures" / "kcat.pcap"]).exchanges
        if e.request.api_key == 3 and e.response is not None
    )
    offers = []
    yield_core = os.sched_yield
    monkeypatch.setattr(os, "sched_yield", lambda: (offers.append(1), yield_core()))
    shown, timers_seen, offers_while_showing = [], [], []

    def exchange(ex) -> None:
        timers_seen.append(signal.getitimer(signal.ITIMER_REAL)[1])
        before, end = len(offers), time.thread_time() + 0.02
        while time.thread_time() < end:  # 20 ms of CPU "decoding" (the machine
            pass  # may be busy: wall time says less)
        offers_while_showing.append(len(offers) - before)
        shown.append(ex)

    read_fd, write_fd = os.pipe()
    while_blocked: list[tuple] = []

    def forwarder():
        def put(kind, side, payload, offset=4):
            os.write(write_fd, feed.HEADER.pack(kind, 1, side, 1.0, offset, len(payload)) + payload)

        put(feed.OPEN, 0, json.dumps([["127.0.0.1", 5000], ["127.0.0.1", 9092]]).encode())
        put(feed.FRAME, 0, ex.request.data)
        put(feed.FRAME, 1, ex.response.data)
        deadline = time.monotonic() + 20  # (slow on a busy machine)
        while not shown and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # the display has it all and waits for more
        count = len(offers)
        time.sleep(0.1)
        while_blocked.append((signal.getitimer(signal.ITIMER_REAL)[1], len(offers) - count))
        put(feed.CLOSE, 0, b"")
        os.close(write_fd)

    t = threading.Thread(target=forwarder)
    t.start()
    FeedDisplay(Enricher(CallbackSink(exchange))).run(read_fd)
    t.join()
    assert [e.request.api_key for e in shown] == [3]
    assert timers_seen == [pytest.approx(YIELD_EVERY)]
    # every 0.5 ms of 20 ms, loosely: on a busy machine timer signals that expire
    # while the process waits for a core arrive as one
    assert offers_while_showing[0] >= 5
    assert while_blocked == [(0.0, 0)]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_display_reads_records_however_the_pipe_cuts_them():
    """Records of every size (none, small, over the 1 MiB read) come out whole and in
    order whatever pieces the pipe delivers; a record cut off at the end is dropped."""
    import random
    from kdissect.proxy import feed

    rng = random.Random(7)
    records = [
        (feed.FRAME, i, i % 2, float(i), i * 10, rng.randbytes(size))
        for i, size in enumerate([0, 5, 3 << 20, 1, 0, 70000, (1 << 20) - 9, 200])
    ]
    wire = b"".join(feed.HEADER.pack(k, c, s, t, o, len(p)) + p for k, c, s, t, o, p in records)
    wire += feed.HEADER.pack(feed.FRAME, 99, 0, 0.0, 0, 100) + b"cut"
    read_fd, write_fd = os.pipe()

    def forwarder():
        at = 0
        while at < len(wire):
            piece = rng.choice([1, 7, feed.HEADER.size, 4096, 1 << 20, 3 << 20])
            os.write(write_fd, wire[at : at + piece])
            at += piece
            if rng.random() < 0.3:
                time.sleep(0.001)
        os.close(write_fd)

    t = threading.Thread(target=forwarder)
    t.start()
    got = list(feed.read_records(read_fd))
    t.join()
    assert got == records


def test_lines_written_while_the_display_offers_its_core_arrive_whole():
    """The timer signal cuts writes to a pipe short, and Python's buffered writer then
    dropped the rest of a big JSON line (a 20 MiB Produce): stdout must still get
    every byte."""
    code = (
        "from kdissect.proxy.backoff import CpuGate; import sys\n"
        "gate = CpuGate(); gate.working()\n"
        "for i in range(3): sys.stdout.write(str(i) * (8 << 20) + '\\n')\n"
        "sys.stdout.flush(); gate.waiting()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=ROOT)
    time.sleep(0.5)  # the pipe fills: writes block, signals cut them
    lines = proc.stdout.read().splitlines()
    assert proc.wait() == 0
    assert [(len(line), line[:1]) for line in lines] == [
        (8 << 20, b"0"),
        (8 << 20, b"1"),
        (8 << 20, b"2"),
    ]


def _sink_server() -> tuple[socket.socket, list[dict]]:
    """A TCP server that reads everything each connection sends, keeping its length and
    hash (an upstream that never answers: forwarding alone is under test)."""
    import hashlib

    server = socket.create_server(("127.0.0.1", 0))
    conns: list[dict] = []

    def serve(s: socket.socket) -> None:
        entry = {"bytes": 0, "sha": hashlib.sha256(), "done": False}
        conns.append(entry)
        with s:
            while chunk := s.recv(1 << 20):
                entry["bytes"] += len(chunk)
                entry["sha"].update(chunk)
        entry["done"] = True

    serve_each(server, serve)
    return server, conns


def _peak_rss_of_children(pid: int) -> int:
    total = 0
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        for line in Path(f"/proc/{child}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total = max(total, int(line.split()[1]) * 1024)
    return total


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_a_request_trickling_in_longer_than_the_idle_timeout_is_not_idle(forwarder):
    """--idle-timeout counts time without bytes, not time without a whole message: a
    large request sent slowly for twice the timeout keeps its connection; once the bytes
    stop, the connection is closed, and the bytes before a bad size still pass."""
    server, conns = _sink_server()
    proxy = ProxyProcess(
        f"127.0.0.1:{server.getsockname()[1]}", "--idle-timeout", "1.5", "--forwarder", forwarder
    )
    try:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
        whole = struct.pack(">i", 12) + struct.pack(">hhih", 18, 3, 1, 0) + b"\x00\x00"
        s.sendall(struct.pack(">i", 10_000_000) + struct.pack(">hhih", 0, 9, 2, 0))
        for _ in range(8):  # 4 s of a trickle
            time.sleep(0.5)
            s.sendall(b"x" * 100)
        s.settimeout(0.2)
        with pytest.raises(TimeoutError):
            s.recv(1)  # still open
        s.settimeout(30)
        assert s.recv(1) == b""  # closed once idle
        sent = 14 + 800
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(c["bytes"] == sent for c in conns):
            time.sleep(0.1)
        assert any(c["bytes"] == sent for c in conns), (
            [c["bytes"] for c in conns],
            proxy.stop()[1],
        )
        # bytes that are not Kafka after a whole request: the request passes, not them
        bad = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
        bad.sendall(whole + b"GET / HTTP/1.1\r\n\r\n")
        assert bad.recv(1) == b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(c["bytes"] == len(whole) for c in conns):
            time.sleep(0.1)
        assert any(c["bytes"] == len(whole) for c in conns), [c["bytes"] for c in conns]
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        server.close()
    assert "not Kafka" in err and "Traceback" not in err


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_partial_requests_of_all_clients_are_capped_and_still_forwarded_unchanged(forwarder):
    """Four clients each announce a 500 MB request and send 40 MB of it: with
    --max-memory 16M the forwarder holds at most about that much (the event loop gives up
    the oldest partial request, and a note says so; the threads never collect one past
    the cap, and the display sheds it), and every byte reaches the upstream unchanged."""
    import hashlib

    server, conns = _sink_server()
    proxy = ProxyProcess(
        f"127.0.0.1:{server.getsockname()[1]}", "--max-memory", "16M", "--forwarder", forwarder
    )
    try:
        sent = []
        socks = [socket.create_connection(("127.0.0.1", proxy.port), timeout=30) for _ in range(4)]
        piece = bytes(range(256)) * 4096  # 1 MiB
        for i, s in enumerate(socks):
            head = struct.pack(">i", 500_000_000) + struct.pack(">hhi", 0, 9, i)
            s.sendall(head)
            sent.append(hashlib.sha256(head))
        for _ in range(40):
            for i, s in enumerate(socks):
                s.sendall(piece)
                sent[i].update(piece)
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and sorted(c["bytes"] for c in conns if c["bytes"]) != [40 * (1 << 20) + 12] * 4
        ):
            time.sleep(0.1)
        peak = _peak_rss_of_children(proxy.proc.pid)
        for s in socks:
            s.close()
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        server.close()
    # (the connections that carried nothing are ProxyProcess's probes of the port)
    got = sorted(c["sha"].hexdigest() for c in conns if c["bytes"])
    assert got == sorted(h.hexdigest() for h in sent)
    if forwarder == "event-loop":
        assert "is not decoded" in err and "--max-memory" in err
        assert "partial requests not decoded" in err  # the exit summary
    assert peak < 200 << 20, peak >> 20  # 4 x 40 MB would be held without the cap
    assert "Traceback" not in err


def test_the_display_samples_while_far_behind_and_leaves_exchanges_out_whole(tmp_path):
    """Records older than the display's lag: a sample is decoded, the others are left
    out with their responses, and the summary counts them."""
    from kdissect.proxy import feed
    from kdissect.proxy.display import FeedDisplay
    from kdissect.stream.sink import Collect

    r, w = os.pipe()
    old = time.time() - 60
    out = [feed.HEADER.pack(feed.OPEN, 1, 0, 0.0, 0, 28) + b'[["c", 1], ["b", 9092]]'.ljust(28)]
    body = struct.pack(">hhih", 18, 0, 0, 1) + b"c"
    for corr in range(50):
        req = struct.pack(">hhih", 18, 0, corr, 1) + b"c"
        resp = struct.pack(">ih", corr, 0) + struct.pack(">i", 0)
        out.append(
            feed.HEADER.pack(feed.FRAME, 1, 0, old, 4 + corr * (4 + len(body)) + 4, len(req)) + req
        )
        out.append(feed.HEADER.pack(feed.FRAME, 1, 1, old, 4 + corr * 14 + 4, len(resp)) + resp)
    data = b"".join(out)
    threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
    sink = Collect()
    display = FeedDisplay(sink, lag=1.0)
    display.run(r)
    assert display.shown + display.left_out == 50
    assert 1 <= display.shown < 10 and display.left_out > 40
    shown = {ex.request.correlation_id for ex in sink.exchanges if ex.request is not None}
    assert len(shown) == display.shown  # each shown request has its answer
    assert all(ex.response is not None for ex in sink.exchanges)
    assert any("left out while it was over 1 s behind" in text for _level, text in sink.notes)


@pytest.mark.slow
@pytest.mark.alone
def test_sigterm_on_a_busy_machine_ends_the_proxy_within_2_s():
    """A busy loop per core at normal priority: the display (nice 10) gets little CPU,
    yet SIGTERM ends the proxy within 2 s, with the display's summary."""
    from kafka import KafkaProducer

    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "--display-lag", "5")
    code = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
    try:
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, linger_ms=0)
        for i in range(200):
            producer.send("busy", b"%d" % i)
        producer.flush(timeout=30)
        producer.close()
        start = time.monotonic()
        proxy.proc.terminate()
        proxy.proc.wait(timeout=30)
        took = time.monotonic() - start
        for reader in proxy.readers:
            reader.join(10)
        err = "".join(proxy.err)
    finally:
        for b in burners:
            b.kill()
        proxy.proc.kill()
        broker.stop()
    assert took < 2.0, took
    assert "display: " in err and "requests shown" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("unbuffered", [False, True])
def test_lines_reach_a_pipe_as_exchanges_happen(unbuffered):
    """Python holds up to 8 KiB of output for a pipe: the proxy's lines for a pipe (`|
    grep`, a log shipper) came only when it stopped, with PYTHONUNBUFFERED too (the
    display's stdout, remade so that a signal cannot cut a write short, was buffered).
    Each line must arrive while the proxy runs."""
    broker = Broker()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", env=env)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
            api_versions(sock, 7)
            proxy.wait_for(lambda rows: any(r.get("correlation_id") == 7 for r in rows), 60)
            shown = [json.loads(line) for line in list(proxy.out)]
            assert proxy.proc.poll() is None  # still running: not the lines written at exit
        assert any(r["api_name"] == "ApiVersions" and r["correlation_id"] == 7 for r in shown)
        proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()


def test_an_answer_too_big_for_the_display_leaves_its_exchange_whole_and_said():
    """The display's buffer (--display-buffer) holds answers up to twice its size: a
    bigger one was dropped alone, and its request was shown "unanswered" (a false
    finding) though the broker answered and the client got every record. Now its
    first bytes go instead: the exchange is shown, paired, with the answer marked as
    not shown and why."""
    from kafka import KafkaProducer

    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "--display-buffer", "1M")
    try:
        producer = KafkaProducer(
            bootstrap_servers=proxy.bootstrap, max_request_size=8 << 20, linger_ms=0
        )
        value = bytes(range(256)) * (3 * 4096)  # 3 MiB: more than twice the buffer
        for _ in range(3):
            producer.send("too-big-to-show", value).get(timeout=60)
        producer.close()
        assert read_big("too-big-to-show", proxy.bootstrap) == [value] * 3  # got everything
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    assert not [r for r in rows if r["status"] == "unanswered"], err
    fetched = [
        r
        for r in rows
        if r["api_name"] == "Fetch" and r["direction"] == "response" and r["pair"] is not None
    ]
    cut = [r for r in fetched if r["status"].startswith("truncated: not shown")]
    assert cut, [r["status"] for r in fetched]
    assert "the display could not keep up" in cut[0]["status"]
    assert "answers not shown" in err


def test_sigterm_with_a_display_stuck_on_unread_output_still_says_the_counters():
    """A display writing to a pipe nobody reads is stuck; SIGTERM gives up on it within
    a second. By the time the command has ended it has said what the display showed
    and the forwarder's counters (connections, requests, bytes, exchanges shed), which
    the forwarder said only after the display had taken what was queued."""
    from kafka import KafkaProducer

    broker = Broker()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kdissect", "proxy", "--upstream", f"127.0.0.1:{broker.port}"]
        + ["--listen", f"127.0.0.1:{port}", "--no-tui", "--format", "jsonl"],
        stdout=subprocess.PIPE,  # never read
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", linger_ms=0)
        for _ in range(3000):  # JSON lines of far more than the pipes hold
            producer.send("unread-output", bytes(range(256)) * 8)
        producer.flush(timeout=60)
        producer.close()
        time.sleep(1)
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        # what was said by the time the command ended (as a shell or a supervisor sees
        # it: not what a process left behind writes later)
        assert proc.stderr is not None
        os.set_blocking(proc.stderr.fileno(), False)
        err = (proc.stderr.read() or b"").decode()
    finally:
        proc.kill()
        broker.stop()
    assert "stopped before the display had shown everything" in err, err
    assert "proxy: " in err and "requests" in err, err


def test_the_forwarder_ends_when_the_display_process_is_killed():
    """The forwarder watches its channel to the display (written by a thread of its
    own): a display killed while nothing is being written still ends the forwarder, and
    its listener, at once; it does not serve on unseen."""
    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}")
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            assert api_versions(s, 3)[:4] == struct.pack(">i", 3)
        kids = [
            int(pid)
            for task in os.listdir(f"/proc/{proxy.proc.pid}/task")
            for pid in open(f"/proc/{proxy.proc.pid}/task/{task}/children").read().split()
        ]
        assert len(kids) == 1
        os.kill(proxy.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                state = open(f"/proc/{kids[0]}/stat").read().rsplit(")", 1)[1].split()[0]
            except OSError:
                break  # gone, and reaped
            if state == "Z":
                break
            time.sleep(0.05)
        else:
            os.kill(kids[0], signal.SIGKILL)
            pytest.fail("the forwarder went on serving after its display was killed")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()
    finally:
        proxy.proc.kill()
        broker.stop()
