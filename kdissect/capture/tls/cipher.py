"""Record protection: one direction's keys and its decryption of a record (TLS 1.3
AEAD; TLS 1.2 AEAD and AES-CBC with HMAC, with or without encrypt-then-MAC). The
cryptography itself is the ``cryptography`` package's."""

from __future__ import annotations

import hmac
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from .schedule import HASHES, Suite

_SEQ = struct.Struct(">Q")
_AAD = struct.Struct(">QBHH")


class Decryptor:
    """Decrypts one direction's records. ``decrypt`` returns (content type, plaintext)
    or None when the record does not authenticate (wrong key, wrong sequence number,
    damage)."""

    def __init__(
        self,
        suite: Suite,
        key: bytes,
        iv: bytes,
        mac_key: bytes = b"",
        tls13: bool = True,
        encrypt_then_mac: bool = False,
    ):
        self.suite, self.iv, self.tls13 = suite, iv, tls13
        self.mac_key, self.etm = mac_key, encrypt_then_mac
        self.aead: AESGCM | ChaCha20Poly1305 | AESCCM | None
        if suite.cipher == "gcm":
            self.aead = AESGCM(key)
        elif suite.cipher == "chacha":
            self.aead = ChaCha20Poly1305(key)
        elif suite.cipher == "ccm":
            self.aead = AESCCM(key)
        else:
            self.aead = None
            self.key = key
        self.ivint = int.from_bytes(iv, "big") if len(iv) == 12 else 0

    def decrypt(
        self, seq: int, ctype: int, version: int, header: bytes, payload
    ) -> tuple[int, bytes] | None:
        """``payload``: bytes or a memoryview of them (read in place)."""
        aead = self.aead
        try:
            if self.tls13:
                if aead is None:  # every TLS 1.3 suite is an AEAD
                    return None
                inner = aead.decrypt((self.ivint ^ seq).to_bytes(12, "big"), payload, header)
                end = len(inner)
                while end and inner[end - 1] == 0:  # padding after the real type
                    end -= 1
                if not end:
                    return None
                return inner[end - 1], inner[: end - 1]
            if aead is not None:
                return ctype, self._aead12(aead, seq, ctype, version, payload)
            return self._cbc(seq, ctype, version, bytes(payload))
        except (InvalidTag, ValueError):
            return None

    def _aead12(
        self,
        aead: AESGCM | ChaCha20Poly1305 | AESCCM,
        seq: int,
        ctype: int,
        version: int,
        payload: bytes,
    ) -> bytes:
        if self.suite.cipher == "chacha":  # RFC 7905: no explicit nonce
            nonce, data = (self.ivint ^ seq).to_bytes(12, "big"), payload
        else:  # RFC 5288: 8 explicit bytes
            nonce, data = self.iv + payload[:8], payload[8:]
        if len(data) < 16:
            raise ValueError("short")
        return aead.decrypt(nonce, data, _AAD.pack(seq, ctype, version, len(data) - 16))

    def _cbc(self, seq: int, ctype: int, version: int, payload: bytes) -> tuple[int, bytes] | None:
        fn, mac_len = HASHES[self.suite.mac]  # type: ignore[index]
        if self.etm:
            body, mac = payload[:-mac_len], payload[-mac_len:]
            want = hmac.new(
                self.mac_key, _AAD.pack(seq, ctype, version, len(body)) + body, fn
            ).digest()
            if len(payload) < mac_len + 32 or not hmac.compare_digest(mac, want):
                return None
        else:
            body = payload
        if len(body) < 32 or len(body) % 16:
            return None
        d = Cipher(algorithms.AES(self.key), modes.CBC(body[:16])).decryptor()
        plain = d.update(body[16:]) + d.finalize()
        pad = plain[-1]
        if pad + 1 > len(plain) - (0 if self.etm else mac_len):
            return None
        plain = plain[: -(pad + 1)]
        if self.etm:
            return ctype, plain
        data, mac = plain[:-mac_len], plain[-mac_len:]
        want = hmac.new(self.mac_key, _AAD.pack(seq, ctype, version, len(data)) + data, fn).digest()
        return (ctype, data) if hmac.compare_digest(mac, want) else None
