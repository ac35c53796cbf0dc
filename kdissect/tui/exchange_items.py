"""Exchanges (pcap, live, proxy) as the browser lists them: the cells of an exchange's
row and why it is an anomaly (``_row``, computed by the loader), its sort keys, a
decrypted connection's TLS facts as a tree, and the browser's adapter
(``ExchangeAdapter``)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ..filters import Filter
from ..protocol.apis import CARRY_RECORDS
from ..protocol.names import error_name
from ..protocol.node import Node
from ..render.lines import endpoint, iso
from ..stream import anomaly
from ..stream.content import buffer_nodes, find_bytes, holds_bytes
from ..stream.facts import Facts
from .detail import FACT, Item
from .exchange_list import COLUMNS, ExchangeList
from .loader import ListedView

BROKER_TIME = "broker time"  # latency beyond the wait the client asked for


EXPECTED = "italic"  # an expected step (MEMBER_ID_REQUIRED): the text's own colour
EXPECTED_MARK = "↻ "  # before an expected error's name: a step that is retried


def _row(view: ListedView) -> tuple:
    """(cells of an exchange's row, why it is an anomaly), computed off the UI thread.
    The status names the anomalies (red: an error, yellow: a warning), then the errors
    that are a normal step of the protocol (a first JoinGroup's MEMBER_ID_REQUIRED), set
    apart as expected: visible, not a problem."""
    ex, first = view.ex, view.ex.first
    facts = view.facts()
    reasons = anomaly.reasons(view)
    normal = anomaly.EXPECTED_ERRORS.get(first.api_key, frozenset())
    expected = (
        sorted({error_name(c) for c in facts.errors if c in normal})
        if first.direction != "sasl"
        else []
    )
    severe = bool(
        view.problems
        or any(c not in normal for c in facts.errors)
        or any(f.severity == "error" for f in ex.findings)
    )
    style = "red" if severe else "yellow" if reasons else ""
    summary = Facts(topics=facts.topics, records=facts.records).text()
    latency = Text()
    if ex.latency is not None:  # dim: mostly a wait the client asked for
        waited = anomaly.client_wait(view) > ex.latency / 2
        latency = _ms(ex.latency, "dim" if waited else "")
    status = Text()
    status.append(", ".join(reasons), style=style)
    for name in expected:
        status.append(", " if status else "")
        status.append(EXPECTED_MARK + name, style=EXPECTED)
    cells = (
        str(first.frame),
        iso(first.ts)[11:23],
        f"{endpoint(ex.client)} → {endpoint(ex.broker)}",
        Text(first.api_name, style="bold red" if severe else "bold"),
        str(first.api_version),
        str(first.correlation_id),
        ex.request.client_id or "" if ex.request else "",
        latency,
        Text(summary),
        status,
    )
    return cells, reasons


def _ms(seconds: float, style: str = "") -> Text:
    return Text(f"{seconds * 1000:.1f}ms", style=style)


_LATENCY = [c.name for c in COLUMNS].index("latency")


class ExchangeRows(ExchangeList):
    """The exchanges' list: sorted by broker time, its latency column (headed
    ``broker``) shows the broker time it is sorted by, not the raw latency."""

    def cells(self, view) -> list:
        cells = super().cells(view)
        if self.order_name == BROKER_TIME:
            took = anomaly.service_time(view)
            cells[_LATENCY] = _ms(took) if took is not None else Text()
        return cells


def _sort_value(view: ListedView, column: str) -> tuple:
    """(0, value) to sort by; (1, ...) for an empty cell, which stays last."""
    ex, first = view.ex, view.ex.first
    if column == "time":
        return (0, first.ts)
    if column == "#":
        return (0, first.frame)
    if column == "latency":
        return (0, ex.latency) if ex.latency is not None else (1, 0.0)
    if column == BROKER_TIME:  # beyond what was asked: long polls wait less
        took = anomaly.service_time(view)
        return (0, (took, ex.latency)) if took is not None else (1, (0.0, 0.0))
    if column == "v":
        return (0, first.api_version or 0)
    if column == "corr":
        return (0, first.correlation_id or 0)
    text = str(view.row[[c.name for c in COLUMNS].index(column)])
    return (0, text) if text else (1, "")


def tls_item(facts) -> Item:
    """A decrypted connection's TLS facts (capture.tls.TlsFacts) as a tree in the detail,
    beside the request and response: each fact a field, read in full on the field line.
    They have no bytes in the messages (the handshake is not Kafka's). A connection still
    being read says "decrypted" once a record is, as its end will: the detail of an
    exchange shown while the capture loads is not rebuilt when the connection ends."""
    state = "decrypted" if facts.is_decrypted else facts.state
    root = Node("tls_connection", FACT, 0, 0, state)
    facts_json = facts.to_json() | {"state": state}
    for name in (
        "server_name",
        "version",
        "cipher",
        "alpn",
        "resumed",
        "state",
        "records",
        "records_decrypted",
        "records_failed",
        "plaintext_bytes",
        "frame",
        "client",
        "server",
    ):
        value = facts_json.get(name)
        note = (
            facts.STATES.get(value)
            if name == "state"
            else "no SNI in the ClientHello"
            if name == "server_name" and value is None
            else None
        )
        root.add(
            Node(
                name, FACT, 0, 0, ", ".join(value) if isinstance(value, list) else value, note=note
            )
        )
    for f in facts.findings:
        root.add(Node("finding", FACT, 0, 0, f.code, problem=f.text(), code=f.code))
    label = Text(f"TLS connection: {state}  ({facts.describe()})", "bold green")
    return Item(label, b"", root)


class ExchangeAdapter:
    """The browser's questions about exchanges (browser.Adapter); ``app`` holds the
    options (`d` may change them) and the spill file of the messages' bytes."""

    noun = "exchange"
    fields: list[str] | None = None
    no_problem = (
        "no anomaly among the exchanges shown: no error code, finding, "
        "missing answer or unexplained slowness"
    )

    def __init__(self, app: Any) -> None:
        self.app = app

    def sort_key(self, view: ListedView, column: str) -> tuple:
        return _sort_value(view, column)

    def matches(self, flt: Filter, view: ListedView) -> bool:
        if flt.needs_decoding and view.ex.first.api_key in CARRY_RECORDS:
            self.app.load_bytes(view)  # (the fields reading bytes read records only)
        return flt(view)

    def slow(self, flt: Filter) -> bool:
        return flt.needs_decoding

    def _load_here(self, view: ListedView) -> None:
        if self.app.spill is not None:
            self.app.spill.load(view, lock=False)  # in a forked child

    def passes(self, flt: Filter, view: ListedView) -> bool:
        self._load_here(view)
        return flt(view)

    def holds(self, view: ListedView, needle: bytes) -> bool:
        self._load_here(view)
        return holds_bytes(view.ex.messages, needle, self.app.options)

    def locate(
        self, view: ListedView, needle: bytes, shown: list[Item]
    ) -> tuple[int, Node, int] | None:
        match = find_bytes(self.app.load_bytes(view).ex.messages, needle, self.app.options)
        if match is None:
            return None
        root = shown[match.message].root
        holder = root if match.buffer is None else buffer_nodes(root)[match.buffer]
        return match.message, holder, match.offset

    def is_problem(self, view: ListedView) -> bool:
        return bool(anomaly.reasons(view))

    def problem_field(self, view: ListedView, root: Node) -> Node | None:
        return None
