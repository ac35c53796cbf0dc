"""The display's end of the channel (proxy/feed.py): how it reads."""

from __future__ import annotations

import os
import threading
import time

from kdissect.proxy import feed


def _records(n: int) -> tuple[list[tuple], bytes]:
    records = [(feed.FRAME, 1, i % 2, float(i), i, bytes([i]) * (100 << 10)) for i in range(n)]
    wire = b"".join(feed.HEADER.pack(k, c, s, t, o, len(p)) + p for k, c, s, t, o, p in records)
    return records, wire


def test_a_channel_with_bytes_waiting_is_read_without_a_select_per_read(monkeypatch):
    """Each read of a busy channel was one select() and one read(): the read alone says
    whether the channel is empty (it is non-blocking), so a select is made only to wait
    for the forwarder, and only then are ``waiting`` and ``working`` told."""
    records, wire = _records(8)
    selects = []
    real = feed.select.select
    monkeypatch.setattr(
        feed.select, "select", lambda *a: selects.append(a) or real(*a), raising=True
    )
    read_fd, write_fd = os.pipe()
    told: list[str] = []

    def forwarder() -> None:
        for at in range(0, len(wire), 64 << 10):
            os.write(write_fd, wire[at : at + (64 << 10)])
        time.sleep(0.05)  # the display waits for the end
        os.close(write_fd)

    t = threading.Thread(target=forwarder)
    t.start()
    got = list(
        feed.read_records(read_fd, lambda: told.append("waiting"), lambda: told.append("working"))
    )
    t.join()
    assert got == records
    # 800 KiB came in reads of 64 KiB at most (the pipe's default size): a select only
    # while the channel was empty, each with its waiting() and working()
    assert len(selects) <= told.count("waiting") + 2
    assert told.count("waiting") == told.count("working") or told[-1] == "waiting"
