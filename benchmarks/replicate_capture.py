#!/usr/bin/env python3
"""A bigger capture from a real one: COPIES copies one after another, each copy's IPv4
addresses moved to their own subnet and its times shifted past the previous copy's end,
so every copy's connections are new ones (tests/support/replicate.py). Makes the 1.5 GB
capture of benchmarks/pcap_vs_tshark.py from make_bulk_capture.py's 150 MB:

    python benchmarks/replicate_capture.py IN.pcap OUT.pcap --copies 10

Ethernet/IPv4 classic pcap only (what make_bulk_capture.py writes); checksums are left
as they are (neither kdissect nor tshark checks them by default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.replicate import replicate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--copies", type=int, default=10)
    args = ap.parse_args()
    data = open(args.input, "rb").read()
    with open(args.output, "wb") as out:
        replicate(data, args.copies, out)


if __name__ == "__main__":
    main()
