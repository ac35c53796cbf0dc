"""Findings: what kdissect noticed about a message or an exchange, as registered codes.

The idea of Wireshark's expert infos, done for Kafka: every finding has a stable code
(what filters, statistics, Parquet columns and the TUI use), a severity, a group and a
one-line meaning. A ``Finding`` adds the specifics of one occurrence. The registry is
the single list of codes; docs/guide/findings.md is generated from it (``markdown_table``).
"""

from __future__ import annotations

from typing import Any

from .plain import Frozen

SEVERITIES = ("note", "warn", "error")  # in rising order
GROUPS = ("malformed", "protocol", "sequence", "storage", "security", "performance", "budget")


class FindingKind(Frozen):
    """A registered code: its severity, group and one-line meaning."""

    __slots__ = _fields = ("code", "severity", "group", "meaning")

    def __init__(self, code: str, severity: str, group: str, meaning: str):
        self.code, self.severity, self.group, self.meaning = code, severity, group, meaning

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)


REGISTRY: dict[str, FindingKind] = {}


class UnregisteredFinding(ValueError):
    """A finding whose code is not in the registry: a bug in kdissect, raised where the
    finding is made (never shown as another code)."""


def register(code: str, severity: str, group: str, meaning: str) -> FindingKind:
    """Add one code to the registry (one call per code, next to related codes below)."""
    if severity not in SEVERITIES or group not in GROUPS:
        raise ValueError(f"finding {code}: severity {severity!r} or group {group!r} unknown")
    kind = REGISTRY.setdefault(code, FindingKind(code, severity, group, meaning))
    if kind.meaning != meaning:
        raise ValueError(f"finding {code} registered twice")
    return kind


class Finding(Frozen):
    """One occurrence of a registered code."""

    __slots__ = _fields = ("code", "detail", "where")

    def __init__(
        self,
        code: str,
        detail: str = "",  # this occurrence: which field, how many bytes...
        where: str = "",
    ):  # "request" / "response" and a field path, or ""
        if code not in REGISTRY:
            raise UnregisteredFinding(
                f"finding code {code!r} is not registered (kdissect/protocol/findings.py)"
            )
        self.code, self.detail, self.where = code, detail, where

    @property
    def kind(self) -> FindingKind:
        return REGISTRY[self.code]

    @property
    def severity(self) -> str:
        return self.kind.severity

    def text(self) -> str:
        where = f"{self.where}: " if self.where else ""
        return f"{where}{self.detail or self.kind.meaning} [{self.code}]"

    def to_json(self) -> dict[Any, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "group": self.kind.group,
            "where": self.where,
            "detail": self.detail or self.kind.meaning,
        }


def severity_of(code: str | None) -> str:
    """The severity of a field's problem by its code (``Node.code``: None reads as
    malformed_field), what its mark in a tree follows."""
    return REGISTRY[code or "malformed_field"].severity


def markdown_table() -> str:
    rows = ["| code | severity | group | meaning |", "|---|---|---|---|"]
    for k in sorted(REGISTRY.values(), key=lambda k: (GROUPS.index(k.group), k.code)):
        rows.append(f"| `{k.code}` | {k.severity} | {k.group} | {k.meaning} |")
    return "\n".join(rows)


# -- the registry ----------------------------------------------------------------------
# malformed: the bytes do not follow the layout
register(
    "malformed_field",
    "error",
    "malformed",
    "a field cannot be read as its type says (the rest of the region is kept raw)",
)
register("truncated", "error", "malformed", "the message ends before a field does")
register(
    "unknown_attribute_bits",
    "note",
    "protocol",
    "a record batch's (or message's) attributes set bits no Kafka version defines; "
    "Kafka ignores them",
)
register("trailing_bytes", "warn", "malformed", "bytes left over after the end of a structure")
register(
    "array_past_end", "error", "malformed", "an array or record count needs more bytes than exist"
)
register(
    "bad_length", "error", "malformed", "a length or size field is negative or points past the end"
)
register("bad_utf8", "warn", "malformed", "a string is not valid UTF-8")
register(
    "missing_tag_trailer",
    "warn",
    "malformed",
    "a flexible version's tagged-field section is missing",
)
register(
    "tagged_field_leftover",
    "warn",
    "malformed",
    "a known tagged field has bytes its layout does not explain",
)
register(
    "crc_mismatch",
    "error",
    "malformed",
    "a record batch's or message's CRC does not match its bytes",
)
register(
    "unknown_magic", "error", "malformed", "a record format (magic byte) kdissect does not know"
)
# record values (kdissect/protocol/values_schema): what a consumer's deserializer would say
register(
    "value_unknown_magic",
    "error",
    "malformed",
    "a schema-framed record key/value does not start with the magic byte 0",
)
register(
    "value_schema_unknown",
    "warn",
    "protocol",
    "a record key/value names a schema id no schema source knows",
)
register(
    "value_schema_mismatch",
    "error",
    "malformed",
    "a record key/value does not match its schema (the node says where it stopped)",
)
register(
    "value_trailing_bytes",
    "warn",
    "malformed",
    "bytes left over in a record key/value after its schema's value ends",
)
register(
    "decompression_failed", "error", "malformed", "a compressed payload cannot be decompressed"
)
register(
    "record_count_mismatch",
    "warn",
    "malformed",
    "a record batch's count differs from the records found",
)
register("malformed_header", "error", "malformed", "a request header cannot be read")
register(
    "size_mismatch",
    "warn",
    "malformed",
    "a pasted message's size prefix does not match the bytes pasted after it",
)
# protocol: valid bytes, odd meaning
register("unknown_api", "warn", "protocol", "an API key kdissect's schemas do not know")
register(
    "assumed_version",
    "note",
    "protocol",
    "a version newer than kdissect's schemas, decoded with the newest known layout",
)
register(
    "answered_in_v0",
    "note",
    "protocol",
    "an ApiVersions version the broker does not support, answered in v0 (read so)",
)
register(
    "unknown_version",
    "warn",
    "protocol",
    "an API version kdissect's schemas do not know (header only)",
)
register(
    "hint_disagrees",
    "warn",
    "protocol",
    "the API/version given as hints differ from what the request header says",
)
register(
    "version_not_advertised",
    "warn",
    "protocol",
    "a request version outside what ApiVersions advertised on this connection",
)
register(
    "removed_version",
    "warn",
    "protocol",
    "a request version a Kafka release removed (4.0: KIP-896's old versions; 4.1: "
    "Share* v0), as Kafka's own jars say: brokers from that release refuse it",
)
register(
    "no_api_versions",
    "note",
    "protocol",
    "a connection seen from its start whose first request is not ApiVersions: the "
    "client chose versions without asking the broker",
)
register(
    "clock_skew",
    "warn",
    "protocol",
    "record timestamps more than 5 minutes from the capture's clock (the producer's or "
    "the broker's clock is off, or the application sets timestamps)",
)
register("error_code", "warn", "protocol", "the response carries a non-zero error code")
register(
    "expected_error",
    "note",
    "protocol",
    "an error code that is a normal step of the API (MEMBER_ID_REQUIRED on a first "
    "JoinGroup, REBALANCE_IN_PROGRESS on a Heartbeat)",
)
register("unknown_error_code", "note", "protocol", "an error code not in kdissect's table")
register(
    "guessed_api",
    "note",
    "protocol",
    "the request was not seen: the response's API was guessed from its bytes",
)
register(
    "client_side_guessed",
    "note",
    "protocol",
    "a connection seen without its SYN or TLS ClientHello, on no Kafka or listener "
    "port: which side is the client was judged from how its bytes start (--stats says "
    "how sure); give -p PORT if it reads backwards",
)
register("sasl_token", "note", "protocol", "a raw SASL token (after SaslHandshake v0)")
# sequence: pairing on the connection
register(
    "acks0_answered",
    "warn",
    "sequence",
    "a Produce with acks=0 was answered (brokers normally send nothing)",
)
register("unanswered", "warn", "sequence", "the request got no response in the capture")
register(
    "response_lost",
    "note",
    "sequence",
    "no response in the capture, and the response stream has a hole after the request: "
    "its answer was most likely lost there",
)
register(
    "impossible_latency",
    "warn",
    "sequence",
    "the response was complete before its request in the capture (packets captured out "
    "of order or clocks stepped): no latency is computed",
)
register("orphan_response", "warn", "sequence", "a response whose request was not captured")
register(
    "out_of_order",
    "warn",
    "sequence",
    "a response came before the answer to an earlier request (Kafka answers in order)",
)
register(
    "correlation_reused",
    "warn",
    "sequence",
    "a correlation id reused while an earlier request with it was still pending",
)
register(
    "producer_sequence_gap",
    "warn",
    "sequence",
    "the broker refused an idempotent producer's batch as OUT_OF_ORDER_SEQUENCE_NUMBER: "
    "the text says which sequence it expected, when the capture shows it",
)
register(
    "producer_retry",
    "note",
    "sequence",
    "an idempotent producer sent a batch again, on the same or a new connection (same "
    "producer id, epoch, partition, sequences): a retry; the text says how the broker "
    "answered each send",
)
register(
    "producer_epoch_bump",
    "note",
    "sequence",
    "an idempotent producer's epoch went up (a transaction ended under transaction "
    "version 2, or the producer recovered): sequences start again",
)
register(
    "leadership_storm",
    "warn",
    "sequence",
    "10 or more NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / NOT_COORDINATOR answers "
    "on one connection within 5 s: the client's metadata is stale (not the KRaft "
    "quorum's own requests, whose such answers are an election's steps)",
)
register(
    "controlled_shutdown",
    "note",
    "sequence",
    "a broker asked the KRaft controller to shut down (BrokerHeartbeat want_shut_down): "
    "a controlled shutdown or restart, its partitions' leadership moving away; said "
    "when it first asks and when the controller lets it go",
)
register(
    "message_truncated",
    "error",
    "sequence",
    "part of the message was not captured (a gap in the TCP stream)",
)
register(
    "pending_limit",
    "warn",
    "sequence",
    "too many requests pending on one connection: the oldest was given up",
)
# storage: Kafka's files on disk (kdissect log; docs/guide/log.md)
register(
    "log_size_past_end",
    "error",
    "storage",
    "a batch's size runs past the end of the segment file (a torn write)",
)
register(
    "log_nonsense_tail",
    "error",
    "storage",
    "bytes at the end of a segment that are no batch: recovery truncates them",
)
register(
    "log_zero_tail",
    "note",
    "storage",
    "a zero-filled tail after the last batch (a preallocated or torn segment)",
)
register(
    "log_bad_batch",
    "error",
    "storage",
    "bytes where a batch should start that are no batch (a length past the end or "
    "too short, a magic byte no Kafka writes with a failing CRC), with intact batches "
    "after them: damage, not a torn write; recovery truncates there (the text says "
    "whether it runs); the batches after it are read",
)
register(
    "log_bad_magic",
    "error",
    "storage",
    "a batch whose magic byte no Kafka writes, though its length and CRC hold (the "
    "CRC does not cover the magic byte): Kafka's recovery keeps it; kept as bytes, "
    "the batches after it are read",
)
register(
    "unclean_shutdown",
    "note",
    "storage",
    "a broker's log dir without .kafka_cleanshutdown: the broker is running or did not "
    "stop cleanly; it recovers the segments past each recovery point at its next start",
)
register(
    "offset_not_monotonic",
    "error",
    "storage",
    "a batch's offsets do not grow past the previous batch's",
)
register(
    "offset_gap",
    "note",
    "storage",
    "offsets skip between batches (normal after compaction or transactions' markers)",
)
register(
    "timestamp_not_monotonic",
    "note",
    "storage",
    "a batch's max timestamp is lower than an earlier batch's",
)
register(
    "index_bad_entry",
    "error",
    "storage",
    "an .index entry does not point at the start of the batch holding its offset",
)
register("index_past_end", "error", "storage", "an index entry points past the end of the segment")
register(
    "index_not_monotonic", "error", "storage", "index entries' offsets or timestamps go backwards"
)
register(
    "time_index_mismatch",
    "warn",
    "storage",
    "a .timeindex entry disagrees with the batch it names (offset or max timestamp)",
)
register(
    "leader_epoch_mismatch",
    "warn",
    "storage",
    "a batch's partition leader epoch disagrees with leader-epoch-checkpoint",
)
register(
    "sequence_gap",
    "warn",
    "storage",
    "a producer's sequence numbers skip or repeat between its batches",
)
register(
    "producer_state_mismatch",
    "warn",
    "storage",
    "the producer .snapshot disagrees with the producer's last batch in the log",
)
register(
    "txnindex_mismatch",
    "warn",
    "storage",
    "aborted transactions in the log and in the .txnindex differ",
)
register(
    "past_high_watermark",
    "note",
    "storage",
    "batches beyond the high watermark in replication-offset-checkpoint",
)
register(
    "unknown_record_type",
    "warn",
    "protocol",
    "an internal-topic record type kdissect's schemas do not know",
)
# security
register(
    "plaintext_credentials",
    "warn",
    "security",
    "a SASL/PLAIN password sent without TLS (readable by anyone on the path)",
)
register(
    "authentication_failed",
    "warn",
    "security",
    "the broker refused a SASL login (a SCRAM server-final carrying e=...)",
)
register(
    "tls_undecryptable",
    "warn",
    "security",
    "a TLS connection kdissect has no keys for (give --keylog; see docs/guide/tls.md)",
)
register(
    "tls_decrypt_failed",
    "error",
    "security",
    "TLS records that do not decrypt or do not read as records (wrong key, damage)",
)
register(
    "tls_alert",
    "warn",
    "security",
    "a TLS alert other than close_notify (its description says which)",
)
register(
    "renegotiation",
    "warn",
    "security",
    "a TLS 1.2 connection started a new handshake after the first one",
)
# performance
register(
    "throttled", "warn", "performance", "the broker throttled the client (throttle_time_ms > 0)"
)
register(
    "slow_response",
    "warn",
    "performance",
    "the broker took more than 0.5 s beyond every wait the request asked for "
    "(Fetch and ShareFetch max_wait_ms, even when records came back; a JoinGroup's "
    "rebalance), the text says which wait was subtracted",
)
register(
    "consumer_lag",
    "note",
    "performance",
    "a consumer's Fetch left it behind the high watermark (the last stable offset for a "
    "read_committed one; lag per partition, after the records this fetch returned)",
)
register(
    "empty_fetches",
    "note",
    "performance",
    "a consumer's fetches on a connection returned no records for 10 s or more (the "
    "text says why: nothing new, or an open transaction holding read_committed)",
)
register(
    "commit_behind_fetch",
    "note",
    "performance",
    "a group committed an offset below what the same client had been given by its "
    "fetches: those records would be delivered again after a restart or rebalance",
)
register(
    "consumer_rebalance",
    "note",
    "performance",
    "a consumer group rebalanced (a new generation, or a KIP-848 group epoch); the text "
    "gives the causes the capture shows (new member, member left, session expired)",
)
# budget: limits that keep hostile input cheap
register(
    "decompressed_budget",
    "warn",
    "budget",
    "the message's decompressed-bytes budget is spent: the rest is kept compressed",
)
register(
    "memory_budget",
    "warn",
    "budget",
    "the process's memory budget (--max-memory) was spent: the oldest partial message "
    "was given up (its first bytes kept, the rest dropped)",
)
register(
    "node_budget", "warn", "budget", "the message's field budget is spent: the rest is kept raw"
)
register(
    "nesting_budget",
    "warn",
    "budget",
    "compressed wrappers nested deeper than the budget: the inner ones are kept raw",
)
# reading the input itself (kdissect log: one file of a log dir; the others are still read)
register(
    "unreadable_file",
    "error",
    "storage",
    "a file or directory cannot be read (permissions, not a regular file, too big "
    "to take whole, deleted by a running broker after it was listed): it is skipped, "
    "the rest is read",
)
register(
    "index_without_segment",
    "warn",
    "storage",
    "an index whose segment is not in the partition directory: a running broker was "
    "deleting or swapping that segment in (retention, the log cleaner) when it was "
    "listed, or the segment is lost (Kafka deletes such an index when it starts); the "
    "checks across batches start again after it",
)
register(
    "log_shrank_while_read",
    "warn",
    "storage",
    "a segment shrank while it was read (a running broker truncated it, as a follower "
    "does to match its leader): its batches up to there are shown, the rest is not",
)
