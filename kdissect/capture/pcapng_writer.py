"""A pcapng writer: what the proxy carries, or what the TUI exports, as a pcapng file: each proxied connection becomes a
synthetic TCP connection between the real client and the real broker (handshake, data
in order with real timestamps, FIN), which kdissect and Wireshark open like a capture.

Secrets (PLAIN passwords, SCRAM proofs, OAUTHBEARER tokens) are masked with ``*`` of the
same length unless asked otherwise, so framing and offsets stay valid.

With a TLS key log (``proxy --keylog``), the secrets of both TLS legs are written into
the recording too, as pcapng Decryption Secrets Blocks ahead of each connection, so a
TLS capture of the same traffic merged with it (mergecap) opens decrypted.
"""

from __future__ import annotations

import ipaddress
import os
import struct
import threading
import time
from collections.abc import Iterable

from ..protocol import Options, decode_request, decode_response, secrets
from ..protocol.apis import ENVELOPE
from ..protocol.message import sasl_token_message

LINKTYPE_RAW = 101  # packets start with the IP header
_MSS = 60000  # payload per synthetic segment (IPv4 max is 65535)
SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01


def _checksum(data: bytes) -> int:
    """The Internet checksum. The ones' complement sum of 16-bit words is the bytes'
    value modulo 0xFFFF (2**16 = 1 mod 0xFFFF), which one big-integer operation in C
    computes, instead of a Python loop over every word."""
    if len(data) % 2:
        data += b"\0"
    total = int.from_bytes(data, "big") % 0xFFFF
    if total == 0 and any(data):
        total = 0xFFFF  # a non-zero sum that folds to 0 is 0xFFFF
    return ~total & 0xFFFF


def _packet(
    src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int, payload: bytes
) -> bytes:
    tcp = struct.pack(
        "!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0
    )
    a, b = ipaddress.ip_address(src[0]), ipaddress.ip_address(dst[0])
    if a.version == 4:
        pseudo = a.packed + b.packed + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
        tcp = tcp[:16] + struct.pack("!H", _checksum(pseudo + tcp + payload)) + tcp[18:]
        ip = struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,
            20 + len(tcp) + len(payload),
            0,
            0x4000,
            64,
            6,
            0,
            a.packed,
            b.packed,
        )
        ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
        return ip + tcp + payload
    pseudo = a.packed + b.packed + struct.pack("!I3xB", len(tcp) + len(payload), 6)
    tcp = tcp[:16] + struct.pack("!H", _checksum(pseudo + tcp + payload)) + tcp[18:]
    ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp) + len(payload), 6, 64, a.packed, b.packed)
    return ip + tcp + payload


class Recorder:
    """A pcapng file being written (thread-safe), created readable by its owner only
    (it holds the traffic). Blocks are kept in memory and written whole by ``flush``
    (the proxy calls it every second and when it stops; past ``FLUSH_AT`` bytes it
    happens at once): the file always ends at a block boundary, so a reader following
    it (``tail -f | tshark -r -``) or a process killed with SIGKILL leaves a valid
    capture up to the last flush."""

    FLUSH_AT = 1 << 20

    def __init__(self, path: str, show_secrets: bool = False, keylog: str | None = None):
        self.file = open(path, "wb", buffering=0, opener=lambda p, flags: os.open(p, flags, 0o600))
        os.fchmod(self.file.fileno(), 0o600)  # an existing file keeps its mode else
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.keylog, self._keylog_done = keylog, 0
        self.lock = threading.Lock()
        self.options = Options(show_secrets=show_secrets)
        self.show_secrets = show_secrets
        shb_body = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)
        self._block(0x0A0D0D0A, shb_body)
        # interface: raw IP, microsecond timestamps (the default resolution)
        self._block(1, struct.pack("<HHI", LINKTYPE_RAW, 0, 0))

    def _block(self, kind: int, body: bytes) -> None:
        body += b"\0" * (-len(body) % 4)
        length = 12 + len(body)
        block = struct.pack("<II", kind, length) + body + struct.pack("<I", length)
        self._pending.append(block)
        self._pending_bytes += len(block)
        if self._pending_bytes >= self.FLUSH_AT:
            self._write()

    def _write(self) -> None:
        """Write the whole blocks kept (the caller holds the lock, or is alone)."""
        if self._pending and not self.file.closed:
            data = b"".join(self._pending)
            self._pending, self._pending_bytes = [], 0
            view = memoryview(data)  # unbuffered: whole blocks, in as few writes
            while view:  # as the kernel takes (one, for a file)
                view = view[self.file.write(view) or 0 :]

    def flush(self) -> None:
        with self.lock:
            self._write()

    def packet(self, data: bytes, ts: float | None = None) -> None:
        micros = int((time.time() if ts is None else ts) * 1_000_000)
        body = (
            struct.pack("<IIIII", 0, micros >> 32, micros & 0xFFFFFFFF, len(data), len(data)) + data
        )
        with self.lock:
            self._block(6, body)

    def connection(
        self, client: tuple[str, int], broker: tuple[str, int], ts: float | None = None
    ) -> RecordedConnection:
        self.secrets()
        return RecordedConnection(self, client, broker, ts)

    def secrets(self) -> None:
        """The key log's new lines as a Decryption Secrets Block (TLS key log)."""
        if self.keylog is None:
            return
        try:
            with open(self.keylog, "rb") as f:
                f.seek(self._keylog_done)
                more = f.read()
        except OSError:
            return
        more = more[: more.rfind(b"\n") + 1]  # whole lines only
        if more:
            self._keylog_done += len(more)
            with self.lock:
                self._block(10, struct.pack("<II", 0x544C534B, len(more)) + more)

    def close(self) -> None:
        self.secrets()
        with self.lock:
            self._write()
            self.file.close()

    def mask(
        self, frame: bytes, side: int, sasl_raw: bool, request: tuple[int, int] | None = None
    ) -> bytes:
        """``frame`` (size prefix and message) with its secrets masked: SASL tokens, and
        the credentials of every API secrets.py knows (SCRAM salted passwords,
        delegation-token HMACs, config passwords, Envelope's forwarded request).
        ``request``: for a response, its request's (api key, version)."""
        if self.show_secrets:
            return frame
        body = frame[4:]
        spans: Iterable = ()
        key = struct.unpack_from(">h", body)[0] if len(body) >= 2 else None
        if sasl_raw:
            spans = secrets.secret_spans(sasl_token_message(body, self.options).tree)
        elif side == 0 and key in _MASKED_REQUESTS:
            spans = secrets.secret_spans(decode_request(body, self.options).tree)
        elif side == 1 and request is not None and request[0] in secrets.SENSITIVE_APIS:
            spans = secrets.secret_spans(decode_response(body, *request, self.options).tree)
        masked = bytearray(frame)
        for start, end in spans:
            masked[4 + start : 4 + end] = b"*" * (end - start)
        return bytes(masked)


# requests that may carry a credential (read whole only then)
_MASKED_REQUESTS = secrets.SENSITIVE_APIS | {ENVELOPE}


_MAX_ASKED = 10_000  # sensitive requests awaiting their answer, per connection


class RecordedConnection:
    """One proxied connection as a synthetic TCP connection client ↔ broker."""

    def __init__(self, recorder: Recorder, client, broker, ts: float | None = None):
        """``ts``: when the handshake happened (default: now)."""
        self.r, self.client, self.broker = recorder, tuple(client), tuple(broker)
        self.seq = [1000, 5000]  # next sequence number per direction
        self.asked: dict[int, tuple[int, int]] = {}  # correlation id -> sensitive API asked
        r = recorder
        r.packet(_packet(self.client, self.broker, self.seq[0] - 1, 0, SYN, b""), ts)
        r.packet(
            _packet(self.broker, self.client, self.seq[1] - 1, self.seq[0], SYN | ACK, b""), ts
        )
        r.packet(_packet(self.client, self.broker, self.seq[0], self.seq[1], ACK, b""), ts)

    def frame(self, side: int, frame: bytes, ts: float, sasl_raw: bool = False) -> None:
        """One whole frame (size prefix and message), its secrets masked (a response's
        by its request's API, remembered by correlation id), then written."""
        request = None
        if side == 0 and len(frame) >= 12:
            key, version, corr = struct.unpack_from(">hhi", frame, 4)
            if key in secrets.SENSITIVE_APIS:
                if len(self.asked) >= _MAX_ASKED:  # the oldest never got an answer:
                    del self.asked[next(iter(self.asked))]  # forget it, not this one
                self.asked[corr] = (key, version)
        elif side == 1 and len(frame) >= 8:
            request = self.asked.pop(struct.unpack_from(">i", frame, 4)[0], None)
        self.data(side, self.r.mask(frame, side, sasl_raw, request), ts)

    def partial(self, side: int, data: bytes, ts: float, sasl_raw: bool = False) -> None:
        """The bytes of a message that never ended (the connection did first), or that
        are not Kafka: written as they came, size and header included, the rest masked
        when it may hold a secret (an API that carries them, an answer to one, or not
        readable as a header: raw SASL), as whole frames' secrets are."""
        keep = len(data)
        if not self.r.show_secrets:
            size = struct.unpack_from(">i", data)[0] if len(data) >= 4 else -1
            if sasl_raw or size < 0:  # a SASL token without a Kafka header, or no size:
                sensitive = True  # all of it may be secret
                keep = 4
            elif side == 0:
                key = struct.unpack_from(">h", data, 4)[0] if len(data) >= 6 else None
                sensitive = key is None or key in secrets.SENSITIVE_APIS
            else:
                corr = struct.unpack_from(">i", data, 4)[0] if len(data) >= 8 else None
                sensitive = corr is None or corr in self.asked
            if sensitive:
                keep = min(keep, 12)  # size, and a request's key, version, correlation id
        self.data(side, data[:keep] + b"*" * (len(data) - keep), ts)

    def data(self, side: int, payload: bytes, ts: float) -> None:
        src, dst = (self.client, self.broker) if side == 0 else (self.broker, self.client)
        for i in range(0, len(payload), _MSS):
            chunk = payload[i : i + _MSS]
            self.r.packet(
                _packet(src, dst, self.seq[side], self.seq[1 - side], PSH | ACK, chunk), ts
            )
            self.seq[side] += len(chunk)

    def close(self, ts: float | None = None) -> None:
        for side in (0, 1):
            src, dst = (self.client, self.broker) if side == 0 else (self.broker, self.client)
            self.r.packet(_packet(src, dst, self.seq[side], self.seq[1 - side], FIN | ACK, b""), ts)
            self.seq[side] += 1
