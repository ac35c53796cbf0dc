"""The TLS record header and the handshake messages kdissect reads: ClientHello and
ServerHello (randoms, version, cipher suite, server name), as pure functions of bytes.
Malformed input gives None, never an exception."""

from __future__ import annotations

from ...protocol.plain import Compared

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET, FINISHED, KEY_UPDATE = 1, 2, 4, 20, 24
HELLO_REQUEST = 0
MAX_RECORD = (1 << 14) + 2048  # the largest ciphertext record RFC 5246 allows
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
VERSIONS = {
    0x0300: "SSL 3.0",
    0x0301: "TLS 1.0",
    0x0302: "TLS 1.1",
    0x0303: "TLS 1.2",
    0x0304: "TLS 1.3",
}
ALERTS = {
    0: "close_notify",
    10: "unexpected_message",
    20: "bad_record_mac",
    22: "record_overflow",
    40: "handshake_failure",
    42: "bad_certificate",
    43: "unsupported_certificate",
    44: "certificate_revoked",
    45: "certificate_expired",
    46: "certificate_unknown",
    47: "illegal_parameter",
    48: "unknown_ca",
    49: "access_denied",
    50: "decode_error",
    51: "decrypt_error",
    70: "protocol_version",
    71: "insufficient_security",
    80: "internal_error",
    86: "inappropriate_fallback",
    90: "user_canceled",
    100: "no_renegotiation",
    109: "missing_extension",
    110: "unsupported_extension",
    112: "unrecognized_name",
    113: "bad_certificate_status_response",
    115: "unknown_psk_identity",
    116: "certificate_required",
    120: "no_application_protocol",
}


def version_name(v: int | None) -> str | None:
    return None if v is None else VERSIONS.get(v, f"version {v:#06x}")


def alert_text(level: int, description: int) -> str:
    name = ALERTS.get(description, f"alert {description}")
    return f"{'fatal' if level == 2 else 'warning'} {name} ({description})"


def record_header(buf, pos: int = 0) -> tuple[int, int, int] | None:
    """(content type, version, length) of a plausible record header at ``pos``."""
    if len(buf) - pos < 5:
        return None
    ctype, major, minor, length = (
        buf[pos],
        buf[pos + 1],
        buf[pos + 2],
        (buf[pos + 3] << 8) | buf[pos + 4],
    )
    if (
        not CHANGE_CIPHER_SPEC <= ctype <= HEARTBEAT
        or major != 3
        or minor > 4
        or length > MAX_RECORD
    ):
        return None
    return ctype, (major << 8) | minor, length


def starts_client_hello(data) -> bool | None:
    """Does a stream start with a TLS ClientHello? None: too few bytes to tell."""
    if not data:
        return None
    if data[0] != HANDSHAKE:
        return False
    if len(data) < 6:
        return None
    return data[1] == 3 and data[2] <= 4 and data[5] == CLIENT_HELLO


def starts_record(data) -> bool | None:
    """Does a stream start with a TLS record (a capture that began mid-connection)?"""
    if not data:
        return None
    if not CHANGE_CIPHER_SPEC <= data[0] <= HEARTBEAT:
        return False
    if len(data) < 5:
        return None
    head = record_header(data)
    if head is None or head[2] == 0:
        return False
    nxt = 5 + head[2]
    return True if len(data) <= nxt else record_header(data, nxt) is not None


def record_chain(data, limit: int = MAX_RECORD + 5) -> int | None:
    """Where whole TLS records start in a stream begun inside one (a capture that began
    mid-record): the first offset before ``limit`` holding a record header followed by
    another right after its record (two chained headers: random bytes almost never
    do), or None."""
    end = min(len(data), limit)
    found = []
    for ctype in (APPLICATION_DATA, HANDSHAKE, ALERT, CHANGE_CIPHER_SPEC):
        pos = data.find(bytes([ctype, 3]), 0, end)
        while pos >= 0:
            head = record_header(data, pos)
            if head is not None and head[2] and record_header(data, pos + 5 + head[2]) is not None:
                found.append(pos)
                break
            pos = data.find(bytes([ctype, 3]), pos + 1, end)
    return min(found, default=None)


class Hello(Compared):
    """What a ClientHello or ServerHello says."""

    _fields = (
        "random",
        "version",
        "session_id",
        "suites",
        "server_name",
        "alpn",
        "ticket",
        "encrypt_then_mac",
        "retry",
        "psk",
    )

    def __init__(
        self,
        random: bytes,
        version: int,  # the negotiated (ServerHello) or highest offered version
        session_id: bytes,
        suites: list[int] | None = None,  # offered, or [the chosen one]
        server_name: str | None = None,
        alpn: list[str] | None = None,
        ticket: bytes | None = None,  # ClientHello session_ticket extension (TLS 1.2)
        encrypt_then_mac: bool = False,  # ServerHello: RFC 7366 for CBC suites
        retry: bool = False,  # a HelloRetryRequest (TLS 1.3)
        psk: bool = False,
    ):  # ServerHello: a pre-shared key (TLS 1.3 resumption)
        self.random, self.version, self.session_id = random, version, session_id
        self.suites = [] if suites is None else suites
        self.server_name = server_name
        self.alpn = [] if alpn is None else alpn
        self.ticket, self.encrypt_then_mac, self.retry, self.psk = (
            ticket,
            encrypt_then_mac,
            retry,
            psk,
        )


class _Reader:
    __slots__ = ("b", "p", "end")

    def __init__(self, b: bytes, p: int = 0, end: int | None = None):
        self.b, self.p, self.end = b, p, len(b) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > self.end:
            raise ValueError("short")
        self.p += n
        return self.b[self.p - n : self.p]

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big")

    def vec(self, n: int) -> bytes:
        return self.take(self.uint(n))


def parse_hello(body: bytes, client: bool) -> Hello | None:
    """A ClientHello (``client``) or ServerHello body (after the 4-byte handshake
    header); None when malformed."""
    try:
        r = _Reader(body)
        version = r.uint(2)
        random = r.take(32)
        session_id = r.vec(1)
        if client:
            raw = r.vec(2)
            suites = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw) - 1, 2)]
            r.vec(1)
        else:
            suites = [r.uint(2)]
            r.take(1)
        hello = Hello(random, version, session_id, suites, retry=random == HRR_RANDOM)
        if r.p < r.end:
            _extensions(hello, r.vec(2), client)
        return hello
    except ValueError:
        return None


def _extensions(hello: Hello, data: bytes, client: bool) -> None:
    r = _Reader(data)
    while r.p < r.end:
        kind, ext = r.uint(2), r.vec(2)
        e = _Reader(ext)
        if kind == 0 and client and ext:  # server_name
            names = _Reader(e.vec(2))
            while names.p < names.end:
                name_type, name = names.uint(1), names.vec(2)
                if name_type == 0:
                    hello.server_name = name.decode("ascii", "replace")
        elif kind == 43:  # supported_versions
            if client:
                raw = e.vec(1)
                offered = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw) - 1, 2)]
                known = [v for v in offered if v in VERSIONS]
                if known:
                    hello.version = max(known)
            else:
                hello.version = e.uint(2)
        elif kind == 16 and ext:  # ALPN
            names = _Reader(e.vec(2))
            while names.p < names.end:
                hello.alpn.append(names.vec(1).decode("ascii", "replace"))
        elif kind == 35 and client:
            hello.ticket = ext or None
        elif kind == 22 and not client:
            hello.encrypt_then_mac = True
        elif kind == 41 and not client:
            hello.psk = True
