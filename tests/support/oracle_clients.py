"""Oracle rules for what kdissect says of clients across exchanges (idempotent producers'
sequences and epochs, consumers' lag, empty fetches and commits, group rebalances, clock
skew), each deciding a finding's truth from Kafka's own reading of the capture's messages
(tests/support/oracle.py: ``truth``; record batches' headers as Kafka's MemoryRecords
reads them in ``_batches``). A rule parses what the finding claims and returns None when
Kafka's reading shows it, else why not: a claim the capture holds no evidence for is false
(kdissect must say it does not know, or stay silent)."""

from __future__ import annotations

import base64
import re
import uuid
from collections import defaultdict
from dataclasses import dataclass

from kdissect.stream.model import Exchange

PRODUCE, FETCH, OFFSET_COMMIT, JOIN_GROUP, LEAVE_GROUP, CGHB = 0, 1, 8, 11, 13, 68
INIT_PRODUCER_ID, END_TXN = 22, 26
SKEW_S = 300.0  # kdissect's threshold for clock skew
EMPTY_S = 10.0  # ... and for a run of empty fetches
OUT_OF_ORDER = 45  # Kafka's Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def _uuid(kafka_id: str) -> str:
    """A topic id as kdissect writes it, from Kafka's JSON (base64url)."""
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(kafka_id + "==")))


@dataclass
class Send:
    """One idempotent batch of a Produce, as Kafka read the request and its answer."""

    ex: Exchange
    client: tuple
    pid: int
    epoch: int
    topic: str
    part: int
    first: int
    last: int
    error: int | None  # the partition's answer (None: no answer read)

    @property
    def sent(self) -> float:
        assert self.ex.request is not None
        return self.ex.request.ts


class History:
    """Kafka's reading of the whole capture, indexed for the rules."""

    def __init__(self, exchanges: list[Exchange], truth: dict[int, dict]):
        self.truth = truth
        self.names: dict[str, str] = {}  # topic id (kdissect's text) -> name
        for e in exchanges:
            body = self.answer(e)
            for t in (body or {}).get("topics") or ():  # Metadata, CreateTopics
                if isinstance(t, dict) and t.get("topicId") and t.get("name"):
                    self.names[_uuid(t["topicId"])] = t["name"]
        self.sends: dict[tuple, list[Send]] = defaultdict(list)  # (pid, topic, part)
        self.fetches: dict[int, list[Exchange]] = defaultdict(list)  # stream -> Fetches
        self.groups: dict[tuple, list[Exchange]] = defaultdict(list)  # (broker, group)
        self.starts: list[Exchange] = []  # InitProducerId, EndTxn
        for e in sorted(exchanges, key=lambda e: (e.stream, e.seq)):
            key, req = e.first.api_key, self.request(e)
            if req is None:
                continue
            if key == PRODUCE:
                self._produce(e, req)
            elif key == FETCH:
                self.fetches[e.stream].append(e)
            elif key in (JOIN_GROUP, LEAVE_GROUP, CGHB) and isinstance(req.get("groupId"), str):
                self.groups[e.broker, req["groupId"]].append(e)
            elif key in (INIT_PRODUCER_ID, END_TXN):
                self.starts.append(e)

    def request(self, e: Exchange) -> dict | None:
        body = self.truth.get(e.request.index) if e.request is not None else None
        return body if body is not None and "_unread" not in body else None

    def answer(self, e: Exchange) -> dict | None:
        return (
            self.truth.get(e.response.index)
            if e.response is not None and e.response.direction == "response"
            else None
        )

    def topic(self, element: dict) -> str:
        name = element.get("name") or element.get("topic")
        if name:
            return name
        tid = _uuid(element["topicId"])
        return self.names.get(tid, tid)

    def said(self, topic: str) -> str:
        """A topic as a finding names it, as the oracle names it (ids resolved alike)."""
        return self.names.get(topic, topic)

    def client(self, e: Exchange) -> tuple:
        body = self.request(e) or {}
        return e.client[0], body.get("_client")

    def epoch_started(self, ex: Exchange, pid: int, epoch: int) -> bool:
        """Whether an InitProducerId or EndTxn answer (Kafka's reading) gave this client
        (host and client id) the producer id and epoch before ``ex`` was sent."""
        assert ex.request is not None
        return any(
            e.first.api_key in (INIT_PRODUCER_ID, END_TXN)
            and h.get("errorCode") == 0
            and h.get("producerId") == pid
            and h.get("producerEpoch") == epoch
            and self.client(e) == self.client(ex)
            and e.response is not None
            and e.response.ts <= ex.request.ts
            for e in self.starts
            if (h := self.answer(e) or {}) is not None
        )

    def _produce(self, e: Exchange, req: dict) -> None:
        answer = self.answer(e)
        errors = {}
        for t in (answer or {}).get("responses") or ():
            for p in t.get("partitionResponses") or ():
                errors[self.topic(t), p["index"]] = p["errorCode"]
        for t in req.get("topicData") or ():
            for p in t.get("partitionData") or ():
                for b in p.get("_batches") or ():
                    if b["magic"] == 2 and b["producerId"] >= 0 and b["baseSequence"] >= 0:
                        topic = self.topic(t)
                        s = Send(
                            e,
                            self.client(e),
                            b["producerId"],
                            b["producerEpoch"],
                            topic,
                            p["index"],
                            b["baseSequence"],
                            b["lastSequence"],
                            errors.get((topic, p["index"])) if answer else None,
                        )
                        self.sends[s.pid, topic, s.part].append(s)

    def batches(self, e: Exchange, which: str) -> dict[tuple[str, int], list[dict]]:
        """(topic, partition) -> the record batches of a Produce request (``"request"``) or
        a Fetch answer (``"answer"``), as Kafka read them."""
        out: dict[tuple[str, int], list[dict]] = {}
        if which == "request":
            for t in (self.request(e) or {}).get("topicData") or ():
                for p in t.get("partitionData") or ():
                    out[self.topic(t), p["index"]] = p.get("_batches") or []
        else:
            for t in (self.answer(e) or {}).get("responses") or ():
                for p in t.get("partitions") or ():
                    out[self.topic(t), p["partitionIndex"]] = p.get("_batches") or []
        return out


def _answer_text(error: int | None, errors: dict[int, str]) -> str:
    if error is None:
        return "got no answer in the capture"
    return "was answered ok" if error == 0 else f"was answered {errors.get(error, error)}"


def _this_send(
    h: History, ex: Exchange, pid: int, epoch: int, topic: str, part: int, first: int, last: int
) -> Send | None:
    return next(
        (
            s
            for s in h.sends.get((pid, topic, part), ())
            if s.ex is ex and s.epoch == epoch and s.first == first and s.last == last
        ),
        None,
    )


_SEQ = r"producer (-?\d+) epoch (-?\d+), (.+)\[(\d+)\]: batch (\d+)-(\d+) "


def producer_retry(ex: Exchange, detail: str, h: History, errors: dict[int, str]) -> str | None:
    """The batch (producer id, epoch, sequences) is in this Produce as Kafka read it, and
    another Produce sent it (overlapping sequences) before this one was sent, after its
    own send was over (its answer read before, or none at all) -- or, "sent again
    later", after; the answers the text gives are Kafka's reading of them."""
    m = re.match(_SEQ + r"(.*)$", detail)
    if m is None:
        return "unparsed"
    pid, epoch, part, first, last = (int(m[i]) for i in (1, 2, 4, 5, 6))
    topic, rest = h.said(m[3]), m[7]
    this = _this_send(h, ex, pid, epoch, topic, part, first, last)
    if this is None:
        return "Kafka reads no such batch in this Produce"
    others = [
        s
        for s in h.sends[pid, topic, part]
        if s.ex is not ex and s.epoch == epoch and s.first <= last and first <= s.last
    ]
    this_said = _answer_text(this.error, errors)
    again = re.match(
        r"sent again \(a retry: the (send on connection \d+|send) (.*); this one "
        r"(.*?)(: written once)?\)$",
        rest,
    )
    later = re.match(
        r"(.*); sent again later \(a retry: the (send on connection \d+|send) "
        r"(.*)\)$",
        rest,
    )
    if again is not None:
        how, other_said = again[1], again[2]
        if again[3] != this_said or bool(again[4]) != (this.error == 0):
            return f"this send {this_said}"
        candidates = [s for s in others if s.sent < this.sent and _over(s, this)]
    elif later is not None:
        how, other_said = later[2], later[3]
        if later[1] != this_said:
            return f"this send {this_said}"
        candidates = [s for s in others if s.sent > this.sent and _over(this, s)]
    else:
        return "unparsed"
    if not any(
        _answer_text(s.error, errors) == other_said
        and how == ("send" if s.ex.stream == ex.stream else f"send on connection {s.ex.stream}")
        for s in candidates
    ):
        return (
            f"Kafka reads no other send of these sequences that {how} {other_said}: "
            f"{[(s.ex.stream, s.ex.seq, _answer_text(s.error, errors)) for s in others]}"
        )
    return None


def _over(earlier: Send, later: Send) -> bool:
    """Whether the earlier send was over when the later was sent (answered before, or
    never answered) -- on its connection the order alone tells."""
    if earlier.ex.stream == later.ex.stream:
        return earlier.ex.seq < later.ex.seq
    e = earlier.ex.response
    return earlier.error is None or (e is not None and e.ts <= later.sent)


def producer_sequence_gap(
    ex: Exchange, detail: str, h: History, errors: dict[int, str]
) -> str | None:
    """Kafka reads OUT_OF_ORDER_SEQUENCE_NUMBER answered to this batch; "the broker expected
    N": the last batch of that producer/epoch/partition accepted before ended at N - 1, and
    the capture holds the answer that gave the client that epoch (so every batch accepted
    since is in it); "at least N" needs only the accepted batch."""
    m = re.match(_SEQ + r"refused \(OUT_OF_ORDER_SEQUENCE_NUMBER\); (.*)$", detail)
    if m is None:
        return "unparsed"
    pid, epoch, part, first, last = (int(m[i]) for i in (1, 2, 4, 5, 6))
    topic = h.said(m[3])
    this = _this_send(h, ex, pid, epoch, topic, part, first, last)
    if this is None or this.error != OUT_OF_ORDER:
        return "Kafka reads no such batch refused as out of order"
    accepted = [
        s
        for s in h.sends[pid, topic, part]
        if s.epoch == epoch and s.error == 0 and s.sent < this.sent
    ]
    expected = max((s.last + 1 for s in accepted), default=None)
    exact = re.match(r"the broker expected (\d+)$", m[7])
    floor = re.match(
        r"the broker expected at least (\d+) \(the start of this producer epoch "
        r"is not in the capture",
        m[7],
    )
    if exact is not None or floor is not None:
        said = int((exact or floor)[1])
        if expected != said:
            return f"the accepted batches end at {expected}"
        if exact is not None and not h.epoch_started(ex, pid, epoch):
            return (
                f"the capture holds no answer giving producer {pid} epoch {epoch}: what "
                "the broker expected is not known"
            )
        return None
    if m[7] != "no earlier accepted batch of it in the capture":
        return "unparsed"
    return None if expected is None else f"Kafka reads accepted batches up to {expected - 1}"


def producer_epoch_bump(
    ex: Exchange, detail: str, h: History, errors: dict[int, str]
) -> str | None:
    """This Produce holds a batch of the producer at the new epoch, starting its
    sequences at 0; the old epoch is the latest this client's earlier Produces used."""
    m = re.match(r"producer (\d+): epoch (-?\d+) -> (-?\d+) \(sequences start again\)", detail)
    if m is None:
        return "unparsed"
    pid, old, new = int(m[1]), int(m[2]), int(m[3])
    mine = [
        s
        for (p, _, _), sends in h.sends.items()
        if p == pid
        for s in sends
        if s.client == h.client(ex)
    ]
    now = [s for s in mine if s.ex is ex and s.epoch == new]
    if not now:
        return f"Kafka reads no batch of producer {pid} at epoch {new} here"
    if all(s.first != 0 for s in now):
        return f"the batches at epoch {new} start at {[s.first for s in now]}, not 0"
    assert ex.request is not None
    before = [s.epoch for s in mine if s.sent < ex.request.ts]
    if not before or max(before) != old or new <= old:
        return f"the epochs before it were {sorted(set(before))}"
    return None


def _fetched_at(h: History, ex: Exchange) -> dict[tuple[str, int], int]:
    return {
        (h.topic(t), p["partition"]): p["fetchOffset"]
        for t in (h.request(ex) or {}).get("topics") or ()
        for p in t.get("partitions") or ()
    }


def _consumer(h: History, ex: Exchange) -> bool:
    body = h.request(ex) or {}
    replica = (body.get("replicaState") or {}).get("replicaId", body.get("replicaId", -1))
    return replica < 0


def consumer_lag(ex: Exchange, detail: str, h: History, errors: dict[int, str]) -> str | None:
    """Each partition said behind: a consumer's Fetch, its offset and the answer's high
    watermark as Kafka read them (its last stable offset for a read_committed consumer:
    Kafka's clients count lag from there), that far past the offset after the last batch
    returned (or the fetch offset, none returned)."""
    answer = h.answer(ex)
    if answer is None or not _consumer(h, ex):
        return "not a consumer's Fetch Kafka read whole"
    committed = (h.request(ex) or {}).get("isolationLevel") == 1
    limit, said = (
        ("lastStableOffset", "last stable offset, read_committed")
        if committed
        else ("highWatermark", "high watermark")
    )
    items = re.findall(
        r"(\S+)\[(\d+)\] (\d+) behind \(fetched at (\d+), " + said + r" (\d+)\)", detail
    )
    if not items:
        return f"unparsed (a {'read_committed' if committed else 'read_uncommitted'} consumer)"
    asked = _fetched_at(h, ex)
    high = {
        (h.topic(t), p["partitionIndex"]): p
        for t in answer.get("responses") or ()
        for p in t.get("partitions") or ()
    }
    returned = h.batches(ex, "answer")
    for topic, part, behind, start, hw in items:
        key = (h.said(topic), int(part))
        p = high.get(key)
        if asked.get(key) != int(start) or p is None or p["errorCode"] or p[limit] != int(hw):
            return f"{topic}[{part}]: Kafka reads offset {asked.get(key)}, answer {_brief(p)}"
        batches = returned.get(key) or []
        end = max(int(start), batches[-1]["lastOffset"] + 1) if batches else int(start)
        if p[limit] - end != int(behind) or int(behind) <= 0:
            return f"{topic}[{part}]: {p[limit] - end} behind, not {behind}"
    return None


def _brief(partition: dict | None) -> dict | None:
    return partition and {k: v for k, v in partition.items() if k != "_batches"}


def empty_fetches(ex: Exchange, detail: str, h: History, errors: dict[int, str]) -> str | None:
    """The connection's last N consumer Fetches up to this one (N as said), each read whole
    by Kafka, returned no record batch, over the time said (at least 10 s); and why, as
    the last answer shows it."""
    m = re.match(r"(\d+) fetches over ([\d.]+) s returned no records: (.*)$", detail)
    if m is None:
        return "unparsed"
    count, span = int(m[1]), float(m[2])
    run = h.fetches[ex.stream]
    at = next((i for i, e in enumerate(run) if e is ex), None)
    if at is None or at + 1 < count:
        return "fewer fetches on the connection"
    run = run[at + 1 - count : at + 1]
    for e in run:
        if h.answer(e) is None or not _consumer(h, e):
            return f"fetch {e.seq}: not a consumer's Fetch Kafka read whole"
        if any(h.batches(e, "answer").values()):
            return f"fetch {e.seq} returned record batches"
    assert run[0].request is not None and ex.response is not None
    took = ex.response.ts - run[0].request.ts
    if took < EMPTY_S or abs(took - span) > 0.051:  # (said to 0.1 s)
        return f"the fetches took {took:.1f} s"
    return _why_empty(ex, m[3], h, errors)


def _why_empty(ex: Exchange, why: str, h: History, errors: dict[int, str]) -> str | None:
    answer = h.answer(ex) or {}
    parts = {
        (h.topic(t), p["partitionIndex"]): p
        for t in answer.get("responses") or ()
        for p in t.get("partitions") or ()
    }
    if why.startswith("no partition in the answers"):
        return None if not parts and answer.get("sessionId") else f"Kafka reads {parts}"
    asked = _fetched_at(h, ex)
    for topic, part, high in re.findall(r"(\S+)\[(\d+)\] at the high watermark (\d+)", why):
        key = (h.said(topic), int(part))
        p = parts.get(key)
        if p is None or p["highWatermark"] != int(high) or asked.get(key, -1) < int(high):
            return f"{topic}[{part}]: Kafka reads fetched at {asked.get(key)}, answer {_brief(p)}"
    for topic, part, name in re.findall(r"(\S+)\[(\d+)\] answered (\w+)", why):
        p = parts.get((h.said(topic), int(part)))
        if p is None or errors.get(p["errorCode"]) != name:
            return f"{topic}[{part}]: Kafka reads the answer {_brief(p)}"
    return None


def commit_behind_fetch(
    ex: Exchange, detail: str, h: History, errors: dict[int, str]
) -> str | None:
    """Kafka reads the commit (group, partition, offset) answered without error, and a
    Fetch by the same client (its host and client id) answered before the commit was sent
    returned batches up to the offset said, past the one committed."""
    req, answer = h.request(ex), h.answer(ex)
    m = re.match(r"group (.*?): ", detail)
    if req is None or answer is None or m is None or req.get("groupId") != m[1]:
        return "Kafka reads no such group's commit"
    committed = {
        (h.topic(t), p["partitionIndex"]): p["committedOffset"]
        for t in req.get("topics") or ()
        for p in t.get("partitions") or ()
    }
    ok = {
        (h.topic(t), p["partitionIndex"])
        for t in answer.get("topics") or ()
        for p in t.get("partitions") or ()
        if p["errorCode"] == 0
    }
    items = re.findall(
        r"(\S+)\[(\d+)\] committed (\d+) after this client was given records "
        r"up to (\d+) \((\d+) would",
        detail,
    )
    if not items:
        return "unparsed"
    assert ex.request is not None
    client = h.client(ex)
    for topic, part, offset, upto, again in items:
        key = (h.said(topic), int(part))
        if committed.get(key) != int(offset) or key not in ok:
            return f"{topic}[{part}]: Kafka reads {committed.get(key)} committed"
        if int(upto) + 1 - int(offset) != int(again) or int(upto) < int(offset):
            return f"{topic}[{part}]: arithmetic"
        given = [
            b[-1]["lastOffset"]
            for run in h.fetches.values()
            for e in run
            if h.client(e) == client
            and e.response is not None
            and e.response.ts <= ex.request.ts
            and (b := h.batches(e, "answer").get(key))
        ]
        if int(upto) not in given:
            return f"{topic}[{part}]: the client's fetches ended at {sorted(set(given))[-5:]}"
    return None


def _number(h: History, e: Exchange) -> int | None:
    """The generation (JoinGroup) or member epoch (ConsumerGroupHeartbeat) an answer
    without error gives, as Kafka read it."""
    answer = h.answer(e)
    if answer is None or answer.get("errorCode") != 0:
        return None
    n = answer.get("generationId" if e.first.api_key == JOIN_GROUP else "memberEpoch")
    return n if isinstance(n, int) and n > 0 else None


def consumer_rebalance(ex: Exchange, detail: str, h: History, errors: dict[int, str]) -> str | None:
    """This answer gives the group the new generation (or member epoch), the highest one
    the coordinator gave the group before was the old one; each cause said is in Kafka's
    reading of the group's requests before it (a LeaveGroup naming the member, a member
    given its id, a heartbeat leaving), or the text says the cause is not in the capture."""
    m = re.match(r"group (.*?): (generation|epoch) (-?\d+) -> (\d+); (.*)$", detail)
    if m is None:
        return "unparsed"
    group, old, new, causes = m[1], int(m[3]), int(m[4]), m[5]
    if _number(h, ex) != new:
        return f"Kafka reads {_number(h, ex)} in this answer"
    history = h.groups[ex.broker, group]
    assert ex.response is not None
    before = [e for e in history if e.response is not None and e.response.ts < ex.response.ts]
    numbers = [n for e in before if (n := _number(h, e)) is not None]
    if not numbers or max(numbers) != old:
        return f"the group's earlier numbers were {sorted(set(numbers))[-5:]}"
    for cause in causes.split("; "):
        why = _cause(cause, before, h, errors)
        if why is not None:
            return f"{cause!r}: {why}"
    return None


def _cause(cause: str, before: list[Exchange], h: History, errors: dict[int, str]) -> str | None:
    if cause == "its cause is not in the capture":
        return None
    m = re.match(r"member (\S+) left \(LeaveGroup\)$", cause)
    if m:
        return (
            None
            if any(
                e.first.api_key == LEAVE_GROUP
                and (h.answer(e) or {}).get("errorCode") == 0
                and m[1]
                in [(h.request(e) or {}).get("memberId")]
                + [x.get("memberId") for x in (h.request(e) or {}).get("members") or ()]
                for e in before
            )
            else "no LeaveGroup of it answered"
        )
    m = re.match(r"member (\S+) left \(member_epoch (-[12])\)$", cause)
    if m:
        return (
            None
            if any(
                e.first.api_key == CGHB
                and (h.request(e) or {}).get("memberEpoch") == int(m[2])
                and (h.answer(e) or {}).get("memberId") == m[1]
                for e in before
            )
            else "no heartbeat of it leaving"
        )
    m = re.match(r"new member (\S+) joined$", cause)
    if m:
        return (
            None
            if any(
                (h.answer(e) or {}).get("memberId") == m[1]
                and (h.request(e) or {}).get("memberId") in ("", None)
                or e.first.api_key == CGHB
                and (h.request(e) or {}).get("memberEpoch") == 0
                and (h.answer(e) or {}).get("memberId") == m[1]
                for e in before
            )
            else "no answer gave it that id"
        )
    m = re.match(r"member (\S+) is gone without a LeaveGroup in the capture$", cause)
    if m:
        return (
            "a LeaveGroup of it is in the capture"
            if any(e.first.api_key == LEAVE_GROUP and m[1] in str(h.request(e)) for e in before)
            else None
        )
    m = re.match(r"member (\S+), told (\S+) on its", cause)
    if m:
        return (
            None
            if any(
                (h.request(e) or {}).get("memberId") == m[1]
                and errors.get((h.answer(e) or {}).get("errorCode", 0)) == m[2]
                for e in before
            )
            else f"Kafka reads no {m[2]} told it"
        )
    return "a cause the oracle does not know"


def clock_skew(ex: Exchange, detail: str, h: History, errors: dict[int, str]) -> str | None:
    """CreateTime: a batch of this Produce, as Kafka read it, stamped (its max timestamp)
    that far from the capture's clock when the request was sent; LogAppendTime: the
    answer's log_append_time that far from when it was captured."""
    m = re.match(
        r"(?:records for|the broker stamped) (\S+)\[(\d+)\] (?:stamped )?(\d+) s "
        r"(ahead of|behind) the capture clock \((CreateTime|LogAppendTime)\)",
        detail,
    )
    if m is None:
        return "unparsed"
    key, seconds = (h.said(m[1]), int(m[2])), int(m[3])
    sign = 1 if m[4] == "ahead of" else -1
    assert ex.request is not None
    if m[5] == "CreateTime":
        stamps = [
            (b["maxTimestamp"] / 1000 - ex.request.ts)
            for b in h.batches(ex, "request").get(key, ())
            if b["timestampType"] == "CreateTime"
        ]
    else:
        assert ex.response is not None
        stamps = [
            p["logAppendTimeMs"] / 1000 - ex.response.ts
            for t in (h.answer(ex) or {}).get("responses") or ()
            for p in t.get("partitionResponses") or ()
            if (h.topic(t), p["index"]) == key and p["logAppendTimeMs"] >= 0
        ]
    if not any(abs(s) > SKEW_S and s * sign > 0 and abs(abs(s) - seconds) <= 0.51 for s in stamps):
        return f"Kafka reads stamps {[round(s) for s in stamps]} s from the capture clock"
    return None


RULES = {
    "producer_retry": producer_retry,
    "producer_sequence_gap": producer_sequence_gap,
    "producer_epoch_bump": producer_epoch_bump,
    "consumer_lag": consumer_lag,
    "empty_fetches": empty_fetches,
    "commit_behind_fetch": commit_behind_fetch,
    "consumer_rebalance": consumer_rebalance,
    "clock_skew": clock_skew,
}
