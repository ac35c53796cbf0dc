"""Kafka-level diagnoses: what a run of exchanges on one connection says about the
clients and brokers (idempotent producers' sequences, consumer lag, versions Kafka 4.0
removed, clients that never ask ApiVersions, clock skew, leadership storms, slow
answers), as registered findings with their evidence in the text.

Each diagnosis fires only on complete evidence: a message the capture cut, a missing
answer or a connection seen mid-stream makes it stay silent (docs/findings.md says when
each one cannot know). State is kept per connection (every path, Spark's per-flow shards
included, sees the same), bounded in size.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, deque
from typing import Any

from ..protocol import schemas
from ..protocol.apis import API_VERSIONS, FETCH, PRODUCE
from ..protocol.findings import Finding
from ..protocol.names import error_name
from ..protocol.node import Node
from .anomaly import SLOW, client_wait
from .fields import ExchangeFields
from .model import Exchange, Gap

# the codes this module adds (--stats counts them)
CODES = ("removed_version", "no_api_versions", "clock_skew", "producer_sequence_gap",
         "producer_retry", "producer_epoch_bump", "consumer_lag", "leadership_storm",
         "slow_response")

OUT_OF_ORDER_SEQUENCE_NUMBER, DUPLICATE_SEQUENCE_NUMBER = 45, 46
# answers that mean "ask the right broker": the client's metadata is stale
LEADERSHIP_ERRORS = frozenset({6, 74, 16})   # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
#                                              NOT_COORDINATOR
STORM_COUNT = 10           # that many leadership errors on a connection ...
STORM_WINDOW = 5.0         # ... within these seconds is a storm
SKEW_S = 300.0             # record timestamps this far from the capture clock: skew
MAX_TRACKED = 100_000      # producer/partition states kept (oldest dropped first)


def plain(body: Node | dict | None) -> Any:
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
            if c.ktype == "tagged_fields":      # known tags by name, as the values decoder
                for tag in c.children:          # gives them (Fetch's replica_state)
                    out.update((v.name, plain(v)) for v in tag.children
                               if not v.name.startswith("_"))
            elif not c.name.startswith("_"):
                out[c.name] = plain(c)
        return out
    return body.value


def _topic(element: dict, topic_ids: dict[str, str]) -> str | None:
    name = element.get("topic", element.get("name"))
    if isinstance(name, str):
        return name
    tid = element.get("topic_id")
    return topic_ids.get(tid, tid) if isinstance(tid, str) else None


def _partitions(body: Any, topics: str, parts: str, topic_ids: dict[str, str]):
    """(topic, partition element) of a body's topics[].partitions[] arrays."""
    if not isinstance(body, dict):
        return
    for t in body.get(topics) or ():
        if isinstance(t, dict):
            name = _topic(t, topic_ids)
            for p in t.get(parts) or ():
                if isinstance(p, dict) and name is not None:
                    yield name, p


def _index(p: dict) -> int | None:
    for key in ("index", "partition", "partition_index"):
        v = p.get(key)
        if type(v) is int:
            return v
    return None


def _complete(m) -> bool:
    return m is not None and m.status == "ok" and not m.holes


class Diagnoses:
    """Watches enriched exchanges in order and adds the diagnoses' findings."""

    def __init__(self) -> None:
        # (stream, producer id, topic, partition) -> (epoch, the sequence after the last
        # accepted batch (-1: none seen), the sequence after the last batch sent, that
        # request's order on its connection: exchanges come out in answer order, and an
        # unanswered request comes out late)
        self.sequences: OrderedDict[tuple, tuple[int, int, int, int]] = OrderedDict()
        self.epochs: OrderedDict[tuple[int, int], int] = OrderedDict()   # (stream, pid)
        self.storms: dict[int, deque[float]] = {}     # stream -> leadership errors' times
        self.stormy: dict[int, float] = {}            # stream -> last storm reported
        # streams whose answers had a hole: the bytes after a lost segment are complete
        # only when the hole is given up on, so their latencies are not the broker's
        self.answers_cut: set[int] = set()

    def gap(self, g: Gap) -> None:
        if g.direction == "response":
            self.answers_cut.add(g.stream)

    def observe(self, ex: Exchange, req_body, resp_body, topic_ids: dict[str, str]) -> None:
        req, resp = ex.request, ex.response
        out = ex.findings
        if req is not None and req.direction == "request" and req.api_key is not None:
            self._versions(ex, out)
            if req.api_key == PRODUCE and _complete(req):
                self._produce(ex, plain(req_body), plain(resp_body)
                              if _complete(resp) else None, topic_ids, out)
            if req.api_key == FETCH and _complete(req) and _complete(resp):
                self._lag(plain(req_body), plain(resp_body), topic_ids, out)
        if resp is not None and resp.direction == "response" and ex.facts is not None:
            self._storm(ex, out)
        self._slow(ex, out)

    # -- clients ---------------------------------------------------------------------------

    def _versions(self, ex: Exchange, out: list[Finding]) -> None:
        req = ex.request
        assert req is not None and req.api_key is not None and req.api_version is not None
        # a request framed after a hole (or a connection's sides mistaken) may be bytes that
        # only look like a header: claim only what a whole, cleanly decoded request says
        clean = _complete(req) and not any(f.kind.group == "malformed" and
                                           f.where.startswith("request") for f in out)
        if clean and (req.api_key, req.api_version) in _removed():
            out.append(Finding("removed_version", f"{req.api_name} v{req.api_version}: Kafka "
                               "4.0 no longer accepts it (KIP-896)", "request"))
        # offset 4: the first message of a connection whose SYN was captured
        if clean and ex.opened and req.offset == 4 and req.api_key != API_VERSIONS:
            out.append(Finding("no_api_versions", f"the connection opens with {req.api_name} "
                               f"v{req.api_version}, not ApiVersions: the client chose "
                               "versions without asking the broker", "request"))

    def _produce(self, ex: Exchange, body, answer, topic_ids, out: list[Finding]) -> None:
        req = ex.request
        assert req is not None
        errors: dict[tuple[str, int | None], int] = {}
        appended: dict[tuple[str, int | None], int] = {}
        for topic, p in _partitions(answer, "responses", "partition_responses", topic_ids):
            code = p.get("error_code")
            errors[topic, _index(p)] = code if type(code) is int else 0
            t = p.get("log_append_time_ms")
            if type(t) is int and t >= 0:
                appended[topic, _index(p)] = t
        capture_ms = req.ts * 1000
        for topic, p in _partitions(body, "topic_data", "partition_data", topic_ids):
            part = _index(p)
            for batch in p.get("records") or ():
                if not isinstance(batch, dict) or batch.get("magic") != 2:
                    continue
                self._skew(batch, capture_ms, f"{topic}[{part}]", out)
                self._sequence(ex.stream, ex.seq, batch, topic, part,
                               errors.get((topic, part)) if answer is not None else None, out)
        for (topic, part), t in appended.items():
            assert ex.response is not None      # appended is read from the answer
            ahead = (t - ex.response.ts * 1000) / 1000
            if abs(ahead) > SKEW_S:
                out.append(Finding("clock_skew", f"the broker stamped {topic}[{part}] "
                                   f"{_ahead(ahead)} the capture clock (LogAppendTime)",
                                   "response"))

    def _skew(self, batch: dict, capture_ms: float, where: str, out: list[Finding]) -> None:
        attrs, stamp = batch.get("attributes"), batch.get("max_timestamp")
        if type(attrs) is not int or attrs & 8 or type(stamp) is not int or stamp < 0:
            return                      # LogAppendTime: the broker stamps it, not the client
        ahead = (stamp - capture_ms) / 1000
        if abs(ahead) > SKEW_S:
            out.append(Finding("clock_skew", f"records for {where} stamped {_ahead(ahead)} the "
                               "capture clock (CreateTime)", "request"))

    def _sequence(self, stream: int, order: int, batch: dict, topic: str, part: int | None,
                  error: int | None, out: list[Finding]) -> None:
        pid, epoch, seq, count = (batch.get(k) for k in (
            "producer_id", "producer_epoch", "base_sequence", "record_count"))
        if not (type(pid) is int and type(epoch) is int and type(seq) is int and
                type(count) is int) or pid < 0 or seq < 0:
            return                      # not an idempotent producer's batch
        known = self.epochs.get((stream, pid))
        if known is not None and epoch > known:
            out.append(Finding("producer_epoch_bump", f"producer {pid}: epoch {known} -> "
                               f"{epoch} (sequences start again)", "request"))
        if known is None or epoch >= known:
            _put(self.epochs, (stream, pid), epoch)
        key = (stream, pid, topic, part)
        state = self.sequences.get(key)
        if state is not None and order < state[3]:
            return                      # sent before the batch the state comes from
        same = state is not None and state[0] == epoch
        accepted, sent = (state[1], state[2]) if state is not None and same else (-1, 0)
        where = f"producer {pid} epoch {epoch}, {topic}[{part}]"
        last = seq + count - 1
        if error == OUT_OF_ORDER_SEQUENCE_NUMBER:
            said = (f"the broker expected {accepted}" if accepted >= 0 else
                    "no earlier accepted batch of it on this connection in the capture")
            out.append(Finding("producer_sequence_gap", f"{where}: batch {seq}-{last} refused "
                               f"(OUT_OF_ORDER_SEQUENCE_NUMBER); {said}", "request"))
        elif seq < sent:
            answer = "no answer in the capture" if error is None else (
                "answered ok: written once" if error == 0 else f"answered {error_name(error)}")
            out.append(Finding("producer_retry", f"{where}: batch {seq}-{last} sent again "
                               f"(a retry; {answer})", "request"))
        refused = error == OUT_OF_ORDER_SEQUENCE_NUMBER     # (its sequences come again)
        _put(self.sequences, key, (epoch, seq + count if error == 0 else accepted,
                                   sent if refused else max(sent, seq + count), order))

    # -- consumers -------------------------------------------------------------------------

    def _lag(self, body, answer, topic_ids, out: list[Finding]) -> None:
        if not isinstance(body, dict) or not isinstance(answer, dict):
            return
        replica = body.get("replica_id")
        state = body.get("replica_state")
        if isinstance(state, dict):
            replica = state.get("replica_id")
        if type(replica) is int and replica >= 0:
            return                      # a follower's or a voter's fetch, not a consumer's
        asked = {(t, _index(p)): p.get("fetch_offset")
                 for t, p in _partitions(body, "topics", "partitions", topic_ids)}
        behind = []
        for topic, p in _partitions(answer, "responses", "partitions", topic_ids):
            part = _index(p)
            start, high = asked.get((topic, part)), p.get("high_watermark")
            if p.get("error_code") or type(start) is not int or type(high) is not int:
                continue
            batches = [b for b in p.get("records") or () if isinstance(b, dict)]
            last = batches[-1] if batches else None
            after = start
            if last is not None and type(last.get("base_offset")) is int and \
                    type(last.get("last_offset_delta")) is int:
                after = max(start, last["base_offset"] + last["last_offset_delta"] + 1)
            if high - after > 0:
                behind.append(f"{topic}[{part}] {high - after} behind (fetched at {start}, "
                              f"high watermark {high})")
        if behind:
            more = f" +{len(behind) - 3} more" if len(behind) > 3 else ""
            out.append(Finding("consumer_lag", "; ".join(behind[:3]) + more, "response"))

    # -- brokers ---------------------------------------------------------------------------

    def _storm(self, ex: Exchange, out: list[Finding]) -> None:
        assert ex.facts is not None and ex.response is not None
        hits = [c for c in ex.facts.errors if c in LEADERSHIP_ERRORS]
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
            out.append(Finding("leadership_storm", f"{len(times)} leadership errors ({names}) "
                               f"on this connection within {now - times[0]:.1f} s: the "
                               "client keeps asking a broker that does not lead", "response"))
        if len(times) > STORM_COUNT:
            times.popleft()

    def _slow(self, ex: Exchange, out: list[Finding]) -> None:
        latency = ex.latency
        if latency is None or ex.facts is None or ex.request is None or \
                not _complete(ex.request) or not _complete(ex.response):
            return
        if ex.stream in self.answers_cut:
            return                      # when this answer came is not known
        view = ExchangeFields(ex)
        wait = client_wait(view)
        if latency - wait > SLOW:
            asked = ex.facts.asked_wait_ms
            if wait and asked:
                said = f"it asked the broker to wait up to {asked} ms"
            else:
                said = "nothing in the request asked the broker to hold it"
                if ex.first.api_key == PRODUCE:
                    said += " (a Produce with acks=all waits for the in-sync replicas)"
            out.append(Finding("slow_response", f"answered after {latency * 1000:.0f} ms; "
                               f"{said}", "response"))


@functools.cache
def _removed() -> frozenset[tuple[int, int]]:
    """(API key, version) Kafka 4.0 removed: kdissect's legacy table holds exactly them."""
    return frozenset(schemas.legacy_versions())


def _ahead(seconds: float) -> str:
    return f"{abs(seconds):.0f} s {'ahead of' if seconds > 0 else 'behind'}"


def _put(table: OrderedDict, key, value) -> None:
    table[key] = value
    table.move_to_end(key)
    if len(table) > MAX_TRACKED:
        table.popitem(last=False)
