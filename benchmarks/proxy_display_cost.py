#!/usr/bin/env python3
"""The display's CPU per large answer, as `kdissect proxy --no-tui --format jsonl` pays it
in a Java consume: a writer process puts --answers Fetch exchanges (a request, then an
answer of real v2 record batches, --size bytes, 1 KiB records as Kafka's perf tools
write) on the display channel the way the forwarder does; the display of this checkout
(and of --compare DIR's, in the same rounds, the order rotating) reads them through the
engine into JSON lines (to /dev/null). Reported: the display process's CPU seconds per
answer (user + system, its own rusage; the writer is another process).

    .venv/bin/python benchmarks/proxy_display_cost.py [--answers 200] [--size 1400000]
        [--rounds 5] [--compare DIR] [--channel-only]

No broker, client or forwarder shares the cores: CPU time per answer moves little with
the machine's load (wall time would).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy_large_answers import fetch_answer, fetch_request  # noqa: E402


def _records(size: int) -> bytes:
    """v2 record batches of 1 KiB uppercase values (kafka-python builds them, CRC and
    all), about ``size`` bytes."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out, offset = bytearray(), 0
    now = int(time.time() * 1000)
    while len(out) < size:
        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=64 << 10,
        )
        for i in range(60):
            value = bytes(65 + (offset + i + j) % 26 for j in range(1024))
            b.append(i, timestamp=now + i, key=None, value=value, headers=[])
        batch = bytearray(b.build())
        struct.pack_into(">q", batch, 0, offset)  # base offsets in order
        offset += 60
        out += batch
    return bytes(out)


def display(answers: int, size: int, channel_only: bool = False, fmt: str = "jsonl") -> None:
    """(Child process, this checkout on sys.path) the channel, a writer process, the
    display; prints its CPU seconds."""
    from kdissect.protocol.context import Options
    from kdissect.proxy import feed
    from kdissect.proxy.display import FeedDisplay
    from kdissect.render.printer import ExchangePrinter
    from kdissect.stream.engine import Engine

    records = _records(size)
    r, w = os.pipe()
    if os.fork() == 0:  # the writer: as the forwarder's FeedWriter lays records out
        os.close(r)
        head = feed.HEADER
        opened = b'[["127.0.0.1", 50000], ["127.0.0.1", 9092]]'
        out = [head.pack(feed.OPEN, 1, 0, 0.0, 0, len(opened)), opened]
        offsets = [0, 0]
        with os.fdopen(w, "wb") as f:
            f.write(b"".join(out))
            for i in range(answers):
                for side, message in ((0, fetch_request(i + 1)), (1, fetch_answer(i + 1, records))):
                    offsets[side] += len(message)
                    payload = message[4:]
                    at = offsets[side] - len(payload)
                    f.write(head.pack(feed.FRAME, 1, side, time.time(), at, len(payload)))
                    f.write(payload)
        os._exit(0)
    os.close(w)
    try:  # (a checkout where the options carried the run's topic names)
        options = Options(topic_ids={})  # type: ignore[call-arg]
    except TypeError:
        options = Options()
    printer = ExchangePrinter(options, fmt)
    before = resource.getrusage(resource.RUSAGE_SELF)
    if channel_only:  # framing and pairing, no enrichment or printer
        FeedDisplay(lag=0).run(r)
    else:
        Engine(FeedDisplay(lag=0, fd=r), printer, options, full=printer.full).run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    sys.stdout.flush()
    os.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(cpu, file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", type=int, default=200)
    ap.add_argument("--size", type=int, default=1_400_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", type=Path, help="another checkout's display ('old')")
    ap.add_argument(
        "--channel-only",
        action="store_true",
        help="only the channel, framing and pairing (no enrichment, no JSON lines)",
    )
    ap.add_argument(
        "--format",
        default="jsonl",
        help="the display's output: jsonl (every record, the benchmark's default) or text "
        "(one summary line per message: the proxy's default when piped, and what the TUI "
        "decodes)",
    )
    ap.add_argument("--display", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.display:
        display(args.answers, args.size, args.channel_only, args.format)
        return
    arms = {"new": ROOT}
    if args.compare is not None:
        arms["old"] = args.compare.resolve()
    names = list(arms)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load before: {load} on {os.cpu_count()} cores", flush=True)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            root = arms[name]
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--display",
                    "--answers",
                    str(args.answers),
                    "--size",
                    str(args.size),
                    *(["--channel-only"] if args.channel_only else []),
                    "--format",
                    args.format,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=root,
                env={**os.environ, "PYTHONPATH": str(root)},
                check=True,
            )
            cpu[name].append(float(done.stderr.strip().splitlines()[-1]))
        print(
            f"round {r + 1}: "
            + ", ".join(f"{n} {cpu[n][-1] / args.answers * 1e3:.2f} ms" for n in names)
            + f"; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
            flush=True,
        )
    print(f"\n{args.answers} Fetch answers of {args.size:,} B per run, {args.rounds} rounds")
    for n in names:
        values = sorted(c / args.answers * 1e3 for c in cpu[n])
        print(
            f"  {n}: display CPU {statistics.median(values):.2f} ms per answer "
            f"({values[0]:.2f}–{values[-1]:.2f})"
        )


if __name__ == "__main__":
    main()
