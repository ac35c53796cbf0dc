"""Statistics over exchanges: counts per API, errors, latency percentiles (with and
without the waits clients asked for), bytes; breakdowns per connection, client, broker
and topic; throttling; and a group timeline: classic groups from JoinGroup, SyncGroup,
Heartbeat and LeaveGroup, KIP-848 consumer groups, share groups and streams groups from
their heartbeats (members joining and leaving, epochs, assignments, fencing)."""

from __future__ import annotations

from typing import Any

import math
from collections import Counter, defaultdict

from ..protocol.apis import (
    CONSUMER_GROUP_HEARTBEAT,
    FETCH,
    GROUP_MEMBERSHIP,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    PRODUCE,
    SHARE_GROUP_HEARTBEAT,
    STREAMS_GROUP_HEARTBEAT,
    SYNC_GROUP,
)
from ..protocol.names import api_name, error_name
from ..protocol.node import Node
from ..protocol.plain import Compared
from . import anomaly
from .diagnoses import CODES as DIAGNOSES
from .facts import Facts
from .fields import ExchangeFields
from .model import Exchange, Gap


def service_known(latency: float | None, service: float | None) -> bool:
    """Whether an exchange's broker time (its latency less the wait the client asked
    for) is known: a Fetch answered before its max_wait_ms elapsed gets a broker time of
    0, which says only that the wait covered it all (unknown), unless the latency itself
    was 0. Every --stats table counts broker time by this one rule."""
    return service is not None and latency is not None and (service > 0 or latency == 0)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = math.ceil(p / 100 * len(sorted_values))  # 1-based
    return sorted_values[max(0, min(len(sorted_values), rank) - 1)]


class ConnectionStats(Compared):
    """One connection's counts (one per connection: a capture may hold 200,000)."""

    __slots__ = _fields = (
        "client",
        "broker",
        "exchanges",
        "to_broker",
        "to_client",
        "first",
        "last",
        "errors",
        "side_by",
    )

    def __init__(
        self,
        client: str,
        broker: str,
        exchanges: int = 0,
        to_broker: int = 0,
        to_client: int = 0,
        first: float = float("inf"),
        last: float = 0.0,
        errors: int = 0,
        side_by: str | None = None,
    ):
        self.client, self.broker, self.exchanges = client, broker, exchanges
        self.to_broker, self.to_client, self.first, self.last = to_broker, to_client, first, last
        self.errors = errors
        self.side_by = side_by  # what decided the client side (stream/direction.py)


class Breakdown(Compared):
    """One client, broker or topic."""

    __slots__ = _fields = (
        "exchanges",
        "errors",
        "latency",
        "throttled",
        "throttle_ms",
        "produce",
        "fetch",
        "partitions",
    )

    def __init__(self) -> None:
        self.exchanges = 0
        self.errors = 0
        self.latency: list[float] = []
        self.throttled = 0
        self.throttle_ms = 0
        self.produce = 0  # topics: Produce and Fetch exchanges that name them
        self.fetch = 0
        self.partitions: set[int] = set()


class GroupEvent(Compared):
    """One step of a consumer group: a join, a sync, a failed heartbeat, a leave."""

    _fields = ("ts", "api", "member", "generation", "error", "detail")  # (not the view)

    def __init__(
        self,
        ts: float,
        api: str,
        member: str,
        generation: int | None,
        error: str,  # "" when none
        detail: str,  # leader and members, an assignment, a wait
        view: ExchangeFields | None = None,
    ):
        self.ts, self.api, self.member, self.generation = ts, api, member, generation
        self.error, self.detail, self.view = error, detail, view


# the heartbeats of the groups that are not classic: (API key, what the group is)
HEARTBEATS = {
    CONSUMER_GROUP_HEARTBEAT: "KIP-848 consumer group",
    SHARE_GROUP_HEARTBEAT: "share group",
    STREAMS_GROUP_HEARTBEAT: "streams group",
}


class GroupStats(Compared):
    """One group's events, members and generations (classic) or member epochs."""

    _fields = ("events", "members", "generations", "heartbeats", "kind")

    def __init__(self) -> None:
        self.events: list[GroupEvent] = []
        self.members: set[str] = set()
        self.generations: set[int] = set()
        self.heartbeats = 0  # answered without error (not listed as events)
        self.kind = "consumer group"  # classic; else a value of HEARTBEATS

    @property
    def rebalances(self) -> int:
        return len(self.generations)


class Stats(Compared):
    """What --stats prints, added up exchange by exchange."""

    _fields = (
        "per_api",
        "errors",
        "latency",
        "bytes_requests",
        "bytes_responses",
        "statuses",
        "problems",
        "gaps",
        "gap_bytes",
        "unread",
        "unread_bytes",
        "connections",
        "service",
        "waited",
        "clients",
        "brokers",
        "topics",
        "partitions",
        "groups",
        "diagnoses",
    )

    def __init__(self) -> None:
        self.per_api: Counter[Any] = Counter()
        self.errors: Counter[Any] = Counter()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.bytes_requests = 0
        self.bytes_responses = 0
        self.statuses: Counter[Any] = Counter()
        self.problems = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.unread = 0  # stretches captured but with no message boundary
        self.unread_bytes = 0
        self.connections: dict[int, ConnectionStats] = {}
        # latency less the waits clients asked for (Fetch max_wait_ms, group rebalances)
        self.service: dict[str, list[float]] = defaultdict(list)
        self.waited: Counter[Any] = Counter()  # per API: exchanges that waited
        self.clients: dict[str, Breakdown] = {}
        self.brokers: dict[str, Breakdown] = {}
        self.topics: dict[str, Breakdown] = {}
        self.partitions: dict[tuple[str, int], Breakdown] = {}
        self.groups: dict[str, GroupStats] = {}
        self.diagnoses: Counter[Any] = Counter()  # diagnosis code -> count
        # broker address -> its "host:port" (formatted once, not per exchange)
        self._broker_names: dict[tuple[str, int], str] = {}

    def add(self, ex: Exchange, view: ExchangeFields) -> None:
        first = ex.first
        sasl = first.direction == "sasl"
        name = api_name(first.api_key) if not sasl else "SASL token"
        self.per_api[name] += 1
        conn = self.connections.get(ex.stream)
        if conn is None:
            conn = self.connections[ex.stream] = ConnectionStats(
                f"{ex.client[0]}:{ex.client[1]}",
                f"{ex.broker[0]}:{ex.broker[1]}",
                side_by=ex.side_by,
            )
        conn.exchanges += 1
        status = ex.status
        if status != "ok":
            self.statuses[status.split(":")[0].split(" (")[0]] += 1
        req, resp = ex.request, ex.response
        for m in (req, resp):
            if m is None:
                continue
            size = m.size + 4
            if m.direction == "response" or (m.direction == "sasl" and req is None):
                self.bytes_responses += size
                conn.to_client += size
            else:
                self.bytes_requests += size
                conn.to_broker += size
            ts = m.ts
            if ts < conn.first:
                conn.first = ts
            if ts > conn.last:
                conn.last = ts
        latency = ex.latency
        if latency is not None:
            self.latency[name].append(latency)
        if ex.findings:
            diagnosed = [f.code for f in ex.findings if f.code in DIAGNOSES]
            if diagnosed:
                self.diagnoses.update(diagnosed)
        if not sasl:
            facts = view.facts()
            for code in facts.errors:
                self.errors[error_name(code)] += 1
                conn.errors += 1
            if ex.findings:
                self.problems += view.problems
            self._breakdowns(ex, view, name, facts, latency)
            if first.api_key in GROUP_MEMBERSHIP or first.api_key in HEARTBEATS:
                self._group(ex, view)

    def _breakdowns(
        self, ex: Exchange, view: ExchangeFields, name: str, facts: Facts, latency: float | None
    ) -> None:
        errors = len(facts.errors)
        throttle = facts.throttle_ms or 0
        req = ex.request
        client = req.client_id if req and req.client_id else f"{ex.client[0]} (no client id)"
        service = anomaly.service_time(view) if latency is not None else None
        known = service_known(latency, service)
        broker = self._broker_names.get(ex.broker)
        if broker is None:
            broker = self._broker_names[ex.broker] = f"{ex.broker[0]}:{ex.broker[1]}"
        for b in (_breakdown(self.clients, client), _breakdown(self.brokers, broker)):
            b.exchanges += 1
            b.errors += errors
            if known:
                b.latency.append(service)  # type: ignore[arg-type]
            if throttle:
                b.throttled += 1
                b.throttle_ms += throttle
        if facts.topics:
            sites = [(t, p) for t, p, _ in facts.error_sites]
            key = ex.first.api_key
            produce, fetch = key == PRODUCE, key == FETCH
            for topic, partitions in facts.topics.items():
                b = _breakdown(self.topics, topic)
                b.exchanges += 1
                b.produce += produce
                b.fetch += fetch
                if partitions:
                    b.partitions |= partitions
                    for p in partitions:
                        part = _breakdown(self.partitions, (topic, p))
                        part.exchanges += 1
                        part.produce += produce
                        part.fetch += fetch
                        if sites:
                            part.errors += sites.count((topic, p))
                if sites:
                    b.errors += sum(1 for t, _ in sites if t == topic)
        if service is not None and latency is not None:
            if latency - service > 0.001:
                self.waited[name] += 1
            if known:  # (not a wait that took it all: time unknown)
                self.service[name].append(service)

    def _group(self, ex: Exchange, view: ExchangeFields) -> None:
        found = group_event(ex, view)
        if found is None:
            return
        group_id, event = found
        g = self.groups.setdefault(group_id, GroupStats())
        key = ex.first.api_key
        if event.member:
            g.members.add(event.member)
        if key == JOIN_GROUP and not event.error and event.generation is not None:
            g.generations.add(event.generation)
        if key in HEARTBEATS:
            g.kind = HEARTBEATS[key]
            if not event.error and event.generation is not None and event.generation > 0:
                g.generations.add(event.generation)
        if (
            (key == HEARTBEAT or (key in HEARTBEATS and not event.detail))
            and not event.error
            and ex.response is not None
        ):
            g.heartbeats += 1  # nothing changed: counted, not listed
            return
        g.events.append(event)

    def add_gap(self, gap: Gap) -> None:
        if gap.unread:
            self.unread += 1
            self.unread_bytes += gap.length
        else:
            self.gaps += 1
            self.gap_bytes += gap.length

    def latency_summary(self, values: list[float]) -> tuple[float, float, float, float]:
        s = sorted(values)
        return percentile(s, 50), percentile(s, 90), percentile(s, 99), s[-1]


def _breakdown(table: dict[Any, Any], key: Any) -> Breakdown:
    """``table[key]``, made when missing (not one made and dropped per exchange)."""
    b = table.get(key)
    if b is None:
        b = table[key] = Breakdown()
    return b


def _items(array: Node) -> list[Any]:
    """The elements of an array node (not its count)."""
    return [c for c in array.children if c.name.startswith("[")]


def _fields(node: Node | None) -> dict[Any, Any]:
    return {c.name: c.value for c in node.children} if node is not None else {}


def _assignment(body: Node | None) -> str:
    """A SyncGroup's assignment as topic[partitions] (the consumer protocol, decoded)."""
    node = body.child("assignment") if body is not None else None
    parts = []
    for item in node.find("assigned_partitions") if node is not None else ():
        for t in item.children:
            topic, partitions = t.child("topic"), t.child("partitions")
            if topic is not None and partitions is not None:
                ps = sorted(p.value for p in _items(partitions) if isinstance(p.value, int))
                parts.append(f"{topic.value}[{','.join(map(str, ps))}]")
    return " ".join(parts) or "nothing assigned"


def group_event(ex: Exchange, view: ExchangeFields) -> tuple[str, GroupEvent] | None:
    """(group id, what the exchange did to the group), from its full trees."""
    from ..protocol import Options

    options = view.options or Options()
    req = ex.request.decoded(options).body if ex.request else None
    resp = (
        ex.response.decoded(options).body
        if ex.response and ex.response.api_key is not None
        else None
    )
    asked, got = _fields(req), _fields(resp)
    group = asked.get("group_id")
    if not isinstance(group, str):
        return None
    code = got.get("error_code") or 0
    error = error_name(code) if code else ("no answer" if ex.response is None else "")
    member = got.get("member_id") or asked.get("member_id") or ""
    key = ex.first.api_key
    generation = got.get("generation_id") if key == JOIN_GROUP else asked.get("generation_id")
    detail = ""
    if key in HEARTBEATS:
        generation, detail = _heartbeat(req, resp, error, view.topic_ids)
    elif key == JOIN_GROUP and not error:
        members = resp.child("members") if resp is not None else None
        count = len(_items(members)) if members is not None else 0
        role = "leader" if got.get("leader") == member else "follower"
        detail = f"{role}, {count} member{'s' if count != 1 else ''} listed"
        wait = anomaly.client_wait(view)
        if wait > 0.001:
            detail += f", waited {wait:.1f} s for the rebalance"
    elif key == SYNC_GROUP and not error:
        detail = _assignment(resp)
    elif key == LEAVE_GROUP:
        detail = "left the group"
    return group, GroupEvent(
        ex.first.ts,
        api_name(key),
        member or "",
        generation if isinstance(generation, int) else None,
        error,
        detail,
        view,
    )


def _heartbeat(
    req: Any, resp: Any, error: str, topic_ids: dict[str, str] | None
) -> tuple[int | None, str]:
    """(member epoch, what changed) of a KIP-848, share or streams group heartbeat: a
    member joining (epoch 0) or leaving (-1; -2 a static member), its epoch moving and
    what it was assigned, or why the coordinator fenced it. "" when nothing changed."""
    from .diagnoses import plain
    from .facts import topic_of_id

    asked, got = plain(req) or {}, plain(resp) or {}
    sent, now = asked.get("member_epoch"), got.get("member_epoch")
    if error:
        why = {
            "FENCED_MEMBER_EPOCH": "the coordinator moved on without it (its session or "
            "rebalance timed out)",
            "UNKNOWN_MEMBER_ID": "the coordinator dropped it (its session timed out)",
            "UNRELEASED_INSTANCE_ID": "its instance id is still held by another member",
        }
        return (
            sent if type(sent) is int else None,
            f"sent epoch {sent}: {why[error]}; it joins again with epoch 0" if error in why else "",
        )
    epoch = now if type(now) is int else None
    if sent in (-1, -2):
        return epoch, "left the group" + (
            " (a static member: it may come back)" if sent == -2 else ""
        )
    assigned = got.get("assignment")
    parts: list[str] = []
    if isinstance(assigned, dict):
        for t in assigned.get("topic_partitions") or ():
            if isinstance(t, dict) and isinstance(t.get("topic_id"), str):
                ps = sorted(p for p in t.get("partitions") or () if type(p) is int)
                name = topic_of_id(t["topic_id"], topic_ids or {})
                parts.append(f"{name}[{','.join(map(str, ps))}]")
    for kind in ("active_tasks", "standby_tasks", "warmup_tasks"):  # streams
        for t in got.get(kind) or ():
            if isinstance(t, dict):
                ps = sorted(p for p in t.get("partitions") or () if type(p) is int)
                parts.append(
                    f"{kind.split('_')[0]} subtopology {t.get('subtopology_id')}"
                    f"[{','.join(map(str, ps))}]"
                )
    given = (
        ("assigned " + " ".join(parts))
        if parts
        else ("assigned nothing" if isinstance(assigned, dict) else "")
    )
    if sent == 0:
        return epoch, "joined" + (f" at epoch {epoch}" if epoch is not None else "") + (
            f", {given}" if given else ""
        )
    if type(sent) is int and epoch is not None and epoch != sent:
        return epoch, f"epoch {sent} -> {epoch}" + (f", {given}" if given else "")
    return epoch, given
