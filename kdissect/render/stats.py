"""--stats as tables."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..stream.stats import Stats


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def stats_tables(stats: Stats) -> Group:
    parts = []
    apis = Table(title="Exchanges per API", title_justify="left")
    for col in ("API", "count", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        apis.add_column(col, justify="left" if col == "API" else "right")
    every = []
    for name, count in stats.per_api.most_common():
        lat = stats.latency.get(name, [])
        every += lat
        cells = [_ms(v) for v in stats.latency_summary(lat)] if lat else ["-"] * 4
        apis.add_row(name, str(count), *cells)
    if every:
        apis.add_row(Text("all", style="bold"), str(sum(stats.per_api.values())),
                     *[_ms(v) for v in stats.latency_summary(every)], end_section=True)
    parts.append(apis)
    if stats.errors:
        errors = Table(title="Errors", title_justify="left")
        errors.add_column("error")
        errors.add_column("count", justify="right")
        for name, count in stats.errors.most_common():
            errors.add_row(Text(name, style="red"), str(count))
        parts.append(errors)
    conns = Table(title="Connections (bytes sent by the client and by the broker)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for i, col in enumerate(("#", "client", "broker", "exchanges", "client", "broker",
                             "seconds", "errors")):
        address = i in (1, 2)
        conns.add_column(col, justify="left" if address else "right", no_wrap=address)
    for index, c in sorted(stats.connections.items()):
        conns.add_row(str(index), c.client, c.broker, str(c.exchanges), str(c.to_broker),
                      str(c.to_client), f"{max(c.last - c.first, 0):.3f}", str(c.errors))
    parts.append(conns)
    lines = Text()
    lines.append(f"bytes: {stats.bytes_requests} to brokers, {stats.bytes_responses} to "
                 f"clients (Kafka messages with their size prefix)\n")
    lines.append(f"gaps: {stats.gaps} ({stats.gap_bytes} bytes lost)\n",
                 style="yellow" if stats.gaps else "")
    lines.append(f"fields with problems: {stats.problems}\n",
                 style="red" if stats.problems else "")
    for status, n in stats.statuses.most_common():
        lines.append(f"{status}: {n}\n", style="yellow")
    parts.append(lines)
    return Group(*parts)
