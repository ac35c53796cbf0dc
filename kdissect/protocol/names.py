"""API names and error codes."""

from __future__ import annotations

from functools import lru_cache

from .apis import NAMES
from .plain import Frozen

API_NAMES: dict[int, str] = NAMES      # from the API table (apis.py)
_KEYS_BY_NAME = {name.lower(): key for key, name in API_NAMES.items()}


def api_name(api_key: int | None) -> str:
    # (a default argument to get() would be formatted on every call)
    name = API_NAMES.get(api_key)     # type: ignore[arg-type]
    if name is not None:
        return name
    return "Unknown" if api_key is None else f"ApiKey{api_key}"


def api_key_of(text: str) -> int | None:
    """``Metadata``, ``metadata``, ``3`` -> 3; None when unknown."""
    text = text.strip()
    if text.isascii() and text.lstrip("-").isdigit():
        key = int(text)
        return key if 0 <= key <= 32767 else None     # an int16 key, never negative
    return _KEYS_BY_NAME.get(text.replace("_", "").replace("-", "").lower())


# Short explanations, in our words, of the codes people meet most while debugging.
# Every other code still gets its name and retriable flag from kio's table.
_MEANINGS = {
    -1: "the broker hit an unexpected error; its log has the cause",
    0: "no error",
    1: "the requested offset is outside the partition's log",
    2: "a message failed its CRC check or is otherwise corrupt",
    3: "this broker does not host the topic or partition",
    5: "the partition is between leaders (election in progress)",
    6: "this broker is not the leader (or follower) for the partition; refresh metadata",
    7: "the broker did not finish in time (e.g. acks=all waiting for replicas)",
    10: "a message is larger than the broker accepts",
    14: "the coordinator is still loading its state",
    15: "the group/transaction coordinator is not available",
    16: "this broker is not the coordinator for the group/transaction",
    17: "the topic name is invalid",
    18: "the batch is larger than the segment size allows",
    19: "fewer in-sync replicas than min.insync.replicas",
    20: "written, but fewer in-sync replicas than required",
    22: "the member's generation is stale",
    25: "the group coordinator does not know this member id",
    26: "the session timeout is outside the broker's allowed range",
    27: "the group is rebalancing; rejoin",
    29: "not authorized for the topic",
    30: "not authorized for the group",
    31: "not authorized for the cluster",
    33: "the SASL mechanism is not enabled on the broker",
    34: "this request is not allowed in the connection's SASL state",
    35: "the broker does not support this API version",
    36: "the topic already exists",
    37: "invalid number of partitions",
    38: "invalid replication factor",
    41: "this broker is not the controller",
    42: "the request is malformed or not valid in this context",
    44: "this broker's quota/policy rejected the request",
    45: "the sequence number is out of order for this producer",
    46: "duplicate sequence number (already written)",
    47: "the producer epoch is stale (another instance fenced this one)",
    48: "invalid transaction state transition",
    53: "not authorized for the transactional id",
    58: "SASL authentication failed (wrong credentials or mechanism)",
    59: "the producer id is unknown to the broker",
    72: "no listener on the broker matches the one requested",
    74: "the leader epoch is stale (client metadata is behind)",
    75: "the leader epoch is newer than the broker knows",
    76: "unknown compression codec",
    79: "the member must rejoin with the member id given",
    82: "the group member was fenced by a newer instance with the same group.instance.id",
    87: "the record failed broker-side validation",
    89: "throttled: the client should wait before retrying",
    100: "the topic id is unknown",
}


class ErrorInfo(Frozen):
    """A Kafka error code: its name, whether a client retries it, what it means."""

    __slots__ = _fields = ("code", "name", "retriable", "meaning")

    def __init__(self, code: int, name: str, retriable: bool | None, meaning: str):
        self.code, self.name, self.retriable, self.meaning = code, name, retriable, meaning


@lru_cache(maxsize=None)
def _kio_errors() -> dict[int, tuple[str, bool]]:
    from . import snapshot
    if snapshot.available():
        return snapshot.errors()
    from kio.schema.errors import ErrorCode
    return {int(e.value): (e.name.upper(), bool(e.retriable)) for e in ErrorCode}


def error_info(code: int) -> ErrorInfo:
    known = _kio_errors().get(code)
    if known is None:
        meaning = ("not a Kafka error code (they start at -1): the bytes are probably "
                   "damaged or decoded with the wrong layout" if code < -1 else
                   "a code newer than kdissect's table")
        return ErrorInfo(code, f"UNKNOWN_ERROR_CODE_{code}", None, meaning)
    name, retriable = known
    meaning = _MEANINGS.get(code) or name.replace("_", " ").lower()
    return ErrorInfo(code, name, retriable, meaning)


def error_note(code: int) -> str:
    if code == 0:
        return "NONE"
    info = error_info(code)
    tail = ", retriable" if info.retriable else ""
    return f"{info.name}{tail}: {info.meaning}"


def error_name(code: int) -> str:
    return "NONE" if code == 0 else error_info(code).name


@lru_cache(maxsize=None)
def error_code(name: str) -> int:
    """The code of an error named as Kafka names it (``"NOT_LEADER_OR_FOLLOWER"``)."""
    return next(code for code, (known, _) in _kio_errors().items() if known == name)
