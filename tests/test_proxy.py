"""`kdissect proxy` between real clients and a real broker (Tansu): clients work through
it, stay on it because of the address rewriting, and every byte passes unchanged except
the rewritten responses."""

from __future__ import annotations

import json
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

ROOT = Path(__file__).resolve().parents[1]


class ProxyProcess:
    def __init__(self, upstream: str, *args: str):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kdissect", "proxy", "--upstream", upstream, "--listen",
             f"127.0.0.1:{self.port}", "--no-tui", "--format", "jsonl", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        # read its output as it comes, as a terminal or a pipe would
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")),
                             daemon=True).start()
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

    def stop(self) -> tuple[list[dict], str]:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        time.sleep(0.3)                            # the readers catch the last lines
        return [json.loads(line) for line in self.out], "".join(self.err)


@pytest.fixture
def chain(tmp_path):
    """client → relay A → proxy → relay B → broker (which advertises relay B): the relays
    record each side of the proxy, and the proxy records to tmp_path/proxy.pcapng."""
    relay_b = Relay()
    broker = Broker(advertised_port=relay_b.port)
    relay_b.upstream = ("127.0.0.1", broker.port)
    proxy = ProxyProcess(f"127.0.0.1:{relay_b.port}", "--write",
                         str(tmp_path / "proxy.pcapng"))
    proxy.recording = tmp_path / "proxy.pcapng"
    relay_a = Relay()
    relay_a.upstream = ("127.0.0.1", proxy.port)
    yield relay_a, proxy, relay_b
    proxy.proc.kill()
    relay_a.close()
    relay_b.close()
    broker.stop()


def endpoints(tree) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every broker in a response, from the full decoder: the
    reference the proxy's skip-scanner is held to."""
    found = []
    for node in tree.walk():
        host, port = node.child("host"), node.child("port")
        ident = next((c for c in node.children if c.name in ("node_id", "broker_id")), None)
        if host is not None and port is not None and ident is not None \
                and host.ktype == "string":
            found.append((ident.value, host.value, port.value))
    return found


def frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        out.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return out


def test_clients_work_through_the_proxy_and_bytes_pass_unchanged(chain):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer
    relay_a, proxy, relay_b = chain
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{relay_a.port}",
                             compression_type="gzip", client_id="kp-through-proxy")
    for i in range(5):
        producer.send("through-proxy", key=b"k%d" % i, value=b"kafka-python %d" % i)
    producer.flush()
    # the client was told the proxy's address for the broker, not relay B's
    assert {(b.host, b.port) for b in producer._metadata.brokers()} != \
        {("127.0.0.1", relay_b.port)}
    assert all(b.host == "127.0.0.1" and b.port not in (relay_b.port, relay_a.port)
               for b in producer._metadata.brokers())
    producer.close()
    ck = Producer({"bootstrap.servers": f"127.0.0.1:{relay_a.port}",
                   "compression.type": "lz4", "client.id": "ck-through-proxy"})
    for i in range(5):
        ck.produce("through-proxy", key=b"c%d" % i, value=b"confluent %d" % i)
    assert ck.flush(10) == 0
    consumer = KafkaConsumer("through-proxy", bootstrap_servers=f"127.0.0.1:{relay_a.port}",
                             auto_offset_reset="earliest", consumer_timeout_ms=4000,
                             group_id="through-proxy", session_timeout_ms=6000,
                             max_poll_interval_ms=6000)
    values = sorted(m.value for m in consumer)
    consumer.close()
    assert values == sorted([b"kafka-python %d" % i for i in range(5)] +
                            [b"confluent %d" % i for i in range(5)])
    ck_consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "ck-g",
                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                            "max.poll.interval.ms": 6000})   # Tansu holds joins that long
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

    # bytes: for each connection through relay A, what the client sent reached the
    # broker unchanged, and what the broker sent reached the client unchanged except
    # the rewritten responses, which differ only in broker addresses
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
            assert [e[0] for e in endpoints(after.tree)] == \
                [e[0] for e in endpoints(before.tree)]
            assert all(e[2] != relay_b.port for e in endpoints(after.tree))
            rewritten += 1
    assert rewritten >= 1

    # the recording opens with kdissect pcap and with tshark, and holds what was shown
    res = subprocess.run([sys.executable, "-m", "kdissect", "pcap", str(proxy.recording),
                          "-p", str(relay_b.port), "--format", "jsonl"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    recorded = [json.loads(line) for line in res.stdout.splitlines()]
    key = lambda r: (r["api_name"], r["direction"], r["correlation_id"], r["status"])
    assert sorted(map(key, recorded)) == sorted(map(key, rows))
    assert all(not r["problems"] for r in recorded)
    tshark = subprocess.run(["tshark", "-r", str(proxy.recording), "-d",
                             f"tcp.port=={relay_b.port},kafka", "-T", "fields", "-e",
                             "kafka.correlation_id", "-Y", "kafka"],
                            capture_output=True, text=True, timeout=120)
    assert tshark.returncode == 0, tshark.stderr
    tshark_ids = sorted(int(c) for line in tshark.stdout.split() for c in line.split(",") if c)
    assert tshark_ids == sorted(r["correlation_id"] for r in rows)


def test_tls_on_a_plaintext_listener_and_a_vanished_broker_close_cleanly():
    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}")
    try:
        hello = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        hello.sendall(bytes.fromhex("16030100f8010000f40303") + b"\x00" * 40)
        assert hello.recv(100) == b""                     # closed, not hung
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
    assert any(r["api_name"] == "ApiVersions" and r["direction"] == "response" for r in rows)


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
    proxy = ProxyProcess(f"127.0.0.1:{terminator.port}", "--upstream-tls", "--ca-file",
                         str(cert), "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        tls = dict(security_protocol="SSL", ssl_cafile=str(cert), ssl_check_hostname=True)
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, **tls)
        producer.send("tls-both-ways", b"secret payload").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer("tls-both-ways", bootstrap_servers=proxy.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=4000, **tls)
        assert [m.value for m in consumer] == [b"secret payload"]
        consumer.close()
        # a plaintext client on the TLS listener is told and closed, not left hanging
        plain = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        request = struct.pack(">hhih", 18, 0, 1, 1) + b"x"
        plain.sendall(struct.pack(">i", len(request)) + request)
        try:
            assert plain.recv(4096) == b""
        except ConnectionResetError:             # closed with its request unread
            pass
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        terminator.close()
        broker.stop()
    produce = [r for r in rows if r["api_name"] == "Produce" and r["direction"] == "request"]
    assert produce, "the proxy decoded the traffic it carried over TLS"
    assert "a plaintext client on a TLS listener" in err


def test_broker_certificates_are_checked(tmp_path):
    from tests.support.tls import TlsTerminator, self_signed
    cert, key = self_signed(tmp_path)
    broker = Broker()
    terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port))
    proxy = ProxyProcess(f"127.0.0.1:{terminator.port}", "--upstream-tls")   # system CAs
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        request = struct.pack(">hhih", 18, 0, 1, 1) + b"x"
        client.sendall(struct.pack(">i", len(request)) + request)
        assert client.recv(100) == b""                # refused upstream: the client is closed
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        terminator.close()
        broker.stop()
    assert "cannot reach broker" in err and "CERTIFICATE_VERIFY_FAILED" in err


def test_the_recording_masks_sasl_secrets_at_the_same_length(tmp_path):
    """Real SCRAM and SASL v0 traffic from the repo captures, through the recorder."""
    from kdissect.proxy.recording import Recorder
    from kdissect.sources.pcap import exchanges_in
    captures = ROOT / "captures"
    exchanges = exchanges_in([str(captures / "sasl-scram.pcap"),
                              str(captures / "sasl-v0.pcap")]).exchanges
    recorder = Recorder(str(tmp_path / "r.pcapng"))
    masked_any = 0
    for ex in exchanges:
        for m in (ex.request, ex.response):
            if m is None:
                continue
            frame = struct.pack(">i", len(m.data)) + m.data
            side = 0 if m.direction in ("request",) or (m.direction == "sasl" and ex.request is m) \
                else 1
            out = recorder.mask(frame, side, m.direction == "sasl")
            assert len(out) == len(frame)
            if out != frame:
                masked_any += 1
                secret = [n for n in m.decoded().tree.walk() if n.secret]
                assert secret
                for n in secret:
                    assert out[4 + n.offset:4 + n.end] == b"*" * n.length
                assert b"p=" not in out or b"p=*" in out      # SCRAM proofs are gone
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


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_many_clients_large_messages_acks0_and_clients_that_vanish():
    from kafka import KafkaConsumer, KafkaProducer
    broker = Broker()
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}")
    try:
        # 200 connections at once, each answered on its own connection
        socks = [socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
                 for _ in range(200)]
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
        payload = bytes(range(256)) * (20 * 4096)          # 20 MiB
        big.send("big-through-proxy", payload).get(timeout=60)
        big.close()
        consumer = KafkaConsumer("acks0-through-proxy", bootstrap_servers=proxy.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=4000)
        assert len([m for m in consumer]) == 50
        consumer.close()
        consumer = KafkaConsumer("big-through-proxy", bootstrap_servers=proxy.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=8000,
                                 fetch_max_bytes=64 << 20, max_partition_fetch_bytes=64 << 20)
        values = [m.value for m in consumer]
        consumer.close()
        assert values == [payload]
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        broker.stop()
    answered = [r for r in rows if r["api_name"] == "ApiVersions" and r["direction"] == "response"]
    assert len(answered) >= 200
    produce = [r for r in rows if r["api_name"] == "Produce" and r["direction"] == "request"]
    assert any(r["size"] > 20 << 20 for r in produce)
    # acks=0: one exchange per request, whether Tansu answers it (it does) or not
    assert any(r["status"].startswith(("no response expected", "answer to acks=0"))
               for r in produce)
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
    proxy = ProxyProcess(f"127.0.0.1:{broker.port}", "--map",
                         f"{advertised}=127.0.0.1:{broker.port}")
    try:
        direct = subprocess.run(["kcat", "-b", f"127.0.0.1:{broker.port}", "-P", "-t",
                                 "unreachable", "-m", "5"], input="lost\n", text=True,
                                capture_output=True, timeout=60, env=env)
        assert direct.returncode != 0 and "Failed to resolve 'kafka-internal.invalid" in \
            direct.stderr                        # direct, the advertised name is useless
        # kcat through the proxy
        subprocess.run(["kcat", "-b", proxy.bootstrap, "-P", "-t", "rewritten"],
                       input="kcat one\nkcat two\n", text=True, check=True, timeout=60,
                       env=env)
        got = subprocess.run(["kcat", "-b", proxy.bootstrap, "-C", "-t", "rewritten", "-o",
                              "beginning", "-e", "-q"], capture_output=True, text=True,
                             timeout=60, env=env)
        assert sorted(got.stdout.split()) == ["kcat", "kcat", "one", "two"]

        async def aio():
            producer = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap,
                                        compression_type="zstd")
            await producer.start()
            await producer.send_and_wait("rewritten-aio", b"aiokafka value")
            await producer.stop()
            consumer = AIOKafkaConsumer("rewritten-aio", bootstrap_servers=proxy.bootstrap,
                                        auto_offset_reset="earliest")
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
