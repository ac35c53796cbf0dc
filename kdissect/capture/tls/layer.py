"""The TLS layer between TCP reassembly and Kafka framing: a connection whose first
bytes are a TLS ClientHello (on any port), or TLS records (a capture that began
mid-connection), becomes a ``TlsSession``; its plaintext goes on to the next stage as the
connection's bytes, with plaintext stream offsets. Every other connection passes through
untouched.

Implements the reassembler's ``StreamSink`` and calls one (``down``) the same way, so
the stages before and after it do not know it is there."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .handshake import (
    CHANGE_CIPHER_SPEC,
    HEARTBEAT,
    MAX_RECORD,
    record_chain,
    starts_client_hello,
    starts_record,
)

if TYPE_CHECKING:
    from .keylog import KeyLog
    from .session import TlsFacts, TlsSession

_PASS, _TLS = 1, 2
_TLS_FIRST = (CHANGE_CIPHER_SPEC, HEARTBEAT)  # what a TLS stream's first byte may be
_INSIDE = 2 * (MAX_RECORD + 5)  # bytes of a side searched for records begun before it


class TlsLayer:
    def __init__(
        self,
        down,
        keys: KeyLog | None = None,
        report: Callable[[TlsFacts], None] = lambda facts: None,
        budget: Any = None,
    ):
        """``report(facts)`` is called once per TLS connection, when it ends (after
        ``down.closed``). ``budget``: the process's memory budget
        (``stream.budget.Budget``), charged by each session with what it holds."""
        self.down, self.keys, self.report = down, keys, report
        self.budget = budget
        self.kind: dict[int, int] = {}
        self.sessions: dict[int, tuple[TlsSession, int]] = {}  # id(conn) -> (session, flip)
        self.held: dict[int, list] = {}
        self.held_bytes = 0  # the bytes of the chunks in ``held`` (no budget counts them)
        self.resumable: dict[bytes, bytes] = {}  # TLS 1.2 resumption, capture-wide
        # ready(conn, direction): a direction the compiled reassembler could now decrypt
        self.ready: Callable[[Any, int], None] | None = None

    def facts(self, conn) -> TlsFacts | None:
        found = self.sessions.get(id(conn))
        return found[0].facts if found else None

    def hand_over(self, conn, direction: int) -> tuple | bool:
        """``TlsSession.hand_over`` for a direction of the TCP connection."""
        session, flip = self.sessions[id(conn)]
        return session.hand_over(direction ^ flip)

    def given_back(self, conn, direction: int, *state) -> None:
        """``TlsSession.given_back`` for a direction of the TCP connection."""
        session, flip = self.sessions[id(conn)]
        session.given_back(direction ^ flip, *state)

    # -- StreamSink -------------------------------------------------------------------------

    def data(self, conn, direction, offset, payload, ts, frame) -> None:
        kind = self.kind.get(id(conn))
        if kind == _PASS:
            self.down.data(conn, direction, offset, payload, ts, frame)
        elif kind == _TLS:
            session, flip = self.sessions[id(conn)]
            session.data(direction ^ flip, payload, ts, frame)
        elif (
            payload
            and not _TLS_FIRST[0] <= payload[0] <= _TLS_FIRST[1]
            and id(conn) not in self.held
            and (conn.saw_syn or not payload[0])
        ):
            # the first bytes seen start neither a ClientHello nor a record: what _sniff
            # decides, without holding them (a capture may hold 200,000 connections).
            # (Seen without its start, a connection may begin inside a record: unless
            # its first byte is a Kafka size's (0), _sniff looks for records further on)
            self.kind[id(conn)] = _PASS
            self.down.data(conn, direction, offset, payload, ts, frame)
        else:
            held = self.held.setdefault(id(conn), [])
            held.append((frame, direction, offset, payload, ts))
            self.held_bytes += len(payload)
            self._sniff(conn, held)

    def gap(self, conn, direction, offset, length, ts, frame) -> None:
        kind = self.kind.get(id(conn))
        if kind == _TLS:
            session, flip = self.sessions[id(conn)]
            session.gap(direction ^ flip, length, ts, frame)
            return
        if kind is None:  # lost bytes before the start told: not TLS's to say
            self._decide(conn, _PASS, 0)
        self.down.gap(conn, direction, offset, length, ts, frame)

    def closed(self, conn) -> None:
        if self.kind.get(id(conn)) is None and id(conn) in self.held:
            if conn.saw_syn:
                self._decide(conn, _PASS, 0)
            else:
                self._inside(conn, self.held[id(conn)], ending=True)
        kind = self.kind.pop(id(conn), None)
        found = self.sessions.pop(id(conn), None)
        self.down.closed(conn)
        if kind == _TLS and found is not None:
            self.report(found[0].finish())

    # -- which connections are TLS --------------------------------------------------------

    def _sniff(self, conn, held: list) -> None:
        starts = [b"".join(c[3] for c in held if c[1] == d)[:512] for d in (0, 1)]
        hello = [starts_client_hello(s) for s in starts]
        for d in (0, 1):
            if hello[d]:
                self._decide(conn, _TLS, d)
                return
        records = [starts_record(s) for s in starts]
        if any(records) and not any(r is False for r in records):
            self._decide(conn, _TLS, 0, mid=True)  # the reassembler's guess of the client
            return
        if all(h is False for h, s in zip(hello, starts) if s) and all(
            r is False for r, s in zip(records, starts) if s
        ):
            if conn.saw_syn:
                self._decide(conn, _PASS, 0)
            else:
                self._inside(conn, held)
        elif sum(map(len, starts)) >= 64:  # undecided after this much: not TLS
            self._decide(conn, _PASS, 0)

    def _inside(self, conn, held: list, ending: bool = False) -> None:
        """A connection seen without its start, whose bytes start no record: whole
        records further on (two chained headers) say it began inside one; no record
        header within a record's length of a side's start says it is not TLS."""
        sides = [b"".join(c[3] for c in held if c[1] == d)[:_INSIDE] for d in (0, 1)]
        at = [record_chain(s) if s else None for s in sides]
        if any(p is not None for p in at):
            self._decide(conn, _TLS, 0, mid=True, inside=at)
        elif ending or any(len(s) >= _INSIDE for s in sides):
            self._decide(conn, _PASS, 0)

    def _decide(
        self,
        conn,
        kind: int,
        client: int,
        mid: bool = False,
        inside: list[int | None] | None = None,
    ) -> None:
        """``client``: the direction (of the TCP connection) the TLS client sends;
        ``inside``: the capture began inside a record: where each direction's first
        whole record starts (None: not found or no bytes)."""
        self.kind[id(conn)] = kind
        # by frame, but each direction in the order it came: its stream order (a segment
        # reordered in the capture comes later with its earlier frame; sorted by frame, a
        # direction's bytes were replayed out of order and framed wrong)
        chunks = self.held.pop(id(conn), [])
        held = list(
            heapq.merge(*[[c for c in chunks if c[1] == d] for d in (0, 1)], key=lambda c: c[0])
        )
        self.held_bytes -= sum(len(c[3]) for c in held)
        if kind == _TLS:
            from .session import TlsFacts, TlsSession  # only with TLS: not at start-up

            c, s = (conn.a, conn.b) if client == 0 else (conn.b, conn.a)
            first = held[0] if held else (0, 0, 0, b"", conn.first_ts)
            facts = TlsFacts(c, s, first[0], first[4])

            def emit(side, offset, data, ts, frame, conn=conn):
                self.down.data(conn, side ^ client, offset, data, ts, frame)

            def emit_gap(side, offset, length, ts, frame, conn=conn):
                self.down.gap(conn, side ^ client, offset, length, ts, frame)

            def ready(side, conn=conn, tell=self.ready):
                if tell is not None:
                    tell(conn, side ^ client)

            session = TlsSession(
                facts, self.keys, emit, emit_gap, self.resumable, mid, ready, self.budget
            )
            self.sessions[id(conn)] = (session, client)
            if inside is not None:
                session.begun_inside([inside[client], inside[1 - client]])
        for frame, direction, offset, payload, ts in held:
            self.data(conn, direction, offset, payload, ts, frame)
