"""TLS: key schedules against published vectors, the record layer on hand-built
records (split, batched, damaged, updated keys), key logs with garbage, and real
OpenSSL traffic (kafka-python through Python's ssl) decrypted to the very bytes the
same workload sent in plaintext, checked against tshark with the same key log."""

from __future__ import annotations

import json
import subprocess
import time
import sys
from collections import Counter

import pytest

from kdissect.capture.tls import KeyLog, KeyLogError
from kdissect.capture.tls.schedule import SUITES, hkdf_expand_label, prf, traffic_keys
from kdissect.capture.tls.session import TlsFacts, TlsSession
from tests.support.tls_synth import Conversation, handshake, record

# -- key schedules -------------------------------------------------------------------------


def test_tls13_traffic_keys_rfc8448():
    """RFC 8448 section 3 (simple 1-RTT handshake): handshake traffic secrets -> keys."""
    suite = SUITES[0x1301]
    server = bytes.fromhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
    client = bytes.fromhex("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
    assert [x.hex() for x in traffic_keys(server, suite)] == [
        "3fce516009c21727d0f2e4e86ee403bc",
        "5d313eb2671276ee13000b30",
    ]
    assert [x.hex() for x in traffic_keys(client, suite)] == [
        "dbfaa693d1762c5b666af5d950258d01",
        "5bd3c71b836e0b76bb73265f",
    ]
    assert (
        hkdf_expand_label(server, "key", b"", 16, "sha256").hex()
        == "3fce516009c21727d0f2e4e86ee403bc"
    )


def test_tls12_prf_vector():
    """The TLS 1.2 PRF (SHA-256) vector from the IETF TLS working group."""
    out = prf(
        bytes.fromhex("9bbe436ba940f017b17652849a71db35"),
        b"test label",
        bytes.fromhex("a0ba9f936cda311827a6f796ffd5198c"),
        100,
        "sha256",
    )
    assert out.hex() == (
        "e3f229ba727be17b8d122620557cd453c2aab21d07c3d495329b52d4e61edb5a"
        "6b301791e90d35c9c9a46b4e14baf9af0fa022f7077def17abfd3797c0564bab"
        "4fbc91666e9def9b97fce34f796789baa48082d122ee42c5a72e5a5110fff701"
        "87347b66"
    )


# -- key logs ------------------------------------------------------------------------------


def test_key_log_skips_garbage_and_counts_it(tmp_path):
    good = "CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48
    text = "\n".join(
        [
            "# comment",
            good,
            "garbage line",
            "CLIENT_RANDOM zz" + "0" * 62 + " " + "00" * 48,
            "CLIENT_RANDOM " + "ab" * 31 + " " + "00" * 48,  # short random
            "CLIENT_RANDOM " + "01" * 32 + " " + "00" * 47,  # master not 48 bytes
            "CLIENT_TRAFFIC_SECRET_0 " + "02" * 32 + " " + "ff" * 5000,  # huge secret
            "X" * 100000,
            "SERVER_TRAFFIC_SECRET_0 " + "03" * 32 + " " + "11" * 48,
            "",
        ]
    )
    path = tmp_path / "keys.log"
    path.write_text(text)
    keys = KeyLog()
    assert keys.add_file(str(path)) == 2
    assert keys.get("CLIENT_RANDOM", bytes.fromhex("ab" * 32)) == bytes.fromhex("cd" * 48)
    assert keys.skipped == 6
    assert "6 key log lines skipped" in keys.problems()
    assert "cd" * 10 not in keys.problems()  # secrets are not echoed


def test_key_log_errors_are_clear(tmp_path):
    with pytest.raises(KeyLogError, match="cannot read"):
        KeyLog().add_file(str(tmp_path / "missing.log"))
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"\x00\x01" * 100)
    with pytest.raises(KeyLogError, match="not a key log"):
        KeyLog().add_file(str(binary))


def test_key_log_rereads_a_growing_file(tmp_path):
    path = tmp_path / "keys.log"
    path.write_text("")
    keys = KeyLog()
    keys.add_file(str(path))
    with open(path, "a") as f:
        f.write("CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48 + "\n")
    assert keys.get("CLIENT_RANDOM", bytes.fromhex("ab" * 32)) is not None


# -- the record layer on hand-built records ----------------------------------------------------


def run(
    conv: Conversation,
    keys: KeyLog | None,
    chunk: int | None = None,
    client: bytes | None = None,
    server: bytes | None = None,
):
    """Feed a conversation (each direction in ``chunk``-byte pieces) through a session;
    (facts, plaintext per side, gaps)."""
    plain = [bytearray(), bytearray()]
    gaps = []

    def emit(side, offset, data, ts, frame):
        assert offset == len(plain[side]) + sum(g[2] for g in gaps if g[0] == side)
        plain[side] += data

    session = TlsSession(
        TlsFacts(("c", 1), ("s", 2)),
        keys,
        emit,
        lambda side, off, n, ts, fr: gaps.append((side, off, n)),
    )
    streams = [
        bytes(client if client is not None else conv.client),
        bytes(server if server is not None else conv.server),
    ]
    step = chunk or max(map(len, streams)) or 1
    hello = 5 + int.from_bytes(streams[0][3:5], "big")
    # as on the wire: the ClientHello, the server's flight, the client's, in pieces
    for side, data in ((0, streams[0][:hello]), (1, streams[1]), (0, streams[0][hello:])):
        for i in range(0, len(data), step):
            session.data(side, data[i : i + step], 0.0, i)
    return session.finish(), plain, gaps


def keys_of(conv: Conversation) -> KeyLog:
    keys = KeyLog()
    keys.add_text(conv.key_log())
    return keys


def conversation_with_data() -> Conversation:
    conv = Conversation()
    conv.client += conv.c_app.seal(23, b"request-1") + conv.c_app.seal(23, b"request-2", pad=7)
    conv.server += conv.s_app.seal(23, b"response-1" * 1600)  # 16000 bytes
    return conv


@pytest.mark.parametrize("chunk", [None, 1, 7, 1448])
def test_records_split_over_segments_and_batched(chunk):
    conv = conversation_with_data()
    facts, plain, gaps = run(conv, keys_of(conv), chunk)
    assert bytes(plain[0]) == b"request-1request-2"
    assert bytes(plain[1]) == b"response-1" * 1600
    assert not gaps and not facts.findings
    assert facts.state == "decrypted" and facts.version == "TLS 1.3"
    assert facts.server_name == "kafka.example" and facts.cipher == "TLS_AES_128_GCM_SHA256"


def test_key_update_switches_keys():
    conv = Conversation()
    conv.client += conv.c_app.seal(23, b"before")
    conv.client += conv.c_app.seal(22, handshake(24, b"\x01"))  # KeyUpdate, update_requested
    conv.c_app.update()
    conv.client += conv.c_app.seal(23, b"after")
    conv.server += conv.s_app.seal(22, handshake(24, b"\x00"))
    conv.s_app.update()
    conv.server += conv.s_app.seal(23, b"server after")
    facts, plain, _ = run(conv, keys_of(conv))
    assert bytes(plain[0]) == b"beforeafter" and bytes(plain[1]) == b"server after"
    assert not facts.findings


def test_bad_tag_is_a_finding_and_decryption_goes_on():
    conv = Conversation()
    conv.client += conv.c_app.seal(23, b"one")
    bad = bytearray(conv.c_app.seal(23, b"two"))
    bad[-1] ^= 1
    conv.client += bad + conv.c_app.seal(23, b"three")
    facts, plain, gaps = run(conv, keys_of(conv))
    assert bytes(plain[0]) == b"onethree"
    assert [f.code for f in facts.findings] == ["tls_decrypt_failed"]
    assert gaps == [(0, 3, len(bad) - 5)]


def test_without_keys_the_connection_is_reported_not_lost():
    conv = conversation_with_data()
    facts, plain, gaps = run(conv, None)
    assert not plain[0] and not plain[1] and not gaps
    assert facts.state == "no keys" and [f.code for f in facts.findings] == ["tls_undecryptable"]
    assert facts.server_name == "kafka.example" and facts.version == "TLS 1.3"


def test_wrong_keys_fail_cleanly():
    conv = conversation_with_data()
    other = Conversation()
    keys = KeyLog()
    keys.add_text(other.key_log().replace(other.client_random.hex(), conv.client_random.hex()))
    facts, plain, _ = run(conv, keys)
    assert facts.state == "failed" and not plain[0] and not plain[1]
    assert {f.code for f in facts.findings} == {"tls_decrypt_failed"}


def test_lost_bytes_then_decryption_resumes():
    conv = Conversation()
    head = len(conv.client)
    for i in range(5):
        conv.client += conv.c_app.seal(23, f"msg-{i};".encode() * 50)
    whole = bytes(conv.client)
    plain, gaps = [bytearray(), bytearray()], []
    session = TlsSession(
        TlsFacts(("c", 1), ("s", 2)),
        keys_of(conv),
        lambda side, off, data, ts, fr: plain[side].extend(data),
        lambda side, off, n, ts, fr: gaps.append((side, off, n)),
    )
    hello = 5 + int.from_bytes(whole[3:5], "big")
    session.data(0, whole[:hello], 0.0, 1)
    session.data(1, bytes(conv.server), 0.0, 1)
    whole = whole[hello:]
    head -= hello
    rec = (len(whole) - head) // 5
    session.data(0, whole[: head + rec + 10], 0.0, 2)  # record 0 and a bit of 1
    session.gap(0, rec, 0.0, 3)  # the rest of 1 and most of 2
    session.data(0, whole[head + 2 * rec + 10 :], 0.0, 4)  # the rest of 2, then 3 and 4
    assert bytes(plain[0]) == b"msg-0;" * 50 + b"msg-3;" * 50 + b"msg-4;" * 50
    assert len(gaps) == 1


@pytest.mark.parametrize("damage", ["length", "type", "truncated_hello", "huge_handshake", "alert"])
def test_hostile_records_give_findings(damage):
    conv = conversation_with_data()
    client, server = bytes(conv.client), bytes(conv.server)
    if damage == "length":
        client = client[:-20] + b"\x17\x03\x03\xff\xff" + client[-15:]
    elif damage == "type":
        server = server + b"\x63\x03\x03\x00\x10" + bytes(16)
    elif damage == "truncated_hello":
        client = client[:40]
    elif damage == "huge_handshake":
        server = record(22, b"\x02\xff\xff\xff" + bytes(100))
    else:
        server += conv.s_app.seal(21, b"\x02\x28")  # fatal handshake_failure
    facts, plain, _ = run(conv, keys_of(conv), 100, client, server)
    codes = {f.code for f in facts.findings}
    if damage == "truncated_hello":
        assert facts.state == "no keys" and codes == {"tls_undecryptable"}
        assert "ClientHello" in facts.findings[0].detail
    elif damage == "alert":
        assert codes == {"tls_alert"}
        assert "handshake_failure" in facts.findings[0].detail
    else:
        assert "tls_decrypt_failed" in codes


# -- real OpenSSL traffic -----------------------------------------------------------------

from kdissect.sources.pcap import exchanges_in  # noqa: E402
from tests.support.broker import Broker, free_port  # noqa: E402
from tests.support.cli import kdissect_text  # noqa: E402
from tests.support.tls_capture import record_tls  # noqa: E402

CONFIGS = {
    "tls13-aes256gcm": dict(),
    "tls13-aes128gcm": dict(suites13="TLS_AES_128_GCM_SHA256"),
    "tls13-chacha20": dict(suites13="TLS_CHACHA20_POLY1305_SHA256"),
    "tls12-aes128gcm": dict(tls12=True, ciphers="ECDHE-RSA-AES128-GCM-SHA256"),
    "tls12-aes256gcm": dict(tls12=True, ciphers="ECDHE-RSA-AES256-GCM-SHA384"),
    "tls12-chacha20": dict(tls12=True, ciphers="ECDHE-RSA-CHACHA20-POLY1305"),
    "tls12-aes128cbc-sha": dict(tls12=True, ciphers="ECDHE-RSA-AES128-SHA"),
    "tls12-aes256cbc-sha384": dict(tls12=True, ciphers="ECDHE-RSA-AES256-SHA384"),
    "tls12-aes128cbc-sha256-mac-then-encrypt": dict(
        tls12=True, ciphers="ECDHE-RSA-AES128-SHA256", no_etm=True
    ),
    "tls13-mutual": dict(mutual=True),
    "tls12-mutual-big": dict(tls12=True, mutual=True, messages=40, size=30000),
    "tls13-big": dict(messages=40, size=30000),
}


@pytest.fixture(scope="module")
def tls_broker():
    """One Tansu broker for the module, advertising the TLS port every run listens on."""
    port = free_port()
    broker = Broker(advertised_port=port)
    yield broker, port
    broker.stop()


def split(ex_list, tls_port: int):
    """(decrypted TLS exchanges, plaintext-leg exchanges) as comparable tuples."""

    def key(e):
        return (e.request.data if e.request else None, e.response.data if e.response else None)

    tls = sorted(key(e) for e in ex_list if e.broker[1] == tls_port)
    plain = sorted(key(e) for e in ex_list if e.broker[1] != tls_port)
    return tls, plain


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_real_tls_decrypts_to_the_plaintext_leg(name, tls_broker, tmp_path, monkeypatch):
    broker, port = tls_broker
    run = record_tls(tmp_path / name, broker=broker, tls_port=port, **CONFIGS[name])
    keys = KeyLog()
    keys.add_file(str(run.keylog))
    got = exchanges_in([str(run.pcap)], keys=keys)
    # the compiled path's record layer (native/src/tls.rs) and the pure-Python one agree
    monkeypatch.setenv("KDISSECT_PURE", "1")
    pure = exchanges_in([str(run.pcap)], keys=keys)
    monkeypatch.delenv("KDISSECT_PURE")
    assert (got.exchanges, got.gaps, got.notes) == (pure.exchanges, pure.gaps, pure.notes)
    tls, plain = split(got.exchanges, port)
    # the same requests; the same responses, but for one the client hung up before the
    # terminator could pass it on (the consumer closes while its last Fetch waits)
    assert tls and [t[0] for t in tls] == [p[0] for p in plain]
    assert Counter(t for t in tls if t[1] is not None) - Counter(plain) == Counter()
    assert sum(t[1] is None for t in tls) <= sum(p[1] is None for p in plain) + 1
    assert not got.gaps
    decrypted = [e for e in got.exchanges if e.broker[1] == port]
    assert all(e.tls is not None and e.tls.state in ("decrypted", "handshake") for e in decrypted)
    cipher = {e.tls.cipher for e in decrypted}
    want = CONFIGS[name]
    if "ciphers" in want or "suites13" in want:
        assert len(cipher) == 1
        if "suites13" in want:
            assert cipher == {want["suites13"]}
    version = {e.tls.version for e in decrypted}
    assert version == {"TLS 1.2" if want.get("tls12") else "TLS 1.3"}
    assert not [f for e in decrypted for f in e.findings if f.code.startswith("tls")]
    # without keys: each TLS connection reported with its facts, nothing lost
    bare = exchanges_in([str(run.pcap)])
    assert not bare.gaps and not [e for e in bare.exchanges if e.broker[1] == port]
    notes = " ".join(text for _level, text in bare.notes)
    assert f"TLS connections to 127.0.0.1:{port}" in notes and "give --keylog" in notes


@pytest.fixture(scope="module")
def tls_run(tls_broker, tmp_path_factory):
    broker, port = tls_broker
    return record_tls(tmp_path_factory.mktemp("tls") / "run", broker=broker, tls_port=port)


@pytest.fixture(scope="module")
def tls12_run(tls_broker, tmp_path_factory):
    broker, port = tls_broker
    return record_tls(
        tmp_path_factory.mktemp("tls12") / "run", broker=broker, tls_port=port, tls12=True
    )


def kdissect(*args, env=None):
    return kdissect_text(*map(str, args), env=env)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["tls_run", "tls12_run"])
def test_tshark_decodes_the_same_messages(which, request):
    """tshark, given the same key log, finds the same Kafka messages in the same frames."""
    run = request.getfixturevalue(which)
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(run.pcap),
            "-o",
            f"tls.keylog_file:{run.keylog}",
            "-d",
            f"tls.port=={run.tls_port},kafka",
            "-Y",
            f"kafka && tcp.port=={run.tls_port}",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "kafka.correlation_id",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    theirs = Counter(
        (int(frame), int(c))
        for line in out.splitlines()
        for frame, corrs in [line.split("\t")]
        for c in corrs.split(",")
    )
    keys = KeyLog()
    keys.add_file(str(run.keylog))
    ours = Counter(
        (m.frame, m.correlation_id)
        for e in exchanges_in([str(run.pcap)], keys=keys).exchanges
        if e.broker[1] == run.tls_port
        for m in e.messages
    )
    assert len(theirs) > 10 and ours == theirs


@pytest.mark.slow
def test_cli_without_keys_reports_tls_not_gaps(tls_run):
    out = kdissect("pcap", tls_run.pcap, "--no-tui")
    assert out.returncode == 0, out.stderr
    assert f"TLS connections to 127.0.0.1:{tls_run.tls_port} (TLS 1.3, " in out.stderr
    assert "give --keylog" in out.stderr and "gap" not in out.stderr
    assert f":{tls_run.tls_port} " not in out.stdout  # no exchanges of the TLS leg
    stats = kdissect("pcap", tls_run.pcap, "--no-tui", "--stats")
    assert "TLS connections" in stats.stdout and "tls_undecryptable" in stats.stdout
    jsonl = kdissect("pcap", tls_run.pcap, "--format", "jsonl")
    conns = [
        json.loads(line)["tls_connection"]
        for line in jsonl.stdout.splitlines()
        if line.startswith('{"tls_connection"')
    ]
    assert conns and all(c["state"] == "no keys" and c["version"] == "TLS 1.3" for c in conns)


@pytest.mark.slow
def test_cli_key_sources_agree(tls_run, tmp_path):
    """--keylog, SSLKEYLOGFILE and a pcapng Decryption Secrets Block (editcap
    --inject-secrets) decrypt the same exchanges."""

    def tls_lines(out):
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if f":{tls_run.tls_port} " in line]

    by_option = tls_lines(kdissect("pcap", tls_run.pcap, "--no-tui", "--keylog", tls_run.keylog))
    by_env = tls_lines(
        kdissect("pcap", tls_run.pcap, "--no-tui", env={"SSLKEYLOGFILE": str(tls_run.keylog)})
    )
    dsb = tmp_path / "with-keys.pcapng"
    subprocess.run(
        ["editcap", "--inject-secrets", f"tls,{tls_run.keylog}", str(tls_run.pcap), str(dsb)],
        check=True,
        capture_output=True,
    )
    by_block = tls_lines(kdissect("pcap", dsb, "--no-tui"))
    assert len(by_option) >= 8 and by_option == by_env == by_block
    bad = kdissect("pcap", tls_run.pcap, "--keylog", tmp_path / "nope.log")
    assert bad.returncode == 2 and "cannot read the key log" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
def test_proxy_writes_the_secrets_of_both_tls_legs(tls_broker, tmp_path):
    """kafka-python -TLS-> kdissect proxy -TLS-> terminator -> broker, captured by
    tcpdump: the proxy's --keylog decrypts both legs of the capture, and its -w
    recording carries the secrets in a Decryption Secrets Block."""
    from kafka import KafkaProducer

    from kdissect.capture.pcapfile import CaptureReader
    from tests.support.tls import TlsTerminator, self_signed
    from tests.support.tls_capture import Tcpdump
    from tests.test_proxy import ProxyProcess

    broker, port = tls_broker
    cert, key = self_signed(tmp_path)
    terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port), port=port)
    keys, recording, pcap = (
        tmp_path / "proxy-keys.log",
        tmp_path / "rec.pcapng",
        tmp_path / "p.pcap",
    )
    base = free_port() - 111  # Tansu is node 111: its proxy listener is base + 111
    proxy = ProxyProcess(
        f"127.0.0.1:{port}",
        "--upstream-tls",
        "--ca-file",
        str(cert),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--keylog",
        str(keys),
        "-w",
        str(recording),
        "--broker-ports",
        str(base),
    )
    dump = Tcpdump(pcap, f"tcp port {port} or tcp port {proxy.port} or tcp port {base + 111}")
    try:
        producer = KafkaProducer(
            bootstrap_servers=proxy.bootstrap, security_protocol="SSL", ssl_cafile=str(cert)
        )
        for i in range(5):
            producer.send("proxy-tls", f"value {i}".encode())
        producer.flush(30)
        producer.close()
        time.sleep(0.5)
    finally:
        dump.stop()
        proxy.proc.terminate()
        try:
            # (the forwarding process has closed the recording by then; the proxy's
            # display may linger after a TLS upstream: not this test's subject)
            proxy.proc.wait(5)
        except subprocess.TimeoutExpired:
            proxy.proc.kill()
        terminator.close()
    keylog = KeyLog()
    keylog.add_file(str(keys))
    got = exchanges_in([str(pcap)], keys=keylog)
    legs = [
        [e.request.data for e in got.exchanges if (e.broker[1] == port) == upstream and e.request]
        for upstream in (False, True)
    ]
    produce = [[r for r in leg if r[:2] == b"\x00\x00"] for leg in legs]
    assert produce[0] and produce[0] == produce[1]  # the very same Produce requests
    assert all(e.tls is not None and e.tls.state == "decrypted" for e in got.exchanges)
    assert not got.gaps
    blocks = []
    with CaptureReader(str(recording)) as reader:
        reader.on_secrets = blocks.append
        list(reader.packets())
    assert blocks and b"CLIENT_TRAFFIC_SECRET_0" in b"".join(blocks)
    rec = exchanges_in([str(recording)])
    assert any(e.request and e.request.api_key == 0 for e in rec.exchanges)


@pytest.mark.slow
def test_real_apache_kafka_ssl_listener(apache_kafka, tmp_path):
    """The real broker's SSL listener (TLS 1.3 and 1.2), and the same workload on its
    PLAINTEXT listener: the decrypted exchanges are the plaintext ones (but for the
    topic's name), and tshark with the same key log finds the same messages."""
    from tests.support.tls_capture import Tcpdump, run_client

    ssl_port = int(apache_kafka.bootstrap("SSL").rsplit(":", 1)[1])
    plain_port = int(apache_kafka.bootstrap("PLAINTEXT").rsplit(":", 1)[1])
    pcap, keylog = tmp_path / "kafka.pcap", tmp_path / "keys.log"
    dump = Tcpdump(pcap, f"tcp port {ssl_port} or tcp port {plain_port}")
    try:
        for topic, args in (("ssl13", ()), ("ssl12", ("--tls12",)), ("plain", ("--plaintext",))):
            port = plain_port if topic == "plain" else ssl_port
            out = run_client(
                f"127.0.0.1:{port}",
                apache_kafka.tls.ca,
                keylog,
                "--topic",
                f"t-{topic}",
                "--messages",
                "30",
                *args,
            )
            assert "consumed 30" in out
    finally:
        dump.stop()
    keys = KeyLog()
    keys.add_file(str(keylog))
    got = exchanges_in([str(pcap)], keys=keys)
    assert not got.gaps

    def workload(ex):
        """The (API, version, answered) of the exchanges: how many Metadata requests a
        client makes depends on timing, what it asks does not."""
        return {
            (e.request.api_name, e.request.api_version, e.response is not None)
            for e in ex
            if e.request and e.request.api_key in (0, 3, 18)
        }

    by_version = {
        v: [e for e in got.exchanges if e.tls is not None and e.tls.version == v]
        for v in ("TLS 1.3", "TLS 1.2")
    }
    plain = [e for e in got.exchanges if e.broker[1] == plain_port]
    assert by_version["TLS 1.3"] and by_version["TLS 1.2"] and plain
    assert workload(by_version["TLS 1.3"]) == workload(by_version["TLS 1.2"]) == workload(plain)
    produced = [
        [e.facts.records for e in ex if e.request and e.request.api_key == 0]
        for ex in (by_version["TLS 1.3"], plain)
    ]
    assert sum(produced[0]) == sum(produced[1]) == 30
    assert not [e for e in got.exchanges if e.broker[1] == ssl_port and e.tls is None]
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-o",
            f"tls.keylog_file:{keylog}",
            "-d",
            f"tls.port=={ssl_port},kafka",
            "-Y",
            f"kafka && tcp.port=={ssl_port}",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "kafka.correlation_id",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    theirs = Counter(
        (int(frame), int(c))
        for line in out.splitlines()
        for frame, corrs in [line.split("\t")]
        for c in corrs.split(",")
    )
    ours = Counter(
        (m.frame, m.correlation_id)
        for e in got.exchanges
        if e.broker[1] == ssl_port
        for m in e.messages
    )
    assert len(theirs) > 20 and ours == theirs


# -- the bundled capture ---------------------------------------------------------------------

CAPTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "captures"


def test_bundled_tls_capture_decodes_to_its_plaintext_leg():
    keys = KeyLog()
    keys.add_file(str(CAPTURES / "tls13.keys"))
    got = exchanges_in([str(CAPTURES / "tls13.pcap")], keys=keys)
    tls, plain = split(got.exchanges, 9093)
    assert len(tls) >= 15 and [t[0] for t in tls] == [p[0] for p in plain]
    assert Counter(t for t in tls if t[1] is not None) - Counter(plain) == Counter()
    assert not got.gaps
    assert (
        "info",
        "4 TLS connections to 127.0.0.1:9093 (TLS 1.3, TLS_AES_256_GCM_SHA384): decrypted",
    ) in got.notes
    bare = exchanges_in([str(CAPTURES / "tls13.pcap")])
    assert not bare.gaps and not [e for e in bare.exchanges if e.broker[1] == 9093]
    assert any("no keys for them; give --keylog" in text for _, text in bare.notes)


@pytest.mark.slow
def test_sasl_plain_over_tls_is_decrypted_and_not_called_plaintext(apache_kafka, tmp_path):
    """SASL/PLAIN inside TLS (a TLS terminator in front of the real broker's SASL_PLAINTEXT
    listener): the decrypted exchanges are those of the plaintext leg, and only the
    plaintext leg's password is flagged as sent in clear."""
    from tests.support.apache_kafka import USERS
    from tests.support.tls import TlsTerminator, self_signed
    from tests.support.tls_capture import Tcpdump, run_client

    sasl_port = int(apache_kafka.bootstrap("SASL_PLAINTEXT").rsplit(":", 1)[1])
    cert, key = self_signed(tmp_path)
    terminator = TlsTerminator(cert, key, ("127.0.0.1", sasl_port))
    pcap, keylog = tmp_path / "sasl.pcap", tmp_path / "keys.log"
    dump = Tcpdump(pcap, f"tcp port {terminator.port} or tcp port {sasl_port}")
    try:
        out = run_client(
            f"127.0.0.1:{terminator.port}",
            cert,
            keylog,
            "--sasl",
            f"alice:{USERS['alice']}",
            "--mechanism",
            "PLAIN",
            "--bootstrap-only",
        )
        assert "bootstrapped" in out
    finally:
        dump.stop()
        terminator.close()
    keys = KeyLog()
    keys.add_file(str(keylog))
    got = exchanges_in([str(pcap)], keys=keys)
    tls, plain = split(got.exchanges, terminator.port)
    assert [t[0] for t in tls] == [p[0] for p in plain]
    inside = [e for e in got.exchanges if e.broker[1] == terminator.port]
    outside = [e for e in got.exchanges if e.broker[1] == sasl_port]
    assert any(e.request.api_key == 36 for e in inside)  # SaslAuthenticate, decrypted
    assert all(e.tls is not None for e in inside)
    assert not any(e.has("plaintext_credentials") for e in inside)
    assert any(e.has("plaintext_credentials") for e in outside)


@pytest.mark.slow
def test_live_decrypts_with_a_key_log_being_written(tls_broker, tmp_path):
    """`kdissect live --keylog` while the client writes the key log: each new connection's
    secrets are read as they appear."""
    from tests.support.capture import stopped_when, wait_sniffing
    from tests.support.tls import TlsTerminator, self_signed
    from tests.support.tls_capture import run_client

    broker, port = tls_broker
    cert, key = self_signed(tmp_path)
    keylog = tmp_path / "keys.log"
    keylog.write_text("")  # empty when live starts
    terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port), port=port)
    sniffer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kdissect",
            "live",
            "-i",
            "lo",
            "-f",
            f"tcp port {port}",
            "--no-tui",
            "--format",
            "jsonl",
            "--keylog",
            str(keylog),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_sniffing(sniffer.pid)
        run_client(f"127.0.0.1:{port}", cert, keylog, "--topic", "live-tls", "--messages", "5")
        # the client is done: a Fetch answered (its consumer's, after every connection's
        # handshake and the Produce) shown means what the checks below need was read
        out, err = stopped_when(
            sniffer,
            lambda shown: any(
                m.get("api_name") == "Fetch" and m.get("direction") == "response" for m in shown
            ),
            timeout=90,
        )
    finally:
        sniffer.kill()
        terminator.close()
    lines = [json.loads(line) for line in out.splitlines()]
    conns = [x["tls_connection"] for x in lines if "tls_connection" in x]
    messages = [x for x in lines if "tls_connection" not in x]
    assert conns and all(c["state"] == "decrypted" for c in conns), err
    produce = [m for m in messages if m["api_name"] == "Produce" and m["direction"] == "request"]
    assert produce and produce[0]["body"]["topic_data"][0]["name"] == "live-tls"


def test_keys_logged_after_the_server_hello_still_decrypt(tmp_path):
    """A key log being written (live, the proxy): the first encrypted records wait until
    the connection's secrets appear, then everything decrypts in order."""
    conv = conversation_with_data()
    path = tmp_path / "keys.log"
    path.write_text("")
    keys = KeyLog()
    keys.add_file(str(path))
    plain = [bytearray(), bytearray()]
    session = TlsSession(
        TlsFacts(("c", 1), ("s", 2)),
        keys,
        lambda side, off, data, ts, fr: plain[side].extend(data),
        lambda *a: None,
    )
    client, server = bytes(conv.client), bytes(conv.server)
    hello = 5 + int.from_bytes(client[3:5], "big")
    session.data(0, client[:hello], 0.0, 1)
    session.data(1, server, 0.0, 2)  # no keys yet: held
    path.write_text(conv.key_log())
    session.data(0, client[hello:], 0.0, 3)
    facts = session.finish()
    assert bytes(plain[0]) == b"request-1request-2" and bytes(plain[1]) == b"response-1" * 1600
    assert facts.state == "decrypted" and not facts.findings


def test_a_capture_starting_mid_connection_says_what_cannot_be_decrypted(tmp_path):
    """The bundled capture without its first 19 packets: the connection whose handshake
    is lost is reported as TLS begun before the capture (no gaps, no garbage); the
    others decrypt."""
    cut = tmp_path / "mid.pcap"
    subprocess.run(
        ["editcap", "-r", str(CAPTURES / "tls13.pcap"), str(cut), "20-100000"],
        check=True,
        capture_output=True,
    )
    keys = KeyLog()
    keys.add_file(str(CAPTURES / "tls13.keys"))
    got = exchanges_in([str(cut)], keys=keys)
    notes = [text for _, text in got.notes]
    assert any(
        n.startswith(
            "1 TLS connection to 127.0.0.1:9093 (handshake not seen): not "
            "decrypted: the capture began after their handshake"
        )
        for n in notes
    )
    assert any(
        n.startswith("3 TLS connections to 127.0.0.1:9093") and n.endswith("decrypted")
        for n in notes
    )
    assert not [
        g for g in got.gaps if g.stream in {e.stream for e in got.exchanges if e.broker[1] == 9093}
    ]


def test_a_key_log_with_nothing_usable_and_a_missing_sslkeylogfile_are_said(tmp_path):
    """captures/tls13.pcap (kafka-python over TLS 1.3 to Apache Kafka): a key log file
    of no usable line was reported as "no keys for them; give --keylog FILE" though one
    was given, and an SSLKEYLOGFILE naming no file was passed over in silence."""
    junk = tmp_path / "notes.txt"
    junk.write_text("these are not TLS secrets\n" * 5)
    given = kdissect_text("pcap", str(CAPTURES / "tls13.pcap"), "--no-tui", "--keylog", str(junk))
    assert "the key log given holds no secret kdissect can use" in given.stderr, given.stderr
    assert "give --keylog FILE" not in given.stderr
    missing = str(tmp_path / "not-written-yet.log")
    env = kdissect_text(
        "pcap", str(CAPTURES / "tls13.pcap"), "--no-tui", env={"SSLKEYLOGFILE": missing}
    )
    assert f"SSLKEYLOGFILE={missing} does not exist" in env.stderr, env.stderr


def test_partial_handshake_messages_are_in_the_memory_budget(tmp_path):
    """TLS handshake messages being reassembled (up to 1 MiB each, a direction) count in
    --max-memory with everything else: four connections each holding 600 KB of one
    under a 1 MiB budget give up the oldest, say so, and the run ends cleanly."""
    import struct

    from click.testing import CliRunner

    from kdissect.cli import main
    from tests.support.tcp_mix import PSH_ACK, SYN, _packet

    broker = ([10, 0, 0, 100], 9093)
    clients = [([10, 0, 0, 1], 40000 + i) for i in range(4)]
    seqs = [1000] * len(clients)
    packets: list[bytes] = []

    def add(i: int, flags: int, payload: bytes = b"") -> None:
        packets.append(_packet(clients[i], broker, seqs[i], 0, flags, payload))
        seqs[i] += len(payload) + (1 if flags == SYN else 0)

    for i in range(len(clients)):
        add(i, SYN)
        # a ClientHello that says it is 700,000 bytes long: its fragments are held
        add(i, PSH_ACK, record(22, b"\x01" + (700_000).to_bytes(3, "big") + bytes(1000), 0x0301))
    for _ in range(40):  # 15 KB records, round-robin: 600 KB each
        for i in range(len(clients)):
            add(i, PSH_ACK, record(22, bytes(15_000)))
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    cap = tmp_path / "big-hellos.pcap"
    cap.write_bytes(
        head
        + b"".join(struct.pack("<IIII", 1000, n, len(p), len(p)) + p for n, p in enumerate(packets))
    )
    run = CliRunner().invoke(main, ["pcap", str(cap), "--format", "jsonl", "--max-memory", "1M"])
    assert run.exit_code == 0, run.output  # (TLS without keys: reported, not an error)
    tls = [json.loads(line)["tls_connection"] for line in run.stdout.splitlines()]
    given_up = [f["detail"] for t in tls for f in t["findings"] if f["code"] == "memory_budget"]
    assert len(tls) == 4 and len(given_up) >= 2, tls
    assert all("bytes of a partial TLS handshake message given up" in d for d in given_up)
