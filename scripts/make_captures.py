#!/usr/bin/env python3
"""Record captures/*.pcap: the Tansu broker on 127.0.0.1:9092 and real clients, captured
with tcpdump inside a private network namespace (so port 9092 is free and nothing else
is on the wire). Needs root (unshare, ip, ethtool, tcpdump) and the [test] extra.

    sudo .venv/bin/python scripts/make_captures.py [NAME ...]
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.broker import tansu_binary  # noqa: E402
from tests.support.scenarios import SASL_PASSWORD, SASL_USER, SCENARIOS  # noqa: E402

PORT = 9092


def in_namespace() -> None:
    if os.environ.get("KDISSECT_NETNS") == "1":
        return
    env = {**os.environ, "KDISSECT_NETNS": "1"}
    script = os.path.abspath(sys.argv[0])  # whichever script called us
    os.execvpe("unshare", ["unshare", "-n", "--", sys.executable, script, *sys.argv[1:]], env)


def set_mtu(mtu: int | None) -> None:
    subprocess.run(["ip", "link", "set", "lo", "mtu", str(mtu or 65536), "up"], check=True)
    # segmentation offloads would hand tcpdump 64 KB super-segments whatever the MTU
    state = "off" if mtu else "on"
    subprocess.run(
        ["ethtool", "-K", "lo", "tso", state, "gso", state, "gro", state],
        check=False,
        capture_output=True,
    )


def record(name: str, session=None, mtu: int | None = None, out: Path | None = None) -> None:
    """Capture ``session`` (by default the named scenario) into ``out``."""
    auth = False
    if session is None:
        session, mtu, _about, *flags = SCENARIOS[name]
        auth = bool(flags and flags[0])
    set_mtu(mtu)
    out = out or ROOT / "captures" / f"{name}.pcap"
    broker = subprocess.Popen(
        [
            tansu_binary(),
            "broker",
            "--cluster-id",
            "kdissect",
            "--listener-url",
            f"tcp://127.0.0.1:{PORT}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{PORT}",
            "--storage-engine",
            "memory://tansu/",
            *(["--authentication"] if auth else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RUST_LOG": "warn"},
    )
    deadline = time.monotonic() + 10
    if auth:
        time.sleep(1.0)  # a bare probe connection upsets an authenticating Tansu
    while not auth:
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("the Tansu broker did not start") from None
            time.sleep(0.05)
    if auth:
        # the broker accepts connections a moment before it serves them: retry
        for _attempt in range(5):
            made = subprocess.run(
                [
                    tansu_binary(),
                    "user",
                    "create",
                    "--broker",
                    f"tcp://127.0.0.1:{PORT}",
                    SASL_USER,
                    SASL_PASSWORD,
                ],
                capture_output=True,
                timeout=30,
            )
            if made.returncode == 0:
                break
            time.sleep(0.5)
        else:
            # seen here: this Tansu build authenticates SCRAM clients without it anyway
            print(
                f"warning: could not create the SASL user ({made.stderr.decode().strip()}); "
                f"going on",
                flush=True,
            )
    # --immediate-mode: else libpcap buffers packets and a stop loses the last ones
    dump = subprocess.Popen(
        [
            "tcpdump",
            "-i",
            "lo",
            "-s",
            "0",
            "-U",
            "--immediate-mode",
            "-n",
            "-B",
            "262144",  # KiB: bursts must not overflow it
            "-w",
            str(out),
            f"tcp port {PORT}",
        ],
        stderr=subprocess.PIPE,
    )
    try:
        dump.stderr.readline()  # "listening on lo ..." once it captures
        time.sleep(0.3)
        session(f"127.0.0.1:{PORT}")
        time.sleep(1.0)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(10)
        report = dump.stderr.read().decode()
        captured = re.search(r"(\d+) packets? captured", report)
        received = re.search(r"(\d+) packets? received by filter", report)
        # the loopback shows the filter each packet twice (out and in); libpcap keeps one
        if not captured or not received or int(captured[1]) * 2 < int(received[1]):
            raise SystemExit(f"{name}: tcpdump did not keep every packet: {report.strip()}")
        broker.terminate()
        broker.wait(10)
    print(f"{out}: {out.stat().st_size} bytes", flush=True)


def main() -> None:
    in_namespace()
    names = sys.argv[1:] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown capture(s) {unknown}; choose from {list(SCENARIOS)}")
    for name in names:
        record(name)


if __name__ == "__main__":
    main()
