"""What the stream layer hands to views: Kafka messages and the exchanges they form.

The framing and correlation cores build these; the enrichment stage fills in what is
learned from decoding (an orphan's guessed API, facts, findings, status) once, in
order. Views only read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING

from ..protocol import Message, Options, decode_request, decode_response
from ..protocol.apis import CARRY_RECORDS
from ..protocol.context import Decoding
from ..protocol.findings import Finding
from ..protocol.node import Node
from ..protocol.records import locate_batches
from ..protocol.names import api_name

if TYPE_CHECKING:
    from .facts import Facts


# finding code -> the exchange's status, most telling first
STATUS_OF_FINDING = (
    ("message_truncated", None),
    ("malformed_header", "malformed header"),
    ("orphan_response", "orphan (request not captured)"),
    ("unanswered", "unanswered"),
    ("pending_limit", "given up (too many pending)"),
    ("acks0_answered", "answer to acks=0 (brokers normally send none)"),
    ("unknown_api", "unknown API"),
    ("unknown_version", "unknown API version"),
)
ACKS0 = "no response expected (acks=0)"
# every status an exchange can have ("truncated: " goes on with what was lost)
STATUSES = ("ok", ACKS0, "truncated", "truncated: ", *(t for _, t in STATUS_OF_FINDING if t))


@dataclass(slots=True, init=False)  # (__init__ by hand: below)
class KafkaMessage:
    index: int  # message number in the capture (0-based)
    stream: int  # connection index (1-based, as TCP connections appear)
    direction: str  # "request" | "response" | "sasl"
    ts: float  # time of the packet that completed the message
    frame: int  # capture frame (packet) number that completed it
    offset: int  # stream offset of the message (after its size)
    data: bytes
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    client_id: str | None = None
    pair: int | None = None  # index of the paired message
    status: str = "ok"  # "ok", or what is wrong with the message's bytes
    how: str | None = None  # for a response: how its API was determined
    size: int = -1  # bytes of the message (stays when ``data`` is kept elsewhere)
    # a message cut by holes: ``data`` ends at the first; the bytes captured after it as
    # (offset in the message, bytes), and the holes as (offset, length)
    pieces: list[tuple[int, bytes]] | None = None
    holes: list[tuple[int, int]] | None = None
    # its body as the values decoder read it for enrichment, kept only for a sink that
    # prints bodies (JSON lines: one decode per message), bytes as that sink shows them
    values: dict[Any, Any] | None = None
    # an Envelope response: the (api key, version) of the request its Envelope request
    # forwarded (its response_data is that request's response, read so)
    forwarded: tuple[int, int] | None = None

    def __init__(
        self,
        index: int,
        stream: int,
        direction: str,
        ts: float,
        frame: int,
        offset: int,
        data: bytes,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
        client_id: str | None = None,
        pair: int | None = None,
        status: str = "ok",
        how: str | None = None,
        size: int = -1,
        pieces: list[tuple[int, bytes]] | None = None,
        holes: list[tuple[int, int]] | None = None,
        values: dict[Any, Any] | None = None,
        forwarded: tuple[int, int] | None = None,
    ) -> None:
        """The dataclass's ``__init__`` (the fields in order, their defaults), with
        ``size`` (-1: ``len(data)``) set without a ``__post_init__`` call: two messages
        are made per exchange (tests/test_model.py holds it to the fields)."""
        self.index = index
        self.stream = stream
        self.direction = direction
        self.ts = ts
        self.frame = frame
        self.offset = offset
        self.data = data
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.pair = pair
        self.status = status
        self.how = how
        self.size = size if size >= 0 else len(data)
        self.pieces = pieces
        self.holes = holes
        self.values = values
        self.forwarded = forwarded

    @property
    def api_name(self) -> str:
        return api_name(self.api_key) if self.direction != "sasl" else "SASL token"

    def decoded(
        self, options: Options | None = None, topic_ids: Mapping[str, str] | None = None
    ) -> Message:
        """The full field tree, decoded anew on each call (callers that show it keep
        it as long as they need it). A response of unknown API decodes as raw bytes:
        enrichment guesses orphans' APIs before views see them. ``topic_ids``: the topic
        names learned so far (``protocol.context.Decoding``)."""
        if self.direction == "request":
            m = decode_request(self.data, options, topic_ids)
        elif self.direction == "sasl":
            from ..protocol.message import sasl_token_message

            m = sasl_token_message(self.data, options)
        elif self.api_key is None or self.api_version is None:
            m = decode_response(self.data, -1, -1, options)
        else:
            m = decode_response(
                self.data, self.api_key, self.api_version, options, self.forwarded, topic_ids
            )
        if self.holes:
            _show_cut(
                m.tree,
                self.holes,
                self.pieces or [],
                options or Options(),
                self.api_key in CARRY_RECORDS,
            )
        return m


def _show_cut(
    tree: Node,
    holes: list[tuple[int, int]],
    pieces: list[tuple[int, bytes]],
    options: Options,
    records: bool,
) -> None:
    """Mark a cut message's holes and keep every byte captured after the first one, in
    the message's order (each piece's bytes are its own buffer). In a message of record
    batches, the batches found whole in a piece (CRC-checked) are decoded; the rest of
    the piece stays raw, marked."""
    spans = [(rel, n, None) for rel, n in holes] + [(rel, len(b), b) for rel, b in pieces]
    for rel, n, data in sorted(spans, key=lambda s: s[0]):
        if data is None:
            tree.add(Node("_hole", "hole", rel, n, None, note=f"{n} bytes not captured"))
        else:
            node = tree.add(
                Node(
                    "_captured_after_hole",
                    "bytes",
                    rel,
                    n,
                    data,
                    note=f"{n} bytes captured after a hole",
                )
            )
            node.buffer = data
            if records and options.records:
                found = locate_batches(data, Decoding(options))
                if any(c.ktype == "record_batch" for c in found):
                    node.children = found
                    whole = sum(c.length for c in found if c.ktype == "record_batch")
                    node.note = (
                        f"{n} bytes captured after a hole: {whole} in record "
                        f"batches found whole, {n - whole} raw"
                    )


@dataclass(slots=True)
class Exchange:
    request: KafkaMessage | None
    response: KafkaMessage | None
    client: tuple[str, int]
    broker: tuple[str, int]
    stream: int  # connection index (1-based)
    seq: int = 0  # order on its connection (requests as they were sent)
    expected: bool = True  # False: the request asked for no answer (acks=0)
    findings: list[Finding] = field(default_factory=list)
    facts: Facts | None = None  # set by enrichment
    status: str = "ok"  # set by enrichment: "ok" or the main finding, short
    # the full trees (request, response), only when a printing sink asked for them
    decoded: tuple[Any, ...] | None = None
    # the connection's TLS facts (capture.tls.TlsFacts) when its bytes were decrypted
    tls: object | None = None
    # whether the connection's opening (its SYN) was captured; None: not known
    opened: bool | None = None
    # what decided which side is the client, and how sure (stream/direction.py); None
    # where it was never in doubt (the proxy, pasted bytes)
    side_by: str | None = None

    @property
    def latency(self) -> float | None:
        """Seconds from the request complete to the response complete (in TCP order);
        None when either is missing or the capture's times make it negative (that is a
        finding, ``impossible_latency``, never a figure)."""
        if self.request is None or self.response is None:
            return None
        value = self.response.ts - self.request.ts
        return value if value >= 0 else None

    @property
    def first(self) -> KafkaMessage:
        return self.request or self.response  # type: ignore[return-value]

    @property
    def messages(self) -> list[KafkaMessage]:
        return [m for m in (self.request, self.response) if m is not None]

    def has(self, code: str) -> bool:
        return any(f.code == code for f in self.findings)


@dataclass(slots=True)
class Gap:
    stream: int
    direction: str  # "request" (client -> broker) | "response"
    offset: int
    length: int
    frame: int  # capture frame where the data resumes (0: nowhere)
    ts: float
    # captured but not read: no message boundary found in these bytes (the capture began
    # inside a message bigger than a broker takes, bytes after a hole, or not Kafka)
    unread: bool = False

    def describe(self, where: str | None = None) -> str:
        """``where`` names the connection (default: its stream number)."""
        name = where or f"stream {self.stream}"
        if self.unread:
            return (
                f"unread: {name} {self.direction}s: {self.length} bytes at stream offset "
                f"{self.offset} not read as Kafka messages (no message boundary in them: the "
                f"rest of a message cut by a hole or begun before the capture, or not "
                f"Kafka)"
            )
        resume = (
            f"data resumes in frame {self.frame}; decoding resumes at the next message boundary"
            if self.frame
            else "the capture ends there"
        )
        return (
            f"gap: {name} {self.direction}s lost "
            f"{self.length} bytes at stream offset {self.offset} ({resume})"
        )


class CaptureStart:
    """A source reading several capture files tells its sinks (``item``) where each
    begins: the exchanges and TLS connections after it are that file's (its frame numbers
    start again at 1). ``path`` as the user gave it. (A plain class: a dataclass costs
    every run's start-up its compiled methods.)"""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path


# what running out of bytes looks like to the decoder: on a message the capture cut, the
# cut explains it (message_truncated), so the layout cannot be blamed (evidence incomplete)
_CUT_CODES = frozenset(
    {
        "truncated",
        "missing_tag_trailer",
        "array_past_end",
        "bad_length",
        "record_count_mismatch",
        "malformed_field",
    }
)


def tree_findings(m: KafkaMessage, tree: Node) -> list[tuple[str, str, str]]:
    """(path, code, reason) of a message's tree as its exchange's findings keep them: a
    message the capture cut keeps no code that would blame its layout (``_CUT_CODES``)."""
    return kept_findings(m, tree.findings())


def kept_findings(m: KafkaMessage, found: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """``tree_findings`` of the findings ``found`` in ``m``'s tree."""
    if not m.status.startswith("truncated"):
        return found
    return [f for f in found if f[1] not in _CUT_CODES]
