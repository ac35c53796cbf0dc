#!/usr/bin/env python3
"""The display's CPU per MB of real traffic: a recording the proxy made (`kdissect proxy
-w FILE.pcapng`, e.g. during a Java produce and consume) is put on the display channel
the way the forwarder puts it there (each message a FRAME record, in the recording's
order), and the display of this checkout (and of --compare DIR's, in the same rounds, the
order rotating) reads it through the engine into --format's output (to /dev/null).
Reported: the display process's CPU seconds per MB of traffic (user + system, its own
rusage; the writer is another process), and per message.

    .venv/bin/python benchmarks/proxy_display_replay.py FILE.pcapng [--format text]
        [--rounds 5] [--compare DIR] [--channel-only]

`--channel-only`: framing and pairing only (no enrichment, no output): the channel's and
the connection core's part of it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def messages(path: str) -> list[tuple[int, int, float, int, bytes]]:
    """(connection, side, time, offset after the size, message without its size) in the
    recording's order; side 0: the client's (the side that sent the SYN)."""
    from kdissect.capture.packet import SYN, tcp_segment
    from kdissect.capture.pcapfile import CaptureReader

    conns: dict[tuple, int] = {}
    streams: dict[tuple[int, int], bytearray] = {}
    taken: dict[tuple[int, int], int] = {}  # bytes of the stream framed so far
    out = []
    with CaptureReader(path) as r:
        for p in r.packets():
            seg = tcp_segment(p.linktype, p.data, p.orig_len)
            if seg is None:
                continue
            a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
            if seg.flags & SYN and not seg.flags & 0x10:
                conns[(a, b)] = len(conns) + 1
            if (a, b) in conns:
                key = (conns[(a, b)], 0)
            elif (b, a) in conns:
                key = (conns[(b, a)], 1)
            else:
                continue
            if not seg.payload:
                continue
            buf = streams.setdefault(key, bytearray())
            buf += seg.payload
            while len(buf) >= 4:
                size = struct.unpack_from(">i", buf)[0]
                if len(buf) < 4 + size:
                    break
                at = taken.get(key, 0) + 4
                out.append((key[0], key[1], p.ts, at, bytes(buf[4 : 4 + size])))
                taken[key] = at + size
                del buf[: 4 + size]
    return out


def display(path: str, fmt: str, channel_only: bool) -> None:
    """(Child process, this checkout on sys.path) the channel, a writer process, the
    display; prints its CPU seconds, the bytes and the messages it was given."""
    from kdissect.protocol.context import Options
    from kdissect.proxy import feed
    from kdissect.proxy.display import FeedDisplay
    from kdissect.render.printer import ExchangePrinter
    from kdissect.stream.engine import Engine

    found = messages(path)
    total = sum(len(m[4]) for m in found)
    r, w = os.pipe()
    if os.fork() == 0:  # the writer: as the forwarder's FeedWriter lays records out
        os.close(r)
        head = feed.HEADER
        with os.fdopen(w, "wb") as f:
            for conn in sorted({m[0] for m in found}):
                opened = b'[["127.0.0.1", %d], ["127.0.0.1", 9092]]' % (40000 + conn)
                f.write(head.pack(feed.OPEN, conn, 0, 0.0, 0, len(opened)) + opened)
            for conn, side, ts, at, payload in found:
                f.write(head.pack(feed.FRAME, conn, side, ts, at, len(payload)))
                f.write(payload)
        os._exit(0)
    os.close(w)
    options = Options()
    printer = ExchangePrinter(options, fmt)
    before = resource.getrusage(resource.RUSAGE_SELF)
    if channel_only:
        FeedDisplay(lag=0).run(r)
    else:
        Engine(FeedDisplay(lag=0, fd=r), printer, options, full=printer.full).run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    sys.stdout.flush()
    os.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(cpu, total, len(found), file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("--format", default="text", help="text (the default display) or jsonl")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", type=Path, help="another checkout's display ('old')")
    ap.add_argument("--channel-only", action="store_true")
    ap.add_argument("--display", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.display:
        display(args.capture, args.format, args.channel_only)
        return
    arms = {"new": ROOT}
    if args.compare is not None:
        arms["old"] = args.compare.resolve()
    names = list(arms)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    size = count = 0
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load before: {load} on {os.cpu_count()} cores", flush=True)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            root = arms[name]
            done = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    os.path.abspath(args.capture),
                    "--display",
                    "--format",
                    args.format,
                    *(["--channel-only"] if args.channel_only else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=root,
                env={**os.environ, "PYTHONPATH": str(root)},
                check=True,
            )
            seconds, total, n = done.stderr.strip().splitlines()[-1].split()
            cpu[name].append(float(seconds))
            size, count = int(total), int(n)
        print(
            f"round {r + 1}: "
            + ", ".join(f"{n} {cpu[n][-1] / size * 1e9:.2f} ms/MB" for n in names)
            + f"; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
            flush=True,
        )
    print(f"\n{size / 1e6:.1f} MB in {count:,} messages per run, {args.rounds} rounds")
    for n in names:
        values = sorted(cpu[n])
        med = statistics.median(values)
        print(
            f"  {n}: display CPU {med / size * 1e9:.2f} ms per MB "
            f"({values[0] / size * 1e9:.2f}–{values[-1] / size * 1e9:.2f}), "
            f"{med / count * 1e6:.1f} µs per message"
        )


if __name__ == "__main__":
    main()
