"""The display-filter fields: one registry of name, type, getter and docs.

The filter language (``kdissect.filters``), its error messages and ``--help`` list, the
TUI's completion and docs/filters.md's table all come from ``FIELDS``. Registering a
field is one ``field(...)`` call; its getter takes an ``ExchangeFields`` (an enriched
exchange) and returns the list of its values (a field with several values matches when
any does). Items that say their own values (``values_of``: the log items of ``kdissect
log``) are asked directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol.findings import REGISTRY as FINDINGS
from ..protocol.findings import SEVERITIES
from . import anomaly, content
from .facts import Facts

if TYPE_CHECKING:
    from ..protocol import Options
    from .model import Exchange

KINDS = ("number", "text", "api", "error", "duration", "finding", "severity")
PROBLEM_GROUPS = frozenset({"malformed", "budget"})


class ExchangeFields:
    """An enriched exchange as summaries and display filters see it: ``field(name)`` ->
    list of values. Reads only what enrichment put on the exchange."""

    def __init__(self, ex: Exchange, options: Options | None = None):
        self.ex = ex
        self.options = options

    def facts(self) -> Facts:
        return self.ex.facts if self.ex.facts is not None else Facts()

    @property
    def problems(self) -> int:
        """Findings about malformed bytes or spent budgets."""
        return sum(1 for f in self.ex.findings if f.kind.group in PROBLEM_GROUPS)

    def field(self, name: str) -> list:
        get = FIELDS[name].get
        return get(self) if get is not None else []


Getter = Callable[[ExchangeFields], list]


@dataclass(frozen=True, slots=True)
class FilterField:
    name: str
    kind: str                     # one of KINDS: how a compared value is read
    docs: str                     # one line: --help, error messages, docs/filters.md
    get: Getter | None = None     # None: no value for exchanges (log items say their own)
    complete: bool = True         # offered by the TUI's completion


FIELDS: dict[str, FilterField] = {}


def field(name: str, kind: str, docs: str, get: Getter | None = None,
          complete: bool = True) -> FilterField:
    """Register one display-filter field."""
    if kind not in KINDS or name in FIELDS:
        raise ValueError(f"filter field {name}: kind {kind!r} unknown or registered twice")
    FIELDS[name] = f = FilterField(name, kind, docs, get, complete)
    return f


def _partitions(x: ExchangeFields) -> list:
    topics = x.facts().topics
    return sorted(set().union(*topics.values())) if topics else []


def _client_id(x: ExchangeFields) -> list:
    r = x.ex.request
    return [r.client_id] if r is not None and r.client_id else []


def _response_frame(x: ExchangeFields) -> list:
    return [x.ex.response.frame] if x.ex.response is not None else []


def _service_time(x: ExchangeFields) -> list:
    t = anomaly.service_time(x)
    return [t] if t is not None else []


# -- the registry (one line per field; docs/filters.md's table is generated from it) ----
field("api", "api", "API name or key: api == Produce, api == 3", lambda x: [x.ex.first.api_key])
field("version", "number", "API version", lambda x: [x.ex.first.api_version])
field("correlation_id", "number", "correlation id", lambda x: [x.ex.first.correlation_id])
field("client_id", "text", "client id of the request", _client_id)
field("latency", "duration", "response time: latency > 50ms (units us, ms, s)",
      lambda x: [x.ex.latency] if x.ex.latency is not None else [])
field("topic", "text", "any topic the exchange touches", lambda x: list(x.facts().topics))
field("partition", "number", "any partition the exchange touches", _partitions)
field("error", "error", "error codes in the response (0 when none): error != 0, "
      "error == UNKNOWN_TOPIC_OR_PARTITION", lambda x: x.facts().errors or [0])
field("records", "number", "records carried (Produce requests, Fetch responses)",
      lambda x: [x.facts().records])
field("status", "text", "ok, unanswered, orphan ..., truncated ...", lambda x: [x.ex.status])
field("stream", "number", "connection number", lambda x: [x.ex.stream])
field("client", "text", "client address, ip:port",
      lambda x: [f"{x.ex.client[0]}:{x.ex.client[1]}"])
field("broker", "text", "broker address, ip:port",
      lambda x: [f"{x.ex.broker[0]}:{x.ex.broker[1]}"])
field("bytes", "number", "request + response size in bytes",
      lambda x: [sum(m.size for m in x.ex.messages)])
field("problems", "number", "number of fields that did not decode cleanly",
      lambda x: [x.problems])
field("frame", "number", "capture frame of the request (or response)",
      lambda x: [x.ex.first.frame])
field("response_frame", "number", "capture frame of the response", _response_frame)
field("anomaly", "number", "anything wrong: an error code, a finding, no answer, a decoding "
      "problem, or slow beyond the wait the client asked for",
      lambda x: [True] if anomaly.reasons(x) else [])
field("finding", "finding", "finding codes: finding == trailing_bytes",
      lambda x: [f.code for f in x.ex.findings])
field("severity", "severity", "severities of the findings: severity >= warn",
      lambda x: [f.kind.rank for f in x.ex.findings])
field("service_time", "duration", "latency less the wait the client asked for "
      "(Fetch max_wait_ms when empty, JoinGroup/SyncGroup)", _service_time)
field("throttle", "number", "the response's throttle_time_ms", content.throttle)
field("record.key", "text", "record keys (decompressed batches too)", content.record_keys)
field("record.value", "text", "record values (decompressed batches too)",
      lambda x: [r.value for r in content.records(x) if r.value is not None])
field("record.header", "text", "record header names; record.header.NAME: its values",
      lambda x: [k for r in content.records(x) for k, _ in r.headers])
# kdissect log (docs/log.md): a batch's header fields, no value for exchanges
field("base_offset", "number", "kdissect log: a batch's first offset")
field("producer_id", "number", "kdissect log: a batch's producer id")
field("producer_epoch", "number", "kdissect log: a batch's producer epoch")
field("base_sequence", "number", "kdissect log: a batch's first sequence number")
field("partition_leader_epoch", "number", "kdissect log: a batch's leader epoch")
field("magic", "number", "kdissect log: the record format (0, 1, 2)")
field("offset", "number", "kdissect log: a batch's (or message's) first offset")

# fields whose values come from the messages' bytes (record contents), not from enrichment
READS_BYTES = frozenset({"record.key", "record.value", "record.header"})


def completions(kind: str) -> list[str] | None:
    """Values the TUI offers after ``field ==`` for fields of this kind (None: the values
    seen so far)."""
    if kind == "finding":
        return sorted(FINDINGS)
    if kind == "severity":
        return list(SEVERITIES)
    return None


def markdown_table() -> str:
    """docs/filters.md's table of fields."""
    rows = ["| field | type | values |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {f.kind} | {f.docs} |" for f in FIELDS.values()]
    return "\n".join(rows)


def help_list(first: str = "  fields: ", width: int = 88) -> str:
    """The names of the exchange fields, wrapped for ``--help`` after ``first``."""
    names = [n if n != "record.header" else "record.header[.NAME]"
             for n, f in FIELDS.items() if f.get is not None]
    lines, line = [], first
    for name in names:
        if len(line) + len(name) + 1 > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(first)
        line += name + " "
    return "\n".join([*lines, line.rstrip()])


def values(item: Any, name: str) -> list:
    """The values of ``name`` for ``item``: an ``ExchangeFields``, or an item that says
    its own (``values_of``)."""
    own = getattr(item, "values_of", None)
    if own is not None:
        return own(name)
    f = FIELDS.get(name)
    if f is not None:
        return f.get(item) if f.get is not None else []
    if name.startswith("record.header."):
        return content.header_values(item, name[len("record.header."):])
    return item.field(name)

