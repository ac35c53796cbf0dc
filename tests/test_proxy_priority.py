"""The forwarding process's scheduling: normal by default, real time with
``--forwarder-priority realtime``, which refuses to start where it is not permitted. The
suite runs as root (scripts/test); the unpermitted case drops CAP_SYS_NICE with capsh."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[1]


def _proxy_command(*extra: str, upstream: int = 0, listen: int = 0) -> list[str]:
    # without `upstream`, one never dialled: no client connects
    return [
        sys.executable,
        "-m",
        "kdissect",
        "proxy",
        "--upstream",
        f"127.0.0.1:{upstream or free_port()}",
        "--listen",
        f"127.0.0.1:{listen or free_port()}",
        "--no-tui",
        "--format",
        "jsonl",
        *extra,
    ]


def _without_cap_sys_nice(command: list[str]) -> list[str]:
    # no capability and no RLIMIT_RTPRIO: what an ordinary user has
    return ["capsh", "--drop=cap_sys_nice", "--", "-c", "ulimit -r 0; exec " + shlex.join(command)]


def _start(command: list[str]) -> tuple[subprocess.Popen, str, int]:
    """The proxy, its 'listening on' line and its forwarding process's pid."""
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "listening on" in line, line + proc.stderr.read()
    kids = [
        int(pid)
        for task in Path(f"/proc/{proc.pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    assert len(kids) == 1, kids  # the forwarding process alone
    return proc, line, kids[0]


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_the_forwarder_runs_normally_or_in_real_time_when_asked_and_the_display_below():
    proc, line, forwarder = _start(_proxy_command())
    policy = os.sched_getscheduler(forwarder)
    try:
        assert policy == os.SCHED_OTHER and "forwarding at normal priority" in line
    finally:
        _stop(proc)
    proc, line, forwarder = _start(_proxy_command("--forwarder-priority", "realtime"))
    policy = os.sched_getscheduler(forwarder)
    try:
        assert policy == os.SCHED_RR | os.SCHED_RESET_ON_FORK  # its children: normal
        assert "forwarding at real-time priority" in line
        assert os.sched_getscheduler(proc.pid) == os.SCHED_OTHER  # the display's process
    finally:
        _stop(proc)


def test_realtime_without_the_right_refuses_to_start_and_says_how():
    res = subprocess.run(
        _without_cap_sys_nice(_proxy_command("--forwarder-priority", "realtime")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    assert "CAP_SYS_NICE" in res.stderr and "RLIMIT_RTPRIO" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def _slice(task: Path) -> int | None:
    """The task's EEVDF slice in ns (None: a kernel that does not show it, before 6.6)."""
    for line in (task / "sched").read_text().splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return None


def _forwarding_threads(pid: int) -> dict[str, tuple[int, int | None]]:
    """The policy and slice of each thread of ``pid`` that moves a connection's bytes."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        if name.startswith("kdissect-"):
            out[name] = (os.sched_getscheduler(int(task.name)), _slice(task))
    return out


def test_the_threads_that_move_the_bytes_run_in_real_time_when_asked_else_on_short_slices():
    """Each connection's two threads are started by the event loop's thread, and Linux
    does not pass SCHED_RESET_ON_FORK's policy on to new threads: they take it. At normal
    priority they ask for the shortest slice (native/src/sched.rs)."""
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    kernel = (int(release[1]), int(release[2])) if release else (0, 0)
    upstream = socket.create_server(("127.0.0.1", 0))  # (a broker's place: only accepts)
    upstream.settimeout(10)
    for asked, expected in (("normal", os.SCHED_OTHER), ("realtime", os.SCHED_RR)):
        listen = free_port()
        command = _proxy_command(
            "--forwarder",
            "threads",
            "--forwarder-priority",
            asked,
            upstream=upstream.getsockname()[1],
            listen=listen,
        )
        proc, _, forwarder = _start(command)
        try:
            client = socket.create_connection(("127.0.0.1", listen), timeout=10)
            broker, _ = upstream.accept()
            policy = expected | (os.SCHED_RESET_ON_FORK if asked == "realtime" else 0)
            # (a thread takes its scheduling as it starts: read until it has, or 10 s)
            slice_ns = 100_000 if asked == "normal" and kernel >= (6, 12) else None
            want = {"kdissect-up": policy, "kdissect-down": policy}
            deadline = time.monotonic() + 10
            while True:
                threads = _forwarding_threads(forwarder)
                policies = {name: p for name, (p, _) in threads.items()}
                slices = {sl for _, sl in threads.values()}
                done = policies == want and (slice_ns is None or slices == {slice_ns})
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert policies == want
            if slice_ns is not None:  # (custom slices: Linux 6.12+)
                assert slices == {slice_ns}
            client.close()
            broker.close()
        finally:
            _stop(proc)
    upstream.close()
