"""What the stream layer hands to views: Kafka messages and the exchanges they form."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import Message, Options, decode_request, decode_response
from ..protocol.guess import guess
from ..protocol.names import api_name


@dataclass(slots=True)
class KafkaMessage:
    index: int                     # message number in the capture (0-based)
    stream: int                    # connection index (1-based, as TCP connections appear)
    direction: str                 # "request" | "response" | "sasl"
    ts: float                      # time of the packet that completed the message
    frame: int                     # capture frame (packet) number that completed it
    offset: int                    # stream offset of the message (after its size)
    data: bytes
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    client_id: str | None = None
    pair: int | None = None        # index of the paired message
    status: str = "ok"
    how: str | None = None         # for a response: how its API was determined
    _decoded: Message | None = field(default=None, repr=False)

    @property
    def api_name(self) -> str:
        return api_name(self.api_key) if self.direction != "sasl" else "SASL token"

    def summary_tree(self, options: Options):
        """A tree decoded with ``options`` (e.g. a summary), not kept: the full tree
        from ``decoded`` stays the one that is remembered."""
        if self._decoded is not None:
            return self._decoded.tree
        if self.direction == "request":
            return decode_request(self.data, options).tree
        if self.api_key is None:
            return self.decoded().tree          # an orphan: the guess needs a full decode
        return decode_response(self.data, self.api_key, self.api_version, options).tree

    def decoded(self, options: Options | None = None) -> Message:
        """The full field tree, built on first use and kept."""
        if self._decoded is None:
            if self.direction == "request":
                self._decoded = decode_request(self.data, options)
            elif self.direction == "sasl":
                from ..protocol.message import sasl_token_message
                self._decoded = sasl_token_message(self.data, options)
            elif self.api_key is not None:
                self._decoded = decode_response(self.data, self.api_key, self.api_version,
                                                options)
            else:
                cands = guess(self.data, "response")
                top = cands[0] if cands else None
                if top is not None and top.clean:
                    self.api_key, self.api_version = top.api_key, top.api_version
                    self.how = f"guessed {top.label}"
                    self._decoded = decode_response(self.data, top.api_key, top.api_version,
                                                    options)
                else:
                    self.how = "no API decodes it cleanly"
                    self._decoded = decode_response(self.data, -1, -1, options)
        return self._decoded


@dataclass(slots=True)
class Exchange:
    request: KafkaMessage | None
    response: KafkaMessage | None
    client: tuple[str, int]
    broker: tuple[str, int]
    stream: int
    repeat: bool = False           # the request was already reported (acks=0, answered late)

    @property
    def latency(self) -> float | None:
        if self.request is None or self.response is None:
            return None
        return self.response.ts - self.request.ts

    @property
    def first(self) -> KafkaMessage:
        return self.request or self.response    # type: ignore[return-value]


@dataclass(slots=True)
class Gap:
    stream: int
    direction: str                 # "request" (client -> broker) | "response"
    offset: int
    length: int
    frame: int
    ts: float

    def describe(self, where: str | None = None) -> str:
        """``where`` names the connection (default: its stream number)."""
        return (f"gap: {where or f'stream {self.stream}'} {self.direction}s lost "
                f"{self.length} bytes at "
                f"stream offset {self.offset} (frame {self.frame}); resuming at the next "
                f"message boundary")
