#!/usr/bin/env python3
"""What the display channel's copies cost, alone: the forwarder's end (``FeedWriter`` on
uvloop, writing each answer into the pipe) and the display's (``read_records``, reading
it into a buffer of its own), in two processes as in `kdissect proxy`, without framing,
pairing or decoding. CPU milliseconds per MB on each side: the most that a channel
without copies (shared memory, vmsplice) could save per MB the display takes.

    .venv/bin/python benchmarks/proxy_channel_copies.py [--answers 200] [--size 3145728]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kdissect.proxy import feed  # noqa: E402
from kdissect.proxy.process import keep_freed_memory  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=200)
    ap.add_argument("--size", type=int, default=3 << 20, help="bytes per answer")
    args = ap.parse_args()
    total = args.answers * args.size / 1e6
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the display's end
        os.close(w)
        keep_freed_memory()
        cpu = time.process_time()
        for _record in feed.read_records(r):
            pass
        ms = (time.process_time() - cpu) * 1e3
        print(f"display (read):    {ms:.0f} ms for {total:.0f} MB, {ms / total:.3f} ms/MB")
        os._exit(0)
    os.close(r)
    keep_freed_memory()
    answer = bytearray(os.urandom(args.size))

    async def forward() -> None:
        writer = feed.FeedWriter(w, 1 << 40)
        await writer.start()
        cpu = time.process_time()
        for _ in range(args.answers):
            writer.frame(1, 1, 0.0, 0, answer)
            await asyncio.sleep(0)
            while writer.buffered > 8 << 20:
                await asyncio.sleep(0.001)
        await writer.aclose()
        ms = (time.process_time() - cpu) * 1e3
        print(f"forwarder (write): {ms:.0f} ms for {total:.0f} MB, {ms / total:.3f} ms/MB")

    try:
        import uvloop

        uvloop.run(forward())
    except ImportError:
        asyncio.run(forward())
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
