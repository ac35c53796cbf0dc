"""The display's process (proxy/display.py) keeps the memory it frees, as the forwarder
does: each answer it reads is copied a few times on its way to the decoder, and with
glibc's defaults every copy of a large answer got pages of its own from the kernel,
faulted in anew (measured: 2.5 ms per MB, 0.12 ms from memory kept; the display's CPU
per 1.4 MB Fetch answer halved, benchmarks/proxy_display_cost.py). Checked in a
process of its own, by glibc's own count of memory it maps for single blocks."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

_CHILD = r"""
import ctypes, os, struct, sys, time
from kdissect.proxy import feed
from kdissect.proxy.display import FeedDisplay
from kdissect.stream.sink import CallbackSink

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info

def mapped_for(size):
    before = libc.mallinfo2().hblkhd
    block = bytearray(size)
    after = libc.mallinfo2().hblkhd
    del block
    return after - before

shown = -1
if sys.argv[1] == "display":
    # one Fetch exchange with a 2 MiB answer through the display channel
    r, w = os.pipe()
    request = struct.pack(">hhih", 1, 4, 7, 2) + b"fc"
    answer = struct.pack(">i", 7) + os.urandom(2 << 20)
    opened = b'[["127.0.0.1", 50000], ["127.0.0.1", 9092]]'
    if os.fork() == 0:
        os.close(r)
        with os.fdopen(w, "wb") as f:
            f.write(feed.HEADER.pack(feed.OPEN, 1, 0, 0.0, 0, len(opened)) + opened)
            for side, m in ((0, request), (1, answer)):
                f.write(feed.HEADER.pack(feed.FRAME, 1, side, time.time(), 4, len(m)) + m)
        os._exit(0)
    os.close(w)
    got = []
    display = FeedDisplay(CallbackSink(got.append), lag=0)
    display.run(r)
    os.wait()
    (exchange,) = got
    response = exchange.messages[1]
    # the answer read straight into a buffer of its own reaches the engine whole, as bytes
    assert type(response.data) is bytes and response.data == answer, "answer altered"
    assert response.offset == 4 and response.correlation_id == 7
    shown = display.shown
print(shown, mapped_for(4 << 20))
"""


def _run(mode: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    shown, mapped = done.stdout.split()
    return int(shown), int(mapped)


def test_the_display_keeps_freed_memory_for_the_copies_of_each_answer():
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("needs glibc 2.33+ (mallinfo2) to see how memory is taken")
    _, mapped = _run("plain")
    assert mapped >= 4 << 20, "glibc's defaults map a 4 MiB block of its own (the contrast)"
    shown, mapped = _run("display")
    assert shown == 1, "the display read and showed the exchange, its answer byte-exact"
    assert mapped == 0, "after the display ran, a 4 MiB block comes from memory kept"


def test_a_display_stopped_behind_the_traffic_still_says_the_notes_queued_after_it(tmp_path):
    """Stopped with exchanges still queued, the display passes them over undecoded but
    says the notes among them (an operator's hint queued behind a burst was lost)."""
    import os
    import struct
    import time

    from kdissect.proxy import feed
    from kdissect.proxy.display import FeedDisplay
    from kdissect.stream.sink import CallbackSink

    r, w = os.pipe()
    opened = b'[["127.0.0.1", 50000], ["127.0.0.1", 9092]]'
    request = struct.pack(">hhih", 18, 3, 1, 2) + b"cl"
    records = [feed.HEADER.pack(feed.OPEN, 1, 0, 0.0, 0, len(opened)) + opened]
    records += [feed.HEADER.pack(feed.FRAME, 1, 0, time.time(), 4, len(request)) + request] * 50
    note = b"a plaintext client on a TLS listener: ..."
    records.append(feed.HEADER.pack(feed.NOTE, 0, 0, 0.0, 0, len(note)) + note)
    os.write(w, b"".join(records))
    os.close(w)
    said: list[str] = []
    display = FeedDisplay(CallbackSink(lambda ex: None, lambda text, level: said.append(text)))
    display.stop(grace=0)
    display.run(r)
    assert display.shown == 0
    assert note.decode() in said
    assert said[-1].startswith("display: 0 requests shown")
    assert f"{50 * (4 + len(request))} bytes of traffic passed over undecoded" in said[-1]


@pytest.mark.alone  # (a bound on wall time, though a loose one)
def test_a_stopped_display_passes_over_what_is_queued_for_a_moment_only():
    """Traffic still coming after a stop (up to three times the budget can be queued) is
    passed over for ``DRAIN`` seconds, not until the channel is empty: the CLI gives up
    on a display 0.2 s after its grace, and what it says then is not the summary."""
    import os
    import struct
    import threading
    import time

    from kdissect.proxy import feed
    from kdissect.proxy.display import DRAIN, FeedDisplay
    from kdissect.stream.sink import CallbackSink

    r, w = os.pipe()
    opened = b'[["127.0.0.1", 50000], ["127.0.0.1", 9092]]'
    request = struct.pack(">hhih", 18, 3, 1, 2) + b"cl" + bytes(4000)
    frame = feed.HEADER.pack(feed.FRAME, 1, 0, time.time(), 4, len(request)) + request
    writing = threading.Event()

    def write_for_3_s() -> None:
        os.write(w, feed.HEADER.pack(feed.OPEN, 1, 0, 0.0, 0, len(opened)) + opened)
        writing.set()
        end = time.monotonic() + 3
        try:
            while time.monotonic() < end:
                os.write(w, frame * 16)
        except BrokenPipeError:  # (the display has ended)
            pass
        os.close(w)

    writer = threading.Thread(target=write_for_3_s)
    writer.start()
    writing.wait()
    said: list[str] = []
    display = FeedDisplay(CallbackSink(lambda ex: None, lambda text, level: said.append(text)))
    display.stop(grace=0)
    started = time.monotonic()
    display.run(r)
    took = time.monotonic() - started
    writer.join()
    assert took < DRAIN + 1.0, took
    assert "bytes of traffic passed over undecoded" in said[-1]
