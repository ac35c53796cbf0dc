"""What every decoder of a message shares: the options (configuration, the same for a
whole run), one message's decoding context (``Decoding``: the options, the topic names
learned so far, the message's budget), and how a field fails (the ``Abort`` signal).
The field walker (decode.py) and the record decoder (records.py) both build on it, and
neither imports the other's internals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .budget import Budget
from .names import API_NAMES, error_note
from .node import NOTE_MAKERS, Node
from .reader import Reader
from .times import LAST_MS

if TYPE_CHECKING:  # values_schema is imported only when values are asked for
    from .values_schema import SchemaSource


@dataclass(frozen=True)
class Options:
    show_secrets: bool = False
    # the per-message budget; the defaults keep one message's tree and buffers well
    # under 256 MB (docs/internals/protocol.md, "Budget")
    max_decompressed: int = 64 * 1024 * 1024  # decompressed bytes, all payloads together
    max_nodes: int = 500_000  # fields in the tree (about 250 bytes each)
    max_nesting: int = 4  # compressed wrappers inside wrappers
    # True: decode record batches fully; "batches": only batch headers (counts, CRCs:
    # what a summary needs); False: leave the bytes raw
    records: bool | str = True
    embedded: bool = True  # decode structures inside bytes fields
    # record keys/values: a values_schema.SchemaSource (schemas by id, per-topic
    # overrides) or None to leave them as bytes (docs/guide/values.md)
    values: SchemaSource | None = field(default=None, compare=False)


class Decoding:
    """One message's decoding: the run's ``options``; the topic names learned so far
    (``topic_ids``: topic id -> name, from earlier messages: Metadata...), which name the
    topic of a Fetch v13+ so that internal topics' records are read by schema (the engine
    owns and fills them, decoders only read them); and the message's ``budget``. Made
    once per message by its decoder (``message._message``) and passed down."""

    __slots__ = ("options", "topic_ids", "budget")

    def __init__(self, options: Options, topic_ids: Mapping[str, str] | None = None):
        self.options, self.topic_ids = options, topic_ids
        self.budget = Budget(options.max_decompressed, options.max_nodes)


class Abort(Exception):
    """A field failed; its node already carries the problem and the remaining bytes."""


def charge_nodes(r: Reader, parent: Node, ctx: Decoding, n: int) -> None:
    """Spend ``n`` nodes of the message's budget; once it is spent, the rest of the region
    is kept raw under ``parent`` (finding node_budget) and decoding of the region stops."""
    budget = ctx.budget
    budget.nodes -= n
    if budget.nodes < 0:
        parent.add(
            Node(
                "_rest",
                "bytes",
                r.pos,
                r.end - r.pos,
                r.buf[r.pos : r.end],
                problem=f"node budget of {budget.max_nodes} fields spent; the "
                f"remaining {r.end - r.pos} bytes are kept raw (raise it "
                f"with --max-nodes)",
                code="node_budget",
            )
        )
        r.pos = r.end
        budget.nodes = 0
        raise Abort()


def time_note(ms: int) -> str | None:
    if ms < 0 or ms > LAST_MS:  # -1 means "none"; beyond year 9999
        return None
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Kafka's enums of resource types, by number: a config's resource (ConfigResource.Type)
# and an ACL's (ResourceType); an API's or a record's resource_type fields are one or the
# other (apis.py's ``resources``, layout.resource_hints)
RESOURCE_TYPES = {
    "config": {
        0: "UNKNOWN",
        2: "TOPIC",
        4: "BROKER",
        8: "BROKER_LOGGER",
        16: "CLIENT_METRICS",
        32: "GROUP",
    },
    "acl": {
        0: "UNKNOWN",
        1: "ANY",
        2: "TOPIC",
        3: "GROUP",
        4: "CLUSTER",
        5: "TRANSACTIONAL_ID",
        6: "DELEGATION_TOKEN",
        7: "USER",
    },
}
for _kind, _names in RESOURCE_TYPES.items():
    NOTE_MAKERS[f"{_kind}_resource"] = _names.get
NOTE_MAKERS["error"] = error_note
NOTE_MAKERS["time"] = time_note
NOTE_MAKERS["api"] = API_NAMES.get  # an API key's name (None: a key Kafka has not named)


def fail(r: Reader, node: Node, reason: str, code: str = "malformed_field") -> Abort:
    """Mark ``node`` as the failing field: it takes the rest of the region."""
    node.problem = reason
    node.code = code
    node.length = r.end - node.offset
    r.pos = r.end
    return Abort()
