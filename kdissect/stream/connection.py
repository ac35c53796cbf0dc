"""Kafka on one connection: both directions framed by the framing core, responses paired
with requests by the correlation core, and SASL tokens after SaslHandshake v0.

Hands finished exchanges to a callback as soon as they are known, so memory holds
only what is still pending (partial messages, unanswered requests). The findings set
here are the ones only the sequence of messages shows; the enrichment stage adds what
decoding shows."""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from ..protocol import peek_request_header, schemas
from ..protocol.apis import API_VERSIONS, CONTROLLED_SHUTDOWN, ENVELOPE, SASL_HANDSHAKE
from ..protocol.findings import Finding
from ..protocol.message import answered_version, forwarded_api, request_head
from .correlation import Correlator, Pending
from .budget import Budget
from .framing import MAX_MESSAGE, Frame, Framer
from .model import Exchange, Gap, KafkaMessage

MAX_EARLY = 256  # responses held while waiting for a request seen out of order
EARLY_WAIT = 1.0  # seconds such a response waits before it is called an orphan
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")  # a request header's API key and version
_CORRELATION = struct.Struct(">i")
# arrivals an answering framer in doubt keeps before it drops those wholly before the
# bytes it holds (_Answers.arrive: a search over many chunks keeps only what it can use)
_ARRIVALS_KEPT = 64
_NOTHING = lambda: None  # noqa: E731 - nothing held, nothing to give up
# requests the compiled pass leaves to Python: they pair otherwise or change the
# connection's state (``_answer``)
_NOT_PASSED = frozenset({API_VERSIONS, SASL_HANDSHAKE, ENVELOPE})
# the pass's own bound on pending requests (reasm.rs PASS_PENDING): past it ``passing``
# answers at once, not by listing them for a refusal (a list per batch per connection
# of up to 4,096: a one-way capture's --stats took 5.7x the CPU)
PASS_PENDING = 64


MAX_VERSION = schemas.MAX_VERSION  # a request header's version, recognised by shape


def plausible_request(data: bytes | bytearray, pos: int = 0) -> bool:
    """Does ``data[pos:]`` start like a size-prefixed Kafka request? Recognised by its
    shape: a known API key, any version up to ``MAX_VERSION`` (a client newer than
    kdissect's tables speaks versions they lack), a sane correlation id and client id."""
    if len(data) - pos < 14:
        return False
    size, key, version = struct.unpack_from(">ihh", data, pos)
    if (
        not (8 <= size <= MAX_MESSAGE)
        or not 0 <= version <= MAX_VERSION
        or key not in schemas.all_versions()
    ):
        return False
    head = peek_request_header(bytes(data[pos + 4 : pos + 4 + min(size, 512)]))
    if head is None:
        return bool(key == CONTROLLED_SHUTDOWN and version == 0 and size >= 8)
    cid = head.client_id
    return bool(head.correlation_id >= 0 and (cid is None or cid.isprintable()))


def is_request(data: bytes) -> bool:
    """Does a message (the bytes after its size) read as a Kafka request? After
    SaslHandshake v0 this tells raw SASL tokens from Kafka requests again."""
    return plausible_request(_SIZE.pack(len(data)) + data[:512])


def opens_raw_sasl(api_key: int | None, api_version: int | None, response: bytes) -> bool:
    """Whether this answered request makes the client's next messages raw SASL tokens:
    a SaslHandshake v0 that succeeded."""
    return (
        api_key == SASL_HANDSHAKE
        and api_version == 0
        and len(response) >= 6
        and struct.unpack_from(">h", response, 4)[0] == 0
    )


def _impossible_latency(request_ts: float, response_ts: float) -> Finding:
    """An answer complete before its request in the capture (clocks of merged captures,
    or a pairing to doubt)."""
    return Finding(
        "impossible_latency",
        f"the response was complete {(request_ts - response_ts) * 1e3:.3f} ms "
        f"before its request in the capture",
        "response",
    )


class RawSasl:
    """SASL without Kafka headers on one connection: after a SaslHandshake v0 that
    succeeded, the client's messages are raw SASL tokens until it sends a Kafka request
    again, and each is answered by one raw token from the broker. The one state machine
    of the connection core and of the proxy's forwarder."""

    __slots__ = ("active", "awaiting")

    def __init__(self) -> None:
        self.active = False  # client messages are raw tokens
        self.awaiting = 0  # client tokens whose broker token has not come yet

    def client_token(self, data: bytes) -> bool:
        """Whether this client message (after its size) is a raw token."""
        if not self.active:
            return False
        if is_request(data):
            self.active = False  # authenticated: Kafka requests again
            return False
        self.awaiting += 1
        return True

    def broker_token(self) -> bool:
        """Whether this broker message answers a raw client token."""
        if not self.awaiting:
            return False
        self.awaiting -= 1
        return True

    def answered(self, api_key: int | None, api_version: int | None, response: bytes) -> None:
        """A request was answered: a successful SaslHandshake v0 starts raw tokens."""
        if opens_raw_sasl(api_key, api_version, response):
            self.active = True


class _Answers:
    """The answering side's boundary test: does a response to a pending request
    plausibly start at ``buf[pos]``? Not in bytes captured before that request was sent
    (26 bytes of an answer's tail were paired as the next request's answer): told by
    the bytes' timestamps, not by the order they were delivered in (bytes held behind a
    hole come after later requests). ``buf`` ends at the stream offset ``end``; the
    chunks fed while the framer is in doubt are kept as where they start and their
    times (bytes before them: no bound). It holds the correlator, not the connection:
    no cycle, so a finished connection is freed at once."""

    __slots__ = ("pending", "end", "starts", "times")

    def __init__(self, pending: Correlator[Any]):
        self.pending = pending
        self.end = 0
        self.starts: list[int] = []
        self.times: list[float] = []

    def __call__(self, buf: bytearray, pos: int) -> bool:
        corr = _SIZE.unpack_from(buf, pos + 4)[0]
        at = bisect_right(self.starts, self.end - len(buf) + pos) - 1
        return self.pending.waiting_for(corr, self.times[at] if at >= 0 else float("inf"))

    def needles(self) -> list[bytes]:
        return [_SIZE.pack(c) for c in self.pending.expected_ids()]

    def arrive(self, framer: Framer, offset: int, ts: float) -> None:
        """Bytes at ``offset`` came at ``ts`` (kept only while ``framer`` is in doubt)."""
        starts = self.starts
        if framer.resync or framer.unsure_at >= 0:
            if len(starts) > _ARRIVALS_KEPT:  # (those wholly before the bytes held are of no use)
                cut = bisect_right(starts, framer.base) - 1
                if cut > 0:
                    del starts[:cut], self.times[:cut]
            starts.append(offset)
            self.times.append(ts)
        elif starts:
            starts.clear()
            self.times.clear()

    def since(self, ts: float) -> int:
        """The stream offset from which bytes came at ``ts`` or later."""
        at = bisect_left(self.times, ts)
        return self.starts[at] if at < len(self.starts) else self.end


class KafkaConnection:
    """One TCP connection's Kafka traffic; ``side`` 0 is the client's direction.

    ``data``/``gap`` take each direction's bytes by stream offset; ``close`` ends the
    connection (requests still waiting become unanswered exchanges)."""

    __slots__ = (
        "index",
        "client",
        "broker",
        "budget",
        "emit_exchange",
        "emit_gap",
        "next_index",
        "framers",
        "pending",
        "early",
        "sasl",
        "seq",
        "tls",
        "response_gap",
        "last_ts",
        "held_at",
        "opened",
        "side_by",
        "doubt",
        "answers",
        "queue",
    )

    def __init__(
        self,
        index: int,
        client: Any,
        broker: Any,
        emit_exchange: Callable[[Exchange], None],
        emit_gap: Callable[[Gap], None],
        next_index: Callable[[], int],
        budget: Budget | None = None,
    ):
        """``budget``: the process's memory budget, charged with partial messages."""
        self.index, self.client, self.broker = index, client, broker
        self.budget = budget
        self.emit_exchange, self.emit_gap, self.next_index = emit_exchange, emit_gap, next_index
        # each request kept as (message, its findings, its seq on the connection)
        self.pending: Correlator[tuple[KafkaMessage, list[Finding], int]] = Correlator()
        # (the response side's boundary asks the correlator, not this object: no cycle, so
        # a finished connection is freed at once, not by the cyclic collector)
        self.answers = _Answers(self.pending)
        self.framers = (
            Framer(plausible_request),
            Framer(self.answers, needles=self.answers.needles),
        )
        # responses seen before their request (packets reordered across directions),
        # held until the request shows up or the connection ends (made when the first
        # comes: most connections never have one)
        self.early: dict[int, list[tuple[KafkaMessage, list[Finding]]]] | None = None
        self.sasl: RawSasl | None = None  # made by a SaslHandshake v0's answer
        self.seq = 0  # exchanges numbered in the order their first message came
        self.tls: object | None = None  # its capture.tls.TlsFacts when its bytes were decrypted
        self.opened: bool | None = None  # its SYN was captured (None: not known)
        # what decided which side is the client, and how sure (stream.direction)
        self.side_by: str | None = None
        self.doubt: str | None = None  # a weak side_by, for a finding on the first exchange
        # when the response stream last resumed after a hole: the answers of requests
        # complete before then may be lost in it
        self.response_gap = float("-inf")
        self.last_ts = 0.0
        # per side, (ts, frame) of the bytes a message begun but unfinished last got: a
        # message the capture (or the memory budget) cuts is dated by them, not by the
        # connection's last whole message (none: it read 1970-01-01, frame 0)
        self.held_at: list[tuple[float, int] | None] = [None, None]
        # the requests the compiled reassembler's pass paired (``passing``), oldest
        # first, each as the correlator keeps it; None: not passed there
        self.queue: list[tuple[KafkaMessage, list[Finding], int]] | None = None

    # -- input ----------------------------------------------------------------------

    def message(self, side: int, offset: int, body: bytes, ts: float, frame: int) -> None:
        """One whole message at stream ``offset`` (after its size), ``body`` without its
        size: the compiled reassembler's usual chunk (its event 9), taken as ``data``
        takes the message with its size (without copying it less its size)."""
        framer = self.framers[side]
        if not framer.whole_body(body, offset):
            self.data(side, offset - 4, _SIZE.pack(len(body)) + body, ts, frame)
            return
        self._whole(side, framer, offset, body, ts, frame)

    def data(self, side: int, offset: int, payload: bytes, ts: float, frame: int) -> None:
        framer = self.framers[side]
        body = framer.whole(payload, offset)
        if body is not None:  # (one whole message, nothing held)
            self._whole(side, framer, offset + 4, body, ts, frame)
            return
        if side:
            self.answers.end = offset + len(payload)
            self.answers.arrive(framer, offset, ts)
        for f in framer.feed(payload, offset):
            self._message(side, f, ts, frame)
        held = framer.pending
        if held:
            self.held_at[side] = (ts, frame)
        if framer.unread:
            self._unread(side, ts, frame)
        budget = self.budget
        # (most chunks end at a message's end: nothing held, nothing charged before)
        if budget is not None and (held or budget.holds(framer)):
            self._charge(side)

    def _whole(
        self, side: int, framer: Framer, offset: int, body: bytes, ts: float, frame: int
    ) -> None:
        """A whole message ``framer`` took (``Framer.whole`` or ``whole_body``), ``body``
        at ``offset``."""
        if not self.early and self.sasl is None:
            # (_clean's usual case inline: nothing held early, no raw SASL)
            if ts > self.last_ts:
                self.last_ts = ts
            msg = KafkaMessage(
                self.next_index(),
                self.index,
                "request" if side == 0 else "response",
                ts,
                frame,
                offset,
                body,
            )
            if side == 0:
                self._request(msg, [])
            else:
                self._response(msg, [])
        else:
            self._clean(side, offset, body, ts, frame)
        if framer.unread:
            self._unread(side, ts, frame)
        budget = self.budget
        # (nothing held anywhere, the usual: the budget is not asked)
        if budget is not None and budget.used and budget.holds(framer):
            self._charge(side)

    # -- the compiled reassembler's pass (native/src/reasm.rs ``pair``) ----------------

    def passing(self) -> tuple[int, int, list[int]] | None:
        """Where each side's framer stands and the correlation ids pending, oldest first,
        when the connection is in the state the compiled pass reads (nothing held,
        nothing early, no raw SASL, no doubt to tell, each request pending expecting an
        answer with an id of its own and answered as ``_answer``'s usual case); else
        None. ``pass_on`` then moves the pending requests to the queue."""
        if self.early or self.sasl is not None or self.doubt is not None:
            return None
        requests, answers = self.framers
        at0, at1 = requests.at_rest(), answers.at_rest()
        if at0 is None or at1 is None:
            return None
        budget = self.budget
        if budget is not None and (budget.holds(requests) or budget.holds(answers)):
            return None
        if len(self.pending) > PASS_PENDING:
            return None
        waiting = self.pending.plain()
        if waiting is None or any(p.item[0].api_key in _NOT_PASSED for p in waiting):
            return None
        return at0, at1, [p.correlation_id for p in waiting]

    def pass_on(self) -> None:
        """The pass took the connection (``passing`` said so): its pending requests wait
        in the queue, in the order sent."""
        self.queue = [p.item for p in self.pending.close()]

    def passed_request(self, row: tuple[Any, ...]) -> None:
        """A request the pass read (event 10): what ``_whole`` and ``_request`` make of
        a request pending in the usual way, the header given."""
        _, _, offset, body, ts, frame, key, version, corr, client_id = row
        if ts > self.last_ts:
            self.last_ts = ts
        msg = KafkaMessage(
            self.next_index(),
            self.index,
            "request",
            ts,
            frame,
            offset,
            body,
            key,
            version,
            corr,
            client_id,
        )
        seq = self.seq
        self.seq = seq + 1
        assert self.queue is not None, "passed"
        self.queue.append((msg, [], seq))

    def passed_answer(self, row: tuple[Any, ...]) -> None:
        """The answer to the oldest request pending (event 11): ``_answer``'s usual
        case (nothing earlier, expected, not ApiVersions, SaslHandshake or Envelope)."""
        _, _, offset, body, ts, frame, corr = row
        if ts > self.last_ts:
            self.last_ts = ts
        assert self.queue is not None, "passed"
        req, findings, seq = self.queue.pop(0)
        msg = KafkaMessage(
            self.next_index(),
            self.index,
            "response",
            ts,
            frame,
            offset,
            body,
            req.api_key,
            req.api_version,
            corr,
            None,
            req.index,
            "ok",
            "paired by correlation id",
        )
        req.pair = msg.index
        if ts < req.ts:
            findings.append(_impossible_latency(req.ts, ts))
        self.emit_exchange(
            Exchange(
                req,
                msg,
                self.client,
                self.broker,
                self.index,
                seq,
                True,
                findings,
                None,
                "ok",
                None,
                self.tls,
                self.opened,
                self.side_by,
            )
        )

    def pass_back(self, client_end: int, broker_end: int) -> None:
        """The pass hands the connection back (event 12): each side's framer goes on
        after the last message read there (-1: none), the requests queued pend as
        ``_request`` would have left them."""
        for framer, end in zip(self.framers, (client_end, broker_end)):
            if end >= 0:
                framer.passed(end)
        queue, self.queue = self.queue, None
        pending = self.pending
        for item in queue or ():
            msg = item[0]
            corr = msg.correlation_id
            assert corr is not None, "a request passed has its header read"
            # (the pass pends only what usual takes; should it not, _request's way)
            if pending.usual(corr, item, msg.ts) is None:
                self._pend(corr, item, True)

    def cut(self, side: int, offset: int, head: bytes, size: int, why: str, ts: float) -> None:
        """A message of ``size`` bytes at stream ``offset`` of which only ``head`` is
        given (the proxy's display had no room for the rest): paired and shown as cut,
        ``why`` saying so. Framing goes on after it."""
        framer = self.framers[side]
        if framer.pending:
            return  # (in a message: not at a boundary, as the proxy's records always are)
        kept = head[:size]
        framer.skip_to(offset + size)
        self._message(
            side,
            Frame(offset, kept, f"truncated: {why}", [], [(len(kept), size - len(kept))]),
            ts,
            0,
        )

    def _charge(self, side: int) -> None:
        framer = self.framers[side]
        assert self.budget is not None, "charged only with a budget"
        held = framer.pending
        self.budget.set(framer, held, (lambda: self._give_up(side)) if held else _NOTHING)

    def _give_up(self, side: int) -> None:
        f = self.framers[side].give_up()
        if f is not None:
            self._message(side, f, *self._last_bytes(side))

    def gap(self, side: int, offset: int, length: int, ts: float, frame: int) -> None:
        self._emit_gap(side, offset, length, frame, ts)
        if side == 1:  # answers to requests before may be lost
            self.response_gap = max(self.response_gap, ts)
        for f in self.framers[side].gap(offset, length):
            self._message(side, f, ts, frame)
        if side:  # (after the framer: it tested the bytes held before the hole)
            self.answers.end = offset + length
        if self.framers[side].unread:
            self._unread(side, ts, frame)
        if self.budget is not None:
            self._charge(side)

    def _emit_gap(
        self, side: int, offset: int, length: int, frame: int, ts: float, unread: bool = False
    ) -> None:
        direction = "request" if side == 0 else "response"
        self.emit_gap(Gap(self.index, direction, offset, length, frame, ts, unread))

    def _unread(self, side: int, ts: float, frame: int) -> None:
        framer = self.framers[side]
        for offset, length in framer.unread:
            self._emit_gap(side, offset, length, frame, ts, unread=True)
        framer.unread.clear()

    def _last_bytes(self, side: int) -> tuple[float, int]:
        """(ts, frame) of the last bytes of the message ``side`` holds unfinished."""
        return self.held_at[side] or (self.last_ts, 0)

    def close(self) -> None:
        if self.queue is not None:  # (the pass hands a connection back before its close)
            self.pass_back(-1, -1)
        budget = self.budget
        for side, framer in enumerate(self.framers):
            if budget is not None:
                budget.drop(framer)
            for f in framer.close():
                self._message(side, f, *self._last_bytes(side))
            if framer.unread:
                self._unread(side, self.last_ts, 0)
        if self.early:
            for waiting in self.early.values():
                for resp, findings in waiting:
                    self._orphan(resp, findings)
            self.early.clear()
        if self.pending:
            for p in self.pending.close():
                self._unanswered(p, "unanswered")

    # -- messages -------------------------------------------------------------------------

    def _emit(
        self,
        request: KafkaMessage | None,
        response: KafkaMessage | None,
        seq: int,
        findings: list[Finding],
        expected: bool = True,
    ) -> None:
        if self.doubt is not None:  # said once, on the first exchange
            findings.append(
                Finding(
                    "client_side_guessed",
                    self.doubt,
                    "request" if request is not None else "response",
                )
            )
            self.doubt = None
        self.emit_exchange(
            Exchange(  # (by position: by keyword it cost twice as much to make)
                request,
                response,
                self.client,
                self.broker,
                self.index,
                seq,
                expected,
                findings,
                None,
                "ok",
                None,
                self.tls,
                self.opened,
                self.side_by,
            )
        )

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq - 1

    def _message(self, side: int, f: Frame, ts: float, frame: int) -> None:
        self._clean(side, f.offset, f.data, ts, frame, f if f.truncated or f.budget else None)

    def _clean(
        self,
        side: int,
        offset: int,
        data: bytes,
        ts: float,
        frame: int,
        cut: Frame | None = None,
    ) -> None:
        """A message framed: whole (the usual: no ``Frame`` made), or ``cut`` (a frame
        whose message was cut by holes or given up to the memory budget)."""
        if self.early:
            self._orphan_stale(ts)
        if ts > self.last_ts:
            self.last_ts = ts
        msg = KafkaMessage(
            self.next_index(),
            self.index,
            "request" if side == 0 else "response",
            ts,
            frame,
            offset,
            data,
        )
        findings: list[Finding] = []
        if cut is not None:
            if cut.budget:
                findings.append(
                    Finding(
                        "memory_budget",
                        (cut.truncated or "").removeprefix("truncated: "),
                        msg.direction,
                    )
                )
            if cut.truncated:
                msg.status = cut.truncated
                msg.pieces, msg.holes = cut.pieces, cut.holes
                msg.size += sum(len(p) for _, p in cut.pieces or ())
                findings.append(Finding("message_truncated", cut.truncated, msg.direction))
        sasl = self.sasl  # (its state read here: a call per message)
        if sasl is not None:
            if side == 0 and sasl.active and sasl.client_token(data):
                msg.direction = "sasl"
                findings.append(Finding("sasl_token", "from the client", "sasl"))
                self._emit(msg, None, self._next_seq(), findings)
                return
            if side == 1 and sasl.awaiting and sasl.broker_token():
                msg.direction = "sasl"
                findings.append(Finding("sasl_token", "from the broker", "sasl"))
                self._emit(None, msg, self._next_seq(), findings)
                return
        if side == 0:
            self._request(msg, findings)
        else:
            self._response(msg, findings)

    def _request(self, msg: KafkaMessage, findings: list[Finding]) -> None:
        head = request_head(msg.data)
        if head is None and msg.status.startswith("truncated"):
            self._cut_head(msg, findings)
            return
        if head is None:
            msg.status = "malformed header"
            findings.append(Finding("malformed_header", "", "request"))
            self._emit(msg, None, self._next_seq(), findings)
            return
        msg.api_key, msg.api_version, corr, msg.client_id, _, acks = head
        msg.correlation_id = corr
        seq = self.seq  # (_next_seq inline: a call per request)
        self.seq = seq + 1
        if self.answers.starts:  # the answers' framer in doubt: its answer may be held
            self.framers[1].search_again(self.answers.since(msg.ts))
        if acks != 0 and self.pending.usual(corr, (msg, findings, seq), msg.ts) is not None:
            # (the usual: pending, its id not reused, nothing finished)
            if self.early and corr in self.early:
                self._early(corr)
            return
        self._pend(corr, (msg, findings, seq), acks != 0)

    def _cut_head(self, msg: KafkaMessage, findings: list[Finding]) -> None:
        """A request cut inside its header (a client that reset mid-request, a capture
        that ended): named by what arrived (API key, version, correlation id) and shown
        on its own; not malformed, the cut explains it, and the broker never had it
        whole, so no answer is awaited."""
        data = msg.data
        if len(data) >= 4:
            msg.api_key, msg.api_version = _KEY_VERSION.unpack_from(data)
        if len(data) >= 8:
            msg.correlation_id = _CORRELATION.unpack_from(data, 4)[0]
        self._emit(msg, None, self._next_seq(), findings)

    def _pend(
        self, corr: int, item: tuple[KafkaMessage, list[Finding], int], expects: bool
    ) -> None:
        """A request (``item``: its message, findings and seq) pending beyond the
        correlator's usual case: its id reused, requests it pushed out or finished given
        up."""
        msg, findings, _ = item
        pending, finished = self.pending.request(corr, item, expects, msg.ts)
        if pending.reused:
            findings.append(
                Finding(
                    "correlation_reused",
                    f"correlation id {corr} was still pending",
                    "request",
                )
            )
        for p in finished:  # acks=0 ones done waiting, or pushed out
            self._unanswered(p, "pending_limit")
        if self.early and corr in self.early:
            self._early(corr)

    def _early(self, corr: int) -> None:
        """A request with ``corr`` came: the first response held for it is taken."""
        assert self.early is not None
        early = self.early[corr]
        if early:
            resp, resp_findings = early.pop(0)
            if not early:
                del self.early[corr]
            self._response(resp, resp_findings)

    def _unanswered(self, p: Pending[Any], code: str) -> None:
        """A request finished without an answer; ``code`` says why, if it expected one."""
        msg, findings, seq = p.item
        if p.expected:
            if code == "unanswered" and msg.ts <= self.response_gap:
                code = "response_lost"  # its answer may be in a hole of the capture
            findings.append(Finding(code, "", "request"))
        self._emit(msg, None, seq, findings, p.expected)

    def _orphan_stale(self, now: float) -> None:
        """Responses held for a request that has not come in ``EARLY_WAIT`` seconds are
        orphans: their request was not captured (a capture that began mid-connection)."""
        assert self.early is not None, "called with responses held"
        for corr in list(self.early):
            waiting = self.early[corr]
            while waiting and now - waiting[0][0].ts >= EARLY_WAIT:
                self._orphan(*waiting.pop(0))
            if not waiting:
                del self.early[corr]

    def _orphan(self, msg: KafkaMessage, findings: list[Finding]) -> None:
        findings.append(Finding("orphan_response", "", "response"))
        self._emit(None, msg, self._next_seq(), findings)

    def _response(self, msg: KafkaMessage, findings: list[Finding]) -> None:
        corr = _SIZE.unpack_from(msg.data)[0] if len(msg.data) >= 4 else None
        msg.correlation_id = corr
        if corr is None:
            self._orphan(msg, findings)
            return
        answered = self.pending.first(corr)
        if answered is not None:  # (the usual: the oldest request, nothing else to say)
            self._answer(msg, findings, answered, None)
            return
        match, finished = self.pending.response(corr, msg.ts)
        for p in finished:  # acks=0 requests: no answer will come
            self._unanswered(p, "unanswered")
        if match is None:
            if self.early is None:
                self.early = {}
            early = self.early
            early.setdefault(corr, []).append((msg, findings))
            if sum(map(len, early.values())) > MAX_EARLY:
                oldest = min(early, key=lambda c: early[c][0][0].index)
                self._orphan(*early[oldest].pop(0))
                if not early[oldest]:
                    del early[oldest]
            return
        # (its fields read directly: Match's properties are calls)
        self._answer(msg, findings, match.pending, match.earlier)

    def _answer(
        self,
        msg: KafkaMessage,
        findings: list[Finding],
        answered: Pending[Any],
        earlier: list[Pending[Any]] | None,
    ) -> None:
        """``msg`` answers ``answered``; ``earlier``: requests sent before it still
        waiting (None: none)."""
        req, req_findings, seq = answered.item
        msg.api_key, msg.api_version = req.api_key, req.api_version
        if req.api_key == ENVELOPE:
            msg.forwarded = forwarded_api(req.data)
        msg.pair, req.pair = req.index, msg.index
        msg.how = "paired by correlation id"
        if findings:
            findings = req_findings + findings
        else:  # (the usual: nothing said of the response yet; the request's list is free)
            findings = req_findings
        if not answered.expected:
            findings.append(Finding("acks0_answered", "", "response"))
        if req.api_key == API_VERSIONS:  # (the one API that may answer in another version)
            version = answered_version(req.api_key, req.api_version, msg.data)
            if version != req.api_version:
                msg.api_version = version
                findings.append(
                    Finding(
                        "answered_in_v0",
                        f"v{req.api_version} is not a version the broker supports: it "
                        f"answered in v{version}, which says the versions it does",
                        "response",
                    )
                )
        if earlier:
            if all(p.ts <= self.response_gap for p in earlier):
                # their answers were most likely in a hole: nothing was out of order
                for p in self.pending.give_up(earlier):
                    self._unanswered(p, "response_lost")
            else:
                findings.append(Finding("out_of_order", "", "response"))
        if msg.ts < req.ts:
            findings.append(_impossible_latency(req.ts, msg.ts))
        if req.api_key == SASL_HANDSHAKE:
            if self.sasl is None:
                self.sasl = RawSasl()
            self.sasl.answered(req.api_key, req.api_version, msg.data)
        if self.doubt is not None:
            self._emit(req, msg, seq, findings, answered.expected)
            return
        self.emit_exchange(  # (_emit inline: a call per exchange)
            Exchange(
                req,
                msg,
                self.client,
                self.broker,
                self.index,
                seq,
                answered.expected,
                findings,
                None,
                "ok",
                None,
                self.tls,
                self.opened,
                self.side_by,
            )
        )
