"""The fuzzer's TLS target: a TLS 1.3 connection's two byte streams and its key log
(hand-built with real keys, so most inputs get past the handshake into decryption),
damaged, through the TLS record layer in random pieces, on the compiled decryptor and
on the pure-Python one: they must agree. Kept apart from harness.py so
targets added by others merge cleanly."""

from __future__ import annotations

import os
import random
import struct
import tempfile
import zlib
from contextlib import contextmanager
from functools import lru_cache

from kdissect.capture.native import PURE_ENV

from . import harness as h


def pack(client: bytes, server: bytes, key_log: bytes) -> bytes:
    return struct.pack(">II", len(client), len(server)) + client + server + key_log


def unpack(data: bytes) -> tuple[bytes, bytes, bytes]:
    if len(data) < 8:
        return data, b"", b""
    a, b = struct.unpack_from(">II", data)
    a = min(a, len(data) - 8)
    b = min(b, len(data) - 8 - a)
    return data[8 : 8 + a], data[8 + a : 8 + a + b], data[8 + a + b :]


@lru_cache(maxsize=1)
def seeds() -> list[bytes]:
    from tests.support.tls_synth import Conversation, handshake

    out = []
    for kind in range(4):
        conv = Conversation()
        for i in range(3):
            conv.client += conv.c_app.seal(23, b"\x00\x00\x00\x0e\x00\x12\x00\x03" + bytes(10) * i)
            conv.server += conv.s_app.seal(23, b"answer %d" % i, pad=kind)
        if kind == 1:  # a key update each way
            conv.client += conv.c_app.seal(22, handshake(24, b"\x01"))
            conv.c_app.update()
            conv.client += conv.c_app.seal(23, b"after the update")
        if kind == 2:
            conv.server += conv.s_app.seal(21, b"\x02\x28")
        log = conv.key_log().encode()
        if kind == 3:
            log = b"garbage\n" + log + b"CLIENT_RANDOM " + b"00" * 32 + b" " + b"ff" * 300 + b"\n"
        out.append(pack(bytes(conv.client), bytes(conv.server), log))
    return out


def tls_input(rng: random.Random) -> bytes:
    seed = rng.choice(seeds())
    if rng.random() < 0.2:  # damage only the key log
        client, server, log = unpack(seed)
        return pack(client, server, h.mutate(rng, log, 4))
    return h.mutate(rng, seed, 8)


def run_tls(data: bytes) -> None:
    """The input through both record layers (the compiled decryptor's and the pure-Python
    one, KDISSECT_PURE=1): anything but the same plaintext, gaps and facts fails. One
    input in three also goes through whole captures (``capture_divergence``)."""
    compiled = session_output(data)
    with pure_python():
        reference = session_output(data)
    if compiled != reference:
        raise AssertionError(
            f"the compiled TLS path differs from the pure-Python one: "
            f"{compiled!r:.1500} != {reference!r:.1500}"
        )
    if zlib.crc32(data) % 3 == 0:
        differs = capture_divergence(data)
        assert differs is None, f"the compiled reassembler's TLS differs: {differs}"


_FILE: str | None = None


def capture_divergence(data: bytes) -> str | None:
    """The streams as a capture (``write_capture``) through the engine on the compiled
    path (TLS decrypted in the compiled reassembler, native/src/tls.rs ``TlsDir``, the
    file read in blocks of a size chosen by the input, small so it takes directions over
    mid-file) and on the pure-Python one, sometimes under a memory budget small enough
    that Python's reassembler takes over mid-file: where they differ (exchanges, gaps,
    notes, TLS facts), or None."""
    from tests.support.native_check import engine_divergence

    crc = zlib.crc32(data)
    block = (512, 2048, 1 << 16)[crc // 3 % 3]
    budget = (None, None, 100_000, 30_000)[crc // 9 % 4]
    return engine_divergence(write_capture(data), budget, block)


def write_capture(data: bytes) -> str:
    """The input's streams as a pcapng capture of a Kafka port (the key log in a
    Decryption Secrets Block; segments sized by the input, every 41st lost), in a
    scratch file: its path."""
    from kdissect.capture.pcapng_writer import Recorder

    global _FILE
    if _FILE is None:
        fd, _FILE = tempfile.mkstemp(
            prefix="kdissect-tls-",
            suffix=".pcapng",
            dir="/dev/shm" if os.path.isdir("/dev/shm") else None,
        )
        os.close(fd)
    client, server, log = unpack(data)
    with open(_FILE + ".keys", "wb") as f:
        f.write(log + b"\n")
    recorder = Recorder(_FILE, show_secrets=True, keylog=_FILE + ".keys")
    conn = recorder.connection(("10.0.0.1", 40000), ("10.0.0.2", 9092), 1.0)
    step = _step(data)
    hello = 5 + int.from_bytes(client[3:5], "big") if len(client) >= 5 else len(client)
    conn.data(0, client[:hello], 1.0)
    streams, pos, n = [client[hello:], server], [0, 0], 0
    while pos[0] < len(streams[0]) or pos[1] < len(server):
        for side in (1, 0):  # as session_output: the server first
            piece = streams[side][pos[side] : pos[side] + step]
            pos[side] += len(piece)
            n += 1
            if piece and n % 41 == 40:  # lost
                conn.seq[side] += len(piece)
            elif piece:
                conn.data(side, piece, 1.0 + n / 1000)
    conn.close(2.0)
    recorder.close()
    return _FILE


def _step(data: bytes) -> int:
    """Pieces of 1 to 97 bytes (records cut anywhere) or up to 4,801 (runs of whole ones)."""
    return 1 + (data[-1] % 97) * (50 if data[-2] & 1 else 1) if len(data) > 1 else 1


@contextmanager
def pure_python():
    """KDISSECT_PURE=1 for a while: decryptors made meanwhile are cipher.py's."""
    before = os.environ.get(PURE_ENV)
    os.environ[PURE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[PURE_ENV]
        else:
            os.environ[PURE_ENV] = before


def session_output(data: bytes) -> tuple:
    """The streams through a session in pieces sized by the input, with a lost stretch
    now and then; (plaintext runs, gaps, facts, summary). A run joins what one call
    emitted for one side at one frame (the compiled path emits a run of records at once)."""
    from kdissect.capture.tls import KeyLog
    from kdissect.capture.tls.report import tls_summary
    from kdissect.capture.tls.session import TlsFacts, TlsSession

    client, server, log = unpack(data)
    keys = KeyLog()
    keys.add_text(log)
    facts = TlsFacts(("c", 1), ("s", 2))
    runs: list[list] = []
    gaps: list[tuple] = []

    def emit(side: int, offset: int, plain: bytes, ts: float, frame: int) -> None:
        last = runs[-1] if runs else None
        if last and last[0] == side and last[3] == frame and last[1] + len(last[2]) == offset:
            last[2] += plain
        else:
            runs.append([side, offset, bytearray(plain), frame])

    session = TlsSession(facts, keys, emit, lambda *a: gaps.append(a))
    step = _step(data)
    hello = 5 + int.from_bytes(client[3:5], "big") if len(client) >= 5 else len(client)
    session.data(0, client[:hello], 0.0, 1)
    streams = [client[hello:], server]
    pos = [0, 0]
    n = 0
    while pos[0] < len(streams[0]) or pos[1] < len(streams[1]):
        for side in (1, 0):
            piece = streams[side][pos[side] : pos[side] + step]
            pos[side] += len(piece)
            n += 1
            if piece and n % 41 == 40:
                session.gap(side, len(piece), 0.0, n)
            elif piece:
                session.data(side, piece, 0.0, n)
    facts = session.finish()
    return runs, gaps, facts.to_json(), facts.describe(), tls_summary([facts], keys)
