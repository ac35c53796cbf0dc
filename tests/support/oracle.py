"""The findings oracle: every finding kdissect raises on a capture, checked against the
truth, with a rule per finding code. The truth of a message is what Kafka's own classes
read of it (tests/support/java/KafkaDecode.java: AbstractRequest/AbstractResponse
parsing, JSON by the generated converters); the capture's timestamps give the times.

    truth = kafka_decoded(exchanges)            # message index -> Kafka's JSON body
    false = check(exchanges, truth)             # [(code, why it is false, finding)]

A rule returns None when the finding is true, else why it is not. A code without a rule
is listed by ``unchecked`` (a test says which codes it could not check)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from kdissect.stream.model import Exchange
from tests.support.oracle_clients import RULES as CLIENT_RULES
from tests.support.oracle_clients import History

__all__ = ["CLIENT_RULES", "RULES", "check", "judge", "kafka_decoded", "unchecked"]

SLOW_S = 0.5
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's JSON of Uuid.METADATA_TOPIC_ID
# error codes (Kafka's Errors): NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, FENCED_LEADER_EPOCH
LEADERSHIP = {6, 16, 74}
ERRORS: dict[int, str] = {}  # Kafka's Errors: code -> name (read by kafka_decoded)
QUORUM = {52, 53, 54, 59}  # Vote, Begin/EndQuorumEpoch, FetchSnapshot


def kafka_decoded(exchanges: list[Exchange]) -> dict[int, dict]:
    """Message index -> its body as Kafka's classes read it (messages captured whole); a
    request's header's API key and version as ``"_api"`` (key, version) in it, the bytes
    Kafka left unread after the body as ``"_trailing"`` (when any) (a request
    of a version Kafka 4 removed: only that, and ``"_unread"``, why Kafka did not)."""
    from tests.support.apache_kafka import classpath
    from tests.support.javac import java_command

    lines = []
    for e in exchanges:
        req, resp = e.request, e.response
        if req is not None and req.direction == "request" and req.status == "ok" and not req.holes:
            lines.append(f"{req.index} req {req.data.hex()}")
        if (
            resp is not None
            and resp.direction == "response"
            and resp.status == "ok"
            and resp.api_key is not None
            and resp.api_version is not None
            and not resp.holes
        ):
            lines.append(f"{resp.index} resp {resp.api_key} {resp.api_version} {resp.data.hex()}")
    source = Path(__file__).parent / "java" / "KafkaDecode.java"
    out = subprocess.run(
        java_command(
            source, classpath(), "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"
        ),
        input="\n".join(lines),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode:
        raise RuntimeError(f"KafkaDecode failed:\n{out.stderr[-3000:]}")
    truth = {}
    for line in out.stdout.splitlines():
        row = json.loads(line)
        if "errors" in row:  # Kafka's error table: code -> name
            ERRORS.update((int(k), v) for k, v in row["errors"].items())
            continue
        if "body" in row:
            truth[row["i"]] = row["body"]
            if row.get("unread"):  # bytes Kafka's classes left after the body
                row["body"]["_trailing"] = row["unread"]
        elif "api_key" in row:  # a version Kafka 4 removed: its header only
            truth[row["i"]] = {"_unread": row["error"]}
        if "api_key" in row:
            truth[row["i"]]["_api"] = (row["api_key"], row["api_version"], row["supported"])
            truth[row["i"]]["_client"] = row.get("client_id")
    return truth


def _waits(api: int | None, body: dict) -> list[tuple[str, int]]:
    """Every wait a request names (Kafka's field names), as Kafka read it."""
    names = {1: ("maxWaitMs",), 78: ("maxWaitMs",), 11: ("rebalanceTimeoutMs",)}.get(api, ())
    if api == 11 and "rebalanceTimeoutMs" not in body:
        names = ("sessionTimeoutMs",)  # JoinGroup v0
    return [(n, body[n]) for n in names if isinstance(body.get(n), int) and body[n] > 0]


def _slow(ex: Exchange, detail: str, truth: dict[int, dict], _state) -> str | None:
    """slow_response: the broker held the answer more than 0.5 s beyond every wait the
    request named; and the text says nothing asked it to hold only when nothing did."""
    assert ex.request is not None
    body = truth.get(ex.request.index)
    if (
        body is None
        or "_unread" in body
        or ex.response is None
        or truth.get(ex.response.index) is None
    ):
        return "a message Kafka's classes do not read"
    if ex.first.api_key == 14 and not body.get("assignments"):
        return "a follower's SyncGroup is held until the group's leader sends the assignments"
    waits = _waits(ex.first.api_key, body)
    if ex.first.api_key == 11 and truth[ex.response.index].get("errorCode") == 79:
        waits = []  # MEMBER_ID_REQUIRED: a first JoinGroup is answered at once
    latency = ex.response.ts - ex.request.ts
    beyond = latency - sum(v for _, v in waits) / 1000
    if beyond <= SLOW_S:
        return f"{latency:.3f} s less the waits {waits}: {beyond:.3f} s"
    if waits and "nothing in the request asked" in detail:
        return f"says nothing asked the broker to hold it; the request names {waits}"
    return None


def _storm(ex: Exchange, detail: str, truth: dict[int, dict], state) -> str | None:
    """leadership_storm: 10 or more leadership errors answered on the connection within
    5 s (Kafka's reading of the answers), none of them KRaft's own Fetch."""
    times: deque = state.setdefault(("storm", ex.stream), deque())
    if ex.first.api_key in QUORUM or (
        ex.first.api_key == 1 and _is_kraft_fetch(truth.get(ex.request.index) or {})
    ):
        return "a KRaft quorum request: the quorum electing its leader"
    return (
        None
        if len(times) >= 10 and times[-1] - times[0] <= 5.0
        else f"{len(times)} leadership errors in the 5 s before it"
    )


def _is_kraft_fetch(body: dict) -> bool:
    return any(
        t.get("topicId") == METADATA_TOPIC_ID or t.get("topic") == "__cluster_metadata"
        for t in body.get("topics") or ()
    )


def _shutdown(ex: Exchange, detail: str, truth: dict[int, dict], _state) -> str | None:
    """controlled_shutdown: Kafka reads want_shut_down in the BrokerHeartbeat, of the
    broker the text names."""
    body = truth.get(ex.request.index) if ex.request is not None else None
    if body is None or body.get("wantShutDown") is not True:
        return "the BrokerHeartbeat does not ask to shut down"
    if f"broker {body.get('brokerId')} " not in detail:
        return f"names another broker than {body.get('brokerId')}"
    return None


def _no_api_versions(ex: Exchange, detail: str, truth: dict[int, dict], _state) -> str | None:
    """no_api_versions: the connection's first request (its SYN captured, its first
    bytes) is, by Kafka's reading of its header, not ApiVersions."""
    req = ex.request
    body = truth.get(req.index) if req is not None else None
    if body is None:
        return "a request Kafka's classes do not read"
    if not ex.opened or req.offset != 4:
        return "not the first request of a connection seen from its start"
    if body["_api"][0] == 18:
        return "Kafka reads it as ApiVersions"
    return None


def _removed(ex: Exchange, detail: str, truth: dict[int, dict], _state) -> str | None:
    """removed_version: Kafka's ApiKeys no longer accept the header's version, and the
    text names that API and version."""
    body = truth.get(ex.request.index) if ex.request is not None else None
    if body is None:
        return "a request Kafka's classes do not read"
    key, version, supported = body["_api"]
    if supported:
        return f"Kafka accepts API {key} v{version}"
    if not detail.startswith(f"{ex.request.api_name} v{version}:"):
        return f"the text names another version than v{version}"
    return None


RULES: dict[str, Callable[..., str | None]] = {
    "removed_version": _removed,
    "slow_response": _slow,
    "leadership_storm": _storm,
    "controlled_shutdown": _shutdown,
    "no_api_versions": _no_api_versions,
}


def _errors(body) -> list[int]:
    """Every nonzero errorCode in a body as Kafka's JSON gives it."""
    out = []
    stack = [body]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            code = v.get("errorCode")
            if isinstance(code, int) and code:
                out.append(code)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def check(
    exchanges: list[Exchange], truth: dict[int, dict]
) -> tuple[Counter, list[tuple[str, str, str]]]:
    """(findings checked per code, the false ones as (code, why, the finding's text))."""
    checked: Counter = Counter()
    false = []
    state: dict = {}
    for ex in sorted(exchanges, key=lambda e: e.response.ts if e.response else e.first.ts):
        if (
            ex.response is not None
            and ex.response.index in truth
            and ex.first.api_key not in QUORUM
            and not (
                ex.first.api_key == 1
                and _is_kraft_fetch(truth.get(ex.request.index) or {} if ex.request else {})
            )
        ):
            hits = [c for c in _errors(truth[ex.response.index]) if c in LEADERSHIP]
            times: deque = state.setdefault(("storm", ex.stream), deque())
            times.extend([ex.response.ts] * len(hits))
            while times and ex.response.ts - times[0] > 5.0:
                times.popleft()
        for f in ex.findings:
            if f.code not in RULES and f.code not in CLIENT_RULES:
                continue
            checked[f.code] += 1
            why = judge(ex, f.code, f.detail, exchanges, truth, state)
            if why is not None:
                false.append((f.code, why, f.detail))
    return checked, false


def judge(
    ex: Exchange,
    code: str,
    detail: str,
    exchanges: list[Exchange],
    truth: dict[int, dict],
    state: dict,
) -> str | None:
    """Why a finding (its code and text, raised on ``ex``) is false; None: it is true.
    (``state``: kept between the calls of one capture.)"""
    if code in CLIENT_RULES:
        if "history" not in state:
            state["history"] = History(exchanges, truth)
        return CLIENT_RULES[code](ex, detail, state["history"], ERRORS)
    return RULES[code](ex, detail, truth, state)


def unchecked(exchanges: list[Exchange]) -> set[str]:
    """The diagnoses raised that no rule checks."""
    from kdissect.stream.diagnoses import CODES

    return {
        f.code
        for e in exchanges
        for f in e.findings
        if f.code in CODES and f.code not in RULES and f.code not in CLIENT_RULES
    }
