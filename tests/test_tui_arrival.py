"""How a source's rows reach the screen: as ``Arrived`` messages handled between keys
(browser.py), a batch of what came since the last one, never one message per row and
never a timer polling a queue."""

from __future__ import annotations

import asyncio
import threading

from textual.app import App
from textual.widgets import Input

from kdissect.protocol import Options
from kdissect.sources.pcap import capture_loader, exchanges_in
from kdissect.tui.app import KdissectApp
from kdissect.tui.browser import Browser
from kdissect.tui.log_app import LogApp
from tests.support.tui import drive, loaded
from tests.test_log import batch
from tests.test_tui import GROUP
from tests.test_tui_typeahead import key_event

ROWS = 5000


def test_rows_sent_while_the_screen_is_busy_arrive_in_one_message(monkeypatch):
    """A source sends one row, then 4999 while the screen is busy (its loop blocked
    here): the screen gets them in two batches, the second carrying the 4999 (its rest
    comes again behind the keys if one slice does not add them all), then the end in a
    third. Keys typed while those rows are added all reach the filter bar."""
    exchanges = exchanges_in([str(GROUP)]).exchanges
    started, go, emitted, finish = (threading.Event() for _ in range(4))
    batches: list[tuple[int, int]] = []  # (id of the batch, its length) per Arrived
    real = Browser.on_arrived

    async def on_arrived(self, message) -> None:
        batches.append((id(message.batch), len(message.batch)))
        await real(self, message)

    monkeypatch.setattr(Browser, "on_arrived", on_arrived)

    def load(sink) -> None:
        started.set()
        go.wait(30)
        for i in range(ROWS):
            sink.exchange(exchanges[i % len(exchanges)])
        emitted.set()
        finish.wait(30)

    async def run() -> None:
        app = KdissectApp(load, title="busy", isolate=False)
        async with app.run_test(size=(120, 40)) as pilot:
            while not started.is_set():
                await pilot.pause(0.02)
            go.set()
            assert emitted.wait(30)  # blocks the screen's loop: nothing is handled meanwhile
            for key in "/api":  # typed as the rows are being added
                event = key_event(key)
                event.set_sender(app)
                app._driver.send_message(event)
                await asyncio.sleep(0.01)
            while len(app.items) < ROWS:
                await pilot.pause(0.02)
            finish.set()
            await loaded(app, pilot)
            assert app.query_one("#filter", Input).value == "api"
            assert app.table.row_count == ROWS and f"{ROWS} exchanges" in app.sub_title
        distinct: dict[int, int] = {}
        for key, size in batches:
            distinct.setdefault(key, size)
        assert list(distinct.values()) == [1, ROWS - 1, 1]  # the last: the end (Done)

    asyncio.run(run())


def test_the_screens_poll_nothing(tmp_path, monkeypatch):
    """No interval timer of kdissect's runs on either screen: rows, progress and the
    work line come as messages."""
    intervals: list[str] = []
    real = App.set_interval

    def set_interval(self, interval, callback=None, **kw):
        module = getattr(callback, "__module__", "") or ""
        if module.startswith("kdissect"):
            intervals.append(getattr(callback, "__qualname__", repr(callback)))
        return real(self, interval, callback, **kw)

    monkeypatch.setattr(App, "set_interval", set_interval)
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"k", b"v")]))

    async def body(app, pilot) -> None:
        assert app.loaded and app.items

    drive(KdissectApp(capture_loader([str(GROUP)]), title=GROUP.name), body)
    drive(LogApp([str(part)], Options()), body)
    assert intervals == []
