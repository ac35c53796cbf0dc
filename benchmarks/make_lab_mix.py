#!/usr/bin/env python3
"""The lab mix of issue 43 ("two MTU-1500 captures replayed as 20 hosts"): the bulk
capture of librdkafka (every codec) and the same traffic from kafka-python, each made
by make_bulk_capture.py at MTU 1500, each copied ten times onto hosts of their own
(tests/support/replicate.py: copy k's addresses in subnet k, kafka-python's copies
numbered after librdkafka's; each input keeps its own start), merged by time (mergecap,
Wireshark's). As root (make_bulk_capture.py needs a network namespace):

    .venv/bin/python benchmarks/make_lab_mix.py /tmp/lab [--mb 12] [--copies 10]
    .venv/bin/python benchmarks/pcap_vs_tshark.py /tmp/lab/lab.pcap --paths compiled \\
        --jobs 1 --only summary --only jsonl --baseline DIR

--mb 12 gives 10 + 6 MB inputs and a 157 MiB mix (3,550 exchanges).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.replicate import replicate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--mb", type=int, default=12, help="each input's target size")
    ap.add_argument("--copies", type=int, default=10, help="hosts per input")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    parts = []
    for k, (name, flags) in enumerate((("librdkafka", []), ("kafka-python", ["--kafka-python"]))):
        source = args.dir / f"{name}.pcap"
        if not source.exists():
            subprocess.run(
                [sys.executable, str(ROOT / "benchmarks" / "make_bulk_capture.py"), str(source)]
                + ["--mb", str(args.mb), *flags],
                check=True,
            )
        copies = args.dir / f"{name}-x{args.copies}.pcap"
        with open(copies, "wb") as out:
            replicate(source.read_bytes(), args.copies, out, first=k * args.copies)
        parts.append(copies)
    mix = args.dir / "lab.pcap"
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(mix), *map(str, parts)], check=True)
    print(f"{mix}: {mix.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
