"""tcpdump on the loopback interface for a set of TCP ports, stopped by PID; checks that
libpcap kept every packet it saw."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path


# receptions the stop itself may leave unread: 8 (4 packets) was too few beside a Java
# client still polling on a loaded machine (616 received, 303 captured: 10 at the stop);
# a packet lost before the stop leaves a hole that the tests' decoding reports anyway
IN_FLIGHT_AT_STOP = 24


class Tcpdump:
    def __init__(self, path: Path, ports: list[int]):
        self.path = Path(path)
        expr = " or ".join(f"tcp port {p}" for p in sorted(set(ports)))
        # --immediate-mode: else libpcap buffers packets and a stop loses the last ones
        self.proc = subprocess.Popen(
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
                "262144",
                "-w",
                str(self.path),
                expr,
            ],
            stderr=subprocess.PIPE,
        )
        self.proc.stderr.readline()  # "listening on lo ..." once it captures
        time.sleep(0.3)

    def stop(self) -> Path:
        if self.proc.poll() is not None:
            return self.path  # stopped already
        self._drained()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)
        report = self.proc.stderr.read().decode()
        captured = re.search(r"(\d+) packets? captured", report)
        received = re.search(r"(\d+) packets? received by filter", report)
        dropped = re.search(r"(\d+) packets? dropped by kernel", report)
        if dropped and int(dropped[1]):
            raise RuntimeError(
                f"tcpdump lost packets (the capture, not the decoder): {report.strip()}"
            )
        # the loopback shows the filter each packet twice (out and in); libpcap keeps one.
        # A few that reach the filter while tcpdump stops (a client still polling) are
        # counted as received but never read: that is the stop, not a lost packet
        if (
            not captured
            or not received
            or int(captured[1]) * 2 + IN_FLIGHT_AT_STOP < int(received[1])
        ):
            raise RuntimeError(f"tcpdump did not keep every packet: {report.strip()}")
        return self.path

    def _drained(self, least: float = 0.5, most: float = 5.0) -> None:
        """Wait for the last segments and their ACKs, and for tcpdump to have written what
        it received: SIGINT leaves the packets still in its ring unread, and on a loaded
        machine tcpdump lags (a CI run: 498 received, 194 written at the stop). Until the
        file has not grown for 0.3 s (a client still polling keeps it growing: ``most``)."""
        start = time.monotonic()
        size, still = -1, 0
        while time.monotonic() - start < most:
            time.sleep(0.1)
            now = self.path.stat().st_size if self.path.exists() else 0
            still = still + 1 if now == size else 0
            size = now
            if still >= 3 and time.monotonic() - start >= least:
                return

    def __enter__(self) -> Tcpdump:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.stop()


def wait_sniffing(pid: int, timeout: float = 60, every_interface: bool = False) -> None:
    """Until process ``pid`` (e.g. `kdissect live -i lo`) has a packet socket bound to an
    interface and running (/proc/net/packet): what a fixed sleep used to guess.
    ``every_interface``: `-i any`, whose socket is bound to none (index 0)."""
    import os

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            mine = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:  # gone, or an fd closed while listed
            mine = set()
        with open("/proc/net/packet") as f:
            for line in f.readlines()[1:]:
                cols = line.split()  # sk RefCnt Type Proto Iface R Rmem User Inode
                bound = cols[4] != "0" or every_interface
                if f"socket:[{cols[8]}]" in mine and bound and cols[5] == "1":
                    time.sleep(0.2)  # (its filter is set next)
                    return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} opened no packet socket in {timeout:.0f} s")


def stopped_when(sniffer: subprocess.Popen, done, timeout: float = 60) -> tuple[str, str]:
    """(stdout, stderr) of a `kdissect live --format jsonl` run (text pipes), stopped with
    SIGTERM once the JSON lines shown so far satisfy ``done``, or after ``timeout``: the
    run lasts as long as the traffic, not a --duration guessed long enough for it on a
    loaded machine. SIGTERM stops as Ctrl-C does, what was captured shown
    (tests/test_live.py's SIGTERM test)."""
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")))
        for stream, sink in ((sniffer.stdout, out), (sniffer.stderr, err))
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and sniffer.poll() is None:
        if done([json.loads(line) for line in list(out)]):
            break
        time.sleep(0.05)
    if sniffer.poll() is None:
        sniffer.send_signal(signal.SIGTERM)
    sniffer.wait(60)
    for reader in readers:
        reader.join(10)
    return "".join(out), "".join(err)
