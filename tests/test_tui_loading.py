"""Both TUIs read their source in a forked child, and fork it from the UI thread as the
screen starts: never from a worker thread (a fork from a worker thread copies the locks
the other threads of this multithreaded app hold at that instant)."""

from __future__ import annotations

import multiprocessing.process
import threading

import pytest

from kdissect.protocol import Options
from kdissect.sources.pcap import capture_loader, exchanges_in
from kdissect.tui.app import KdissectApp
from kdissect.tui.log_app import LogApp
from tests.support.tui import drive
from tests.test_log import batch
from tests.test_tui import GROUP


def _forks_from(monkeypatch) -> list[str]:
    """The names of the threads that start a child process from now on."""
    threads: list[str] = []
    real = multiprocessing.process.BaseProcess.start

    def start(self) -> None:
        threads.append(threading.current_thread().name)
        real(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    return threads


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_the_log_reader_is_forked_from_the_ui_thread(tmp_path, monkeypatch):
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batch(2, 0, 0, [(b"k", b"v")]))
    threads = _forks_from(monkeypatch)

    async def body(app, pilot):
        assert app.loaded and [item.kind for item in app.items] == ["batch"]

    drive(LogApp([str(part)], Options()), body)
    assert threads == [threading.main_thread().name]


def test_the_capture_loader_is_forked_from_the_ui_thread(monkeypatch):
    threads = _forks_from(monkeypatch)

    async def body(app, pilot):
        assert app.loaded and app.views

    drive(KdissectApp(capture_loader([str(GROUP)]), title=GROUP.name), body)
    assert threads == [threading.main_thread().name]


def test_a_live_source_hands_gaps_tls_and_notes_to_the_screen_by_their_kind():
    """A source (live, the proxy) gets the engine's sink itself: its gaps are counted as
    gaps, its TLS connections listed, an error note shown as an error. (The live and
    proxy TUIs once turned gaps into plain text and dropped the TLS facts.)"""
    from kdissect.capture.tls import KeyLog
    from kdissect.stream.model import Gap
    from tests.test_tui_tls import KEYS, TLS

    keys = KeyLog()
    keys.add_file(str(KEYS))
    seen = exchanges_in([str(TLS)], keys=keys)
    hole = Gap(1, "response", 4000, 120, 0, 0.0)
    assert seen.tls_facts and seen.exchanges

    def load(sink) -> None:
        for facts in seen.tls_facts:
            sink.tls(facts)
        for ex in seen.exchanges:
            sink.exchange(ex)
        sink.gap(hole)
        sink.note("the interface went down", "error")

    async def body(app, pilot):
        assert app.loaded and len(app.views) == len(seen.exchanges)
        assert app.tls_connections == seen.tls_facts
        assert app.gaps == [hole] and hole.describe() in app.warnings
        assert "the interface went down" in app.warnings

    drive(KdissectApp(load, title="live", isolate=False, live=True), body)
