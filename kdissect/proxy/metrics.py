"""What the proxy counts: bytes, requests, request latency and exchanges the display
did not get, per connection and in total. The forwarding path only adds to plain
integers; Prometheus (opt-in ``--metrics``) reads them when scraped, and the exit
summary reads them once."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

# seconds; the proxy's own added latency is well under a millisecond, brokers' answers
# (a Fetch waiting for data) take up to its max wait
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
           0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(slots=True)
class Counters:
    bytes_to_broker: int = 0
    bytes_to_client: int = 0
    requests: int = 0
    responses: int = 0
    rewritten: int = 0
    dropped: int = 0                       # exchanges the display did not get
    latency_sum: float = 0.0
    latency: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))

    def observe(self, seconds: float) -> None:
        self.latency[bisect_left(BUCKETS, seconds)] += 1
        self.latency_sum += seconds

    def add(self, other: Counters) -> None:
        for name in ("bytes_to_broker", "bytes_to_client", "requests", "responses",
                     "rewritten", "dropped", "latency_sum"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.latency = [a + b for a, b in zip(self.latency, other.latency)]

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile ``q`` (None: no samples)."""
        total = sum(self.latency)
        if not total:
            return None
        seen = 0
        for i, n in enumerate(self.latency):
            seen += n
            if seen >= q * total:
                return BUCKETS[i] if i < len(BUCKETS) else float("inf")
        return None


class Metrics:
    """Live connections' counters and the folded counters of closed ones."""

    def __init__(self) -> None:
        self.closed = Counters()
        self.live: dict[int, tuple[str, str, Counters]] = {}   # id -> (client, broker, c)
        self.connections = 0
        self.given_up = 0           # partial requests not decoded (--max-memory)

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

    def summary(self) -> str:
        t = self.total()
        text = (f"{self.connections} connections, {t.requests} requests, "
                f"{_size(t.bytes_to_broker)} to brokers, {_size(t.bytes_to_client)} to clients, "
                f"{t.rewritten} responses rewritten")
        p50, p99 = t.quantile(0.5), t.quantile(0.99)
        if p50 is not None and p99 is not None:
            text += f"; broker answers p50 ≤ {p50 * 1000:g} ms, p99 ≤ {p99 * 1000:g} ms"
        if t.dropped:
            text += f"; {t.dropped} exchanges not shown (the display fell behind)"
        if self.given_up:
            text += (f"; {self.given_up} partial requests not decoded (--max-memory reached; "
                     f"forwarded unchanged)")
        return text


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def serve_prometheus(metrics: Metrics, host: str, port: int):
    """Expose ``metrics`` at http://host:port/metrics (a thread of this process)."""
    from prometheus_client import start_http_server
    from prometheus_client.core import (CollectorRegistry, CounterMetricFamily,
                                        GaugeMetricFamily, HistogramMetricFamily)

    def histogram(fam, labels, c: Counters) -> None:
        cumulative, buckets = 0, []
        for bound, n in zip((*map(str, BUCKETS), "+Inf"), c.latency):
            cumulative += n
            buckets.append((bound, cumulative))
        fam.add_metric(labels, buckets, c.latency_sum)

    class Collector:
        def collect(self):
            t = metrics.total()
            live = list(metrics.live.items())
            yield GaugeMetricFamily("kdissect_proxy_connections_open",
                                    "Client connections open now", value=len(live))
            yield CounterMetricFamily("kdissect_proxy_connections",
                                      "Client connections accepted", value=metrics.connections)
            per = ["connection", "client", "broker"]
            byte_fam = CounterMetricFamily("kdissect_proxy_bytes", "Bytes forwarded",
                                           labels=["direction"])
            byte_fam.add_metric(["to_broker"], t.bytes_to_broker)
            byte_fam.add_metric(["to_client"], t.bytes_to_client)
            conn_bytes = CounterMetricFamily("kdissect_proxy_connection_bytes",
                                             "Bytes forwarded on one connection",
                                             labels=per + ["direction"])
            requests = CounterMetricFamily("kdissect_proxy_requests", "Requests forwarded")
            requests.add_metric([], t.requests)
            conn_requests = CounterMetricFamily("kdissect_proxy_connection_requests",
                                                "Requests forwarded on one connection",
                                                labels=per)
            dropped = CounterMetricFamily("kdissect_proxy_display_dropped_exchanges",
                                          "Exchanges the display did not get (it fell "
                                          "behind; forwarding was not slowed)")
            dropped.add_metric([], t.dropped)
            conn_dropped = CounterMetricFamily(
                "kdissect_proxy_connection_display_dropped_exchanges",
                "Exchanges of one connection the display did not get", labels=per)
            latency = HistogramMetricFamily("kdissect_proxy_request_latency_seconds",
                                            "From a request forwarded to its response "
                                            "received")
            histogram(latency, [], t)
            conn_latency = HistogramMetricFamily(
                "kdissect_proxy_connection_request_latency_seconds",
                "Request latency on one connection", labels=per)
            for index, (client, broker, c) in live:
                labels = [str(index), client, broker]
                conn_bytes.add_metric(labels + ["to_broker"], c.bytes_to_broker)
                conn_bytes.add_metric(labels + ["to_client"], c.bytes_to_client)
                conn_requests.add_metric(labels, c.requests)
                conn_dropped.add_metric(labels, c.dropped)
                histogram(conn_latency, labels, c)
            yield from (byte_fam, conn_bytes, requests, conn_requests, dropped, conn_dropped,
                        latency, conn_latency)

    registry = CollectorRegistry()
    registry.register(Collector())
    return start_http_server(port, addr=host, registry=registry)
