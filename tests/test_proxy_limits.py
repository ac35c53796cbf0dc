"""`kdissect proxy` against what would take it down or make it lie: error answers that
name no broker, answers naming 100,000 brokers, broker ids past the port range,
connection storms, idle and excess connections, running out of file descriptors.
Real Apache Kafka where a real broker can say it; a hostile upstream (a socket that
answers with built bytes) where no real broker would."""

from __future__ import annotations

import itertools
import os
import resource
import signal
import socket
import struct
import threading
import time

import pytest

from kdissect.protocol import decode_response
from kdissect.proxy.server import LARGE_FIRST, MAX_NEW_LISTENERS
from tests.support.broker import free_port
from tests.test_proxy import FORWARDERS, ProxyProcess, metric, scrape
from tests.support.sockets import recv_exactly, serve_each

pytestmark = pytest.mark.slow


# -- a raw Kafka client ---------------------------------------------------------------------


def call(s: socket.socket, request: bytes) -> bytes:
    """Send one request (without its size), return the response (without its size)."""
    s.sendall(struct.pack(">i", len(request)) + request)
    return recv_exactly(s, struct.unpack(">i", recv_exactly(s, 4))[0])


def api_versions(corr: int = 1) -> bytes:
    return struct.pack(">hhih", 18, 0, corr, 4) + b"test"


def find_coordinator_v6(key_type: int, key: str, corr: int = 7) -> bytes:
    raw = key.encode()
    return (
        struct.pack(">hhih", 10, 6, corr, 2)
        + b"fc"
        + b"\0"  # header v2
        + struct.pack(">b", key_type)
        + bytes([2, len(raw) + 1])
        + raw
        + b"\0"
    )


def metadata_v1_request(corr: int = 3) -> bytes:
    return struct.pack(">hhih", 3, 1, corr, 2) + b"md" + struct.pack(">i", -1)


def metadata_v1_response(corr: int, brokers: list[tuple[int, str, int]]) -> bytes:
    parts = [struct.pack(">ii", corr, len(brokers))]
    for node_id, host, port in brokers:
        raw = host.encode()
        parts.append(struct.pack(">ih", node_id, len(raw)) + raw + struct.pack(">ih", port, -1))
    parts.append(struct.pack(">ii", brokers[0][0] if brokers else -1, 0))  # controller, topics
    return b"".join(parts)


def brokers_named(body: bytes) -> list[tuple[int, str, int]]:
    from tests.test_proxy import endpoints

    return endpoints(decode_response(body, 3, 1).tree)


class HostileBroker:
    """Answers every Metadata v1 request with ``answer(correlation id)``, ApiVersions
    with a minimal answer; one thread per connection."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=4096)
        self.port = self.sock.getsockname()[1]
        serve_each(self.sock, self._serve)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                request = recv_exactly(conn, struct.unpack(">i", recv_exactly(conn, 4))[0])
                key, _version, corr = struct.unpack_from(">hhi", request)
                body = (
                    self.answer(corr) if key == 3 else struct.pack(">ihi", corr, 0, 0)
                )  # ApiVersions v0, no APIs
                conn.sendall(struct.pack(">i", len(body)) + body)
        except (ConnectionError, OSError):
            conn.close()

    def close(self) -> None:
        self.sock.close()


# -- rewriting only what names a broker ------------------------------------------------------


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_find_coordinator_error_answers_pass_unchanged_and_open_no_listener(
    apache_kafka, forwarder
):
    """Apache Kafka answers a malformed share-group key with INVALID_REQUEST, node -1,
    host "", port -1: the proxy passes it as it came, makes no listener for "broker -1";
    a real coordinator in the same kind of answer is rewritten to the proxy."""
    direct_addr = ("127.0.0.1", apache_kafka.node(1).ports["PLAINTEXT"])
    proxy = ProxyProcess(apache_kafka.bootstrap(), "--forwarder", forwarder)
    try:
        bad = find_coordinator_v6(2, "not-a-share-key")
        with socket.create_connection(direct_addr, timeout=20) as s:
            direct = call(s, bad)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            through = call(s, bad)
        tree = decode_response(through, 10, 6).tree
        values = {
            n.name: n.value
            for n in tree.walk()
            if n.name in ("node_id", "host", "port", "error_code")
        }
        assert values == {"node_id": -1, "host": "", "port": -1, "error_code": 42}
        assert through == direct  # byte for byte
        # a group's coordinator (once the offsets topic is ready) names node 1: rewritten
        deadline = time.monotonic() + 60
        while True:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
                answer = call(s, find_coordinator_v6(0, "limits-group"))
            values = {
                n.name: n.value
                for n in decode_response(answer, 10, 6).tree.walk()
                if n.name in ("node_id", "host", "port", "error_code")
            }
            if values["error_code"] != 15 or time.monotonic() > deadline:  # not available yet
                break
            time.sleep(0.5)
        assert values["error_code"] == 0 and values["node_id"] == 1
        assert values["port"] != direct_addr[1] and values["host"] == "127.0.0.1"
        with socket.create_connection(("127.0.0.1", values["port"]), timeout=20) as s:
            assert call(s, api_versions())[:4] == struct.pack(">i", 1)
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
    assert "broker -1" not in err and "broker 1 (" in err
    assert "Traceback" not in err


def test_answers_naming_thousands_of_brokers_are_forwarded_with_capped_listeners():
    """One answer names 1,000 broker ids: it is forwarded whole, MAX_NEW_LISTENERS of
    them get a listener, the rest keep their own addresses (said once). One naming
    100,000 (or one id 100,000 times) is forwarded unchanged at once (the walk stops at
    MAX_ENDPOINTS) and other clients go on."""
    upstream = HostileBroker(
        lambda corr: metadata_v1_response(corr, [(i, "127.0.0.1", 9000 + i) for i in range(1000)])
    )
    proxy = ProxyProcess(f"127.0.0.1:{upstream.port}")
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=120) as s:
            named = brokers_named(call(s, metadata_v1_request()))
        assert len(named) == 1000
        rewritten = [b for b in named if b[2] != 9000 + b[0]]
        assert len(rewritten) == MAX_NEW_LISTENERS
        for flood in (
            [(i, "127.0.0.1", 9000 + i % 1000) for i in range(100_000)],
            [(7, "127.0.0.1", 9007)] * 100_000,
        ):
            upstream.answer = lambda corr, flood=flood: metadata_v1_response(corr, flood)
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=120) as s:
                s.sendall(struct.pack(">i", len(metadata_v1_request(4))) + metadata_v1_request(4))
                # meanwhile another client is served (the proxy did not stall on it)
                with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as other:
                    assert call(other, api_versions(5))[:4] == struct.pack(">i", 5)
                answer = recv_exactly(s, struct.unpack(">i", recv_exactly(s, 4))[0])
            assert answer == metadata_v1_response(4, flood)  # as the broker sent it
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        upstream.close()
    assert "names 1,000 brokers" in err and "bypass the proxy" in err
    assert err.count("names 1,000 brokers") == 1
    assert "names more than 5,000 broker entries" in err
    assert "Traceback" not in err


class Relabeller:
    """Between the proxy and a real broker: a client's Metadata request of version
    ``newer`` goes to the broker as ``known`` (which the broker speaks), and the broker's
    answer comes back as it was, plus ``extra`` bytes: the proxy sees an answer of a
    version newer than its tables, in the newest known layout (or one that differs)."""

    def __init__(self, broker: tuple[str, int], newer: int, known: int, extra: bytes = b""):
        self.broker, self.newer, self.known, self.extra = broker, newer, known, extra
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        serve_each(self.sock, self._serve)

    def _serve(self, conn: socket.socket) -> None:
        try:
            with socket.create_connection(self.broker, timeout=20) as up:
                while True:
                    request = bytearray(
                        recv_exactly(conn, struct.unpack(">i", recv_exactly(conn, 4))[0])
                    )
                    key, version = struct.unpack_from(">hh", request)
                    relabelled = key == 3 and version == self.newer
                    if relabelled:
                        struct.pack_into(">h", request, 2, self.known)
                    answer = call(up, bytes(request)) + (self.extra if relabelled else b"")
                    conn.sendall(struct.pack(">i", len(answer)) + answer)
        except (ConnectionError, OSError):
            conn.close()

    def close(self) -> None:
        self.sock.close()


def metadata_flexible_request(version: int, corr: int) -> bytes:
    """Metadata (v9+ layout): all topics, no auto-creation, header v2."""
    return struct.pack(">hhih", 3, version, corr, 2) + b"md" + b"\0" + b"\0\0\0\0"


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_answers_newer_than_the_tables_are_rewritten_with_the_newest_layout(
    apache_kafka, forwarder
):
    """A client newer than kdissect asks Metadata v(newest+1): the answer's brokers are
    read with the newest known layout and rewritten to the proxy (passing it unread
    handed clients the brokers' own addresses), and the proxy says what it assumed. An
    answer that does not fit that layout to its last byte is forwarded unchanged, said."""
    from kdissect.protocol import schemas

    known = schemas.all_versions()[3][-1]
    broker = ("127.0.0.1", apache_kafka.node(1).ports["PLAINTEXT"])
    fits, differs = (
        Relabeller(broker, known + 1, known),
        Relabeller(broker, known + 1, known, b"\0"),
    )
    try:
        for relay, rewritten in ((fits, True), (differs, False)):
            with socket.create_connection(("127.0.0.1", relay.port), timeout=20) as s:
                direct = call(s, metadata_flexible_request(known + 1, 5))
            proxy = ProxyProcess(f"127.0.0.1:{relay.port}", "--forwarder", forwarder)
            try:
                with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
                    through = call(s, metadata_flexible_request(known + 1, 5))
                _, err = proxy.stop()
            finally:
                proxy.proc.kill()
            named = brokers_named_as(direct[: len(direct) - len(relay.extra)], known)
            assert named and all(port == broker[1] for _, _, port in named)
            if rewritten:
                got = brokers_named_as(through, known)
                assert [n for n, _, _ in got] == [n for n, _, _ in named]
                assert all(host == "127.0.0.1" and port != broker[1] for _, host, port in got)
                assert f"v{known + 1} is newer than kdissect's tables" in err
                assert f"read with v{known}'s layout" in err
            else:
                assert through == direct  # byte for byte
                assert "does not follow its layout" in err and "ends at byte" in err
            assert "Traceback" not in err
    finally:
        fits.close()
        differs.close()


def brokers_named_as(body: bytes, version: int) -> list[tuple[int, str, int]]:
    from tests.test_proxy import endpoints

    return endpoints(decode_response(body, 3, version).tree)


def test_broker_ports_past_65535_are_never_wrapped():
    base = free_port() - 1
    upstream = HostileBroker(
        lambda corr: metadata_v1_response(
            corr, [(1, "127.0.0.1", 9001), (50000, "127.0.0.1", 9002)]
        )
    )
    proxy = ProxyProcess(f"127.0.0.1:{upstream.port}", "--broker-ports", str(base))
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            named = dict((b[0], b[2]) for b in brokers_named(call(s, metadata_v1_request())))
        assert named[1] == base + 1
        assert named[50000] not in (9002, (base + 50000) % 65536)  # a free port instead
        with socket.create_connection(("127.0.0.1", named[50000]), timeout=20):
            pass
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        upstream.close()
    assert f"broker 50000: --broker-ports would give it port {base + 50000}" in err


def test_broker_ports_base_must_be_a_port():
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdissect",
            "proxy",
            "--upstream",
            "127.0.0.1:1",
            "--broker-ports",
            "70000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--broker-ports" in done.stderr
    assert "Traceback" not in done.stderr


# -- connections -----------------------------------------------------------------------------


@pytest.mark.alone
@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_2000_connects_at_once_without_a_stall(apache_kafka, forwarder):
    """A storm of 2,000 connections: none waits for a SYN retry (1 s), all are served."""
    proxy = ProxyProcess(apache_kafka.bootstrap(), "--forwarder", forwarder)
    clients: list[socket.socket] = []
    try:
        slowest = 0.0
        for _ in range(2000):
            started = time.monotonic()
            clients.append(socket.create_connection(("127.0.0.1", proxy.port), timeout=30))
            slowest = max(slowest, time.monotonic() - started)
        assert slowest < 1.0, f"a connect took {slowest:.2f} s (the backlog overflowed)"
        for i, s in enumerate(clients[::40]):  # served, not just queued
            assert call(s, api_versions(i))[:4] == struct.pack(">i", i)
        for s in clients:
            s.close()
        rows, err = proxy.stop()
    finally:
        for s in clients:
            s.close()
        proxy.proc.kill()
    assert "Traceback" not in err


def _closed(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def served(port: int, corr: int, tries: int = 50) -> socket.socket:
    """A connection that had an answer (the readiness probe's connection may still be
    ending when a test starts: its slot frees a moment later)."""
    for _ in range(tries):
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        try:
            assert call(s, api_versions(corr))[:4] == struct.pack(">i", corr)
            return s
        except ConnectionError:
            s.close()
            time.sleep(0.2)
    raise AssertionError("no connection was served")


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_the_connection_cap_and_the_idle_timeout(apache_kafka, forwarder):
    proxy = ProxyProcess(
        apache_kafka.bootstrap(),
        "--max-connections",
        "5",
        "--idle-timeout",
        "3",
        "--forwarder",
        forwarder,
    )
    try:
        kept = [served(proxy.port, i) for i in range(5)]
        refused = [
            socket.create_connection(("127.0.0.1", proxy.port), timeout=20) for _ in range(3)
        ]
        assert all(_closed(s, 10) for s in refused)  # closed at once, not queued
        # no traffic: all five are closed by the idle timeout, then new clients get in
        assert all(_closed(s, 30) for s in kept)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            assert call(s, api_versions(9))[:4] == struct.pack(">i", 9)
        for s in kept + refused:
            s.close()
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
    assert "--max-connections 5" in err and " connections refused (--max-connections)" in err
    assert err.count("closing new ones at once") == 1  # said once, then counted
    assert "5 idle connections closed (--idle-timeout)" in err


def _limited(limit: int):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return preexec


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_running_out_of_file_descriptors_ends_no_listener(apache_kafka, tmp_path, tls):
    """With few descriptors, a storm of clients makes accept fail (EMFILE): the
    listener stays, and once the storm's connections end, new clients are served."""
    import ssl

    args = ["--max-connections", "10000"]
    context = None
    if tls:
        from tests.support.tls import self_signed

        cert, key = self_signed(tmp_path)
        args += ["--tls-cert", str(cert), "--tls-key", str(key)]
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
    proxy = ProxyProcess(apache_kafka.bootstrap(), *args, preexec_fn=_limited(96))

    def client(corr: int) -> bytes:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
        if context is not None:
            s = context.wrap_socket(s)
        with s:
            return call(s, api_versions(corr))[:4]

    try:
        assert client(1) == struct.pack(">i", 1)
        storm = []
        for _ in range(150):  # far past what 96 descriptors allow
            storm.append(socket.create_connection(("127.0.0.1", proxy.port), timeout=20))
        time.sleep(2)  # the proxy meets EMFILE on accept
        for s in storm:
            s.close()
        time.sleep(2)
        for corr in range(10, 15):  # every new client is served
            assert client(corr) == struct.pack(">i", corr)
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
    assert "Traceback" not in err, err[-3000:]
    # the storm did meet the limit (on accept, or connecting to the broker)
    assert "out of file descriptors" in err or "Too many open files" in err, err[-3000:]


# -- large answers pass as they come -----------------------------------------------------------


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_large_answers_pass_as_they_come_byte_exact(apache_kafka, forwarder):
    """Fetch answers of megabytes are passed on before their last byte arrives (v4:
    as they come; v12+ librdkafka: but their tail): the bytes are the broker's, and a
    consumer reads every record."""
    import hashlib
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from tests.test_proxy_recording import _fetch_v4

    topic = f"large-answers-{forwarder}"
    admin = AdminClient({"bootstrap.servers": apache_kafka.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": apache_kafka.bootstrap(), "linger.ms": 5})
    values = [hashlib.sha256(str(i).encode()).digest() * 32 for i in range(3000)]  # 1 KiB
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(60) == 0
    proxy = ProxyProcess(apache_kafka.bootstrap(), "--forwarder", forwarder)
    try:
        fetch = _fetch_v4(topic, 100, 9)
        fetch = fetch[:-4] + struct.pack(">i", 8 << 20)  # partition max bytes
        fetch = fetch.replace(
            struct.pack(">iiii", -1, 100, 1, 1 << 20), struct.pack(">iiii", -1, 100, 1, 8 << 20)
        )
        with socket.create_connection(
            ("127.0.0.1", apache_kafka.node(1).ports["PLAINTEXT"]), timeout=30
        ) as s:
            direct = call(s, fetch)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            through = call(s, fetch)
        assert len(direct) > 1_000_000 and through == direct
        consumer = Consumer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "group.id": "large",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(1000, 1.0) if not m.error()]
        consumer.close()
        assert got == values
        proxy.wait_for(
            lambda rows: (
                sum(r["api_name"] == "Fetch" and r["direction"] == "response" for r in rows) >= 2
            )
        )
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
    assert "Traceback" not in err
    assert any(
        r["api_name"] == "Fetch" and r["direction"] == "response" and r.get("api_version") == 4
        for r in rows
    )


def _fetch_request(version: int, corr: int) -> bytes:
    """A Fetch request's header (the scripted broker below reads nothing more)."""
    if version >= 12:  # flexible: header v2
        return struct.pack(">hhih", 1, version, corr, 2) + b"fc" + b"\0"
    return struct.pack(">hhih", 1, version, corr, 2) + b"fc"


def _fetch_v16_answer(corr: int, records: bytes, hint: bytes = b"") -> bytes:
    """A Fetch v16 answer: one partition holding ``records``; ``hint``: a KIP-951
    leader hint (node 1 at that host) in the top-level tagged field 0."""
    from kdissect.proxy.rewrite import uvarint

    partition = (
        struct.pack(">ihqqq", 0, 0, 10, 10, 0)
        + b"\x01"  # no aborted txns
        + struct.pack(">i", -1)
        + uvarint(len(records) + 1)
        + records
        + b"\0"
    )
    body = (
        struct.pack(">i", corr)
        + b"\0"  # header v1
        + struct.pack(">ihi", 0, 0, 0)
        + b"\x02"
        + bytes(range(16))
        + b"\x02"
        + partition
        + b"\0"
    )  # topic's tags
    if not hint:
        return body + b"\0"
    endpoint = (
        struct.pack(">i", 1)
        + uvarint(len(hint) + 1)
        + hint
        + struct.pack(">i", 9092)
        + b"\x00"
        + b"\x00"
    )
    value = uvarint(2) + endpoint
    return body + b"\x01" + uvarint(0) + uvarint(len(value)) + value


class ScriptedBroker:
    """Reads ``len(answers)`` requests, then sends the answers' bytes (each with its
    size) cut at ``cuts`` (stream offsets), pausing between pieces so that the proxy
    reads them apart: a piece holding 3 bytes of a size, one ending exactly at an
    answer's end, one holding the end of one and the start of the next."""

    def __init__(self, answers: list[bytes], cuts: list[int]) -> None:
        self.stream = b"".join(struct.pack(">i", len(a)) + a for a in answers)
        self.answers, self.cuts = answers, cuts
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:  # (the proxy's start-up probe connects too)
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                for _ in self.answers:
                    recv_exactly(conn, struct.unpack(">i", recv_exactly(conn, 4))[0])
            except ConnectionError:
                return
            at = 0
            for cut in [*self.cuts, len(self.stream)]:
                conn.sendall(self.stream[at:cut])
                at = cut
                time.sleep(0.05)
            conn.recv(1)  # until the client leaves

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_large_answers_cut_anywhere_pass_byte_exact(forwarder):
    """Large answers reach the proxy in pieces cut anywhere (inside a size, at an
    answer's end, across two answers): the client gets the broker's bytes exactly. Fetch
    v4 answers pass as they come; a Fetch v16 answer but its tail, whose leader hint of
    the broker's own address is rewritten to the proxy's at the same size; the display
    shows every exchange."""
    # (the last over LARGE_FIRST: its buffer grows as its bytes come)
    records = [
        os.urandom(300_000),
        os.urandom(200_000),
        os.urandom(70_000),
        os.urandom(LARGE_FIRST + 300_000),
    ]
    answers = [
        struct.pack(">ii", 1, 0) + records[0],  # Fetch v4
        _fetch_v16_answer(2, records[1], hint=b"127.0.0.9"),  # Fetch v16
        _fetch_v16_answer(3, os.urandom(100_000)),  # no hint
        struct.pack(">ii", 4, 0) + records[2],  # Fetch v4
        struct.pack(">ii", 5, 0) + records[3],
    ]
    ends = list(itertools.accumulate(4 + len(a) for a in answers))
    cuts = [
        3,
        6,
        100_000,
        ends[0],
        ends[0] + 5,
        ends[0] + 150_000,
        ends[1] + 20,
        ends[2] + 2,
        ends[3] - 1,
        ends[3] + 100,
        ends[4] - 70_000,
    ]
    upstream = ScriptedBroker(answers, cuts)
    proxy = ProxyProcess(f"127.0.0.1:{upstream.port}", "--forwarder", forwarder)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=60) as s:
            for version, corr in ((4, 1), (16, 2), (16, 3), (4, 4), (4, 5)):
                request = _fetch_request(version, corr)
                s.sendall(struct.pack(">i", len(request)) + request)
            got = recv_exactly(s, len(upstream.stream))
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        upstream.close()
    hinted = upstream.stream[ends[0] : ends[1]]
    assert got[: ends[0]] == upstream.stream[: ends[0]]
    assert got[ends[1] :] == upstream.stream[ends[1] :]
    # the hint: same size, the records untouched, the proxy's port instead of 9092
    through = got[ends[0] : ends[1]]
    assert len(through) == len(hinted) and through[:-20] == hinted[:-20]
    assert b"127.0.0.1" in through[-20:] and struct.pack(">i", 9092) not in through[-20:]
    assert "broker 1 (127.0.0.9:9092)" in err and "Traceback" not in err
    assert sorted(r["correlation_id"] for r in rows if r["direction"] == "response") == [
        1,
        2,
        3,
        4,
        5,
    ]


def _display_idle(pid: int, timeout: float = 30.0) -> None:
    """Until the display process has slept on an empty channel for a second."""
    asleep, deadline = 0, time.monotonic() + timeout
    while asleep < 20 and time.monotonic() < deadline:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        asleep = asleep + 1 if state == "S" else 0
        time.sleep(0.05)


def _forwarder_faults(display_pid: int) -> int:
    """Page faults the proxy's forwarding process (the display's child) has taken."""
    task = f"/proc/{display_pid}/task/{display_pid}/children"
    (child,) = open(task).read().split()
    return int(open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[7])


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_the_forwarders_memory_is_used_again_not_faulted_in_anew(forwarder):
    """The same twenty 1 MiB answers twice, each collected whole for the display and freed
    once it has taken them: the second time the forwarder uses the memory it freed
    instead of having the kernel fault pages in anew. (The relay's threads had heaps of
    their own, given back whole once free: 18,500 faults per Java consume run of 200 MB.)
    The display is stopped while the answers pass, so that both times the forwarder holds
    all of them at once (a display that kept up the first time and not the second would
    need more memory the second time, on a loaded machine)."""
    answers = [struct.pack(">ii", corr, 0) + os.urandom(1 << 20) for corr in range(1, 21)]
    upstream = ScriptedBroker(answers, [])

    def fetch_all() -> None:
        os.kill(proxy.proc.pid, signal.SIGSTOP)  # the display (the forwarder goes on)
        try:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=60) as s:
                for corr in range(1, 21):
                    request = _fetch_request(4, corr)
                    s.sendall(struct.pack(">i", len(request)) + request)
                assert recv_exactly(s, len(upstream.stream)) == upstream.stream
            time.sleep(0.5)  # (the last answers handed to the channel)
        finally:
            os.kill(proxy.proc.pid, signal.SIGCONT)
        _display_idle(proxy.proc.pid)  # it took all the channel held: freed

    proxy = ProxyProcess(f"127.0.0.1:{upstream.port}", "--forwarder", forwarder)
    try:
        fetch_all()
        before = _forwarder_faults(proxy.proc.pid)
        fetch_all()
        faults = _forwarder_faults(proxy.proc.pid) - before
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        upstream.close()
    # 20 MiB moved: 5,120 pages each time it is allocated anew, more for each copy of it
    assert faults < 1000, faults
    assert len([r for r in rows if r["direction"] == "response"]) == 40
    assert "Traceback" not in err


def test_a_client_that_stops_reading_holds_up_no_other_connections_events():
    """A client pipelines 2,000 requests and reads none of their answers: its relay thread
    ends up blocked writing a chunk whose answers it queued, with Python's wake-up put off
    until that write ends, which is never while the client stalls. Another client's
    exchange must still be counted (the event loop also takes events every POLL_EVERY)."""

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while True:
                    size = struct.unpack(">i", recv_exactly(conn, 4))[0]
                    corr = recv_exactly(conn, size)[4:8]
                    conn.sendall(struct.pack(">i", 4096) + corr + bytes(4092))
            except (ConnectionError, OSError, struct.error):
                return

    server = socket.create_server(("127.0.0.1", 0))
    serve_each(server, serve)
    metrics_port = free_port()
    proxy = ProxyProcess(
        f"127.0.0.1:{server.getsockname()[1]}",
        "--forwarder",
        "threads",
        "--metrics",
        f"127.0.0.1:{metrics_port}",
    )
    stalled = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    try:
        for corr in range(2000):  # ApiVersions v0, never read
            stalled.sendall(struct.pack(">ihhi", 10, 18, 0, corr) + b"\xff\xff")
        time.sleep(1.0)  # its answers fill the sockets; its relay thread blocks
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as other:
            other.sendall(struct.pack(">ihhi", 10, 16, 0, 7) + b"\xff\xff")  # ListGroups
            assert recv_exactly(other, 8)[4:] == struct.pack(">i", 7)
        deadline = time.monotonic() + 5
        counted = 0.0
        while counted < 1 and time.monotonic() < deadline:
            try:
                counted = metric(
                    scrape(metrics_port), "kdissect_proxy_responses_total", api="ListGroups"
                )
            except AssertionError:  # (not counted yet: no series)
                pass
            time.sleep(0.1)
        assert counted == 1
    finally:
        stalled.close()
        proxy.proc.kill()
        server.close()


@pytest.mark.parametrize("forwarder", FORWARDERS)
def test_a_brokers_whole_answers_before_a_bad_size_pass(forwarder):
    """A broker (here a hostile one) sends three whole answers, one of them large enough
    to be passed on as it comes, then bytes that are not Kafka, in one write: the
    client gets every answer byte for byte, then the connection closes, and the proxy
    says why (the event loop dropped the whole write). The bad size is -2, which the
    thread forwarder once took for its own "no thread to be had"."""

    def answer(corr: int, entries: int) -> bytes:
        body = struct.pack(">ihi", corr, 0, entries) + struct.pack(">hhh", 0, 0, 9) * entries
        return struct.pack(">i", len(body)) + body

    # 240 kB streamed between two small ones: the last one and the bad size come in one
    # read, whatever the reads of the large one were
    answers = answer(1, 3) + answer(2, 40_000) + answer(3, 2)
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                for _ in range(3):
                    recv_exactly(conn, struct.unpack(">i", recv_exactly(conn, 4))[0])
            except ConnectionError:
                return  # (the proxy's readiness probe)
            conn.sendall(answers + b"\xff\xff\xff\xfe" + b"not Kafka" * 10)
            time.sleep(5)

    serve_each(server, serve)
    proxy = ProxyProcess(f"127.0.0.1:{server.getsockname()[1]}", "--forwarder", forwarder)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            for corr in (1, 2, 3):
                request = api_versions(corr)
                s.sendall(struct.pack(">i", len(request)) + request)
            got = b""
            while chunk := s.recv(1 << 20):
                got += chunk
        rows, err = proxy.stop()
    finally:
        proxy.proc.kill()
        server.close()
    assert got == answers
    assert "sent an implausible message size -2" in err, err
    assert "forwarding thread" not in err
    assert "Traceback" not in err
