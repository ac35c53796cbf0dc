"""No lost keys: a filter typed at 20 ms a key right after `/` (and Enter, and a list key
right after Enter) arrives whole while a big capture (a real one, replicated) loads, on
the exchange screen and on the log screen; Tab right after the last letter completes.

Keys go to the app the way the terminal driver sends them (one message each, 20 ms
apart, without waiting for the app to be idle, unlike Textual's pilot.press): the race
in which a key queued for the list before `/` had moved the focus was lost."""

from __future__ import annotations

import asyncio
import statistics
import struct
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from textual import events
from textual.keys import _character_to_key, _get_unicode_name_from_key
from textual.widgets import Input

from kdissect.protocol import Options
from kdissect.sources.pcap import capture_loader
from kdissect.tui.app import KdissectApp
from kdissect.tui.log_app import LogApp

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / "captures" / "kafka-clients.pcap"  # 113 KB, 151 exchanges
GAP = 0.02  # seconds between keys


def replicated(tmp: Path, copies: int) -> Path:
    """kafka-clients.pcap, ``copies`` times over (each copy its own connections)."""
    out = tmp / f"clients-x{copies}.pcap"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "replicate_capture.py"),
            str(CLIENTS),
            str(out),
            "--copies",
            str(copies),
        ],
        check=True,
    )
    return out


def key_event(key: str) -> events.Key:
    """The Key message the terminal driver makes for ``key`` (a character or a name)."""
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char: str | None = unicodedata.lookup(_get_unicode_name_from_key(key))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


class Typist:
    """Sends keys GAP apart and notes how long each took to reach the filter bar."""

    def __init__(self, app) -> None:
        self.app = app
        self.sent: list[float] = []
        self.latencies: list[float] = []

    def watch(self, box: Input) -> None:
        def changed(value: str) -> None:
            if 0 < len(value) <= len(self.sent):
                self.latencies.append(time.monotonic() - self.sent[len(value) - 1])

        self.app.watch(box, "value", changed, init=False)

    async def type(self, *keys: str) -> None:
        for key in keys:
            event = key_event(key)
            event.set_sender(self.app)
            self.app._driver.send_message(event)
            await asyncio.sleep(GAP)

    async def filter(self, text: str, after: str) -> None:
        """`/`, the text, Enter, then the list key ``after``: the filter bar's value is
        timed from its first key."""
        await self.type("/")
        self.sent = []
        for ch in text:
            self.sent.append(time.monotonic())
            await self.type(ch)
        await self.type("enter", *([after] if after else []))


async def until(pilot, done, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        await pilot.pause(0.02)


def typeahead(
    app, pilot_size, filters: list[str], after: str, check
) -> tuple[int, int, list[float]]:
    """Types each filter, then ``after`` (a list key) right after Enter; ``check(app,
    text, times)``: whether the filter arrived whole and ``after`` ran ``times`` times
    so far (waited for a while: keys may queue while rows are added). (intact, typed
    while loading, latencies of the keys)."""
    result: dict = {}

    async def go():
        async with app.run_test(size=pilot_size) as pilot:
            await until(pilot, lambda: app.table.row_count > 0)
            typist = Typist(app)
            typist.watch(app.query_one("#filter", Input))
            intact = during = 0
            for i, text in enumerate(filters):
                during += not app.loaded
                await typist.filter(text, after)
                await until(pilot, lambda: check(app, text, i + 1), 30)
                ok = check(app, text, i + 1)
                if not ok:
                    print(
                        f"trial {i}: filter {app.filter_text!r}, bar "
                        f"{app.query_one('#filter', Input).value!r}, sorted "
                        f"{app.sorted_by}"
                    )
                intact += ok
            result.update(intact=intact, during=during, lat=typist.latencies)

    asyncio.run(go())
    return result["intact"], result["during"], result["lat"]


def exchange_filters_hold(tmp: Path, copies: int, n: int) -> None:
    app = KdissectApp(capture_loader([str(replicated(tmp, copies))]), title="big")
    filters = ["api == Produce" if i % 2 else "api == Fetch" for i in range(n)]

    def check(app, text: str, times: int) -> bool:
        """The filter whole, no list key run (`o` sorts, `t` changes the time, `f`
        follows: the letters of a filter are list keys too)."""
        return (
            app.focused is app.table
            and app.filter_text == text
            and app.sorted_by == ("time", False)
            and app.time_format == "short"
            and app.following is None
        )

    intact, during, lat = typeahead(app, (120, 40), filters, "", check)
    print(
        f"\n{intact}/{n} filters intact, {during} typed while loading; key latency "
        f"median {statistics.median(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms "
        f"({len(lat)} keys)"
    )
    assert intact == n
    assert during >= 1, "the capture was loaded before the first filter: make it bigger"


@pytest.mark.slow  # a loading capture: half a minute of a core or two
def test_filters_typed_while_a_capture_loads_arrive_whole(tmp_path):
    exchange_filters_hold(tmp_path, 120, 6)  # 13 MB, 18 000 exchanges


@pytest.mark.slow
def test_twenty_filters_typed_while_a_150_mb_capture_loads_arrive_whole(tmp_path):
    exchange_filters_hold(tmp_path, 1330, 20)  # 151 MB, 200 000 exchanges


def big_partition(tmp: Path, batches: int) -> Path:
    """customers-0: ``batches`` record batches written by kafka-python's encoder (one
    batch repeated at growing base offsets: the base offset is outside the CRC)."""
    from tests.test_log import batch

    part = tmp / "customers-0"
    part.mkdir()
    one = bytearray(batch(2, 0, 0, [(b"k", b"v" * 40), (b"l", b"w" * 40)]))
    with open(part / "00000000000000000000.log", "wb") as f:
        for n in range(batches):
            struct.pack_into(">q", one, 0, 2 * n)
            f.write(one)
    return part


def log_filters_hold(tmp: Path, batches: int, n: int) -> None:
    from kdissect.tui.log_app import SORT_CYCLE

    app = LogApp([str(big_partition(tmp, batches))], Options())
    filters = ["topic == customers" if i % 2 else "partition == 0" for i in range(n)]

    def check(app, text: str, times: int) -> bool:
        """The filter whole, no list key run (`o`, a letter of `partition`, sorts)."""
        return (
            app.focused is app.table
            and app.filter_text == text
            and app.sorted_by[0] == SORT_CYCLE[0]
        )

    intact, during, lat = typeahead(app, (120, 40), filters, "", check)
    print(
        f"\n{intact}/{n} filters intact, {during} typed while loading; key latency "
        f"median {statistics.median(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms "
        f"({len(lat)} keys)"
    )
    assert intact == n
    assert during >= 1, "the log was read before the first filter: make it bigger"


@pytest.mark.slow
def test_filters_typed_while_a_log_loads_arrive_whole(tmp_path):
    log_filters_hold(tmp_path, 60_000, 4)


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_tab_right_after_the_last_letter_completes():
    """Tab 20 ms after the last letter: the completion (Textual computes it in the
    background after each key) is computed when Tab comes."""
    app = KdissectApp(capture_loader([str(CLIENTS)]), title="clients")

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.loaded)
            typist = Typist(app)
            box = app.query_one("#filter", Input)
            for typed, completed in (
                ("api == Prod", "api == Produce"),
                ("err", "error"),
                ("api == Fetch and cli", "api == Fetch and client_id"),
            ):
                await typist.type("/", *typed, "tab")
                await until(pilot, lambda: box.value != typed, 5)
                assert box.value == completed
                await typist.type("escape")
                await until(pilot, lambda: app.focused is app.table, 5)

    asyncio.run(go())
