"""One TLS connection: both directions' records read, the handshake followed (randoms,
version, cipher suite, server name), keys found in the key log, records decrypted, and
the plaintext handed on by direction with its own stream offsets.

Side 0 is the client (who sent the ClientHello), side 1 the server. ``emit(side,
offset, plaintext, ts, frame)`` and ``emit_gap(side, offset, length, ts, frame)`` take
the plaintext streams; ``facts`` says what the connection is, and its ``findings``
what went wrong. Memory per direction: one record and one handshake message."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...protocol.findings import Finding
from ...protocol.plain import Compared
from ..native import record_cipher_class
from .handshake import (
    ALERT,
    APPLICATION_DATA,
    CHANGE_CIPHER_SPEC,
    CLIENT_HELLO,
    FINISHED,
    HANDSHAKE,
    HELLO_REQUEST,
    KEY_UPDATE,
    NEW_SESSION_TICKET,
    SERVER_HELLO,
    Hello,
    alert_text,
    parse_hello,
    record_header,
    version_name,
)
from .keylog import KeyLog
from .schedule import SUITES, Suite, key_block, next_secret, suite_name, traffic_keys

if TYPE_CHECKING:  # imported when keys are found: cryptography is a tenth of start-up
    from .cipher import Decryptor

MAX_HANDSHAKE = 1 << 20  # a handshake message longer than this is not followed
MAX_RESYNC_TRIES = 4096  # sequence numbers tried after lost bytes, per candidate
# trial decryptions after one loss, over every candidate header: bytes that merely look
# like record headers (17 03 ..) once cost 4,096 each (1.4 MB: 42 CPU-s)
MAX_RESYNC_TOTAL = 16384
MAX_FAILED_REPORTED = 3  # tls_decrypt_failed findings per direction (then counted)
MAX_WAITING = 32  # encrypted records held while their keys may still be logged


class TlsFacts(Compared):
    """What a TLS connection is, for every view (text, JSON lines, stats, the TUI)."""

    _fields = (
        "client",
        "server",
        "first_frame",
        "ts",
        "stream",
        "server_name",
        "version",
        "cipher",
        "alpn",
        "resumed",
        "state",
        "records",
        "decrypted",
        "failed",
        "plaintext_bytes",
        "findings",
    )

    def __init__(
        self,
        client: tuple[str, int],
        server: tuple[str, int],
        first_frame: int = 0,
        ts: float = 0.0,
    ) -> None:
        self.client, self.server, self.first_frame, self.ts = client, server, first_frame, ts
        self.stream: int | None = None  # the Kafka connection's number, once its plaintext is Kafka
        self.server_name: str | None = None  # SNI from the ClientHello
        self.version: str | None = None  # negotiated (ServerHello), else the highest offered
        self.cipher: str | None = None  # negotiated cipher suite
        self.alpn: list[str] = []
        self.resumed = False
        self.state = "handshake"  # see STATES
        self.records = 0  # records read (both directions)
        self.decrypted = 0  # records decrypted
        self.failed = 0  # records that did not authenticate
        self.plaintext_bytes = 0  # application data handed on
        self.record_bytes = 0  # bytes of the records read (headers too)
        self.findings: list[Finding] = []
        # its ClientHellos' randoms, which name its secrets in a key log (an export
        # carries the secrets of its own connections only)
        self.client_randoms: list[bytes] = []

    STATES = {
        "decrypted": "decrypted",
        "no keys": "no keys in the key log",
        "mid-connection": "the capture began after the handshake",
        "mid-record": "the capture began inside a TLS record",
        "failed": "decryption failed",
        "handshake": "handshake only (no data)",
        "unsupported": "cipher suite kdissect cannot decrypt",
    }

    @property
    def hello_seen(self) -> bool:
        """Its ClientHello was captured (so ``client`` is the one who sent it)."""
        return self.state not in ("mid-connection", "mid-record")

    @property
    def is_decrypted(self) -> bool:
        return self.decrypted > 0

    def describe(self) -> str:
        bits = [b for b in (self.version, self.cipher) if b]
        if self.server_name:
            bits.append(f"server name {self.server_name}")
        if self.resumed:
            bits.append("resumed")
        return ", ".join(bits) or "handshake not seen"

    def to_json(self) -> dict:
        return {
            "stream": self.stream,
            "client": f"{self.client[0]}:{self.client[1]}",
            "server": f"{self.server[0]}:{self.server[1]}",
            "frame": self.first_frame,
            "server_name": self.server_name,
            "version": self.version,
            "cipher": self.cipher,
            "alpn": self.alpn,
            "resumed": self.resumed,
            "state": self.state,
            "records": self.records,
            "records_decrypted": self.decrypted,
            "records_failed": self.failed,
            "plaintext_bytes": self.plaintext_bytes,
            "findings": [f.to_json() for f in self.findings],
        }


def decryptor(
    suite: Suite,
    key: bytes,
    iv: bytes,
    mac_key: bytes = b"",
    tls13: bool = True,
    encrypt_then_mac: bool = False,
) -> Decryptor:
    """One direction's record decryptor: the compiled one for the AEAD suites it knows
    (its ``open_records`` then decrypts runs of application data in one call), else
    cipher.py's (which imports ``cryptography`` only then)."""
    compiled = record_cipher_class()
    if compiled is not None and suite.cipher in ("gcm", "chacha"):
        return compiled(suite.cipher, key, iv, tls13)
    from .cipher import Decryptor

    return Decryptor(suite, key, iv, mac_key, tls13, encrypt_then_mac)


class _Side:
    __slots__ = (
        "buf",
        "pos",
        "plain",
        "cipher",
        "pending",
        "seq",
        "hs",
        "secret",
        "app_secret",
        "lost",
        "broken",
        "failed",
        "hs_cipher_active",
        "encrypted",
        "native",
        "tried",
    )

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0  # next unread byte of buf
        self.plain = 0  # plaintext stream offset handed on so far
        self.cipher: Decryptor | None = None
        self.pending: Decryptor | None = None  # TLS 1.2: active after ChangeCipherSpec
        self.seq = 0
        self.hs = bytearray()  # handshake bytes not yet a whole message
        self.secret: bytes | None = None  # TLS 1.3: current traffic secret
        self.app_secret: bytes | None = None  # TLS 1.3: after this side's Finished
        self.lost = 0  # encrypted bytes lost just before buf (resync)
        self.broken = False  # no longer reads as TLS records
        self.failed = 0  # records that failed to decrypt
        self.hs_cipher_active = False  # TLS 1.3: handshake keys in use
        self.encrypted = False  # TLS 1.2: after ChangeCipherSpec (keys or not)
        self.native = False  # the compiled reassembler decrypts (``hand_over``)
        self.tried = 0  # trial decryptions since the last loss (resync)


class TlsSession:
    def __init__(
        self,
        facts: TlsFacts,
        keys: KeyLog | None,
        emit: Callable[[int, int, bytes, float, int], None],
        emit_gap: Callable[[int, int, int, float, int], None],
        resumable: dict[bytes, bytes] | None = None,
        mid_connection: bool = False,
        ready: Callable[[int], None] = lambda side: None,
        budget: Any = None,
    ):
        """``ready(side)``: a direction now has application keys the compiled reassembler
        could use (``hand_over``). ``budget``: the process's memory budget
        (``stream.budget.Budget``), charged with the partial records and handshake
        messages held."""
        self.facts, self.keys, self.emit, self.emit_gap = facts, keys, emit, emit_gap
        self.budget = budget
        self.ready = ready
        self.resumable = resumable if resumable is not None else {}  # session id/ticket -> master
        self.sides = (_Side(), _Side())
        self.client_hello: Hello | None = None
        self.suite: Suite | None = None
        self.tls13 = False
        self.master: bytes | None = None
        self.handshakes = 0
        self.keyed = False  # keys were found for the current handshake
        self.server_hello: Hello | None = None
        self.awaiting_keys = False  # the key log may still get this connection's keys
        self.waiting: list[tuple] = []  # records held meanwhile (both sides, in order)
        if mid_connection:
            self.facts.state = "mid-connection"
            self._finding(
                "tls_undecryptable",
                "the capture began after the TLS handshake: "
                "without its ClientHello the key log cannot be searched",
            )

    def begun_inside(self, first: list[int | None]) -> None:
        """The capture began inside a record: each side's bytes up to ``first[side]``
        (where its first whole record starts; None: not seen yet) belong to records
        begun before it. Both sides read on from their next record header (``_resync``)."""
        said = []
        for side, s in enumerate(self.sides):
            s.lost = max(s.lost, 1)
            if first[side]:
                said.append(f"{first[side]} bytes from the {self._who(side)}")
        self.facts.state = "mid-record"
        self._finding(
            "tls_undecryptable",
            "the capture began inside a TLS record (whole "
            "records found further on by their headers)"
            + (f": {' and '.join(said)} before the first whole record" if said else ""),
        )

    # -- input ----------------------------------------------------------------------------

    def data(self, side: int, payload: bytes, ts: float, frame: int) -> None:
        """The next bytes of a direction. Records are read in place from ``payload``; only
        a record split over segments is copied (once, when whole)."""
        s = self.sides[side]
        if s.native:  # decrypted by the compiled reassembler
            self.emit(side, s.plain, payload, ts, frame)
            s.plain += len(payload)
            self.facts.plaintext_bytes += len(payload)
            return
        self._read(side, s, payload, ts, frame)
        if self.budget is not None:
            self._charge(side, s)

    def _charge(self, side: int, s: _Side) -> None:
        """Tell the budget what the direction holds of a handshake message begun (up to
        ``MAX_HANDSHAKE`` each: many connections' together are bounded only there). (A
        record begun, at most ``MAX_RECORD`` bytes, is not charged: the compiled
        reassembler holds it too, outside the budget, and both must read alike.)"""
        assert self.budget is not None, "charged only with a budget"
        if s.broken:  # nothing more is read there (records replayed may have added some)
            s.hs = bytearray()
        held = len(s.hs)
        if held or self.budget.holds(s):
            self.budget.set(s, held, lambda: self._give_up(side))

    def _give_up(self, side: int) -> None:
        """The budget is spent and this direction's partial data is the oldest: it goes,
        and with it the rest of the direction (its records can no longer be followed)."""
        s = self.sides[side]
        held = len(s.hs)
        s.buf.clear()
        s.pos = 0
        s.hs = bytearray()
        s.broken = True
        self._finding(
            "memory_budget",
            f"{self._who(side)}: {held} bytes of a partial TLS handshake message given "
            "up (--max-memory): the rest of this direction is not read",
            side,
        )

    def _read(self, side: int, s: _Side, payload: bytes, ts: float, frame: int) -> None:
        if s.broken:
            return
        if s.lost:  # after lost bytes: find the next record first
            s.buf += payload
            if not self._resync(side, s):
                del s.buf[: s.pos]
                s.pos = 0
                return
            payload = bytes(s.buf[s.pos :])
            s.buf.clear()
            s.pos = 0
        view = memoryview(payload)
        if s.buf:  # a record begun in an earlier segment
            if len(s.buf) < 5:
                take = 5 - len(s.buf)
                s.buf += view[:take]
                view = view[take:]
                if len(s.buf) < 5:
                    return
            head = record_header(s.buf)
            if head is None:
                self._not_a_record(side, s, s.buf, 0)
                return
            need = 5 + head[2] - len(s.buf)
            if len(view) < need:
                s.buf += view
                return
            s.buf += view[:need]
            view = view[need:]
            record = bytes(s.buf)
            s.buf.clear()
            self._record(side, s, head[0], head[1], record[:5], record[5:], ts, frame)
        pos, n = 0, len(view)
        while n - pos >= 5 and not s.broken:
            opener = getattr(s.cipher, "open_records", None)
            if opener is not None and view[pos] == APPLICATION_DATA:
                plain, count, pos, seq = opener(view, pos, n, s.seq)
                self._opened(side, s, plain, count, seq, ts, frame)
                if n - pos < 5:
                    break
            head = record_header(view, pos)
            if head is None:
                self._not_a_record(side, s, view, pos)
                return
            end = pos + 5 + head[2]
            if end > n:
                break
            self._record(
                side,
                s,
                head[0],
                head[1],
                bytes(view[pos : pos + 5]),
                view[pos + 5 : end],
                ts,
                frame,
            )
            pos = end
        if pos < n and not s.broken:
            s.buf += view[pos:]

    # -- the compiled reassembler decrypting (capture/native.py, native/src/tls.rs) -------

    def hand_over(self, side: int) -> tuple | bool:
        """(keys, next sequence number, plaintext offset, the record begun) when the
        compiled reassembler can decrypt this direction's application data from here
        (it then gives the direction back with ``given_back``); False: not now, maybe
        later; True: not with these keys."""
        s = self.sides[side]
        if s.broken or s.cipher is None or not hasattr(s.cipher, "open_records"):
            return True
        if (
            s.lost
            or s.hs
            or self.waiting
            or (s.buf and s.buf[0] != APPLICATION_DATA)
            or (s.hs_cipher_active if self.tls13 else not s.encrypted)
        ):
            return False
        begun = bytes(s.buf)
        s.buf.clear()
        s.native = True
        if self.budget is not None:
            self.budget.drop(s)  # (the record begun is the compiled reassembler's now)
        return s.cipher, s.seq, s.plain, begun

    def given_back(
        self, side: int, seq: int, records: int, plain: int, rest: bytes, ts: float, frame: int
    ) -> None:
        """The compiled reassembler stopped decrypting at ``rest`` (a record that is not
        application data, or does not authenticate, or the direction's end, a gap):
        ``records`` were decrypted there, up to plaintext offset ``plain``."""
        s, f = self.sides[side], self.facts
        s.native = False
        s.seq = seq
        f.records += records
        f.decrypted += records
        # the plaintext handed on straight to Kafka meanwhile (sources/pcap.py ``direct``)
        assert s.plain <= plain, "the compiled decryptor's offset is the session's or beyond"
        f.plaintext_bytes += plain - s.plain
        s.plain = plain
        if rest:
            self.data(side, rest, ts, frame)
        self.ready(side)

    def _opened(
        self, side: int, s: _Side, plain: bytes, count: int, seq: int, ts: float, frame: int
    ) -> None:
        """What the compiled decryptor's ``open_records`` did: ``count`` application-data
        records, read as ``_record`` reads them (their plaintext joined: one emit); the
        record at ``pos`` (if whole) is then ``_record``'s."""
        if count:
            f = self.facts
            f.records += count
            f.decrypted += count
            s.seq = seq
            if plain:
                self.emit(side, s.plain, plain, ts, frame)
                s.plain += len(plain)
                f.plaintext_bytes += len(plain)

    def _not_a_record(self, side: int, s: _Side, buf, pos: int) -> None:
        s.broken = True
        self._finding(
            "tls_decrypt_failed",
            f"{self._who(side)}: bytes at this point are not a TLS record "
            f"(type {buf[pos]}, length {(buf[pos + 3] << 8) | buf[pos + 4]}): "
            f"the rest of this direction is not read",
            side,
        )
        s.buf.clear()

    def gap(self, side: int, length: int, ts: float, frame: int) -> None:
        """``length`` encrypted bytes lost: the partial record goes, the plaintext stream
        gets a gap of about that size, and reading resumes at the next record that
        decrypts (its sequence number found by trying)."""
        s = self.sides[side]
        lost = length + len(s.buf) - s.pos
        s.buf.clear()
        s.pos = 0
        s.lost += lost
        if s.cipher is not None:
            self.emit_gap(side, s.plain, lost, ts, frame)
            s.plain += lost
        if self.budget is not None:
            self._charge(side, s)

    def finish(self) -> TlsFacts:
        f = self.facts
        if self.budget is not None:
            for s in self.sides:
                self.budget.drop(s)
        if self.waiting:
            self.waiting = []
            self._undecryptable()
        if f.decrypted:
            f.state = "decrypted"
        elif f.failed:
            f.state = "failed"
        return f

    # -- records ---------------------------------------------------------------------------

    def _record(
        self,
        side: int,
        s: _Side,
        ctype: int,
        version: int,
        header: bytes,
        payload: bytes | memoryview,
        ts: float,
        frame: int,
    ) -> None:
        self.facts.records += 1
        self.facts.record_bytes += 5 + len(payload)
        if (
            s.cipher is not None
            and ctype != CHANGE_CIPHER_SPEC
            and (ctype == APPLICATION_DATA or not self.tls13)
        ):
            out = s.cipher.decrypt(s.seq, ctype, version, header, payload)
            s.seq += 1
            if out is None:
                self._failed(side, s, len(payload), ts, frame)
                return
            self.facts.decrypted += 1
            ctype, payload = out
        elif ctype == APPLICATION_DATA or s.encrypted:
            if self.awaiting_keys:
                self._wait_for_keys(side, ctype, version, header, payload, ts, frame)
            else:
                self._undecryptable()
            return
        if ctype == APPLICATION_DATA:
            if payload:  # decrypted: bytes (bytes() of bytes is no copy)
                self.emit(side, s.plain, bytes(payload), ts, frame)
                s.plain += len(payload)
                self.facts.plaintext_bytes += len(payload)
        elif ctype == HANDSHAKE:
            self._handshake_bytes(side, s, payload)
        elif ctype == CHANGE_CIPHER_SPEC:
            if not self.tls13:
                s.encrypted = True
                s.cipher, s.pending, s.seq = s.pending, None, 0
                self.ready(side)
        elif ctype == ALERT and len(payload) >= 2:
            if payload[1] != 0:  # close_notify is how TLS ends
                self._finding(
                    "tls_alert",
                    f"{self._who(side)} sent {alert_text(payload[0], payload[1])}",
                    side,
                )

    def _failed(self, side: int, s: _Side, size: int, ts: float, frame: int) -> None:
        self.facts.failed += 1
        s.failed += 1
        if s.failed <= MAX_FAILED_REPORTED:
            why = (
                "wrong key in the key log, or a damaged record"
                if self.facts.decrypted or s.failed > 1
                else "wrong key in the key log (or a damaged record)"
            )
            self._finding(
                "tls_decrypt_failed",
                f"{self._who(side)}: record {s.seq - 1} does not authenticate: {why}",
                side,
            )
        if s.failed > 1 and not self.facts.decrypted and s.seq == s.failed:
            s.broken = True  # nothing ever decrypted: the key is wrong
            return
        self.emit_gap(side, s.plain, size, ts, frame)
        s.plain += size

    def _undecryptable(self) -> None:
        if self.facts.state == "handshake":
            self.facts.state = "no keys"
            why = (
                "no keys in the key log for this connection's client random"
                if self.keys is not None and (len(self.keys) or self.keys.files)
                else "no key log given (--keylog FILE or SSLKEYLOGFILE)"
            )
            if self.client_hello is None:
                why = "the ClientHello was not captured whole"
            elif self.suite is None:
                why = "the ServerHello was not captured"
            self._finding("tls_undecryptable", why)

    # -- handshake --------------------------------------------------------------------------

    def _handshake_bytes(self, side: int, s: _Side, data: bytes | memoryview) -> None:
        s.hs += data
        while len(s.hs) >= 4:
            length = int.from_bytes(s.hs[1:4], "big")
            if length > MAX_HANDSHAKE:
                self._finding(
                    "tls_decrypt_failed",
                    f"{self._who(side)}: a handshake message "
                    f"claims {length} bytes; the handshake is not followed further",
                    side,
                )
                s.hs = bytearray()
                s.broken = True
                return
            if len(s.hs) < 4 + length:
                return
            kind, body = s.hs[0], bytes(s.hs[4 : 4 + length])
            del s.hs[: 4 + length]
            self._handshake(side, s, kind, body)

    def _handshake(self, side: int, s: _Side, kind: int, body: bytes) -> None:
        f = self.facts
        if kind == CLIENT_HELLO and side == 0:
            hello = parse_hello(body, client=True)
            if hello is None:
                self._finding("tls_decrypt_failed", "the ClientHello is malformed", side)
                return
            if self.suite is not None and s.cipher is not None:
                self._finding(
                    "renegotiation",
                    "the client started a new handshake on an established TLS connection",
                    side,
                )
            if self.client_hello is None or hello.random != self.client_hello.random:
                self.handshakes += 1
                f.client_randoms.append(hello.random)
            self.client_hello = hello
            f.server_name = f.server_name or hello.server_name
            f.alpn = hello.alpn or f.alpn
            if f.version is None:
                f.version = version_name(hello.version)
        elif kind == HELLO_REQUEST and side == 1 and s.cipher is not None:
            self._finding("renegotiation", "the server asked for a new handshake", side)
        elif kind == SERVER_HELLO and side == 1:
            hello = parse_hello(body, client=False)
            if hello is None:
                self._finding("tls_decrypt_failed", "the ServerHello is malformed", side)
                return
            if hello.retry:
                return  # HelloRetryRequest: another comes
            self._server_hello(hello)
        elif kind == FINISHED and self.tls13 and s.hs_cipher_active:
            s.hs_cipher_active = False
            s.secret = s.app_secret
            s.cipher, s.seq = self._tls13_decryptor(s.app_secret), 0
            self.ready(side)
        elif kind == KEY_UPDATE and self.tls13 and s.secret is not None and self.suite:
            s.secret = next_secret(s.secret, self.suite)
            s.cipher, s.seq = self._tls13_decryptor(s.secret), 0
            self.ready(side)
        elif kind == NEW_SESSION_TICKET and not self.tls13 and self.master and len(body) > 6:
            self.resumable[body[6:]] = self.master  # ticket -> master secret

    def _server_hello(self, hello: Hello) -> None:
        f = self.facts
        f.version = version_name(hello.version)
        f.cipher = suite_name(hello.suites[0])
        self.tls13 = hello.version == 0x0304
        self.suite = SUITES.get(hello.suites[0])
        self.server_hello = hello
        if self.client_hello is None:
            return
        if self.suite is None or self.suite.tls13 != self.tls13:
            f.state = "unsupported"
            self._finding(
                "tls_undecryptable",
                f"cipher suite {f.cipher} is not one kdissect decrypts (see docs/guide/tls.md)",
            )
            return
        ch = self.client_hello
        if self.tls13:
            f.resumed = hello.psk
        else:
            f.resumed = bool(hello.session_id) and hello.session_id == ch.session_id
        # a key log being written (live captures, the proxy) may get this connection's
        # secrets a moment after its ServerHello passed: records wait for them a little
        self.awaiting_keys = not self._key_up() and self.keys is not None and bool(self.keys.files)

    def _key_up(self) -> bool:
        """Find the current handshake's keys in the key log and set the decryptors;
        False when the key log does not have them (yet)."""
        ch, hello, keys = self.client_hello, self.server_hello, self.keys
        if ch is None or hello is None:  # no handshake yet
            return False
        if self.tls13:
            if keys is None:
                return False
            secrets = [
                keys.get(n, ch.random)
                for n in (
                    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                    "CLIENT_TRAFFIC_SECRET_0",
                    "SERVER_TRAFFIC_SECRET_0",
                )
            ]
            if any(x is None for x in secrets):
                return False
            for side, hs, app in ((0, secrets[0], secrets[2]), (1, secrets[1], secrets[3])):
                s = self.sides[side]
                s.app_secret = app
                s.cipher, s.seq, s.hs_cipher_active = self._tls13_decryptor(hs), 0, True
            self.keyed = True
            return True
        master = keys.get("CLIENT_RANDOM", ch.random) if keys is not None else None
        if master is None and self.facts.resumed:
            master = self.resumable.get(hello.session_id)
        if master is None and ch.ticket:
            master = self.resumable.get(ch.ticket)
            self.facts.resumed = self.facts.resumed or master is not None
        suite = self.suite
        if master is None or suite is None:
            return False
        self.master = master
        if hello.session_id:
            self.resumable[hello.session_id] = master
        k = key_block(master, ch.random, hello.random, suite)
        etm = hello.encrypt_then_mac and suite.cipher == "cbc"
        for side, key, iv, mac in (
            (0, k.client_key, k.client_iv, k.client_mac),
            (1, k.server_key, k.server_iv, k.server_mac),
        ):
            d, s = decryptor(suite, key, iv, mac, False, etm), self.sides[side]
            if s.encrypted:  # its ChangeCipherSpec already passed
                s.cipher, s.seq = d, 0
                self.ready(side)
            else:
                s.pending = d
        self.keyed = True
        return True

    def _wait_for_keys(
        self, side: int, ctype: int, version: int, header, payload, ts: float, frame: int
    ) -> None:
        """An encrypted record before its keys are in the key log: held (a few) until
        they are, then all decrypted in order."""
        self.waiting.append((side, ctype, version, bytes(header), bytes(payload), ts, frame))
        if self._key_up():
            self.awaiting_keys = False
            held, self.waiting = self.waiting, []
            self.facts.records -= len(held)  # counted when they came
            for side, ctype, version, header, payload, ts, frame in held:
                self._record(side, self.sides[side], ctype, version, header, payload, ts, frame)
            if self.budget is not None:  # (both sides' handshakes may have moved)
                for side, s in enumerate(self.sides):
                    self._charge(side, s)
        elif len(self.waiting) >= MAX_WAITING:
            self.awaiting_keys = False
            self.waiting = []
            self._undecryptable()

    def _tls13_decryptor(self, secret: bytes | None) -> Decryptor | None:
        if secret is None or self.suite is None:
            return None
        key, iv = traffic_keys(secret, self.suite)
        return decryptor(self.suite, key, iv)

    # -- after lost bytes ----------------------------------------------------------------

    def _resync(self, side: int, s: _Side) -> bool:
        """Find the next record after lost bytes: a header whose record decrypts with a
        sequence number a little ahead. True when reading can go on."""
        buf = s.buf
        while True:
            pos = buf.find(bytes([APPLICATION_DATA, 3]), s.pos)
            if pos < 0 or len(buf) - pos < 5:
                s.pos = max(s.pos, len(buf) - 4)
                return False
            head = record_header(buf, pos)
            if head is None or head[2] == 0:
                s.pos = pos + 1
                continue
            end = pos + 5 + head[2]
            if end > len(buf):
                s.pos = pos
                return False
            if s.cipher is None:  # nothing to decrypt: structure will do
                after = record_header(buf, end)
                if after is not None or end == len(buf):
                    s.pos, s.lost = pos, 0
                    return True
                s.pos = pos + 1
                continue
            header, payload = bytes(buf[pos : pos + 5]), bytes(buf[pos + 5 : end])
            tries = min(MAX_RESYNC_TRIES, s.lost // 21 + 2, MAX_RESYNC_TOTAL - s.tried)
            s.tried += tries
            for seq in range(s.seq, s.seq + tries):
                if s.cipher.decrypt(seq, head[0], head[1], header, payload) is not None:
                    s.pos, s.seq, s.lost, s.tried = pos, seq, 0, 0
                    return True
            s.pos = pos + 1
            if s.tried >= MAX_RESYNC_TOTAL:
                s.broken = True
                self._finding(
                    "tls_decrypt_failed",
                    f"{self._who(side)}: after {s.lost} lost "
                    f"bytes no record decrypted in {MAX_RESYNC_TOTAL} tries; the "
                    f"rest of this direction is not decrypted",
                    side,
                )
                return False

    # -- findings ----------------------------------------------------------------------------

    def _who(self, side: int) -> str:
        return "client" if side == 0 else "server"

    def _finding(self, code: str, detail: str, side: int | None = None) -> None:
        where = "" if side is None else ("request" if side == 0 else "response")
        self.facts.findings.append(Finding(code, detail, where))
