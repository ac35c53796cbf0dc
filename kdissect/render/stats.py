"""--stats (and the TUI's statistics screen) as tables (render/plain_table.py: written
plainly to a pipe or a file, drawn by rich elsewhere)."""

from __future__ import annotations

import heapq
from collections import Counter

from typing import Any

from ..render.lines import iso
from .plain_table import Lines, Pieces, Table
from ..stream.stats import Breakdown, Stats, percentile


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def stats_tables(stats: Stats) -> Any:
    """The tables as a rich ``Group`` (the TUI's statistics screen)."""
    return stats_pieces(stats).__rich__()


def stats_pieces(stats: Stats) -> Pieces:
    parts = Pieces()
    apis = Table(
        title="Exchanges per API: broker time, i.e. latency less the waits clients "
        "asked for (Fetch/ShareFetch max_wait_ms, JoinGroup/SyncGroup "
        "rebalances)",
        title_justify="left",
    )
    for col in (
        "API",
        "count",
        "timed",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "waited",
        "max latency ms",
    ):
        apis.add_column(
            col,
            justify="left" if col == "API" else "right",
            keep=col == "API",
            optional=col in ("timed", "waited"),
        )
    every = []
    for name, count in stats.per_api.most_common():
        service = stats.service.get(name) or (
            [] if stats.waited.get(name) else stats.latency.get(name, [])
        )
        every += service
        cells = [_ms(v) for v in stats.latency_summary(service)] if service else ["-"] * 4
        raw = stats.latency.get(name)
        apis.add_row(
            name,
            str(count),
            _timed(len(service), count),
            *cells,
            str(stats.waited.get(name, 0) or ""),
            _ms(max(raw)) if raw else "-",
        )
    if every:
        total = sum(stats.per_api.values())
        apis.add_row(
            ("all", "bold"),
            str(total),
            _timed(len(every), total),
            *[_ms(v) for v in stats.latency_summary(every)],
            "",
            "",
            end_section=True,
        )
    parts.append(apis)
    if stats.errors:
        errors = Table(title="Errors", title_justify="left")
        errors.add_column("error", keep=True)
        errors.add_column("count", justify="right")
        for name, count in stats.errors.most_common(LISTED):
            errors.add_row((name, "red"), str(count))
        _more(errors, len(stats.errors))
        parts.append(errors)
    if stats.diagnoses:
        found = Table(title="Diagnoses (docs/guide/findings.md)", title_justify="left")
        found.add_column("finding", keep=True)
        found.add_column("count", justify="right")
        for code, count in stats.diagnoses.most_common():
            found.add_row(code, str(count))
        parts.append(found)
    # the busiest connections only: a table of 200,000 takes rich minutes to lay out
    busiest = sorted(
        heapq.nlargest(LISTED, stats.connections.items(), key=lambda kv: (kv[1].exchanges, -kv[0]))
    )
    listed = (
        f", the {LISTED} busiest of {len(stats.connections)}"
        if len(stats.connections) > LISTED
        else ""
    )
    conns = Table(
        title=f"Connections (bytes sent by the client and by the broker{listed})",
        title_justify="left",
        box="SIMPLE_HEAD",
        padding=(0, 1),
    )
    for i, col in enumerate(
        ("#", "client", "broker", "exchanges", "client", "broker", "seconds", "errors")
    ):
        address = i in (1, 2)
        conns.add_column(
            col,
            justify="left" if address else "right",
            no_wrap=address,
            keep=address,
            optional=col == "errors",
            label=("bytes from client", "bytes from broker")[i - 4] if i in (4, 5) else None,
        )
    for index, c in busiest:
        conns.add_row(
            str(index),
            c.client,
            c.broker,
            str(c.exchanges),
            str(c.to_broker),
            str(c.to_client),
            f"{max(c.last - c.first, 0):.3f}",
            str(c.errors),
        )
    _more(conns, len(stats.connections))
    parts.append(conns)
    sides = Counter(c.side_by for c in stats.connections.values() if c.side_by)
    if sides:
        decided = Table(title="Client side decided by", title_justify="left")
        decided.add_column("evidence", keep=True)
        decided.add_column("connections", justify="right")
        for by, n in sides.most_common():
            decided.add_row(by, str(n))
        parts.append(decided)
    parts += [
        _breakdown("Clients (by client id)", "client", stats.clients),
        _breakdown("Brokers", "broker", stats.brokers),
    ]
    if stats.topics:
        # a terminal table of 200,000 topics (one crafted Metadata request) takes minutes
        rows = sorted(stats.topics.items(), key=lambda kv: -kv[1].exchanges)
        more = f" (the first {TOPICS_LISTED} of {len(rows)})" if len(rows) > TOPICS_LISTED else ""
        topics = Table(title=f"Topics{more}", title_justify="left", box="SIMPLE_HEAD")
        for col in ("topic", "partitions", "exchanges", "Produce", "Fetch", "errors"):
            topics.add_column(
                col,
                justify="left" if col in ("topic", "partitions") else "right",
                keep=col == "topic",
            )
        for name, b in rows[:TOPICS_LISTED]:
            topics.add_row(
                name,
                _ranges(b.partitions),
                str(b.exchanges),
                str(b.produce),
                str(b.fetch),
                (str(b.errors), "red" if b.errors else ""),
            )
        parts.append(topics)
        parts.append(_partitions(stats))
    for group, g in list(stats.groups.items())[:LISTED]:
        parts.append(group_timeline(group, g))
    if len(stats.groups) > LISTED:
        parts.append(Lines([(f"and {len(stats.groups) - LISTED} more groups", "dim")]))
    lines = Lines()
    lines.append(
        f"bytes: {stats.bytes_requests} to brokers, {stats.bytes_responses} to "
        f"clients (Kafka messages with their size prefix)\n"
    )
    lines.append(
        f"gaps: {stats.gaps} ({stats.gap_bytes} bytes lost)\n", style="yellow" if stats.gaps else ""
    )
    if stats.unread:
        lines.append(
            f"unread: {stats.unread_bytes} bytes in {stats.unread} stretch(es) with no "
            f"message boundary (not read as Kafka)\n",
            style="yellow",
        )
    lines.append(f"fields with problems: {stats.problems}\n", style="red" if stats.problems else "")
    for status, n in stats.statuses.most_common():
        lines.append(f"{status}: {n}\n", style="yellow")
    parts.append(lines)
    return parts


TOPICS_LISTED = 200
LISTED = 50  # rows of the connection, client, broker and error tables


def _more(table: Table, total: int) -> None:
    """Say how many rows a bounded table left out (a line under it)."""
    if total > table.row_count:
        table.note = f"and {total - table.row_count} more"


def _timed(timed: int, count: int) -> str:
    """The exchanges a row's broker-time percentiles cover, when fewer than its count
    (a Fetch answered before its max_wait_ms has no known broker time: left out)."""
    return str(timed) if timed < count else ""


def _breakdown(title: str, what: str, rows: dict[str, Breakdown]) -> Table:
    table = Table(
        title=f"{title} (p50 and p99 of broker time)", title_justify="left", box="SIMPLE_HEAD"
    )
    for col in (
        what,
        "exchanges",
        "errors",
        "timed",
        "p50 ms",
        "p99 ms",
        "throttled",
        "throttle ms",
    ):
        table.add_column(
            col,
            justify="left" if col == what else "right",
            keep=col == what,
            optional=col in ("timed", "throttled", "throttle ms"),
        )
    for name, b in heapq.nsmallest(LISTED, rows.items(), key=lambda kv: -kv[1].exchanges):
        lat = sorted(b.latency)
        p50, p99 = (_ms(percentile(lat, 50)), _ms(percentile(lat, 99))) if lat else ("-", "-")
        table.add_row(
            name,
            str(b.exchanges),
            (str(b.errors), "red" if b.errors else ""),
            _timed(len(lat), b.exchanges),
            p50,
            p99,
            (str(b.throttled), "yellow" if b.throttled else ""),
            str(b.throttle_ms),
        )
    _more(table, len(rows))
    return table


def _partitions(stats: Stats, listed: int = 40) -> Table:
    """Per topic partition, the ones with errors first, then the busiest."""
    rows = sorted(stats.partitions.items(), key=lambda kv: (-kv[1].errors, -kv[1].exchanges, kv[0]))
    more = f" (the first {listed} of {len(rows)})" if len(rows) > listed else ""
    table = Table(title=f"Partitions{more}", title_justify="left", box="SIMPLE_HEAD")
    for col in ("topic", "partition", "exchanges", "Produce", "Fetch", "errors"):
        table.add_column(col, justify="left" if col == "topic" else "right", keep=col == "topic")
    for (topic, partition), b in rows[:listed]:
        table.add_row(
            topic,
            str(partition),
            str(b.exchanges),
            str(b.produce),
            str(b.fetch),
            (str(b.errors), "red" if b.errors else ""),
        )
    return table


def _ranges(values: set[int]) -> str:
    """0,1,2,3,7 -> 0-3,7 (a damaged message can leave a partition unread: not listed)"""
    out: list[str] = []
    run: list[int] = []
    for v in sorted(v for v in values if isinstance(v, int)):
        if run and v != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(v)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def group_timeline(group: str, g) -> Table:
    """A group's joins, syncs, failed heartbeats and leaves (classic), or its members'
    joins, epochs, assignments, fencing and leaves (KIP-848, share, streams), in time
    order."""
    classic = g.kind == "consumer group"
    numbers = "generation" if classic else "member epoch"
    table = Table(
        title=f"{g.kind[0].upper()}{g.kind[1:]} {group}: {len(g.members)} member"
        f"{'s' if len(g.members) != 1 else ''}, {g.rebalances} {numbers}"
        f"{'s' if g.rebalances != 1 else ''}, {g.heartbeats} heartbeat"
        f"{'s' if g.heartbeats != 1 else ''} answered" + ("" if classic else " with nothing new"),
        title_justify="left",
        box="SIMPLE_HEAD",
    )
    for col in ("time", "API", "member", "gen" if classic else "epoch", "what"):
        table.add_column(col, justify="right" if col in ("gen", "epoch") else "left")
    events = sorted(g.events, key=lambda e: e.ts)
    for e in events[:TIMELINE_LISTED]:
        what = (
            (e.error + (f": {e.detail}" if e.detail and not classic else ""), "red")
            if e.error
            else (e.detail, "")
        )
        member = e.member if len(e.member) <= 24 else e.member[:23] + "…"
        table.add_row(
            iso(e.ts)[11:23], e.api, member, "" if e.generation is None else str(e.generation), what
        )
    _more(table, len(events))
    return table


TIMELINE_LISTED = 500
