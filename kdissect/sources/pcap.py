"""Packets (from capture files or an interface) -> TCP reassembly -> which connections
are Kafka -> the stream engine's connections -> a sink, streaming."""

from __future__ import annotations

import gc
import heapq
import itertools
import os
import stat
import struct
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from collections import deque

from ..capture.native import reasm_class
from ..capture.packet import SUPPORTED, LINKTYPE_NAMES, tcp_segment
from ..capture.pcapfile import Packet
from ..capture.tcp import Direction, Reassembler, TcpConnection
from ..capture.tls import KeyLog, TlsLayer
from ..capture.tls.report import tls_summary
from ..protocol import Options
from ..protocol.message import header_versions
from ..stream import direction as evidence
from ..stream.connection import KafkaConnection
from ..stream.budget import Budget
from ..stream.model import CaptureStart
from ..stream.engine import Engine
from ..stream.sink import Collect, Sink

if TYPE_CHECKING:
    from ..capture.tls import TlsFacts

DEFAULT_PORTS = frozenset({9092})


class Endpoints(NamedTuple):
    client: tuple[str, int]
    broker: tuple[str, int]


_SIZE = struct.Struct(">i")
_Chunk = tuple[int, bytes, float, int]  # a held chunk: offset, payload, ts, frame
# bytes held across all connections being decided past which each decides at
# ``evidence.HOLD`` (a capture of many one-way flows must not hold ``ALONE`` each)
_SNIFF_TOTAL = 64 * 1024 * 1024


class _Held:
    """A connection's chunks held while it is decided, and each side's first bytes (up
    to ``evidence.ALONE``: kept as they come, not joined anew for each packet)."""

    __slots__ = ("chunks", "first", "size")

    def __init__(self) -> None:
        self.chunks: tuple[list[_Chunk], list[_Chunk]] = ([], [])
        self.first = (bytearray(), bytearray())
        self.size = 0

    def add(self, direction: int, chunk: _Chunk) -> None:
        self.chunks[direction].append(chunk)
        first = self.first[direction]
        if len(first) < evidence.ALONE:
            first += chunk[1][: evidence.ALONE - len(first)]
        self.size += len(chunk[1])


# a connection of the compiled reassembler has no Python Direction objects until the
# budget charges one or Python's reassembler takes over (``_dirs``): it keeps that state
# itself, and a capture may hold 200,000 connections
_NO_DIRS: Any = ()


class CaptureDissector:
    """Feed packets; finished exchanges and gaps go to ``sink`` as they happen (the
    caller calls ``finish`` at the end of the packets, and the sink's ``done``)."""

    # the compiled reassembler frames, reads and pairs the messages of connections in
    # the simple state itself (``_pass``; tests turn it off to compare)
    passing = True

    def __init__(
        self,
        sink: Sink,
        ports: Iterable[int] = DEFAULT_PORTS,
        detect: bool = True,
        first_message: int = 0,
        first_stream: int = 1,
        keys: KeyLog | None = None,
        budget: Budget | None = None,
    ):
        """``first_message``/``first_stream``: where numbering starts (files read one
        after another keep counting, so messages and connections stay unique).
        ``keys``: TLS session keys (more may come from the capture itself).
        ``budget``: the process's memory budget (default: ``budget.DEFAULT`` bytes)."""
        self.budget = budget if budget is not None else Budget()
        self.ports = frozenset(ports)
        self.detect = detect
        self.sink = sink
        self.keys = keys if keys is not None else KeyLog()
        # TLS connections are decrypted (or reported) between reassembly and Kafka
        self.tls = TlsLayer(self, self.keys, self._tls_ended, self.budget)
        self.tls_connections: list[TlsFacts] = []
        # TLS directions the compiled reassembler could decrypt: (its cid, direction)
        self.tls_ready: set[tuple[int, int]] = set()
        self.tcp = Reassembler(
            self.tls,
            client_hint=lambda src, dst: (
                dst[1] in self.ports or (src[1] not in self.ports and src[1] > dst[1])
            ),
            budget=self.budget,
        )
        # TCP connection -> its Kafka connection, and 1 when the TCP initiator is not
        # the Kafka client (a capture that began mid-connection): side = direction ^ it
        self.kafka: dict[int, tuple[KafkaConnection, int]] = {}
        self.sniffing: dict[int, _Held] = {}
        self.sniffed = 0  # the bytes of the chunks in ``sniffing``
        self.ignored: set[int] = set()
        # messages are numbered by a C counter (a Python method was a call per message);
        # ``messages`` reads where it stands
        self._count = itertools.count(first_message)
        self._next_index = self._count.__next__
        self.first_stream = first_stream
        self.packets = 0
        self.unsupported: dict[int, int] = {}  # linktype -> packets skipped
        # each Kafka connection's endpoints, by stream number - 1 (what is kept of a
        # finished connection: a capture may hold hundreds of thousands)
        self.streams: list[Endpoints] = []
        # the compiled reassembler (``attach``), its connections by number, and those
        # whose directions may yet be size-tracked there
        self.reasm: Any = None
        self.rconns: dict[int, TcpConnection] = {}
        self.untracked: set[int] = set()
        # the directions of the compiled reassembler whose bytes are Kafka's as they come
        # (plain Kafka, or TLS it decrypts), by connection number: per direction (its
        # Kafka connection's ``data``, flip, its ``message``) or None. Their data events
        # (``message`` for a whole message without its size, event 9) skip the TLS
        # layer and the dispatch by connection, which only pass them on (three to five
        # calls per chunk were a tenth of a summary of many small messages); a TLS
        # session counts the plaintext so handed on when the direction comes back
        self.direct: dict[int, list[tuple[Any, int, Any] | None]] = {}
        # connections the compiled reassembler pairs (native/src/reasm.rs ``pair``), by
        # its number: their Kafka connection's calls for its events 10 and 11, the
        # connection, flip; those whose both directions come directly, not (yet) paired
        # there; and those of them to ask after this batch (new ones: the others are
        # asked when their data came, ``_pass``)
        self.passes: dict[int, tuple[Any, Any, KafkaConnection, int]] = {}
        self.pass_wait: set[int] = set()
        self.pass_new: set[int] = set()
        # what each Kafka connection calls, bound once (not three bound methods made and
        # kept per connection)
        self._calls = (self._exchange, sink.gap, self._next_index)
        # broker listeners the capture's answers name (by host name or address: their
        # ports), and the addresses Kafka clients opened connections to (their SYN)
        self.listeners: set[int] = set()
        self.servers: set[tuple[str, int]] = set()

    @property
    def messages(self) -> int:
        """The number the next message will get (the messages numbered so far, from
        ``first_message`` on)."""
        return int(repr(self._count)[6:-1])  # (``count(N)``: its next value, not taken)

    def packet(self, pkt: Packet) -> None:
        self.packets += 1
        if pkt.linktype not in SUPPORTED:
            self.unsupported[pkt.linktype] = self.unsupported.get(pkt.linktype, 0) + 1
            return
        seg = tcp_segment(pkt.linktype, pkt.data, pkt.orig_len)
        if seg is not None:
            self.tcp.segment(seg, pkt.ts, pkt.index)

    def attach(self, reader) -> None:
        """Reassemble the reader's segments in Rust when the compiled path runs: the
        scanner's batches are then this reassembler's events (``rows``)."""
        cls = reasm_class()
        if cls is not None:
            self.reasm = reader.reasm = cls(sorted(self.ports))
            self.reasm.room = self._room()
            self.tls.ready = self._tls_ready
            if self.passing:
                self.reasm.head_table(header_versions())

    def rows(self, batch: list[tuple]) -> None:
        """A batch of the compiled scanner (capture.native): segments and secrets, or
        the compiled reassembler's events (native/src/reasm.rs says what they are)."""
        take = self.tcp.take
        tls, conns, direct, passes = self.tls, self.rconns, self.direct, self.passes
        for row in batch:
            n = len(row)
            if n == 11:
                take(*row)
                continue
            tag = row[0]
            if tag == 10:  # a request the compiled pass read
                p = passes.get(row[1])
                if p is not None:
                    p[0](row)
                else:
                    self._passed_late(row)
            elif tag == 11:  # the answer it paired with the oldest request
                p = passes.get(row[1])
                if p is not None:
                    p[1](row)
                else:
                    self._passed_late(row)
            elif n == 1:
                self.add_secrets(row[0])
            elif tag == 9:  # one whole Kafka message, without its size
                found = direct.get(row[1])
                to = found[row[2]] if found is not None else None
                if to is not None:
                    to[2](row[2] ^ to[1], row[3], row[4], row[5], row[6])
                else:  # (not seen: only directions handed on directly are tracked)
                    data = _SIZE.pack(len(row[4])) + row[4]
                    tls.data(conns[row[1]], row[2], row[3] - 4, data, row[5], row[6])
            elif tag == 1:
                found = direct.get(row[1])
                to = found[row[2]] if found is not None else None
                if to is not None:
                    to[0](row[2] ^ to[1], row[3], row[4], row[5], row[6])
                else:
                    tls.data(conns[row[1]], row[2], row[3], row[4], row[5], row[6])
            elif tag == 5:  # a direction's charge dropped (two per
                dirs = conns[row[1]].dirs  # connection at its end: inline)
                if dirs:  # else never charged
                    self.budget.drop(id(dirs[row[2]]))
            else:
                self._event(row)
        rs = self.reasm
        if rs is not None and not rs.tight:
            if self.untracked:
                self._track()
            if self.tls_ready:
                self._tls_track()
            if self.passing:
                self._pass()
            rs.room = self._room()

    def _room(self) -> int:
        """The budget's headroom for the compiled reassembler: what is left, less the
        bytes held while a connection is decided (here and in the TLS layer). No holder
        counts them, but when the connection is decided they go to its framers (which
        are charged) at once, with no segment of their own: without them, the reference
        could give up where the compiled path did not hand over first."""
        return self.budget.limit - self.budget.used - self.sniffed - self.tls.held_bytes

    def _event(self, row: tuple) -> None:
        tag, cid = row[0], row[1]
        if tag == 0:
            _, cid, a_ip, a_port, b_ip, b_port, ts, syn = row
            self.rconns[cid] = TcpConnection(cid, (a_ip, a_port), (b_ip, b_port), ts, syn, _NO_DIRS)
            self.untracked.add(cid)
        elif tag == 2:
            self.tls.gap(self.rconns[cid], *row[2:])
        elif tag == 12:  # the compiled pass hands a connection back
            self._pass_back(cid, row[2], row[3])
        elif tag == 13:  # handed back where a message's first piece came, and the piece
            self._pass_back(cid, row[7], row[8])
            found = self.direct.get(cid)
            to = found[row[2]] if found is not None else None
            if to is not None:
                to[0](row[2] ^ to[1], row[3], row[4], row[5], row[6])
            else:
                self.tls.data(self.rconns[cid], row[2], row[3], row[4], row[5], row[6])
        elif tag == 3:
            self.untracked.discard(cid)
            self.pass_wait.discard(cid)
            self.pass_new.discard(cid)
            self.tls_ready.discard((cid, 0))
            self.tls_ready.discard((cid, 1))
            self.direct.pop(cid, None)
            self.tls.closed(self.rconns.pop(cid))
        elif tag == 4:
            conn = self.rconns[cid]
            d = _dirs(conn)[row[2]]
            d.held_bytes = row[3]
            self.tcp._charge(conn, row[2], d)
        elif tag == 6:
            self._take_over()
        elif tag == 8:  # a TLS direction the reassembler decrypted
            found = self.direct.get(cid)
            if found is not None:
                found[row[2]] = None
            self.tls.given_back(self.rconns[cid], *row[2:])

    def _track(self) -> None:
        """Connections now known to be plain Kafka: let the compiled reassembler follow
        their message sizes (it then hands over about two chunks per message)."""
        assert self.reasm is not None
        track, kinds, kafka, rconns = self.reasm.track, self.tls.kind, self.kafka, self.rconns
        untracked, tls_facts = self.untracked, self.tls.facts
        for cid in list(untracked):
            conn = rconns[cid]
            key = id(conn)
            found = kafka.get(key)
            if kinds.get(key) is None or (found is None and key not in self.ignored):
                continue  # not decided yet
            untracked.discard(cid)
            if found is None or tls_facts(conn) is not None:
                continue  # not Kafka, or TLS: Python's to read
            k, flip = found
            self.direct[cid] = [(k.data, flip, k.message), (k.data, flip, k.message)]
            if self.passing:
                self._pass_wait(cid)
            for direction in (0, 1):
                at = k.framers[direction ^ flip].position()
                if at is not None:
                    track(cid, direction, *at)

    def _take_over(self) -> None:
        """The memory budget may be spent: Python's reassembler (the reference, whose
        giving up is exact) takes the compiled one's state and the rest of the file."""
        assert self.reasm is not None
        count, packets, closing, conns = self.reasm.export()
        self.direct.clear()  # (the Python reassembler delivers from here on)
        self.pass_wait.clear()  # (the pass handed every connection back before)
        self.pass_new.clear()
        tcp = self.tcp
        tcp.count, tcp.packets = count, packets
        for cid, closed, last_ts, n, dirs in conns:
            conn = self.rconns[cid]
            conn.closed, conn.last_ts, conn.packets = closed, last_ts, n
            conn.key = tcp._key(conn.a, conn.b)
            for d, state in zip(_dirs(conn), dirs):
                (
                    d.base,
                    d.next,
                    held,
                    d.held_bytes,
                    d.fin,
                    d.end,
                    d.acked,
                    d.overdue,
                    d.last_ts,
                    d.hole,
                    d.retransmitted,
                    d.gaps,
                    d.gap_bytes,
                ) = state
                if held:
                    d.held = {off: (p, size, ts, frame) for off, p, size, ts, frame in held}
                    d.order = [h[0] for h in held]  # ascending: already a heap
            tcp.conns[conn.key] = conn
        gone = TcpConnection(0, ("", 0), ("", 0), 0.0, False)  # finished since it closed
        tcp.closing = deque((at, self.rconns.get(cid, gone)) for at, cid in closing)
        self.untracked.clear()

    def _pass_wait(self, cid: int) -> None:
        self.pass_wait.add(cid)
        self.pass_new.add(cid)

    def _pass(self) -> None:
        """Connections whose messages may now be paired by the compiled reassembler
        (native/src/reasm.rs ``pair``): both directions come directly and the Kafka
        connection is in the simple state (``KafkaConnection.passing``). Asked when
        they begin to wait and then when their data came (nothing else changes it)."""
        assert self.reasm is not None
        waiting = self.pass_wait
        asked = self.pass_new
        asked.update(cid for cid in self.reasm.touched() if cid in waiting)
        if not asked:
            return
        pair, kafka, rconns, direct = self.reasm.pair, self.kafka, self.rconns, self.direct
        for cid in sorted(asked):
            dirs = direct.get(cid)
            conn = rconns.get(cid)
            found = kafka.get(id(conn)) if conn is not None else None
            if dirs is None or None in dirs or found is None or found[0].sasl is not None:
                waiting.discard(cid)  # (not now; a TLS direction tracked asks again)
                continue
            k, flip = found
            at = k.passing()
            if at is None:
                continue
            starts = (at[0], at[1]) if flip == 0 else (at[1], at[0])  # by direction
            taken = pair(cid, flip, starts, at[2])
            if taken < 0:
                waiting.discard(cid)
            elif taken:
                k.pass_on()
                self.passes[cid] = (k.passed_request, k.passed_answer, k, flip)
                waiting.discard(cid)
        asked.clear()

    def _pass_back(self, cid: int, end0: int, end1: int) -> None:
        """A connection the compiled pass handed back, its directions' last messages
        read there ending at ``end0`` and ``end1``; nothing if it was handed back
        before (native/src/reasm.rs ``hand_first``: a first piece's place may come
        earlier)."""
        found = self.passes.pop(cid, None)
        if found is None:
            return
        k, flip = found[2], found[3]
        k.pass_back(end1 if flip else end0, end0 if flip else end1)
        self._pass_wait(cid)

    def _passed_late(self, row: tuple) -> None:
        """A message the compiled pass read after Python took its connection back
        (``_pass_back``): taken as its event 9, the whole message, would be."""
        k, flip = self.kafka[id(self.rconns[row[1]])]
        side = 0 if row[0] == 10 else 1
        k.message(side, row[2], row[3], row[4], row[5])

    def _tls_ready(self, conn: TcpConnection, direction: int) -> None:
        self.tls_ready.add((conn.index, direction))

    def _tls_track(self) -> None:
        """TLS directions with application keys: the compiled reassembler decrypts them
        (and follows their Kafka sizes) until anything else comes (``TlsSession``)."""
        assert self.reasm is not None
        for cid, direction in list(self.tls_ready):
            conn = self.rconns.get(cid)
            found = self.kafka.get(id(conn))
            if conn is not None and found is None and id(conn) not in self.ignored:
                continue  # Kafka or not: not decided yet
            state = self.tls.hand_over(conn, direction) if conn is not None else True
            if state is False:
                continue  # not at a record's start yet
            self.tls_ready.discard((cid, direction))
            if state is True:
                continue
            at = found[0].framers[direction ^ found[1]].position() if found else None
            start, held = at if at is not None else (-1, b"")
            if not self.reasm.tls_track(cid, direction, *state, start, held):
                cipher, seq, plain, begun = state
                self.tls.given_back(conn, direction, seq, 0, plain, begun, 0.0, 0)
                self.tls_ready.discard((cid, direction))
            elif found is not None:
                k = found[0]
                self.direct.setdefault(cid, [None, None])[direction] = (k.data, found[1], k.message)
                if self.passing:
                    self._pass_wait(cid)

    def scanned(self, reader) -> None:
        """Count the packets the compiled scanner read (it counts them itself)."""
        scanner = reader.scanned
        if scanner is not None:
            self.packets += scanner.packets
            for linktype, n in scanner.unsupported.items():
                self.unsupported[linktype] = self.unsupported.get(linktype, 0) + n

    def finish(self) -> None:
        if self.reasm is not None and not self.reasm.tight:
            self.rows(self.reasm.flush())
        self.tcp.flush()
        for text, level in tls_summary(self.tls_connections, self.keys):
            self.sink.note(text, level)

    def add_secrets(self, key_log: bytes) -> None:
        """Secrets carried by the capture (pcapng Decryption Secrets Blocks)."""
        self.keys.add_text(key_log)

    def _tls_ended(self, facts: TlsFacts) -> None:
        self.tls_connections.append(facts)
        self.sink.tls(facts)

    # -- StreamSink -------------------------------------------------------------------

    def _decide(
        self, conn: TcpConnection, held: _Held, ending: bool = False
    ) -> KafkaConnection | None:
        """Is this connection Kafka, and which side is the client? None: not yet known
        (or not Kafka: then it is ignored from now on). ``ending``: the connection ends,
        decide with what was held. The client side is taken from the strongest evidence
        there is (``direction.decide``); whether it is Kafka from a Kafka port, else from
        how its bytes start."""
        on_port = conn.a[1] in self.ports or conn.b[1] in self.ports
        if not on_port and not self.detect:
            self.ignored.add(id(conn))
            return None
        tls = self.tls.facts(conn)
        verdict = evidence.decide(
            conn.a,
            conn.b,
            list(held.first),
            syn=conn.saw_syn,
            hello=tls.client if tls is not None and tls.hello_seen else None,
            ports=self.ports,
            listeners=self.listeners,
            servers=self.servers,
            detect=self.detect and not on_port,
            # (past the total, as if each held ALONE: decided with what it has)
            held=held.size if self.sniffed <= _SNIFF_TOTAL else evidence.ALONE,
            ending=ending,
        )
        if verdict is None:
            return None
        if verdict is evidence.NOT_KAFKA:
            self.ignored.add(id(conn))
            self._unsniff(conn)
            return None
        client, broker = (conn.a, conn.b) if verdict.client == 0 else (conn.b, conn.a)
        if conn.saw_syn and self.detect and len(self.servers) < evidence.MAX_LEARNED_PORTS:
            # an address a Kafka client opened a connection to is a listener: another
            # connection to it, seen without its start, is a client's
            self.servers.add(broker)
        k = KafkaConnection(
            self.first_stream + len(self.streams), client, broker, *self._calls, self.budget
        )
        self.kafka[id(conn)] = (k, verdict.client)
        self.streams.append(Endpoints(client, broker))
        k.tls = tls
        k.opened = conn.saw_syn
        k.side_by = verdict.label
        if verdict.sure in (evidence.MEDIUM, evidence.LOW):
            k.doubt = verdict.label
        if not conn.saw_syn and not (tls is not None and tls.hello_seen):
            # seen without its start: the first bytes may be inside a message (a request
            # must also start like one; an answer cannot be told by its start)
            for side, framer in enumerate(k.framers):
                framer.begun_inside(check=side == 0)
        if tls is not None:
            tls.stream = k.index
        return k

    def _exchange(self, ex) -> None:
        """Each exchange on to the sink; the broker listeners its Metadata,
        FindCoordinator and DescribeCluster answers name are learned on the way (a
        connection to one of them, seen without its start, is a client's)."""
        req = ex.request
        if (
            req is not None
            and req.api_key in evidence.NAMES_LISTENERS
            and ex.response is not None
            and self.detect
            and len(self.listeners) < evidence.MAX_LEARNED_PORTS
        ):
            named = evidence.listeners(ex.response.data, req.api_key, req.api_version)
            room = evidence.MAX_LEARNED_PORTS - len(self.listeners)
            self.listeners.update(itertools.islice({port for _, port in named}, room))
        self.sink.exchange(ex)

    def data(self, conn, direction, offset, payload, ts, frame) -> None:
        found = self.kafka.get(id(conn))
        if found is not None:
            found[0].data(direction ^ found[1], offset, payload, ts, frame)
            return
        if id(conn) in self.ignored:
            return
        if (conn.a[1] in self.ports or conn.b[1] in self.ports) and (
            conn.saw_syn or (conn.a[1] in self.ports) != (conn.b[1] in self.ports)
        ):
            # a Kafka port (and which side it is on) says it at once: nothing to hold
            k = self._decide(conn, _Held())
            assert k is not None, "a connection on a Kafka port is Kafka"
            k.data(direction ^ self.kafka[id(conn)][1], offset, payload, ts, frame)
            return
        # undecided: hold the chunks until the first bytes tell, then replay them in order
        held = self.sniffing.get(id(conn))
        if held is None:
            held = self.sniffing[id(conn)] = _Held()
        held.add(direction, (offset, payload, ts, frame))
        self.sniffed += len(payload)
        self._decided(conn, held, self._decide(conn, held))

    def _decided(self, conn, held: _Held, k: KafkaConnection | None) -> None:
        """Replay what was held while deciding, in the order it came."""
        if k is None:
            return
        self._unsniff(conn)
        flip = self.kafka[id(conn)][1]
        # (merged by frame, each side kept in its stream order: see TlsLayer._decide)
        chunks = heapq.merge(
            *[[(f, d, o, p, t) for o, p, t, f in held.chunks[d]] for d in (0, 1)],
            key=lambda c: c[0],
        )
        for f, d, o, p, t in chunks:
            k.data(d ^ flip, o, p, t, f)

    def _unsniff(self, conn) -> None:
        held = self.sniffing.pop(id(conn), None)
        if held is not None:
            self.sniffed -= held.size

    def gap(self, conn, direction, offset, length, ts, frame) -> None:
        found = self.kafka.get(id(conn))
        if found is not None:
            found[0].gap(direction ^ found[1], offset, length, ts, frame)

    def closed(self, conn) -> None:
        held = self.sniffing.get(id(conn))
        if held is not None and id(conn) not in self.kafka:
            # still deciding (e.g. waiting for the other side that never came)
            self._decided(conn, held, self._decide(conn, held, ending=True))
        found = self.kafka.pop(id(conn), None)
        self._unsniff(conn)
        self.ignored.discard(id(conn))  # ids are reused once the object is gone
        if found is not None:
            found[0].close()

    def unsupported_summary(self) -> str | None:
        if not self.unsupported:
            return None
        kinds = ", ".join(
            f"{LINKTYPE_NAMES.get(t, f'link type {t}')} ({n} packets)"
            for t, n in self.unsupported.items()
        )
        return f"skipped packets of unsupported link types: {kinds}"


def _dirs(conn: TcpConnection) -> tuple[Direction, Direction]:
    if not conn.dirs:
        conn.dirs = (Direction(), Direction())
    return conn.dirs


class CaptureFiles:
    """The engine's source for capture files (``kw`` as for ``read_captures``)."""

    def __init__(self, paths, **kw):
        self.paths, self.kw = paths, kw

    def feed(self, sink: Sink) -> int:
        return read_captures(self.paths, sink, **self.kw)


def read_captures(
    paths,
    sink: Sink,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    packets=None,
    keys: KeyLog | None = None,
    budget: Budget | None = None,
) -> int:
    """Every exchange in the capture files ``paths`` to ``sink``, then ``sink.done()``;
    what the user should know about the files goes to ``sink.note`` ("error" for a file
    that cannot be read). ``packets(reader, path)`` may wrap the packet iterator (e.g.
    with a progress bar). ``keys``: TLS session keys (a file's pcapng Decryption Secrets
    Blocks add to them for that file). Returns the number of packets read. A closed
    output (BrokenPipeError) propagates."""
    with steady_gc():
        return _read(paths, sink, ports, detect, packets, keys, budget)


_frozen = False


@contextmanager
def steady_gc():
    """A capture keeps many long-lived objects per connection (200,000 connections are
    millions): the cyclic collector, run at its default pace, rescans them again and
    again (a quarter of the time). Collect less often while reading (the young
    generation at 200,000 allocations and the middle one at every 50th: at 50,000 and
    20, 200,000 connections spent 2.1 CPU-s in the collector, half of it rescanning the
    middle generation; now 1.0); what was made
    before the first read (modules, schemas) is set aside for good. Only once per
    process, after a collection: a process that reads capture after capture (the TUI,
    a Spark worker, the fuzzer) would otherwise freeze each read's uncollected garbage
    forever."""
    global _frozen
    if not _frozen:
        gc.collect(1)  # the young garbage; a full collection cost a small capture 10 ms
        gc.freeze()
        _frozen = True
    before = gc.get_threshold()
    gc.set_threshold(200_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _read(
    paths, sink: Sink, ports, detect: bool, packets, keys: KeyLog | None, budget: Budget | None
) -> int:
    from ..capture.pcapfile import CaptureError, CaptureReader

    total, messages, streams = 0, 0, 1
    budget = budget if budget is not None else Budget()
    paths = list(paths)
    for path in paths:
        if len(paths) > 1:  # frame numbers start again: say whose they are
            sink.item(CaptureStart(str(path)))
        file_keys = keys.copy() if keys is not None else KeyLog()
        dissector = CaptureDissector(sink, ports, detect, messages, streams, file_keys, budget)
        readable = True
        try:
            with CaptureReader(path) as reader:
                reader.on_secrets = dissector.add_secrets
                dissector.attach(reader)
                try:
                    for item in packets(reader, path) if packets else reader.items():
                        if isinstance(item, list):
                            dissector.rows(item)
                        else:
                            dissector.packet(item)
                finally:
                    dissector.scanned(reader)
                for w in reader.warnings:
                    sink.note(f"{path}: {w}; everything before it was decoded")
        except CaptureError as e:
            sink.note(str(e), "error")
            readable = dissector.packets > 0
        except OSError as e:
            if isinstance(e, BrokenPipeError):
                raise
            what = (
                " (run kdissect as a user who can read it)"
                if isinstance(e, PermissionError)
                else _stream_hint(path)
            )
            sink.note(f"{path}: cannot read it: {e.strerror or e}{what}", "error")
            readable = dissector.packets > 0
        dissector.finish()  # what was read of a damaged file still counts
        total += dissector.packets
        messages, streams = dissector.messages, streams + len(dissector.streams)
        skipped = dissector.unsupported_summary()
        if skipped:
            sink.note(f"{path}: {skipped}")
        if not dissector.streams and readable and not dissector.tls_connections:
            sink.note(
                f"{path}: no Kafka traffic found in {dissector.packets} packets "
                f"(ports {', '.join(map(str, sorted(dissector.ports)[:5]))}; add others "
                f"with -p)"
                if dissector.packets
                else f"{path}: the capture holds no packets",
                "error",
            )
    sink.done()
    return total


def tracked(reader, path: str, progress: Callable[[int, int], None]):
    """Packets, telling ``progress(bytes read, file size)`` as they are read."""
    import os

    size = os.path.getsize(path)
    for i, packet in enumerate(reader.items()):
        if i % 100 == 0:
            progress(reader.bytes_read, size)
        yield packet
    progress(size, size)


def capture_loader(paths, options: Options | None = None, **kw):
    """The TUI's source for capture files: ``load(sink)`` runs them through the engine
    into the TUI's sink (``kw`` as for ``read_captures``)."""

    def load(sink: Sink) -> None:
        Engine(
            CaptureFiles(
                paths, packets=lambda reader, path: tracked(reader, path, sink.progress), **kw
            ),
            sink,
            options,
        ).run()

    return load


def exchanges_in(paths, options: Options | None = None, **kw) -> Collect:
    """Every enriched exchange, gap and note of the capture files, collected."""
    sink = Collect()
    Engine(CaptureFiles(paths, **kw), sink, options).run()
    return sink


def unreadable(path: str) -> str | None:
    """Why ``path`` cannot be read as a capture, as reading it would say (its first
    packet is read), or None. (The TUI opened on README.md and then said it held no
    Kafka traffic; the command line said what it is.)"""
    from ..capture.pcapfile import CaptureError, CaptureReader

    try:
        with CaptureReader(path) as reader:
            next(iter(reader.packets()), None)
    except CaptureError as e:
        return str(e)
    except OSError as e:
        hint = " (run kdissect as a user who can read it)" if isinstance(e, PermissionError) else ""
        return f"{path}: cannot read it: {e.strerror or e}{hint or _stream_hint(path)}"
    return None


def _stream_hint(path: str) -> str:
    """What to do when ``path`` is a pipe or a terminal (kdissect reads capture files,
    which it maps and seeks): write the capture to a file first."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    seekable = stat.S_ISREG(mode) or stat.S_ISBLK(mode)
    if seekable:
        return ""
    return (
        " (a pipe or device: kdissect pcap reads capture files; write the capture to a "
        "file first, e.g. tcpdump -w capture.pcap, or sniff with kdissect live)"
    )
