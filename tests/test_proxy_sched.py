"""The forwarding process asks for short scheduler slices (proxy/sched.py): woken by a
socket on a machine whose cores are busy, it then runs before the task on the core ends
its slice. The display (low priority, decoding in bursts) keeps the default."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kdissect.proxy import sched
from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[1]


def _kernel_grants_short_slices() -> bool:
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(sched.short_slices()))
    t.start()
    t.join()
    return got == [True]


def _slice_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    raise AssertionError("no se.slice")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not _kernel_grants_short_slices(),
    reason="Linux 6.12+ (EEVDF slices)",
)
def test_the_forwarder_asks_for_short_slices_and_the_display_does_not():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kdissect", "proxy", "--upstream", "127.0.0.1:1"]
        + ["--listen", f"127.0.0.1:{port}", "--no-tui"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1
        assert _slice_of(int(children[0])) == sched.SLICE_NS
        assert _slice_of(proc.pid) != sched.SLICE_NS
    finally:
        proc.terminate()
        proc.wait(30)
