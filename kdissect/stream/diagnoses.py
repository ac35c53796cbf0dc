"""Kafka-level diagnoses: what the exchanges of a capture say about the clients and
brokers (idempotent producers' sequences, consumer lag, rebalances and their causes,
fetches that return nothing for long, commits behind what was fetched, versions Kafka
4.0 removed, clients that never ask ApiVersions, clock skew, leadership storms, slow
answers), as registered findings with their evidence in the text.

Each diagnosis fires only on complete evidence: a message the capture cut, a missing
answer or a connection seen mid-stream makes it stay silent (docs/guide/findings.md says when
each one cannot know). What one connection shows is kept per connection; what clients do
across connections (a producer retrying on a new connection, a consumer group's members,
a consumer's fetches and its commits) is kept per capture, so a Spark job that decodes
a split file flow by flow sees only each connection's part. State is bounded in size.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, deque
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any

from ..protocol.apis import (
    API_VERSIONS,
    BEGIN_QUORUM_EPOCH,
    BROKER_HEARTBEAT,
    CONSUMER_GROUP_HEARTBEAT,
    END_QUORUM_EPOCH,
    END_TXN,
    FETCH,
    FETCH_SNAPSHOT,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    PRODUCE,
    SYNC_GROUP,
    VOTE,
)
from ..protocol.findings import Finding
from ..protocol.names import error_code, error_name
from ..protocol.native_ext import bind
from ..protocol.node import Node
from ..protocol.removed_versions import REMOVED
from .anomaly import SLOW, client_wait
from .fields import ExchangeFields
from .model import Exchange, Gap, KafkaMessage

# the codes this module adds (--stats counts them)
CODES = (
    "removed_version",
    "no_api_versions",
    "clock_skew",
    "producer_sequence_gap",
    "producer_retry",
    "producer_epoch_bump",
    "consumer_lag",
    "consumer_rebalance",
    "empty_fetches",
    "commit_behind_fetch",
    "leadership_storm",
    "slow_response",
    "controlled_shutdown",
)
# the codes drawn from several connections (state kept per capture): a job that decodes a
# split file flow by flow finds fewer of them, never others
ACROSS_CONNECTIONS = frozenset(
    {
        "producer_sequence_gap",
        "producer_retry",
        "producer_epoch_bump",
        "consumer_rebalance",
        "commit_behind_fetch",
    }
)

STORM_COUNT = 10  # that many leadership errors on a connection ...
STORM_WINDOW = 5.0  # ... within these seconds is a storm
SKEW_S = 300.0  # record timestamps this far from the capture clock: skew

# native/src/produce.rs's produce_quiet(body, answer, ts, SKEW_S): True where _produce
# would say and keep nothing (None: no extension, or KDISSECT_PURE; native_ext.refresh)
_PRODUCE_QUIET = bind(__name__, "_PRODUCE_QUIET", "produce_quiet")
EMPTY_S = 10.0  # a consumer's fetches returning nothing for this long
MAX_TRACKED = 100_000  # producer/partition/group states kept (oldest dropped first)
SENDS_KEPT = 8  # a producer/partition's latest sends compared for retries

QUORUM = frozenset({VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH_SNAPSHOT})
# the answers that start a producer epoch: InitProducerId, and EndTxn from v5 (transactions
# v2, KIP-890, bump the epoch at each transaction's end)
EPOCH_STARTS = frozenset({INIT_PRODUCER_ID, END_TXN})


@functools.cache
def _codes(*names: str) -> frozenset[int]:
    """Error codes by the names Kafka gives them (kdissect's error table)."""
    return frozenset(error_code(n) for n in names)


# answers that mean "ask the right broker": the client's metadata is stale
LEADERSHIP = ("NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "NOT_COORDINATOR")
# what a coordinator tells a member it no longer has (its session expired, or it was
# fenced): the member must join again
EXPIRED = ("UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH")


def plain(body: Node | dict[Any, Any] | None) -> Any:
    """A body as plain values (the values decoder's dicts are already): structs ->
    dicts (tagged fields among them), arrays -> lists, a records field -> its record
    batches' headers."""
    if body is None or not isinstance(body, Node):
        return body
    kind = body.ktype
    if kind == "array":
        return [plain(c) for c in body.children if c.name.startswith("[")]
    if kind == "records":
        return [plain(c) for c in body.children if c.ktype == "record_batch" and not c.problem]
    if body.children:
        out: dict[str, Any] = {}
        for c in body.children:
            if c.ktype == "tagged_fields":  # known tags by name, as the values decoder
                for tag in c.children:  # gives them (Fetch's replica_state)
                    out.update(
                        (v.name, plain(v)) for v in tag.children if not v.name.startswith("_")
                    )
            elif not c.name.startswith("_"):
                out[c.name] = plain(c)
        return out
    return body.value


def _topic(element: dict[Any, Any], topic_ids: dict[str, str]) -> str | None:
    name = element.get("topic", element.get("name"))
    if isinstance(name, str):
        return name
    tid = element.get("topic_id")
    return topic_ids.get(tid, tid) if isinstance(tid, str) else None


def _partitions(
    body: Any, topics: str, parts: str, topic_ids: dict[str, str]
) -> Iterator[tuple[str, Any]]:
    """(topic, partition element) of a body's topics[].partitions[] arrays."""
    if not isinstance(body, dict):
        return
    for t in body.get(topics) or ():
        if isinstance(t, dict):
            name = _topic(t, topic_ids)
            for p in t.get(parts) or ():
                if isinstance(p, dict) and name is not None:
                    yield name, p


def _index(p: dict[Any, Any]) -> int | None:
    for key in ("index", "partition", "partition_index"):
        v = p.get(key)
        if type(v) is int:
            return v
    return None


def _produce_errors(answer: Any, topic_ids: dict[str, str]) -> dict[tuple[str, int | None], int]:
    """A Produce answer's error code per (topic, partition) (0 where it is not an int)."""
    errors: dict[tuple[str, int | None], int] = {}
    for topic, p in _partitions(answer, "responses", "partition_responses", topic_ids):
        code = p.get("error_code")
        errors[topic, _index(p)] = code if type(code) is int else 0
    return errors


def _appended(answer: Any, topic_ids: dict[str, str]) -> dict[tuple[str, int | None], int]:
    """When the broker stamped each (topic, partition) of a Produce answer
    (log_append_time_ms, LogAppendTime topics only: -1 elsewhere), ms."""
    appended: dict[tuple[str, int | None], int] = {}
    if not isinstance(answer, dict):
        return appended
    for t in answer.get("responses") or ():
        if not isinstance(t, dict):
            continue
        for p in t.get("partition_responses") or ():
            # (the partition's time first: its topic is read only for a stamped one)
            if isinstance(p, dict):
                at = p.get("log_append_time_ms")
                if type(at) is int and at >= 0:
                    topic = _topic(t, topic_ids)
                    if topic is not None:
                        appended[topic, _index(p)] = at
    return appended


def _complete(m: KafkaMessage | None) -> bool:
    return m is not None and m.status == "ok" and not m.holes


@dataclass(slots=True)
class _Send:
    """One Produce of an idempotent producer's batch to one partition."""

    stream: int
    order: int  # the request's order on its connection
    corr: int | None
    sent: float  # when the request was complete in the capture
    answered: float | None  # when its answer was (None: no answer captured)
    error: int | None  # the partition's answer (None: no answer captured)
    first: int
    last: int

    def before(self, other: _Send) -> bool:
        """Whether ``other`` was sent after this send was over (answered, or given up
        on): only then is it a retry. On one connection the order tells; across
        connections a send still waiting may be the same request seen on both sides of
        a proxy (the same correlation id, answered after the other was sent)."""
        if not self.earlier(other):
            return False
        if self.stream == other.stream:
            return True
        return self.corr != other.corr and (self.answered is None or self.answered <= other.sent)

    def earlier(self, other: _Send) -> bool:
        """Whether this send came first."""
        if self.stream == other.stream:
            return self.order < other.order
        return self.sent < other.sent


@dataclass(slots=True)
class _Group:
    """What the capture shows of one consumer group (classic generations, or KIP-848
    epochs), and what happened since the last rebalance seen."""

    generation: int | None = None
    members: frozenset[str] | None = None  # the last generation's (leader's answer)
    causes: list[str] | None = None
    # connection -> the member id last used on it (a member that comes back after the
    # coordinator dropped it joins again on its connection with a new id)
    on: dict[tuple[str, int], str] | None = None
    gone: dict[str, str] | None = None  # member -> how it was dropped

    def cause(self, text: str) -> None:
        self.causes = self.causes or []
        if len(self.causes) < 10:
            self.causes.append(text)

    def uses(self, client: tuple[str, int], member: Any) -> None:
        if isinstance(member, str) and member:
            self.on = self.on or {}
            if len(self.on) < 1000 or client in self.on:
                self.on[client] = member

    def dropped(self, member: str, how: str) -> None:
        self.gone = self.gone or {}
        if len(self.gone) < 1000:
            self.gone[member] = how

    def joined(self, client: tuple[str, int], member: str) -> None:
        before = self.on.get(client) if self.on else None
        how = self.gone.pop(before, None) if self.gone and before else None
        # a KIP-848 member keeps its id when it joins again; a classic one gets a new id
        again = "" if before == member else f" as {member}"
        self.cause(
            f"member {before}, {how}, joined again on its connection{again}"
            if how
            else f"new member {member} joined"
        )
        self.uses(client, member)


class _Sends(deque["_Send"]):
    """A producer/partition's latest sends, and the highest sequence any of them ended
    at (``top``: never below the kept sends' ends, so a batch starting above it
    overlaps none of them)."""

    def __init__(self, maxlen: int):
        super().__init__(maxlen=maxlen)
        self.top = -1

    def append(self, send: _Send) -> None:
        deque.append(self, send)  # (not super(): a call per idempotent batch)
        if send.last > self.top:
            self.top = send.last


class Diagnoses:
    """Watches enriched exchanges in order and adds the diagnoses' findings."""

    def __init__(self) -> None:
        # (client host, client id, producer id, epoch, topic, partition) -> the latest
        # sends of its batches, kept per capture: clients retry on a new connection after
        # a timeout or NOT_LEADER. (The client is in the key because producer ids are a
        # cluster's: two clusters in one capture may both have a producer 0.)
        self.sends: OrderedDict[tuple[Any, ...], _Sends] = OrderedDict()
        # (client host, client id, producer id) -> epoch
        self.epochs: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        # (client host, client id, producer id, epoch) whose start the capture holds (an
        # answer gave the client that epoch): its accepted batches are all in the capture
        self.started: OrderedDict[tuple[Any, ...], bool] = OrderedDict()
        self.storms: dict[int, deque[float]] = {}  # stream -> leadership errors' times
        self.stormy: dict[int, float] = {}  # stream -> last storm reported
        # streams whose answers had a hole: the bytes after a lost segment are complete
        # only when the hole is given up on, so their latencies are not the broker's
        self.answers_cut: set[int] = set()
        # (coordinator address, group id) -> its state
        self.groups: OrderedDict[tuple[Any, ...], _Group] = OrderedDict()
        # stream -> (first fetch of a run that returned nothing, how many, reported)
        self.empty: dict[int, tuple[float, int, bool]] = {}
        # (client host, client id, topic, partition) -> (offset after the last record
        # returned, when that answer came)
        self.fetched: OrderedDict[tuple[Any, ...], tuple[int, float]] = OrderedDict()
        # (controller address, broker id, broker epoch) of shutdowns said
        self.shutdowns: OrderedDict[tuple[Any, ...], bool] = OrderedDict()

    def gap(self, g: Gap) -> None:
        if g.direction == "response":
            self.answers_cut.add(g.stream)
            self.empty.pop(g.stream, None)  # a lost answer may have held records

    def observe(
        self, ex: Exchange, req_body: Any, resp_body: Any, topic_ids: dict[str, str]
    ) -> None:
        req, resp = ex.request, ex.response
        out = ex.findings
        if req is not None and req.direction == "request" and req.api_key is not None:
            whole = req.status == "ok" and not req.holes  # (_complete, asked once)
            if whole and (
                (req.api_key, req.api_version) in REMOVED or (ex.opened and req.offset == 4)
            ):  # (what _versions can say anything of: asked here, cheaply)
                self._versions(ex, out, whole)
            key = req.api_key
            if key == PRODUCE and whole:
                # (plain and _complete inline for values dicts: calls per Produce)
                body = req_body if type(req_body) is dict else plain(req_body)
                answer = (
                    (resp_body if type(resp_body) is dict else plain(resp_body))
                    if resp is not None and resp.status == "ok" and not resp.holes
                    else None
                )
                # (most Produces say nothing: told by the extension without the walk)
                if _PRODUCE_QUIET is None or not _PRODUCE_QUIET(body, answer, req.ts, SKEW_S):
                    self._produce(ex, body, answer, topic_ids, out)
            elif whole and resp is not None and resp.status == "ok" and not resp.holes:
                if key == FETCH:
                    # (a follower's or a voter's Fetch, most of a cluster's, says nothing
                    # here: told from its dict without three calls)
                    if type(req_body) is not dict or _consumer(req_body):
                        self._fetch(ex, plain(req_body), plain(resp_body), topic_ids, out)
                elif key in (
                    JOIN_GROUP,
                    LEAVE_GROUP,
                    HEARTBEAT,
                    SYNC_GROUP,
                    CONSUMER_GROUP_HEARTBEAT,
                ):
                    self._group(ex, key, plain(req_body), plain(resp_body), out)
                elif key == OFFSET_COMMIT:
                    self._commit(ex, plain(req_body), plain(resp_body), topic_ids, out)
                elif key == BROKER_HEARTBEAT:
                    self._shutdown(ex, plain(req_body), plain(resp_body), out)
                elif key in EPOCH_STARTS:
                    self._epoch_start(ex, plain(resp_body))
            elif key == FETCH:
                self.empty.pop(ex.stream, None)  # what it returned is not known
        # (the KRaft quorum's own requests -- its Fetch of __cluster_metadata, Vote,
        # Begin/EndQuorumEpoch, FetchSnapshot -- are answered NOT_LEADER_OR_FOLLOWER or
        # FENCED_LEADER_EPOCH while the quorum elects a leader, at start-up or after a
        # leader left: the answers name the leader, so these are election steps, no storm)
        if (
            resp is not None
            and resp.direction == "response"
            and ex.facts is not None
            and ex.facts.errors
            and ex.first.api_key not in QUORUM
            and not (ex.first.api_key == FETCH and "__cluster_metadata" in ex.facts.topics)
        ):
            self._storm(ex, out)
        if req is not None and resp is not None and resp.ts - req.ts > SLOW:
            self._slow(ex, out)  # (only a latency above SLOW can be: asked inline)

    # -- clients ---------------------------------------------------------------------------

    def _versions(self, ex: Exchange, out: list[Finding], whole: bool) -> None:
        """``whole``: the request is ``_complete``."""
        req = ex.request
        assert req is not None and req.api_key is not None and req.api_version is not None
        # a request framed after a hole (or a connection's sides mistaken) may be bytes that
        # only look like a header: claim only what a whole, cleanly decoded request says
        clean = whole and not (
            out and any(f.kind.group == "malformed" and f.where.startswith("request") for f in out)
        )
        gone = REMOVED.get((req.api_key, req.api_version)) if clean else None
        if gone is not None:
            out.append(
                Finding(
                    "removed_version",
                    f"{req.api_name} v{req.api_version}: Kafka "
                    f"{gone} no longer accepts it" + (" (KIP-896)" if gone == "4.0" else ""),
                    "request",
                )
            )
        # offset 4: the first message of a connection whose SYN was captured
        if clean and ex.opened and req.offset == 4 and req.api_key != API_VERSIONS:
            out.append(
                Finding(
                    "no_api_versions",
                    f"the connection opens with {req.api_name} "
                    f"v{req.api_version}, not ApiVersions: the client chose "
                    "versions without asking the broker",
                    "request",
                )
            )

    def _produce(
        self, ex: Exchange, body: Any, answer: Any, topic_ids: dict[str, str], out: list[Finding]
    ) -> None:
        # A finding or a state added here must be told to native/src/produce.rs too: it
        # answers "nothing to say" for most Produces without calling this
        # (tests/test_produce_quiet.py compares the two on all the diagnoses keep).
        # (_partitions, _index and _skew inline: an idempotent producer's one-record
        # Produce, the whole of a small-produce capture, made a call of each per batch;
        # the answer's errors are read only for an idempotent batch, and its partitions'
        # names only where the broker stamped them: most producers' batches need neither)
        req = ex.request
        assert req is not None
        errors: dict[tuple[str, int | None], int] | None = None
        capture_ms = req.ts * 1000
        if isinstance(body, dict):
            for t in body.get("topic_data") or ():
                if not isinstance(t, dict):
                    continue
                topic = t.get("topic", t.get("name"))
                if type(topic) is not str:  # (_topic's usual case first)
                    topic = _topic(t, topic_ids)
                    if topic is None:
                        continue
                for p in t.get("partition_data") or ():
                    if not isinstance(p, dict):
                        continue
                    part = p.get("index")
                    if type(part) is not int:
                        part = _index(p)
                    for batch in p.get("records") or ():
                        if not isinstance(batch, dict) or batch.get("magic") != 2:
                            continue
                        attrs, stamp = batch.get("attributes"), batch.get("max_timestamp")
                        # (LogAppendTime: the broker stamps it, not the client)
                        if (
                            type(attrs) is int
                            and not attrs & 8
                            and type(stamp) is int
                            and stamp >= 0
                            and abs((stamp - capture_ms) / 1000) > SKEW_S
                        ):
                            self._skew(batch, capture_ms, topic, part, out)
                        # (else not an idempotent producer's batch: _sequence says
                        # nothing of it, asked without a call)
                        pid = batch.get("producer_id")
                        if type(pid) is int and pid >= 0:
                            if errors is None:
                                errors = _produce_errors(answer, topic_ids)
                            self._sequence(
                                ex,
                                batch,
                                topic,
                                part,
                                errors.get((topic, part)) if answer is not None else None,
                                out,
                            )
        for (topic, part), t in _appended(answer, topic_ids).items():
            assert ex.response is not None  # appended is read from the answer
            ahead = (t - ex.response.ts * 1000) / 1000
            if abs(ahead) > SKEW_S:
                out.append(
                    Finding(
                        "clock_skew",
                        f"the broker stamped {topic}[{part}] "
                        f"{_ahead(ahead)} the capture clock (LogAppendTime)",
                        "response",
                    )
                )

    def _epoch_start(self, ex: Exchange, answer: Any) -> None:
        if not isinstance(answer, dict) or answer.get("error_code") != 0:
            return
        pid, epoch = answer.get("producer_id"), answer.get("producer_epoch")
        if type(pid) is int and type(epoch) is int and pid >= 0 and epoch >= 0:
            assert ex.request is not None
            _put(self.started, (ex.client[0], ex.request.client_id, pid, epoch), True)

    def _skew(
        self,
        batch: dict[Any, Any],
        capture_ms: float,
        topic: str,
        part: int | None,
        out: list[Finding],
    ) -> None:
        attrs, stamp = batch.get("attributes"), batch.get("max_timestamp")
        if type(attrs) is not int or attrs & 8 or type(stamp) is not int or stamp < 0:
            return  # LogAppendTime: the broker stamps it, not the client
        ahead = (stamp - capture_ms) / 1000
        if abs(ahead) > SKEW_S:
            out.append(
                Finding(
                    "clock_skew",
                    f"records for {topic}[{part}] stamped "
                    f"{_ahead(ahead)} the "
                    "capture clock (CreateTime)",
                    "request",
                )
            )

    def _sequence(
        self,
        ex: Exchange,
        batch: dict[Any, Any],
        topic: str,
        part: int | None,
        error: int | None,
        out: list[Finding],
    ) -> None:
        get = batch.get
        pid, epoch, seq, count = (
            get("producer_id"),
            get("producer_epoch"),
            get("base_sequence"),
            get("record_count"),
        )
        if (
            not (
                type(pid) is int and type(epoch) is int and type(seq) is int and type(count) is int
            )
            or pid < 0
            or seq < 0
            or count < 1
        ):
            return  # not an idempotent producer's batch
        req, resp = ex.request, ex.response
        assert req is not None
        producer = (ex.client[0], req.client_id, pid)
        known = self.epochs.get(producer)
        if known is not None and epoch > known:
            out.append(
                Finding(
                    "producer_epoch_bump",
                    f"producer {pid}: epoch {known} -> {epoch} (sequences start again)",
                    "request",
                )
            )
        if known is None or epoch >= known:
            epochs = self.epochs  # (_put inline: a call per batch)
            epochs[producer] = epoch
            epochs.move_to_end(producer)
            if len(epochs) > MAX_TRACKED:
                epochs.popitem(last=False)
        this = _Send(
            ex.stream,
            ex.seq,
            req.correlation_id,
            req.ts,
            resp.ts if resp is not None and error is not None else None,
            error,
            seq,
            seq + count - 1,
        )
        key = (*producer, epoch, topic, part)
        table = self.sends
        sends = table.get(key)
        if sends is None:
            sends = _Sends(SENDS_KEPT)
        table[key] = sends  # (_put inline)
        table.move_to_end(key)
        if len(table) > MAX_TRACKED:
            table.popitem(last=False)
        if this.first > sends.top and (
            not error or error not in _codes("OUT_OF_ORDER_SEQUENCE_NUMBER")
        ):
            # the common case, told cheaply: a batch past every kept send overlaps none,
            # and was not refused as out of order: nothing to say
            sends.append(this)
            return
        where = f"producer {pid} epoch {epoch}, {topic}[{part}]"
        batch_seqs = f"batch {this.first}-{this.last}"
        if error in _codes("OUT_OF_ORDER_SEQUENCE_NUMBER"):
            accepted = max(
                (s.last + 1 for s in sends if s.error == 0 and s.earlier(this)), default=None
            )
            # what the broker expected is known only if every batch it accepted of this
            # epoch is in the capture: the epoch's start is; else the capture's accepted
            # batches give a floor (sequences only grow within an epoch)
            said = (
                "no earlier accepted batch of it in the capture"
                if accepted is None
                else f"the broker expected {accepted}"
                if (*producer, epoch) in self.started
                else f"the broker expected at least {accepted} (the start of this "
                "producer epoch is not in the capture: batches it accepted later may be "
                "missing)"
            )
            out.append(
                Finding(
                    "producer_sequence_gap",
                    f"{where}: {batch_seqs} refused (OUT_OF_ORDER_SEQUENCE_NUMBER); {said}",
                    "request",
                )
            )
        overlapping = [s for s in sends if s.first <= this.last and this.first <= s.last]
        earlier = [s for s in overlapping if s.before(this)]
        later = [s for s in overlapping if this.before(s)]
        if earlier:
            prior = max(earlier, key=lambda s: s.sent)
            out.append(
                Finding(
                    "producer_retry",
                    f"{where}: {batch_seqs} sent again (a retry: "
                    f"the {_send(prior, this)} {_answer(prior)}; this one "
                    f"{_answer(this)}{': written once' if this.error == 0 else ''})",
                    "request",
                )
            )
        elif later:
            # reported late (an unanswered request comes out when its connection ends):
            # its retry came out first
            retry = min(later, key=lambda s: s.sent)
            out.append(
                Finding(
                    "producer_retry",
                    f"{where}: {batch_seqs} {_answer(this)}; "
                    f"sent again later (a retry: the {_send(retry, this)} "
                    f"{_answer(retry)})",
                    "request",
                )
            )
        sends.append(this)

    # -- consumers -------------------------------------------------------------------------

    def _fetch(
        self, ex: Exchange, body: Any, answer: Any, topic_ids: dict[str, str], out: list[Finding]
    ) -> None:
        """A consumer's Fetch: its lag, a run of fetches that return nothing, and how far
        it was given records (for commits behind them)."""
        if not isinstance(body, dict) or not isinstance(answer, dict) or not _consumer(body):
            return
        req, resp = ex.request, ex.response
        assert req is not None and resp is not None
        # (the request's _partitions inline: a generator per consumer Fetch)
        asked = {}
        for t in body.get("topics") or ():
            if isinstance(t, dict):
                topic = _topic(t, topic_ids)
                for p in t.get("partitions") or ():
                    if isinstance(p, dict) and topic is not None:
                        asked[topic, _index(p)] = p.get("fetch_offset")
        behind: list[str] = []
        # what each partition that gave nothing says: text, or _why_empty's arguments
        # (written only if empty_fetches says them: most empty answers never are)
        idle: list[Any] = []
        returned = False
        # a read_committed consumer reads up to the last stable offset, and Kafka's
        # clients count its lag from there (an open transaction's records wait)
        committed = body.get("isolation_level") == 1
        for topic, p in _partitions(answer, "responses", "partitions", topic_ids):
            part = _index(p)
            batches = [b for b in p.get("records") or () if isinstance(b, dict)]
            returned = returned or bool(batches)
            start, high, error = (
                asked.get((topic, part)),
                p.get("high_watermark"),
                p.get("error_code"),
            )
            limit, mark = high, "high watermark"
            if committed:
                stable = p.get("last_stable_offset")  # (unknown: no lag is said)
                limit = stable if type(stable) is int and stable >= 0 else None
                mark = "last stable offset, read_committed"
            if error:
                idle.append(
                    f"{topic}[{part}] answered {error_name(error)}"
                    if type(error) is int
                    else f"{topic}[{part}]"
                )
                continue
            if type(start) is not int or type(high) is not int:
                continue
            after = _after(batches)
            self._given(ex, topic, part, start, after)
            end = start if after is None else max(start, after)
            if limit is not None and limit - end > 0:
                behind.append(
                    f"{topic}[{part}] {limit - end} behind (fetched at {start}, {mark} {limit})"
                )
            if after is None:
                idle.append((topic, part, start, high, p.get("last_stable_offset")))
        if behind:
            out.append(Finding("consumer_lag", _some(behind), "response"))
        self._empty(ex.stream, req.ts, resp.ts, returned, idle, out)

    def _given(
        self, ex: Exchange, topic: str, part: int | None, start: int, after: int | None
    ) -> None:
        """Remember how far this client was given records of a partition."""
        req, resp = ex.request, ex.response
        assert req is not None and resp is not None
        key = (ex.client[0], req.client_id, topic, part)
        known = self.fetched.get(key)
        if known is not None and start < known[0]:
            # it went back (a seek, a reset): what it was given before no longer counts
            self.fetched.pop(key)
            known = None
        if after is not None and (known is None or after > known[0]):
            _put(self.fetched, key, (after, resp.ts))

    def _empty(
        self,
        stream: int,
        asked: float,
        now: float,
        returned: bool,
        idle: list[Any],
        out: list[Finding],
    ) -> None:
        """``idle``: what each partition that gave nothing says, as text or as
        ``_why_empty``'s arguments."""
        if returned:
            self.empty.pop(stream, None)
            return
        first, count, said = self.empty.get(stream, (asked, 0, False))
        count += 1
        if not said and now - first >= EMPTY_S:
            said = True
            why = (
                _some([i if type(i) is str else _why_empty(*i) for i in idle])
                if idle
                else ("no partition in the answers (an incremental fetch session: nothing changed)")
            )
            out.append(
                Finding(
                    "empty_fetches",
                    f"{count} fetches over {now - first:.1f} s returned no records: {why}",
                    "response",
                )
            )
        self.empty[stream] = (first, count, said)

    def _commit(
        self, ex: Exchange, body: Any, answer: Any, topic_ids: dict[str, str], out: list[Finding]
    ) -> None:
        if not isinstance(body, dict) or not isinstance(answer, dict):
            return
        req = ex.request
        assert req is not None
        done = {
            (t, _index(p))
            for t, p in _partitions(answer, "topics", "partitions", topic_ids)
            if p.get("error_code") == 0
        }
        behind = []
        for topic, p in _partitions(body, "topics", "partitions", topic_ids):
            part, committed = _index(p), p.get("committed_offset")
            given = self.fetched.get((ex.client[0], req.client_id, topic, part))
            # only records given before the commit was sent count
            if (
                (topic, part) not in done
                or type(committed) is not int
                or committed < 0
                or given is None
                or given[1] > req.ts
                or committed >= given[0]
            ):
                continue
            behind.append(
                f"{topic}[{part}] committed {committed} after this client was "
                f"given records up to {given[0] - 1} ({given[0] - committed} would "
                "be delivered again after a restart or rebalance)"
            )
        if behind:
            out.append(
                Finding(
                    "commit_behind_fetch",
                    f"group {body.get('group_id')}: " + _some(behind),
                    "request",
                )
            )

    def _group(self, ex: Exchange, key: int, body: Any, answer: Any, out: list[Finding]) -> None:
        """Group membership (classic JoinGroup generations, KIP-848 heartbeats' epochs):
        what happened since the last rebalance, said when the next one is seen."""
        if not isinstance(body, dict) or not isinstance(answer, dict):
            return
        gid = body.get("group_id")
        if not isinstance(gid, str):
            return
        # by coordinator too: group ids are a cluster's (a coordinator that moves starts
        # again, and says nothing about its first generation)
        g = self.groups.get((ex.broker, gid)) or _Group()
        _put(self.groups, (ex.broker, gid), g)
        error, member = answer.get("error_code"), body.get("member_id")
        if key == LEAVE_GROUP:
            if error == 0:
                gone = [
                    m.get("member_id") for m in body.get("members") or () if isinstance(m, dict)
                ] or [member]
                for m in gone:
                    if isinstance(m, str):
                        g.cause(f"member {m} left (LeaveGroup)")
            return
        if error in _codes(*EXPIRED) and isinstance(member, str) and member:
            g.dropped(
                member,
                f"told {error_name(error)} on its {ex.first.api_name} (the "
                "coordinator had dropped it: its session or rebalance timed out)",
            )
        if key == JOIN_GROUP:
            given = answer.get("member_id")
            if member == "" and error in (0, *_codes("MEMBER_ID_REQUIRED")) and given:
                g.joined(ex.client, given)
            g.uses(ex.client, member)
            generation = answer.get("generation_id")
            if error == 0 and type(generation) is int and generation >= 0:
                members = [
                    m.get("member_id") for m in answer.get("members") or () if isinstance(m, dict)
                ]
                self._rebalanced(
                    gid,
                    g,
                    "generation",
                    generation,
                    frozenset(m for m in members if isinstance(m, str)) if members else None,
                    out,
                )
        elif key == CONSUMER_GROUP_HEARTBEAT and error == 0:
            epoch, given = body.get("member_epoch"), answer.get("member_id") or member
            if epoch == 0 and isinstance(given, str):
                g.joined(ex.client, given)
            elif epoch in (-1, -2):
                g.cause(f"member {given} left (member_epoch {epoch})")
            now = answer.get("member_epoch")
            if type(now) is int and now > 0:
                self._rebalanced(gid, g, "epoch", now, None, out)
        else:
            g.uses(ex.client, member)

    @staticmethod
    def _rebalanced(
        gid: str,
        g: _Group,
        what: str,
        number: int,
        members: frozenset[str] | None,
        out: list[Finding],
    ) -> None:
        if g.generation is not None and number > g.generation:
            causes = list(g.causes or ())
            if members is not None and g.members is not None:
                said = " ".join(causes)
                for m in sorted(g.members - members):
                    if m not in said:
                        causes.append(f"member {m} is gone without a LeaveGroup in the capture")
                        g.dropped(
                            m,
                            "dropped from the group without a LeaveGroup (its "
                            "session or rebalance timeout ran out)",
                        )
            out.append(
                Finding(
                    "consumer_rebalance",
                    f"group {gid}: {what} {g.generation} -> "
                    f"{number}; "
                    + ("; ".join(causes) if causes else "its cause is not in the capture"),
                    "response",
                )
            )
        if g.generation is None or number > g.generation:
            g.causes = None  # (the first one seen: what led to it is not known)
        if g.generation is None or number >= g.generation:
            g.generation = number
            if members is not None:
                g.members = members

    # -- brokers ---------------------------------------------------------------------------

    def _shutdown(self, ex: Exchange, body: Any, answer: Any, out: list[Finding]) -> None:
        """A broker's controlled shutdown: it heartbeats want_shut_down until the
        controller, its leaderships moved, answers should_shut_down."""
        if (
            not isinstance(body, dict)
            or not isinstance(answer, dict)
            or body.get("want_shut_down") is not True
        ):
            return
        key = (ex.broker, body.get("broker_id"), body.get("broker_epoch"))
        allowed = answer.get("should_shut_down") is True
        said = self.shutdowns.get(key)
        if said is None or (allowed and not said):
            _put(self.shutdowns, key, allowed)
            error = answer.get("error_code")
            out.append(
                Finding(
                    "controlled_shutdown",
                    f"broker {key[1]} (epoch {key[2]}) asks "
                    "the controller to shut down (BrokerHeartbeat want_shut_down); "
                    + (
                        f"answered {error_name(error)}"
                        if error
                        else "the controller lets it go (should_shut_down)"
                        if allowed
                        else "the controller holds it while leaderships move"
                    ),
                    "request",
                )
            )

    def _storm(self, ex: Exchange, out: list[Finding]) -> None:
        assert ex.facts is not None and ex.response is not None
        hits = [c for c in ex.facts.errors if c in _codes(*LEADERSHIP)]
        if not hits:
            return
        now = ex.response.ts
        times = self.storms.setdefault(ex.stream, deque())
        times.extend([now] * len(hits))
        while times and now - times[0] > STORM_WINDOW:
            times.popleft()
        if len(times) >= STORM_COUNT and now - self.stormy.get(ex.stream, -1e18) > STORM_WINDOW:
            self.stormy[ex.stream] = now
            names = ", ".join(sorted({error_name(c) for c in hits}))
            out.append(
                Finding(
                    "leadership_storm",
                    f"{len(times)} leadership errors ({names}) "
                    f"on this connection within {now - times[0]:.1f} s: the "
                    "client keeps asking a broker that does not lead",
                    "response",
                )
            )
        if len(times) > STORM_COUNT:
            times.popleft()

    def _slow(self, ex: Exchange, out: list[Finding]) -> None:
        latency = ex.latency
        if (
            latency is None
            or latency <= SLOW
            or ex.facts is None
            or ex.request is None
            or not _complete(ex.request)
            or not _complete(ex.response)
        ):
            return
        if ex.stream in self.answers_cut:
            return  # when this answer came is not known
        view = ExchangeFields(ex)
        wait = client_wait(view)  # (>= 0: quick answers are never slow)
        if latency - wait > SLOW:
            out.append(
                Finding(
                    "slow_response",
                    f"answered after {latency * 1000:.0f} ms; " + _waited(ex, wait),
                    "response",
                )
            )


def _waited(ex: Exchange, wait: float) -> str:
    """What of the latency was a wait the request asked for (subtracted), and what not."""
    assert ex.facts is not None
    asked, name = ex.facts.asked_wait_ms, ex.facts.asked_wait_field
    api = ex.first.api_name
    if wait and asked:
        return (
            f"{((ex.latency or 0) - wait) * 1000:.0f} ms beyond the {asked} ms its "
            f"{name} asked the broker to hold the {api} (subtracted)"
        )
    if asked and name:  # a JoinGroup told MEMBER_ID_REQUIRED: not held
        return (
            f"its {name} ({asked} ms) does not hold this answer: a first JoinGroup is "
            "answered MEMBER_ID_REQUIRED at once"
        )
    said = "nothing in the request asked the broker to hold it"
    if ex.first.api_key == PRODUCE:
        said += " (a Produce with acks=all waits for the in-sync replicas)"
    return said


def _consumer(body: dict[Any, Any]) -> bool:
    """A consumer's Fetch, not a follower's or a KRaft voter's (replica id >= 0)."""
    replica = body.get("replica_id")
    state = body.get("replica_state")
    if isinstance(state, dict):
        replica = state.get("replica_id")
    return not (type(replica) is int and replica >= 0)


def _after(batches: list[dict[Any, Any]]) -> int | None:
    """The offset after the last batch a fetch returned (None: none, or unknown)."""
    last = batches[-1] if batches else None
    if (
        last is None
        or type(last.get("base_offset")) is not int
        or type(last.get("last_offset_delta")) is not int
    ):
        return None
    return int(last["base_offset"] + last["last_offset_delta"] + 1)


def _why_empty(topic: str, part: int | None, start: int, high: int, stable: Any) -> str:
    if start >= high:
        return f"{topic}[{part}] at the high watermark {high} (nothing new written)"
    if type(stable) is int and 0 <= stable < high and start >= stable:
        return (
            f"{topic}[{part}] held at the last stable offset {stable} below the high "
            f"watermark {high} (an open transaction; the consumer reads committed)"
        )
    return f"{topic}[{part}] fetched at {start}, high watermark {high}"


def _some(items: list[str]) -> str:
    more = f" +{len(items) - 3} more" if len(items) > 3 else ""
    return "; ".join(items[:3]) + more


def _send(other: _Send, this: _Send) -> str:
    return "send" if other.stream == this.stream else f"send on connection {other.stream}"


def _answer(send: _Send) -> str:
    if send.error is None:
        return "got no answer in the capture"
    if send.error == 0:
        return "was answered ok"
    return f"was answered {error_name(send.error)}"


def _ahead(seconds: float) -> str:
    return f"{abs(seconds):.0f} s {'ahead of' if seconds > 0 else 'behind'}"


def _put(table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    table[key] = value
    table.move_to_end(key)
    if len(table) > MAX_TRACKED:
        table.popitem(last=False)
