#!/usr/bin/env python3
"""Message-dense real traffic (issue 43): a capture of a real 3-node KRaft cluster
(captures/kafka-kraft-cluster.pcap: replication and metadata Fetches, heartbeats,
ApiVersions, Vote...) copied COPIES times (benchmarks/replicate_capture.py; 40 copies:
9.5 MB, 15,680 exchanges, ~600 bytes a message), then, alternating, --runs times:

    kdissect pcap (summary)      vs  tshark -T fields -e kafka.api_key
    kdissect pcap --stats        vs  tshark -T fields -e kafka.api_key
    kdissect pcap --format jsonl vs  tshark -T json            (-j 1: one process)
    kdissect pcap --format parquet [--records-output]   (no peer: against --baseline)

tshark is told each Kafka port of the capture (-d tcp.port==P,kafka for every server
port kdissect's summary names). Prints medians of CPU time (user + system, children
included: what counts on a loaded machine) and wall time, per exchange too, and the
ratios (peer / kdissect: above 1, kdissect is cheaper). --baseline DIR also runs the
kdissect source tree in DIR (e.g. a `git worktree add /tmp/base main` with the compiled
extension copied in), alternating with the others: before/after in the same run.

    .venv/bin/python benchmarks/message_dense.py [--copies 40] [--runs 3] [--no-peer]
        [--only summary|stats|jsonl]... [--baseline DIR] [--keep PATH]
        [--capture PCAP [--keylog KEYS]]

--capture runs on another capture instead: issue 43's ≥ 50 MB ones come from
benchmarks/make_dense_captures.py (a 3-node Kafka 4.4 cluster's one-record acks=all
traffic, and a TLS small-produce one with its key log, --keylog: given to kdissect and
to tshark, -o tls.keylog_file).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from pcap_vs_tshark import ENV, measure  # noqa: E402  (one way of measuring a run)

SOURCE = ROOT / "captures" / "kafka-kraft-cluster.pcap"


def kafka_ports(out: str) -> list[int]:
    """The server ports of the capture's exchanges, as kdissect's summary gives them."""
    return sorted({int(m) for m in re.findall(r"→ \S+:(\d+) ", out)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--only", choices=["summary", "stats", "jsonl", "parquet", "records"], action="append"
    )
    ap.add_argument("--no-peer", action="store_true", help="kdissect alone")
    ap.add_argument("--baseline", metavar="DIR", help="also run the kdissect tree in DIR")
    ap.add_argument("--keep", metavar="PATH", help="write the capture here and keep it")
    ap.add_argument("--capture", metavar="PCAP", help="this capture instead of copies")
    ap.add_argument("--keylog", metavar="KEYS", help="TLS session keys of --capture")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    cap = (
        os.path.abspath(args.capture)
        if args.capture
        else args.keep or os.path.join(tmp.name, f"kraft{args.copies}.pcap")
    )
    if not os.path.exists(cap):
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "replicate_capture.py"),
                str(SOURCE),
                cap,
                "--copies",
                str(args.copies),
            ],
            check=True,
            capture_output=True,
        )
    kdissect = [sys.executable, "-m", "kdissect", "pcap"]
    if args.keylog:
        kdissect += ["--keylog", os.path.abspath(args.keylog)]
    summary = subprocess.run(
        kdissect + ["--no-tui", cap], capture_output=True, text=True, env=ENV, check=True
    ).stdout  # also the warm-up
    exchanges = summary.count("\n")
    ports = kafka_ports(summary)
    tshark = ["tshark", "-r", cap] + (
        ["-o", f"tls.keylog_file:{os.path.abspath(args.keylog)}"] if args.keylog else []
    )
    for p in ports:  # (over TLS: Kafka inside the decrypted records)
        tshark += ["-d", f"tls.port=={p},kafka" if args.keylog else f"tcp.port=={p},kafka"]
    fields = tshark + ["-T", "fields", "-e", "kafka.api_key"]
    table, recs = (os.path.join(tmp.name, n) for n in ("exchanges.parquet", "records.parquet"))
    ours = kdissect + [cap]
    rows = [
        ("summary", fields, ours + ["--no-tui"]),
        ("stats", fields, ours + ["--no-tui", "--stats"]),
        ("jsonl", tshark + ["-T", "json"], ours + ["--format", "jsonl", "-j", "1"]),
        # no peer writes these tables: kdissect against its baseline only
        ("parquet", None, ours + ["--format", "parquet", "-o", table]),
        ("records", None, ours + ["--format", "parquet", "-o", table, "--records-output", recs]),
    ]
    rows = [r for r in rows if not args.only or r[0] in args.only]
    what = os.path.basename(cap) if args.capture else f"{args.copies} copies of {SOURCE.name}"
    print(
        f"capture: {what}, "
        f"{os.path.getsize(cap) / 1e6:.1f} MB, {exchanges} exchanges, Kafka ports {ports}; "
        f"{args.runs} alternating runs, medians; load at start {os.getloadavg()[0]:.1f}\n"
    )
    print(f"{'run':34} {'CPU s':>7} {'µs/ex':>7} {'wall s':>7} {'CPU ×':>6}   CPU of each run")
    for label, peer_cmd, cmd in rows:
        variants = (
            ([] if args.no_peer or peer_cmd is None else [("tshark", peer_cmd)])
            + [("kdissect", cmd)]
            + ([("kdissect baseline", cmd)] if args.baseline else [])
        )
        got: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for name, c in variants:
                base = args.baseline if name.endswith("baseline") else None
                wall, cpu, _pss, _rss = measure(c, "", base)
                got.setdefault(name, []).append((wall, cpu))
        peer = statistics.median(r[1] for r in got["tshark"]) if "tshark" in got else None
        for name, _c in variants:
            cpu = statistics.median(r[1] for r in got[name])
            wall = statistics.median(r[0] for r in got[name])
            ratio = f"{peer / cpu:6.2f}" if peer is not None and name != "tshark" else f"{'':6}"
            print(
                f"{label + ': ' + name:34} {cpu:7.2f} {cpu / exchanges * 1e6:7.0f} "
                f"{wall:7.1f} {ratio}   {'/'.join(f'{r[1]:.2f}' for r in got[name])}",
                flush=True,
            )
    print(f"\nload at the end {os.getloadavg()[0]:.1f}; ×: tshark CPU / kdissect CPU")


if __name__ == "__main__":
    main()
