"""What the proxy counts: bytes and exchanges in and out, per API the broker-side latency
of requests, their top-level error codes and the answers rewritten, the exchanges the
display did not show, connections refused or closed idle. The forwarding path only adds
to plain integers; Prometheus (opt-in ``--metrics``) reads them when scraped, and the
exit summary reads them once.

Label cardinality is bounded: series are per API (a few dozen keys) and per error code,
never per connection unless asked (``--metrics-per-connection``: one connection's series
for each of thousands of idle clients made one scrape 48,000 series).

The display runs in another process: what it left out while behind is counted there
and read here through a small shared memory (``DisplayShared``), so the metric and the
exit summary are the same numbers.
"""

from __future__ import annotations

import mmap
import struct
from bisect import bisect_left
from dataclasses import dataclass, field

from ..protocol.apis import TABLE

# seconds; the proxy's own added latency is well under a millisecond, brokers' answers
# (a Fetch waiting for data) take up to its max wait
BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
MAX_ERROR_CODES = 64  # distinct error codes kept per API (brokers use ~130 in all)


@dataclass(slots=True)
class Counters:
    """One connection's counters."""

    bytes_to_broker: int = 0
    bytes_to_client: int = 0
    requests: int = 0
    responses: int = 0
    rewritten: int = 0
    dropped: int = 0  # exchanges the forwarder shed (display full)

    def add(self, other: Counters) -> None:
        for name in Counters.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(slots=True)
class ApiCounters:
    """One API's counters (all connections)."""

    requests: int = 0
    responses: int = 0
    rewritten: int = 0
    latency_sum: float = 0.0
    latency: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    errors: dict[int, int] = field(default_factory=dict)  # top-level error code -> n

    def observe(self, seconds: float) -> None:
        self.latency[bisect_left(BUCKETS, seconds)] += 1
        self.latency_sum += seconds

    def error(self, code: int) -> None:
        if code in self.errors or len(self.errors) < MAX_ERROR_CODES:
            self.errors[code] = self.errors.get(code, 0) + 1


def quantile(latency: list[int], q: float) -> float | None:
    """The upper bound of the bucket holding quantile ``q`` (None: no samples)."""
    total = sum(latency)
    if not total:
        return None
    seen = 0
    for i, n in enumerate(latency):
        seen += n
        if seen >= q * total:
            return BUCKETS[i] if i < len(BUCKETS) else float("inf")
    return None


class DisplayShared:
    """Counts both processes read (memory shared across the fork): exchanges the
    display left out while behind and requests it showed (the display writes them),
    exchanges the forwarder shed (it writes them: the display's summary must not wait
    for the channel to tell it, it may stop before)."""

    _DISPLAY = struct.Struct("=qq")
    _SHED = struct.Struct("=q")

    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, self._DISPLAY.size + self._SHED.size)  # anonymous: shared

    def write(self, left_out: int, shown: int) -> None:
        self._DISPLAY.pack_into(self._mem, 0, left_out, shown)

    def read(self) -> tuple[int, int]:
        left_out, shown = self._DISPLAY.unpack_from(self._mem, 0)
        return left_out, shown

    def write_shed(self, shed: int) -> None:
        self._SHED.pack_into(self._mem, self._DISPLAY.size, shed)

    def shed(self) -> int:
        return self._SHED.unpack_from(self._mem, self._DISPLAY.size)[0]


class Metrics:
    """Live connections' counters, the folded counters of closed ones, and per API."""

    def __init__(self, display: DisplayShared | None = None) -> None:
        self.closed = Counters()
        self.live: dict[int, tuple[str, str, Counters]] = {}  # id -> (client, broker, c)
        self.apis: dict[int, ApiCounters] = {}
        self.connections = 0
        self.refused = 0  # connections closed at once: --max-connections reached
        self.idle_closed = 0  # connections closed by --idle-timeout
        self.listeners_refused = 0  # brokers named beyond the listener caps
        self.given_up = 0  # partial requests not decoded (--max-memory)
        self.shed_total = 0  # exchanges shed (the display's buffer was full)
        self.display = display

    def shed(self) -> None:
        """One more exchange shed by the forwarder (counted per connection too)."""
        self.shed_total += 1
        if self.display is not None:
            self.display.write_shed(self.shed_total)

    def api(self, key: int) -> ApiCounters:
        a = self.apis.get(key)
        if a is None:
            # any int16 a client sends must not make a series: keys Kafka does not
            # define share one, labelled "unknown"
            if key not in TABLE:
                key = UNKNOWN_API
                a = self.apis.get(key)
            if a is None:
                a = self.apis[key] = ApiCounters()
        return a

    def open(self, index: int, client, broker) -> Counters:
        c = Counters()
        self.live[index] = (f"{client[0]}:{client[1]}", f"{broker[0]}:{broker[1]}", c)
        self.connections += 1
        return c

    def close(self, index: int) -> None:
        entry = self.live.pop(index, None)
        if entry is not None:
            self.closed.add(entry[2])

    def total(self) -> Counters:
        t = Counters()
        t.add(self.closed)
        for _, _, c in list(self.live.values()):
            t.add(c)
        return t

    def latency(self) -> list[int]:
        out = [0] * (len(BUCKETS) + 1)
        for a in list(self.apis.values()):
            out = [x + y for x, y in zip(out, a.latency)]
        return out

    def left_out(self) -> int:
        """Exchanges the display left out while far behind (counted in its process)."""
        return self.display.read()[0] if self.display is not None else 0

    def summary(self) -> str:
        t = self.total()
        text = (
            f"{self.connections} connection{'s' * (self.connections != 1)}, "
            f"{t.requests} request{'s' * (t.requests != 1)}, "
            f"{_size(t.bytes_to_broker)} to brokers, {_size(t.bytes_to_client)} to clients, "
            f"{t.rewritten} responses rewritten"
        )
        latency = self.latency()
        p50, p99 = quantile(latency, 0.5), quantile(latency, 0.99)
        if p50 is not None and p99 is not None:
            text += f"; broker answers p50 ≤ {p50 * 1000:g} ms, p99 ≤ {p99 * 1000:g} ms"
        if self.shed_total:
            text += f"; {self.shed_total} exchanges shed (the display's buffer was full)"
        if self.refused:
            text += f"; {self.refused} connections refused (--max-connections)"
        if self.idle_closed:
            text += f"; {self.idle_closed} idle connections closed (--idle-timeout)"
        if self.listeners_refused:
            text += f"; {self.listeners_refused} broker listeners not opened (caps)"
        if self.given_up:
            text += (
                f"; {self.given_up} partial requests not decoded (--max-memory reached; "
                f"forwarded unchanged)"
            )
        return text


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


UNKNOWN_API = -1  # the counters of every API key Kafka does not define


def _api_name(key: int) -> str:
    a = TABLE.get(key)
    return a.name if a is not None else "unknown"


def serve_prometheus(metrics: Metrics, host: str, port: int, per_connection: bool = False):
    """Expose ``metrics`` at http://host:port/metrics (a thread of this process)."""
    from prometheus_client import start_http_server
    from prometheus_client.core import (
        CollectorRegistry,
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    def histogram(fam, labels, latency: list[int], total: float) -> None:
        cumulative, buckets = 0, []
        for bound, n in zip((*map(str, BUCKETS), "+Inf"), latency):
            cumulative += n
            buckets.append((bound, cumulative))
        fam.add_metric(labels, buckets, total)

    def counter(name: str, text: str, value=None, labels=None):
        fam = CounterMetricFamily(name, text, value=value, labels=labels)
        return fam

    class Collector:
        def collect(self):
            t = metrics.total()
            live = list(metrics.live.items())
            apis = sorted(metrics.apis.items())
            yield GaugeMetricFamily(
                "kdissect_proxy_connections_open", "Client connections open now", value=len(live)
            )
            yield counter(
                "kdissect_proxy_connections", "Client connections accepted", metrics.connections
            )
            yield counter(
                "kdissect_proxy_connections_refused",
                "Client connections closed at once because --max-connections were open",
                metrics.refused,
            )
            yield counter(
                "kdissect_proxy_connections_idle_closed",
                "Client connections closed after --idle-timeout without traffic",
                metrics.idle_closed,
            )
            yield counter(
                "kdissect_proxy_listeners_refused",
                "Brokers named in answers for which no listener was opened (caps reached)",
                metrics.listeners_refused,
            )
            byte_fam = counter("kdissect_proxy_bytes", "Bytes forwarded", labels=["direction"])
            byte_fam.add_metric(["to_broker"], t.bytes_to_broker)
            byte_fam.add_metric(["to_client"], t.bytes_to_client)
            yield byte_fam
            requests = counter(
                "kdissect_proxy_requests", "Requests forwarded to brokers", labels=["api"]
            )
            responses = counter(
                "kdissect_proxy_responses", "Responses forwarded to clients", labels=["api"]
            )
            rewritten = counter(
                "kdissect_proxy_rewritten_responses",
                "Responses whose broker addresses were rewritten",
                labels=["api"],
            )
            errors = counter(
                "kdissect_proxy_response_errors",
                "Responses by top-level error code (APIs whose answer has one)",
                labels=["api", "error_code"],
            )
            latency = HistogramMetricFamily(
                "kdissect_proxy_request_latency_seconds",
                "From a request forwarded to the broker to its response received from it",
                labels=["api"],
            )
            for key, a in apis:
                name = _api_name(key)
                requests.add_metric([name], a.requests)
                responses.add_metric([name], a.responses)
                rewritten.add_metric([name], a.rewritten)
                for code, n in sorted(a.errors.items()):
                    errors.add_metric([name, str(code)], n)
                histogram(latency, [name], a.latency, a.latency_sum)
            yield from (requests, responses, rewritten, errors, latency)
            dropped = counter(
                "kdissect_proxy_display_dropped_exchanges",
                "Exchanges the "
                "display did not show (forwarding was not slowed): shed when "
                "its buffer was full, left out while it was far behind",
                labels=["reason"],
            )
            dropped.add_metric(["shed"], metrics.shed_total)
            dropped.add_metric(["left_out"], metrics.left_out())
            yield dropped
            if not per_connection:
                return
            per = ["connection", "client", "broker"]
            conn_bytes = counter(
                "kdissect_proxy_connection_bytes",
                "Bytes forwarded on one connection",
                labels=per + ["direction"],
            )
            conn_requests = counter(
                "kdissect_proxy_connection_requests",
                "Requests forwarded on one connection",
                labels=per,
            )
            conn_dropped = counter(
                "kdissect_proxy_connection_display_dropped_exchanges",
                "Exchanges of one connection the display's buffer shed",
                labels=per,
            )
            for index, (client, broker, c) in live:
                labels = [str(index), client, broker]
                conn_bytes.add_metric(labels + ["to_broker"], c.bytes_to_broker)
                conn_bytes.add_metric(labels + ["to_client"], c.bytes_to_client)
                conn_requests.add_metric(labels, c.requests)
                conn_dropped.add_metric(labels, c.dropped)
            yield from (conn_bytes, conn_requests, conn_dropped)

    registry = CollectorRegistry()
    registry.register(Collector())
    return start_http_server(port, addr=host, registry=registry)
