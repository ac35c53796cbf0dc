#!/usr/bin/env python3
"""TLS: kdissect pcap --keylog against tshark with the same key log on the same TLS
capture, and what decryption costs kdissect against the same Kafka messages in plaintext,
side by side in one run:

    tshark -o tls.keylog_file:KEYS -d tls.port==P,kafka -T fields -e kafka.api_key TLS.pcap
    kdissect pcap --keylog KEYS TLS.pcap                  (one line per exchange)
    kdissect pcap PLAIN.pcap                              (the same messages, no TLS)

The capture is made by --make: kafka-python (OpenSSL through Python's ssl, TLS 1.3
AES-256-GCM) produces and consumes uncompressed records through a TLS terminator in front
of the Tansu broker; tcpdump records both legs, which are split into TLS.pcap (client ↔
terminator) and PLAIN.pcap (terminator ↔ broker: the very same Kafka messages). Each
command runs alternately --runs times; the table gives medians of wall and CPU time and
peak memory (as benchmarks/pcap_vs_tshark.py measures them) and the ratios.

    .venv/bin/python benchmarks/tls_vs_tshark.py --make DIR [--mb 110] [--size 32000]
        [--small-requests] [--mtu 1500]
    .venv/bin/python benchmarks/tls_vs_tshark.py DIR [--runs 3] [--before CHECKOUT]

--mtu records inside a private network namespace whose loopback has that MTU and no
segmentation offloads (root; as scripts/make_captures.py): a TLS record then spans about
eleven 1,448-byte segments, as on a real network, instead of loopback's 64 KB ones.

--before runs CHECKOUT's kdissect too (another worktree with its own .venv, e.g. main):
its --keylog run beside this one's, in the same alternation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pcap_vs_tshark import ENV, measure  # noqa: E402


def make(directory: Path, megabytes: int, size: int, small: bool, mtu: int | None) -> None:
    from tests.support.tls_capture import record_tls

    if mtu:
        from scripts.make_captures import in_namespace, set_mtu

        in_namespace()  # re-runs this script in its own namespace
        set_mtu(mtu)
    messages = megabytes * 1_000_000 // (2 * size)  # produced, then fetched back
    extra = ("--compression", "none")
    if small:  # many small requests: a batch and a fetch of about one record each
        extra += ("--batch-size", str(size + 100), "--fetch-bytes", str(4 * size))
    run = record_tls(directory / "run", messages=messages, size=size, extra=extra)
    for name, port in (("tls.pcap", run.tls_port), ("plain.pcap", run.broker_port)):
        subprocess.run(
            ["tcpdump", "-r", str(run.pcap), "-w", str(directory / name), f"tcp port {port}"],
            check=True,
            capture_output=True,
        )
    (directory / "ports.json").write_text(
        json.dumps({"tls": run.tls_port, "plain": run.broker_port})
    )
    run.pcap.unlink()
    for name in ("tls.pcap", "plain.pcap"):
        print(f"{directory / name}: {(directory / name).stat().st_size / 1e6:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--make", action="store_true", help="record the captures into DIRECTORY")
    ap.add_argument("--mb", type=int, default=110, help="TLS bytes to capture (--make)")
    ap.add_argument("--size", type=int, default=32000, help="record value bytes (--make)")
    ap.add_argument(
        "--small-requests",
        action="store_true",
        help="one record a Produce, a few a Fetch (--make): many Kafka messages",
    )
    ap.add_argument("--mtu", type=int, help="loopback MTU while recording (--make; root)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", help="a checkout with its own .venv to compare with")
    args = ap.parse_args()
    d = Path(args.directory)
    if args.make:
        d.mkdir(parents=True, exist_ok=True)
        make(d, args.mb, args.size, args.small_requests, args.mtu)
        return
    ports = json.loads((d / "ports.json").read_text())
    tls, plain, keys = str(d / "tls.pcap"), str(d / "plain.pcap"), str(d / "run" / "keys.log")
    if not os.path.exists(keys):
        keys = str(d / "keys.log")
    kd = [sys.executable, "-m", "kdissect", "pcap", "--no-tui"]
    subprocess.run(
        kd + [str(ROOT / "captures" / "acks0.pcap")], env=ENV, cwd=ROOT, capture_output=True
    )  # warm-up: bytecode written
    commands = [
        (
            "tshark --keylog (TLS)",
            [
                "tshark",
                "-r",
                tls,
                "-o",
                f"tls.keylog_file:{keys}",
                "-d",
                f"tls.port=={ports['tls']},kafka",
                "-T",
                "fields",
                "-e",
                "kafka.api_key",
            ],
        ),
        ("kdissect --keylog (TLS)", kd + [tls, "--keylog", keys]),
        ("kdissect (plaintext)", kd + [plain, "-p", str(ports["plain"])]),
    ]
    if args.before:
        b = Path(args.before).resolve()
        commands.insert(
            1,
            (
                "before: kdissect --keylog",
                [
                    "env",
                    "-C",
                    str(b),
                    str(b / ".venv/bin/python"),
                    "-m",
                    "kdissect",
                    "pcap",
                    "--no-tui",
                    tls,
                    "--keylog",
                    keys,
                ],
            ),
        )
    load = os.getloadavg()[0]
    results: dict[str, list[tuple[float, float, float]]] = {n: [] for n, _ in commands}
    for _ in range(args.runs):
        for name, cmd in commands:
            results[name].append(measure(cmd))
    med = {
        n: tuple(statistics.median(r[i] for r in rs) for i in range(3)) for n, rs in results.items()
    }
    print(
        f"TLS capture {os.path.getsize(tls) / 1e6:.1f} MB, plaintext {os.path.getsize(plain) / 1e6:.1f} MB; "
        f"medians of {args.runs} alternating runs"
    )
    print(f"{'':28} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}   CPU s of each run")
    for name, (wall, cpu, mib) in med.items():
        each = " ".join(f"{r[1]:.2f}" for r in results[name])
        print(f"{name:28} {wall:8.2f} {cpu:8.2f} {mib:9.0f}   {each}")
    t, k, p = (
        med["tshark --keylog (TLS)"],
        med["kdissect --keylog (TLS)"],
        med["kdissect (plaintext)"],
    )
    print(f"tshark / kdissect on TLS: wall ×{t[0] / k[0]:.2f}, CPU ×{t[1] / k[1]:.2f} (goal: ≥ 3)")
    print(
        f"decryption cost: kdissect TLS / plaintext: wall ×{k[0] / p[0]:.2f}, "
        f"CPU ×{k[1] / p[1]:.2f} (goal: ≤ 1.5)"
    )
    if args.before:
        b = med["before: kdissect --keylog"]
        print(f"kdissect --keylog before / now: wall ×{b[0] / k[0]:.2f}, CPU ×{b[1] / k[1]:.2f}")
    print(
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (the "
        f"machine is shared: wall "
        f"time depends on the others' load, CPU time much less)"
    )


if __name__ == "__main__":
    main()
