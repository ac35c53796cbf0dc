"""Statistics over exchanges: counts per API, errors, latency percentiles, bytes, and a
summary per connection."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..protocol.names import api_name, error_name
from .facts import ExchangeView
from .model import Exchange, Gap


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = math.ceil(p / 100 * len(sorted_values))       # 1-based
    return sorted_values[max(0, min(len(sorted_values), rank) - 1)]


@dataclass
class ConnectionStats:
    client: str
    broker: str
    exchanges: int = 0
    to_broker: int = 0
    to_client: int = 0
    first: float = float("inf")
    last: float = 0.0
    errors: int = 0


@dataclass
class Stats:
    per_api: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    bytes_requests: int = 0
    bytes_responses: int = 0
    statuses: Counter = field(default_factory=Counter)
    problems: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    connections: dict[int, ConnectionStats] = field(default_factory=dict)

    def add(self, ex: Exchange, view: ExchangeView) -> None:
        first = ex.first
        name = api_name(first.api_key) if first.direction != "sasl" else "SASL token"
        self.per_api[name] += 1
        conn = self.connections.setdefault(
            ex.stream, ConnectionStats(f"{ex.client[0]}:{ex.client[1]}",
                                       f"{ex.broker[0]}:{ex.broker[1]}"))
        conn.exchanges += 1
        if ex.status != "ok":
            self.statuses[ex.status.split(":")[0].split(" (")[0]] += 1
        for m in ex.messages:
            size = len(m.data) + 4
            if m.direction == "response" or (m.direction == "sasl" and ex.request is None):
                self.bytes_responses += size
                conn.to_client += size
            else:
                self.bytes_requests += size
                conn.to_broker += size
            conn.first = min(conn.first, m.ts)
            conn.last = max(conn.last, m.ts)
        if ex.latency is not None:
            self.latency[name].append(ex.latency)
        if first.direction != "sasl":
            for code in view.facts().errors:
                self.errors[error_name(code)] += 1
                conn.errors += 1
            self.problems += view.field("problems")[0]

    def add_gap(self, gap: Gap) -> None:
        self.gaps += 1
        self.gap_bytes += gap.length

    def latency_summary(self, values: list[float]) -> tuple[float, float, float, float]:
        s = sorted(values)
        return percentile(s, 50), percentile(s, 90), percentile(s, 99), s[-1]
