"""Hand-built TLS 1.3 conversations (for unit tests of the record layer only): a
ClientHello and ServerHello in clear, then records sealed with keys derived from random
traffic secrets, and the key log that names them."""

from __future__ import annotations

import os
import struct

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kdissect.capture.tls.schedule import SUITES, next_secret, traffic_keys

SUITE = SUITES[0x1301]
LABELS = (
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0",
    "SERVER_TRAFFIC_SECRET_0",
)


def record(ctype: int, body: bytes, version: int = 0x0303) -> bytes:
    return struct.pack(">BHH", ctype, version, len(body)) + body


def handshake(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def client_hello(random: bytes, server_name: str = "kafka.example") -> bytes:
    name = server_name.encode()
    sni = struct.pack(">HBH", len(name) + 3, 0, len(name)) + name
    exts = struct.pack(">HH", 0, len(sni)) + sni + struct.pack(">HHB", 43, 3, 2) + b"\x03\x04"
    body = (
        b"\x03\x03"
        + random
        + b"\x00"
        + b"\x00\x02\x13\x01"
        + b"\x01\x00"
        + struct.pack(">H", len(exts))
        + exts
    )
    return handshake(1, body)


def server_hello(random: bytes) -> bytes:
    exts = struct.pack(">HHH", 43, 2, 0x0304)
    body = (
        b"\x03\x03" + random + b"\x00" + b"\x13\x01" + b"\x00" + struct.pack(">H", len(exts)) + exts
    )
    return handshake(2, body)


class Sealer:
    """One direction's record protection, as a real peer would do it."""

    def __init__(self, secret: bytes):
        self.secret = secret
        self._keys()

    def _keys(self) -> None:
        key, iv = traffic_keys(self.secret, SUITE)
        self.aead, self.iv, self.seq = AESGCM(key), int.from_bytes(iv, "big"), 0

    def seal(self, ctype: int, data: bytes, pad: int = 0) -> bytes:
        inner = data + bytes([ctype]) + bytes(pad)
        header = struct.pack(">BHH", 23, 0x0303, len(inner) + 16)
        nonce = (self.iv ^ self.seq).to_bytes(12, "big")
        self.seq += 1
        return header + self.aead.encrypt(nonce, inner, header)

    def update(self) -> None:
        self.secret = next_secret(self.secret, SUITE)
        self._keys()


class Conversation:
    """A TLS 1.3 connection's two byte streams, built record by record."""

    def __init__(self) -> None:
        self.client_random = os.urandom(32)
        self.secrets = [os.urandom(32) for _ in LABELS]
        self.client = bytearray(record(22, client_hello(self.client_random), 0x0301))
        self.server = bytearray(record(22, server_hello(os.urandom(32))))
        self.c_hs, self.s_hs = Sealer(self.secrets[0]), Sealer(self.secrets[1])
        self.server += self.s_hs.seal(22, handshake(8, b"\x00\x00") + handshake(20, os.urandom(32)))
        self.client += record(20, b"\x01")  # the middlebox-compatibility CCS
        self.client += self.c_hs.seal(22, handshake(20, os.urandom(32)))
        self.c_app, self.s_app = Sealer(self.secrets[2]), Sealer(self.secrets[3])

    def key_log(self) -> str:
        return "".join(
            f"{label} {self.client_random.hex()} {secret.hex()}\n"
            for label, secret in zip(LABELS, self.secrets)
        )
