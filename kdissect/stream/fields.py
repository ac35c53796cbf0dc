"""The display-filter fields: one registry of name, type, getter and docs.

The filter language (``kdissect.filters``), its error messages and ``--help`` list, the
TUI's completion and docs/guide/filters.md's table all come from ``FIELDS``. Registering a
field is one ``field(...)`` call; its getter takes an ``ExchangeFields`` (an enriched
exchange) and returns the list of its values (a field with several values matches when
any does). Items that say their own values (``values_of``: the log items of ``kdissect
log``) are asked directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.apis import CARRY_RECORDS
from ..protocol.codecs import CODECS
from ..protocol.findings import REGISTRY as FINDINGS
from ..protocol.findings import SEVERITIES
from ..protocol.plain import Frozen
from . import anomaly, content
from .facts import Facts
from .model import STATUSES

if TYPE_CHECKING:
    from ..protocol import Options
    from .model import Exchange

KINDS = ("number", "text", "api", "error", "duration", "finding", "severity")
PROBLEM_GROUPS = frozenset({"malformed", "budget"})


class ExchangeFields:
    """An enriched exchange as summaries and display filters see it: ``field(name)`` ->
    list of values. Reads only what enrichment put on the exchange; a field that decodes
    its messages again does so with ``options`` and the run's ``topic_ids`` (id -> name,
    as the engine learned them)."""

    def __init__(
        self,
        ex: Exchange,
        options: Options | None = None,
        topic_ids: dict[str, str] | None = None,
    ):
        self.ex = ex
        self.options = options
        self.topic_ids = topic_ids

    def facts(self) -> Facts:
        return self.ex.facts if self.ex.facts is not None else Facts()

    @property
    def problems(self) -> int:
        """Findings about malformed bytes or spent budgets."""
        findings = self.ex.findings
        return sum(1 for f in findings if f.kind.group in PROBLEM_GROUPS) if findings else 0

    def field(self, name: str) -> list[Any]:
        get = FIELDS[name].get
        return get(self) if get is not None else []


Getter = Callable[[ExchangeFields], list[Any]]


class FilterField(Frozen):
    """A display-filter field: its kind, its one-line docs, how an exchange gives it."""

    __slots__ = _fields = ("name", "kind", "docs", "get", "complete", "choices")

    def __init__(
        self,
        name: str,
        kind: str,  # one of KINDS: how a compared value is read
        docs: str,  # one line: --help, error messages, docs/guide/filters.md
        get: Getter | None = None,  # None: no value for exchanges (log items say their own)
        complete: bool = True,  # offered by the TUI's completion
        choices: tuple[str, ...] = (),  # a closed set of values ("x: " also opens "x: ...")
    ):
        self.name, self.kind, self.docs, self.get, self.complete = name, kind, docs, get, complete
        self.choices = choices

    def accepts(self, value: str, part: bool = False) -> bool:
        """Whether a text value can ever be one of this field's (``part``: be in one, as
        ``contains`` asks); any, without choices."""
        return not self.choices or any(
            (value in c if part else value == c)
            or (c.endswith(": ") and (part or value.startswith(c)))
            for c in self.choices
        )


FIELDS: dict[str, FilterField] = {}


def choice_texts(choices: tuple[str, ...]) -> list[str]:
    """A closed set of values as a user reads them (an open one, ``x: ``, as ``x: ...``)."""
    return [c + "..." if c.endswith(": ") else c for c in choices]


def field(
    name: str,
    kind: str,
    docs: str,
    get: Getter | None = None,
    complete: bool = True,
    choices: tuple[str, ...] = (),
) -> FilterField:
    """Register one display-filter field."""
    if kind not in KINDS or name in FIELDS:
        raise ValueError(f"filter field {name}: kind {kind!r} unknown or registered twice")
    FIELDS[name] = f = FilterField(name, kind, docs, get, complete, choices)
    return f


def _partitions(x: ExchangeFields) -> list[Any]:
    topics = x.facts().topics
    return sorted(set().union(*topics.values())) if topics else []


def _client_id(x: ExchangeFields) -> list[Any]:
    r = x.ex.request
    return [r.client_id] if r is not None and r.client_id else []


def _response_frame(x: ExchangeFields) -> list[Any]:
    return [x.ex.response.frame] if x.ex.response is not None else []


def _service_time(x: ExchangeFields) -> list[Any]:
    t = anomaly.service_time(x)
    return [t] if t is not None else []


# -- the registry (one call per field; docs/guide/filters.md's table is generated from it) ----
field(
    "api",
    "api",
    "the API: compare with a name (`Produce`, case-insensitive) or a key (`0`)",
    lambda x: [x.ex.first.api_key],
)
field("version", "number", "API version", lambda x: [x.ex.first.api_version])
field(
    "correlation_id",
    "number",
    "correlation id (alias `corr`)",
    lambda x: [x.ex.first.correlation_id],
)
field("client_id", "text", "the request's client id", _client_id)
field(
    "latency",
    "duration",
    "response time; a number with a unit: `us` (or `µs`), `ms` (the default) or `s`",
    lambda x: [x.ex.latency] if x.ex.latency is not None else [],
)
field(
    "topic",
    "text",
    "every topic the exchange names (requests and responses)",
    lambda x: list(x.facts().topics),
)
field("partition", "number", "every partition it names", _partitions)
field(
    "error",
    "error",
    "the nonzero error codes in it, or `0` when there are none; compare "
    "with a number or a name (`UNKNOWN_TOPIC_OR_PARTITION`)",
    lambda x: x.facts().errors or [0],
)
field(
    "records",
    "number",
    "records carried (Produce requests, Fetch responses; in `kdissect log`, a batch's, or a "
    "compressed v0/v1 wrapper's inner messages)",
    lambda x: [x.facts().records],
)
field(
    "status",
    "text",
    "the exchange's status: " + ", ".join(f"`{s}`" for s in choice_texts(STATUSES)),
    lambda x: [x.ex.status],
    choices=STATUSES,
)
field("stream", "number", "connection number", lambda x: [x.ex.stream])
field(
    "client",
    "text",
    "the client's address as `ip:port`",
    lambda x: [f"{x.ex.client[0]}:{x.ex.client[1]}"],
)
field(
    "broker",
    "text",
    "the broker's address as `ip:port`",
    lambda x: [f"{x.ex.broker[0]}:{x.ex.broker[1]}"],
)
field("bytes", "number", "request + response size", lambda x: [sum(m.size for m in x.ex.messages)])
field("problems", "number", "number of fields that did not decode cleanly", lambda x: [x.problems])
field(
    "frame",
    "number",
    "capture frame of the request (of the response for an orphan), "
    "numbered as Wireshark numbers them",
    lambda x: [x.ex.first.frame],
)
field("response_frame", "number", "capture frame of the response", _response_frame)


def _finding_codes(x: Any) -> list[str]:
    """The exchange's finding codes, then its records' (the summary's enrichment reads
    batches' heads and CRCs, not their records)."""
    codes = [f.code for f in x.ex.findings]
    if x.ex.first.api_key in CARRY_RECORDS:
        codes += [c for c in _filter_values().record_findings(x) if c not in codes]
    return codes


field(
    "anomaly",
    "number",
    "true when anything is wrong: a nonzero error code (but a normal step of the "
    "protocol: a first JoinGroup's MEMBER_ID_REQUIRED, a Heartbeat's "
    "REBALANCE_IN_PROGRESS, ApiVersions' UNSUPPORTED_VERSION), a finding of "
    "severity warn or error (no answer, malformed bytes, throttled, a version not "
    "advertised...), or a broker time over 500 ms. Waits the client asked for are not "
    "slowness (see `service_time`). The TUI's `p` key goes to the next exchange it selects. "
    "It does not read records (fast on every exchange): `severity >= warn` does.",
    lambda x: [True] if anomaly.reasons(x) else [],
)
field(
    "finding",
    "finding",
    "the exchange's finding codes (`finding == unanswered`), its records' included (a "
    "header key not UTF-8: the filter reads the records of Produce and Fetch, as "
    "`record.*` fields do); the codes are listed in [findings.md](findings.md)",
    _finding_codes,
)
field(
    "severity",
    "severity",
    "the severities of its findings, its records' included: `note`, `warn`, `error`, in "
    "that order (`severity >= warn`; `warning` is taken for `warn`)",
    lambda x: [FINDINGS[code].rank for code in _finding_codes(x)],
)
field(
    "service_time",
    "duration",
    "broker time: the latency less the wait the client asked for "
    "(a Fetch or ShareFetch may be held up to `max_wait_ms`, with records or without; a "
    "JoinGroup up to "
    "`rebalance_timeout_ms`; a follower's SyncGroup until the leader's assignments arrive). A "
    "duration "
    "like `latency`.",
    _service_time,
)
field("throttle", "number", "the response's `throttle_time_ms`", content.throttle)
field(
    "record.key",
    "text",
    "the keys of the records carried (Produce requests, Fetch "
    "responses), as text; records inside compressed batches (gzip, snappy, lz4, zstd) are "
    "decompressed. Bytes that are not UTF-8 are replaced.",
    content.record_keys,
)
field(
    "record.value",
    "text",
    "the values of the records carried, as `record.key` reads keys; "
    "`record.value == null` finds tombstones (null values) in `kdissect log`",
    lambda x: [r.value for r in content.records(x) if r.value is not None],
)
field(
    "record.header",
    "text",
    "the records' header names; `record.header.NAME` is the values "
    "of the header `NAME` (`record.header.codec == gzip`)",
    lambda x: [k for r in content.records(x) for k, _ in r.headers],
)
# decoded keys and values (kdissect/stream/filter_values.py); record.value.PATH and record.key.PATH
# are names under these, read by values() below
field(
    "record.value_schema",
    "number",
    "the Schema Registry ids of the record values "
    "(`record.value_schema == 2`); `record.value.PATH` selects on the decoded values "
    '(`record.value.customer.id == "c-3"`, [values.md](values.md))',
    lambda x: _filter_values().values(x, "record.value_schema"),
)
field(
    "record.key_schema",
    "number",
    "the Schema Registry ids of the record keys; `record.key.PATH` selects on the decoded keys",
    lambda x: _filter_values().values(x, "record.key_schema"),
)
# kdissect log only (docs/guide/log.md): a batch's header fields, no value for exchanges
_LOG = "`kdissect log` only ([log.md](log.md)): "
field("base_offset", "number", _LOG + "a batch's (or a v0/v1 message's) first offset")
field("producer_id", "number", _LOG + "a batch's producer id")
field("producer_epoch", "number", _LOG + "a batch's producer epoch")
field("base_sequence", "number", _LOG + "a batch's first sequence number")
field("partition_leader_epoch", "number", _LOG + "a batch's partition leader epoch")
field("magic", "number", _LOG + "the record format (0, 1, 2)")
field("offset", "number", _LOG + "a batch's (or a v0/v1 message's) first offset")
field(
    "control",
    "number",
    _LOG + "true for a control batch (a transaction's COMMIT or "
    "ABORT marker, KRaft's control records): `-Y control`",
)
field(
    "transactional",
    "number",
    _LOG + "true for a batch of a transaction (its records and its COMMIT/ABORT marker)",
)
field(
    "aborted",
    "number",
    _LOG + "true for a batch of records of an aborted transaction "
    "(its partition's `.txnindex` lists the transaction)",
)
field(
    "codec",
    "text",
    _LOG
    + "a v2 batch's compression: "
    + ", ".join(f"`{c}`" for c in CODECS.values())
    + " (`codec == zstd`)",
    choices=tuple(CODECS.values()),
)
field(
    "deleted",
    "number",
    _LOG + "true for a batch starting below its partition's log start "
    "offset (from `log-start-offset-checkpoint` or `leader-epoch-checkpoint`): deleted by "
    "DeleteRecords or retention but still on disk",
)

# the fields `kdissect log` answers (its filter bar completes them, its errors list them)
LOG_NAMES = (
    "finding",
    "severity",
    "anomaly",
    "topic",
    "partition",
    "records",
    "record.key",
    "record.value",
    "record.header",
    "record.value_schema",
    "record.key_schema",
    "base_offset",
    "offset",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "partition_leader_epoch",
    "magic",
    "control",
    "transactional",
    "aborted",
    "codec",
    "deleted",
    # internal topics' keys (__consumer_offsets, __transaction_state) by field
    "record.key.group",
    "record.key.topic",
    "record.key.transactional_id",
)

# fields whose values come from the messages' bytes (record contents), not from enrichment
# alone (findings: their records' too)
READS_BYTES = frozenset(
    {
        "record.key",
        "record.value",
        "record.header",
        "record.value_schema",
        "record.key_schema",
        "finding",
        "severity",
    }
)


def completions(kind: str) -> list[str] | None:
    """Values the TUI offers after ``field ==`` for fields of this kind (None: the values
    seen so far)."""
    if kind == "finding":
        return sorted(FINDINGS)
    if kind == "severity":
        return list(SEVERITIES)
    return None


def markdown_table() -> str:
    """docs/guide/filters.md's table of fields (a test checks it is current)."""
    rows = ["| field | values |", "|---|---|"]
    rows += [f"| `{f.name}` | {f.docs} |" for f in FIELDS.values()]
    return "\n".join(rows)


def help_list(first: str = "  fields: ", width: int = 88) -> str:
    """The names of the exchange fields, wrapped for ``--help`` after ``first``."""
    names = [
        n if n != "record.header" else "record.header[.NAME]"
        for n, f in FIELDS.items()
        if f.get is not None
    ]
    lines, line = [], first
    for name in names:
        if len(line) + len(name) + 1 > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(first)
        line += name + " "
    return "\n".join([*lines, line.rstrip()])


def values(item: Any, name: str) -> list[Any]:
    """The values of ``name`` for ``item``: an ``ExchangeFields``, or an item that says
    its own (``values_of``)."""
    own = getattr(item, "values_of", None)
    if own is not None:
        return list(own(name))
    f = FIELDS.get(name)
    if f is not None:
        return f.get(item) if f.get is not None else []
    if name.startswith("record.header."):
        return content.header_values(item, name[len("record.header.") :])
    decoded = _filter_values()
    if decoded.is_value_path(name):
        return list(decoded.values(item, name))
    return list(item.field(name))


def _filter_values() -> Any:
    from . import filter_values  # imported when a filter reads decoded values

    return filter_values
