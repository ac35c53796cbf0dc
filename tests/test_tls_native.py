"""TLS decryption on the compiled path (native/src/tls.rs's RecordCipher) against the
pure-Python reference (cipher.py's Decryptor over the ``cryptography`` package, and
session.py record by record): the same results for every AEAD suite, on hand-built and
damaged conversations, and on the bundled capture of a real broker's TLS listener. The
real-broker captures of every cipher are compared in tests/test_tls.py."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from kdissect.capture.tls.cipher import Decryptor
from kdissect.capture.tls.schedule import SUITES
from kdissect.capture.tls.session import decryptor
from kdissect.cli import main
from tests.fuzz import tls_target
from tests.support.tls_synth import Conversation, handshake
from tests.test_native import _built  # noqa: F401  (autouse: fails unless the extension is built)

ROOT = Path(__file__).resolve().parents[1]
AEAD = [s for s in SUITES.values() if s.cipher in ("gcm", "chacha")]


def seal(suite, key: bytes, iv: bytes, seq: int, ctype: int, plain: bytes) -> tuple[bytes, bytes]:
    """(header, payload) of a record as a peer protects it (RFC 8446 / 5288 / 7905)."""
    aead = (AESGCM if suite.cipher == "gcm" else ChaCha20Poly1305)(key)
    if suite.tls13:
        inner = plain + bytes([ctype]) + bytes(seq % 3)  # some padding
        header = struct.pack(">BHH", 23, 0x0303, len(inner) + 16)
        nonce = (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
        return header, aead.encrypt(nonce, inner, header)
    aad = struct.pack(">QBHH", seq, ctype, 0x0303, len(plain))
    if suite.cipher == "gcm":
        explicit = os.urandom(8)
        body = explicit + aead.encrypt(iv + explicit, plain, aad)
    else:
        body = aead.encrypt((int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big"), plain, aad)
    return struct.pack(">BHH", ctype, 0x0303, len(body)), body


@pytest.mark.parametrize("suite", AEAD, ids=lambda s: s.name)
def test_record_cipher_decrypts_as_the_reference(suite):
    rng = random.Random(suite.code)
    key, iv = rng.randbytes(suite.key_len), rng.randbytes(12 if suite.tls13 else suite.iv_len)
    compiled = decryptor(suite, key, iv, tls13=suite.tls13)
    reference = Decryptor(suite, key, iv, b"", suite.tls13)
    assert type(compiled).__name__ == "RecordCipher"
    for seq, size in enumerate([0, 1, 100, 16384]):
        ctype = 22 if size == 1 else 23
        header, body = seal(suite, key, iv, seq, ctype, rng.randbytes(size))
        want = reference.decrypt(seq, header[0], 0x0303, header, body)
        assert want is not None and want[0] == ctype
        assert compiled.decrypt(seq, header[0], 0x0303, header, body) == want
        assert compiled.decrypt(seq, header[0], 0x0303, header, memoryview(body)) == want
        # wrong sequence number, flipped bits, cut payloads: None on both
        bad = [
            (seq + 1, body),
            (seq, body[:-1] + bytes([body[-1] ^ 1])),
            (seq, body[:15]),
            (seq, body[:8]),
            (seq, b""),
        ]
        for s, b in bad:
            assert reference.decrypt(s, header[0], 0x0303, header, b) is None
            assert compiled.decrypt(s, header[0], 0x0303, header, b) is None


def test_open_records_stops_at_what_python_reads():
    suite = SUITES[0x1301]
    key, iv = bytes(range(16)), bytes(range(12))
    c = decryptor(suite, key, iv)
    recs = [
        b"".join(seal(suite, key, iv, i, t, b"x%d" % i)) for i, t in enumerate([23, 23, 22, 23])
    ]
    data = b"".join(recs)
    plain, count, pos, seq = c.open_records(data, 0, len(data), 0)
    assert (plain, count, pos, seq) == (b"x0x1", 2, len(recs[0]) + len(recs[1]), 2)
    # a record cut off, a wrong sequence number, another content type outside: no records
    assert c.open_records(data, 0, len(recs[0]) - 1, 0) == (b"", 0, 0, 0)
    assert c.open_records(data, 0, len(data), 5) == (b"", 0, 0, 5)
    ccs = b"\x14\x03\x03\x00\x01\x01"
    assert c.open_records(ccs + data, 0, len(data) + 6, 0) == (b"", 0, 0, 0)
    # a length field past the largest record, and past the buffer
    huge = b"\x17\x03\x03\xff\xff" + bytes(40)
    assert c.open_records(huge, 0, len(huge), 0) == (b"", 0, 0, 0)
    assert c.open_records(recs[3], 0, 10**9, 3) == (b"x3", 1, len(recs[3]), 4)


def conversations() -> list[bytes]:
    """Hand-built TLS 1.3 connections as the fuzz target takes them: many small records,
    big ones, a key update, an alert, a bad tag."""
    out = list(tls_target.seeds())
    conv = Conversation()
    for i in range(40):
        conv.client += conv.c_app.seal(23, b"request %d;" % i * (1 + i % 7))
        conv.server += conv.s_app.seal(23, b"response %d;" % i * 1000, pad=i % 3)
    conv.client += conv.c_app.seal(22, handshake(24, b"\x00"))
    conv.c_app.update()
    bad = bytearray(conv.c_app.seal(23, b"damaged"))
    bad[-3] ^= 0x40
    conv.client += conv.c_app.seal(23, b"after the update") + bad + conv.c_app.seal(23, b"on")
    conv.server += conv.s_app.seal(21, b"\x01\x00")
    out.append(tls_target.pack(bytes(conv.client), bytes(conv.server), conv.key_log().encode()))
    return out


@pytest.mark.parametrize(
    "last", [b"\x00\x20", b"\x01\x05", b"\x01\x60"], ids=["33-byte", "251-byte", "4801-byte"]
)
def test_both_paths_agree_on_conversations_in_pieces(last):
    """Pieces from 33 bytes (most records buffered) to 4,801 (runs of whole records),
    every 41st lost: the same plaintext, gaps and facts (the fuzz target's comparison)."""
    decrypted = 0
    for data in conversations():
        compiled = tls_target.session_output(data + last)
        with tls_target.pure_python():
            reference = tls_target.session_output(data + last)
        assert compiled == reference
        decrypted += compiled[2]["records_decrypted"]
    assert decrypted > 0


def test_both_paths_agree_on_damaged_conversations():
    """The fuzz target's mutations, a fixed few hundred: every one agrees (run_tls
    raises on any difference)."""
    rng = random.Random(26)
    for _ in range(400):
        tls_target.run_tls(tls_target.tls_input(rng))


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_bundled_capture_prints_the_same_on_both_paths(fmt):
    """A real broker's TLS listener (captures/tls): every output byte the same."""
    args = [
        "pcap",
        "--no-tui",
        "--format",
        fmt,
        str(ROOT / "captures/tls/kafka-tls.pcap"),
        "--keylog",
        str(ROOT / "captures/tls/kafka-tls.keys"),
    ]
    runs = [CliRunner().invoke(main, args, env={"KDISSECT_PURE": pure}) for pure in ("0", "1")]
    assert runs[0].exit_code == 0, runs[0].output
    assert runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr
    assert "TLS_AES_256_GCM_SHA384): decrypted" in runs[0].stderr
    assert runs[0].stdout.count("\n") > 8


def kafka_conversation() -> bytes:
    """A TLS 1.3 connection carrying size-framed Kafka-like messages of 14 bytes to 40 KB
    (one record holds several, or one message spans several records), with a
    NewSessionTicket, a key update, a record that does not authenticate and an alert
    between them: the compiled reassembler gives the direction back at each."""
    conv = Conversation()
    for i in range(32):
        body = struct.pack(">hhih", 18, 0, i, -1) + bytes(i * 1500 % 40_000)
        frame = struct.pack(">i", len(body)) + body
        for at in range(0, len(frame), 7000 + i * 300):
            conv.client += conv.c_app.seal(23, frame[at : at + 7000 + i * 300], pad=i % 2)
        answer = struct.pack(">ih", i, 0) + bytes(i * 300)
        conv.server += conv.s_app.seal(23, struct.pack(">i", len(answer)) + answer)
        if i == 8:
            conv.server += conv.s_app.seal(22, handshake(4, bytes(20)))
        if i == 20:
            conv.client += conv.c_app.seal(22, handshake(24, b"\x00"))
            conv.c_app.update()
        if i == 28:
            bad = bytearray(conv.s_app.seal(23, b"\x00\x00\x00\x02\x00\x00"))
            bad[-1] ^= 1
            conv.server += bad
    conv.server += conv.s_app.seal(21, b"\x02\x28")
    return tls_target.pack(bytes(conv.client), bytes(conv.server), conv.key_log().encode())


@pytest.mark.parametrize(
    "last,block,least",
    [
        pytest.param(b"\x00\x48", 2048, 1, marks=pytest.mark.slow),
        (b"\x01\x60", 512, 20),
        (b"\x01\x60", 1 << 16, 20),
    ],
    ids=["73-byte-pieces", "4801-byte-pieces", "4801-byte-big-reads"],
)
def test_compiled_reassembler_decrypts_as_the_reference(last, block, least, monkeypatch):
    """TLS directions decrypted inside the compiled reassembler (native/src/tls.rs's
    TlsDir, handed over between the scanner's batches and given back at anything but
    application data, at lost bytes and at the end) give the engine exactly what the
    pure-Python path gives: exchanges, gaps, notes, TLS facts."""
    from kdissect.capture.tls.session import TlsSession
    from tests.support.native_check import engine_divergence

    given_back = TlsSession.given_back
    in_rust = []

    def spy(self, side, seq, records, *rest):
        in_rust.append(records)
        given_back(self, side, seq, records, *rest)

    monkeypatch.setattr(TlsSession, "given_back", spy)
    data = kafka_conversation() + last
    path = tls_target.write_capture(data)
    assert engine_divergence(path, None, block) is None
    # records the compiled reassembler decrypted (with small pieces most records are lost)
    assert sum(in_rust) >= least
    assert engine_divergence(path, 60_000, block) is None  # Python's reassembler takes over
