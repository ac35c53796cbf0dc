"""What is wrong with an exchange, for the `anomaly` filter and the TUI's next-problem key:
error codes, findings, decoding problems, no answer, throttling, and slowness that is
not a wait the client asked for (a Fetch or ShareFetch long poll, a JoinGroup or
SyncGroup held by the coordinator until the group rebalances)."""

from __future__ import annotations

from typing import Any

from ..protocol.apis import API_VERSIONS, FETCH, HEARTBEAT, JOIN_GROUP, SHARE_FETCH, SYNC_GROUP
from ..protocol.names import error_name
from ..protocol.node import Node

SLOW = 0.5  # seconds of broker time (latency less the asked wait): an outlier
MEMBER_ID_REQUIRED = 79  # a JoinGroup answered with it joined nothing: it did not wait


def client_wait(view: Any) -> float:
    """Seconds of the latency the client asked the broker to hold the answer."""
    ex = view.ex
    latency = ex.latency
    if latency is None or ex.request is None:
        return 0.0
    key = ex.first.api_key
    wait = view.facts().asked_wait_ms  # read from the request by enrichment
    if key == JOIN_GROUP and MEMBER_ID_REQUIRED in view.facts().errors:
        return 0.0  # answered at once: the first join's step
    # a Fetch is held until min_bytes arrive or max_wait_ms runs out, so it may be held
    # even when it returns records (a KRaft quorum leader holds one with min_bytes 0 too);
    # a ShareFetch likewise: the broker's time is what is beyond the whole wait
    if key in (FETCH, SHARE_FETCH, JOIN_GROUP):
        return min(latency, wait / 1000) if isinstance(wait, int) and wait > 0 else 0.0
    if key == SYNC_GROUP:  # a follower's is held until the leader sends assignments
        return 0.0 if view.facts().leads_sync else float(latency)
    return 0.0


def service_time(view: Any) -> float | None:
    """Latency less the wait the client asked for: the time the broker took."""
    latency = view.ex.latency
    return None if latency is None else max(0.0, latency - client_wait(view))


# error codes that are a normal step of an API's protocol, not a failure: a first
# JoinGroup is told MEMBER_ID_REQUIRED (79) and joins again with the id it was given
# (KIP-394); a Heartbeat during a rebalance hears REBALANCE_IN_PROGRESS (27) and rejoins;
# a client newer than its broker is told UNSUPPORTED_VERSION (35) by ApiVersions and asks
# again in a version the answer names
EXPECTED_ERRORS: dict[int | None, frozenset[int]] = {
    JOIN_GROUP: frozenset({MEMBER_ID_REQUIRED}),
    HEARTBEAT: frozenset({27}),
    API_VERSIONS: frozenset({35}),
}


def reasons(view: Any) -> list[str]:
    """Why the exchange is an anomaly (empty: it is not), most telling first."""
    cached: list[str] | None = view.__dict__.get("_reasons")
    if cached is not None:
        return cached
    ex = view.ex
    out = []
    if ex.first.direction != "sasl":
        normal = EXPECTED_ERRORS.get(ex.first.api_key, ())
        out += sorted({error_name(c) for c in view.facts().errors if c not in normal})
    # (slow_response is the "slow" below, said with the figure)
    out += [
        f.code
        for f in ex.findings
        if f.severity != "note" and f.code not in ("error_code", "slow_response")
    ]
    slow = service_time(view)
    if slow is not None and slow > SLOW:
        out.append(f"slow ({slow * 1000:.0f}ms)")
    return list(dict.fromkeys(out))


def offending(tree: Node) -> Node | None:
    """The field to look at first in a message: one that did not decode, else a
    nonzero error code, else a throttle time."""
    error = throttle = None
    for node in tree.walk():
        if node.problem:
            return node
        if (
            error is None
            and node.ktype == "int16"
            and node.name.endswith("error_code")
            and node.value
        ):
            error = node
        elif throttle is None and node.name == "throttle_time_ms" and node.value:
            throttle = node
    return error or throttle
