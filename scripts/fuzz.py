#!/usr/bin/env python3
"""Fuzz kdissect for a while: the decoder with hints and by guessing, the capture reader
through the whole engine, the blob parser, the grammar parser, the TLS record layer and
the segment reader; the filter language, the proxy's framing, TCP reassembly and the
paste reader with time budgets linear in the input's size (tests/fuzz/).

    .venv/bin/python scripts/fuzz.py --minutes 30
    .venv/bin/python scripts/fuzz.py --inputs 1000000 --log fuzz.log
    nice -n 10 .venv/bin/python scripts/fuzz.py --inputs 1000000 &     # in the background

Each round runs every target, weighted toward the cheap, deep decoder target. Stops at
the first failure (an escaped exception, an input taking over a second of CPU, peak RSS
over 1 GiB): the input is saved under tests/fuzz/regressions/, where tests/test_fuzz.py
replays it from then on. Prints the inputs run, the rate and peak RSS as it goes.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz import runner  # noqa: E402

# inputs per round, per target (a round is about 3 s of CPU on the project's machine)
ROUND = {
    "hinted": 4000,
    "blob": 500,
    "grammar": 400,
    "capture": 75,
    "guessed": 25,
    "tls": 400,
    "segment": 100,
}


def _hostile_round() -> dict[str, int]:
    """Issue 22's targets: filters, the proxy's framing, TCP reassembly, pastes."""
    return {"filter": 100, "framing": 400, "tcp": 100, "paste": 50}


ROUND.update(_hostile_round())
ROUND["native"] = 150  # issue 28: the compiled packet path against the Python one
ROUND["logjson"] = 400  # issue 25: kdissect log's compiled record lines, likewise
ROUND["jsonrec"] = 400  # issue 28: JSON lines' compiled record lists, likewise
ROUND["records"] = 400  # issue 37: the Record views against the record loop
ROUND["rectable"] = 400  # issue 43: the records table's compiled batch walker, likewise
ROUND["msgvalues"] = 400  # issue 43: the compiled message values against the readers
ROUND["bodyjson"] = 400  # issue 43: JSON lines' compiled body text against the readers
ROUND["avro"] = 1000  # issue 27: the compiled Avro reader against the Python one
ROUND["parquet"] = 100  # issue 28: the Parquet writer, read back by pyarrow
ROUND["midway"] = 200  # issue 36: connections seen without their start
ROUND["relay"] = 100  # issue 44: the thread forwarder's relay over loopback sockets
# issue 39: log files, bounded JSON, registry answers, schemas, key logs
ROUND.update({"logfile": 1000, "json": 1000, "answer": 500, "schema": 500, "keylog": 1000})
BATCH = 25


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, help="stop after this long")
    ap.add_argument("--inputs", type=int, help="stop after this many inputs")
    ap.add_argument(
        "--targets", default=",".join(ROUND), help=f"comma-separated, from {', '.join(ROUND)}"
    )
    ap.add_argument("--log", help="also append progress lines to this file")
    args = ap.parse_args()
    if args.minutes is None and args.inputs is None:
        ap.error("give --minutes or --inputs")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(ROUND)
    if unknown:
        ap.error(f"unknown targets: {', '.join(sorted(unknown))}")
    log = open(args.log, "a") if args.log else None

    def say(text: str) -> None:
        print(text, flush=True)
        if log:
            log.write(text + "\n")
            log.flush()

    runner.warm_up()
    start = time.monotonic()
    done = {t: 0 for t in targets}
    last = 0.0
    while True:
        for t in targets:
            try:
                done[t] += runner.run(t, max(1, ROUND[t] // BATCH), batch=BATCH)
            except runner.InputFailed as e:
                say(f"FAILED after {sum(done.values())} inputs: {e}")
                return 1
        total, elapsed = sum(done.values()), time.monotonic() - start
        finished = (args.inputs is not None and total >= args.inputs) or (
            args.minutes is not None and elapsed >= args.minutes * 60
        )
        if finished or elapsed - last >= 30:
            last = elapsed
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
            per = ", ".join(f"{t} {n}" for t, n in done.items())
            say(
                f"{elapsed:7.0f} s  {total} inputs  {total / elapsed:.0f}/s  "
                f"peak RSS {rss} MiB  ({per})"
            )
        if finished:
            say(
                f"done: {total} inputs in {elapsed:.0f} s ({total / elapsed:.0f}/s), "
                f"no escaped exception, no input over 1 s of CPU, peak RSS {rss} MiB"
            )
            return 0


if __name__ == "__main__":
    sys.exit(main())
