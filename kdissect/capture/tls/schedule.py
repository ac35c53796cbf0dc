"""Key schedules: TLS 1.3 (RFC 8446 section 7: HKDF-Expand-Label, traffic keys, key
updates) and the TLS 1.2 PRF (RFC 5246 section 5: key block from the master secret),
and the table of cipher suites kdissect can decrypt. Pure functions of bytes."""

from __future__ import annotations

import hashlib
import hmac
import struct

from ...protocol.plain import Frozen

HASHES = {
    "sha256": (hashlib.sha256, 32),
    "sha384": (hashlib.sha384, 48),
    "sha1": (hashlib.sha1, 20),
}


class Suite(Frozen):
    """A cipher suite kdissect can decrypt."""

    __slots__ = _fields = ("code", "name", "tls13", "cipher", "key_len", "iv_len", "hash", "mac")

    def __init__(
        self,
        code: int,
        name: str,
        tls13: bool,
        cipher: str,  # "gcm", "chacha", "ccm", "cbc"
        key_len: int,
        iv_len: int,  # fixed IV bytes from the key schedule (GCM 1.2: 4; CBC: 0)
        hash: str,  # the PRF / HKDF hash
        mac: str | None = None,
    ):  # CBC suites: the record MAC's hash
        self.code, self.name, self.tls13, self.cipher = code, name, tls13, cipher
        self.key_len, self.iv_len, self.hash, self.mac = key_len, iv_len, hash, mac


def _suites() -> dict[int, Suite]:
    table: dict[int, Suite] = {}

    def add(code, name, tls13, cipher, key_len, iv_len, hash_, mac=None):
        table[code] = Suite(code, name, tls13, cipher, key_len, iv_len, hash_, mac)

    add(0x1301, "TLS_AES_128_GCM_SHA256", True, "gcm", 16, 12, "sha256")
    add(0x1302, "TLS_AES_256_GCM_SHA384", True, "gcm", 32, 12, "sha384")
    add(0x1303, "TLS_CHACHA20_POLY1305_SHA256", True, "chacha", 32, 12, "sha256")
    add(0x1304, "TLS_AES_128_CCM_SHA256", True, "ccm", 16, 12, "sha256")
    for kx, base in (
        ("ECDHE_RSA", {0xC02F: 16, 0xC030: 32}),
        ("ECDHE_ECDSA", {0xC02B: 16, 0xC02C: 32}),
        ("DHE_RSA", {0x009E: 16, 0x009F: 32}),
        ("RSA", {0x009C: 16, 0x009D: 32}),
    ):
        for code, key in base.items():
            h = "sha256" if key == 16 else "sha384"
            add(code, f"TLS_{kx}_WITH_AES_{key * 8}_GCM_{h.upper()}", False, "gcm", key, 4, h)
    for code, kx in ((0xCCA8, "ECDHE_RSA"), (0xCCA9, "ECDHE_ECDSA"), (0xCCAA, "DHE_RSA")):
        add(code, f"TLS_{kx}_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, 12, "sha256")
    for code, kx, key, mac in (
        (0xC013, "ECDHE_RSA", 16, "sha1"),
        (0xC014, "ECDHE_RSA", 32, "sha1"),
        (0xC009, "ECDHE_ECDSA", 16, "sha1"),
        (0xC00A, "ECDHE_ECDSA", 32, "sha1"),
        (0xC027, "ECDHE_RSA", 16, "sha256"),
        (0xC028, "ECDHE_RSA", 32, "sha384"),
        (0xC023, "ECDHE_ECDSA", 16, "sha256"),
        (0xC024, "ECDHE_ECDSA", 32, "sha384"),
        (0x0033, "DHE_RSA", 16, "sha1"),
        (0x0039, "DHE_RSA", 32, "sha1"),
        (0x0067, "DHE_RSA", 16, "sha256"),
        (0x006B, "DHE_RSA", 32, "sha256"),
        (0x002F, "RSA", 16, "sha1"),
        (0x0035, "RSA", 32, "sha1"),
        (0x003C, "RSA", 16, "sha256"),
        (0x003D, "RSA", 32, "sha256"),
    ):
        macname = "SHA" if mac == "sha1" else mac.upper()
        add(
            code,
            f"TLS_{kx}_WITH_AES_{key * 8}_CBC_{macname}",
            False,
            "cbc",
            key,
            0,
            "sha384" if mac == "sha384" else "sha256",
            mac,
        )
    return table


SUITES = _suites()


def suite_name(code: int) -> str:
    s = SUITES.get(code)
    return s.name if s else f"cipher suite {code:#06x}"


# -- TLS 1.3 ---------------------------------------------------------------------------


def hkdf_expand_label(secret: bytes, label: str, context: bytes, length: int, hash_: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1) with the "tls13 " prefix."""
    full = b"tls13 " + label.encode()
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    return hkdf_expand(secret, info, length, hash_)


def hkdf_expand(prk: bytes, info: bytes, length: int, hash_: str) -> bytes:
    fn, size = HASHES[hash_]
    out, block, i = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([i]), fn).digest()
        out += block
        i += 1
    return out[:length]


def traffic_keys(secret: bytes, suite: Suite) -> tuple[bytes, bytes]:
    """(write key, write IV) of a TLS 1.3 traffic secret."""
    return (
        hkdf_expand_label(secret, "key", b"", suite.key_len, suite.hash),
        hkdf_expand_label(secret, "iv", b"", 12, suite.hash),
    )


def next_secret(secret: bytes, suite: Suite) -> bytes:
    """The traffic secret after a KeyUpdate (RFC 8446 7.2)."""
    return hkdf_expand_label(secret, "traffic upd", b"", HASHES[suite.hash][1], suite.hash)


# -- TLS 1.2 ---------------------------------------------------------------------------


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash_: str) -> bytes:
    """The TLS 1.2 PRF: P_hash(secret, label + seed) (RFC 5246 5)."""
    fn = HASHES[hash_][0]
    seed = label + seed
    out, a = b"", seed
    while len(out) < length:
        a = hmac.new(secret, a, fn).digest()
        out += hmac.new(secret, a + seed, fn).digest()
    return out[:length]


class Keys12(Frozen):
    """Both sides' MAC keys, keys and IVs from a TLS 1.2 key block."""

    __slots__ = _fields = (
        "client_mac",
        "server_mac",
        "client_key",
        "server_key",
        "client_iv",
        "server_iv",
    )

    def __init__(
        self,
        client_mac: bytes,
        server_mac: bytes,
        client_key: bytes,
        server_key: bytes,
        client_iv: bytes,
        server_iv: bytes,
    ):
        self.client_mac, self.server_mac = client_mac, server_mac
        self.client_key, self.server_key = client_key, server_key
        self.client_iv, self.server_iv = client_iv, server_iv


def key_block(master: bytes, client_random: bytes, server_random: bytes, suite: Suite) -> Keys12:
    """The TLS 1.2 key block (RFC 5246 6.3), split into both sides' keys."""
    mac_len = HASHES[suite.mac][1] if suite.mac else 0
    sizes = (mac_len, mac_len, suite.key_len, suite.key_len, suite.iv_len, suite.iv_len)
    block = prf(master, b"key expansion", server_random + client_random, sum(sizes), suite.hash)
    parts, pos = [], 0
    for n in sizes:
        parts.append(block[pos : pos + n])
        pos += n
    return Keys12(*parts)
