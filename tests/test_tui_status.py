"""The list's status column and its fitting to the terminal: expected errors (a first
JoinGroup's MEMBER_ID_REQUIRED, a Heartbeat's REBALANCE_IN_PROGRESS) named and set apart
as expected steps, not problems; error names whole at 80 columns or abbreviated, never
cut to 14 characters; endpoints at 120 columns keep the broker whole."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from kdissect.protocol import Options
from kdissect.sources.pcap import exchanges_in
from kdissect.tui.exchange_items import EXPECTED, EXPECTED_MARK, _row
from kdissect.tui.exchange_list import COLUMNS, abbreviate, compact_endpoints, fit
from kdissect.tui.loader import ListedView

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def rows(name: str) -> list[tuple[ListedView, tuple]]:
    views = [ListedView(ex, Options()) for ex in exchanges_in([str(CAPTURES / name)]).exchanges]
    return [(v, _row(v)[0]) for v in views]


def test_expected_errors_are_named_as_expected_steps_not_problems():
    found = []
    for name in ("kafka-clients.pcap", "confluent-group.pcap"):
        for view, cells in rows(name):
            status, api = cells[-1], cells[3]
            if "MEMBER_ID_REQUIRED" in status.plain or "REBALANCE_IN_PROGRESS" in status.plain:
                found.append(view)
                at = status.plain.index(EXPECTED_MARK)
                assert any(s.style == EXPECTED and s.start == at for s in status.spans)
                expected_only = not view.facts().errors or all(
                    c in (79, 27) for c in view.facts().errors
                )
                if expected_only and not view.problems:
                    assert "red" not in str(api.style)  # not a problem
    assert found, "the captures hold a first JoinGroup told MEMBER_ID_REQUIRED"


def test_error_names_keep_their_room_at_80_columns_or_are_abbreviated():
    names = [COLUMNS[i].name for i, _ in fit(78)]
    widths = dict((COLUMNS[i].name, w) for i, w in fit(78))
    assert {"#", "API", "latency", "status"} <= set(names) and widths["status"] >= 24
    for width in (78, 118, 158, 198):
        assert sum(w for _, w in fit(width)) + len(fit(width)) - 1 <= width
    status = Text()
    status.append("COORDINATOR_LOAD_IN_PROGRESS", "red")
    short = abbreviate(status, 24)
    assert short.plain == "COORD_LOAD_IN_PROG" and short.spans[0].style == "red"
    assert abbreviate(Text("NOT_COORDINATOR"), 24).plain == "NOT_COORDINATOR"


def test_endpoints_at_120_columns_keep_the_broker_whole():
    widths = dict((COLUMNS[i].name, w) for i, w in fit(118, 12, 43))
    view = rows("kafka-clients.pcap")[0][0]
    shown = compact_endpoints(view)
    assert len(shown) <= widths["client → broker"]
    host, port = view.ex.broker
    assert shown.endswith(f"{host}:{port}") and shown.startswith(f":{view.ex.client[1]}→")
