"""The display's channel (proxy/feed.py): how it is read, and how shedding is said."""

from __future__ import annotations

import asyncio
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


def _written(steps) -> list[tuple[int, int]]:
    """(kind, offset) of every record a FeedWriter puts on a pipe for ``steps``: "frame"
    (a message shown) or "shed" (an exchange left out)."""
    r, w = os.pipe()

    async def write() -> None:
        writer = feed.FeedWriter(w, budget=1 << 20)
        await writer.start()
        for step in steps:
            if step == "frame":
                writer.frame(1, 0, 0.0, 0, b"x" * 10)
            else:
                writer.shed()
            await asyncio.sleep(0)
        await writer.aclose()

    asyncio.run(write())
    return [(kind, offset) for kind, _, _, _, offset, _ in feed.read_records(r)]


def test_shedding_is_said_when_it_begins_not_only_before_the_next_message_shown():
    """A display far behind may be given up on before another message is shown: the
    first exchange left out is said at once, the rest before the next message shown."""
    records = _written(["frame", "shed", "shed", "shed", "frame", "shed"])
    assert records == [
        (feed.FRAME, 0),
        (feed.DROPPED, 1),  # at once
        (feed.DROPPED, 2),  # the two after it, before the next frame
        (feed.FRAME, 0),
        (feed.DROPPED, 1),
    ]


def test_a_long_shedding_adds_no_record_per_exchange():
    """The channel stays bounded while nothing is shown: one record, however many are shed."""
    records = _written(["shed"] * 10_000)
    assert records == [(feed.DROPPED, 1)]
