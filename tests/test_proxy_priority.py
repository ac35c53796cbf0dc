"""The forwarding process's scheduling: normal by default, real time with
``--forwarder-priority realtime``, which refuses to start where it is not permitted. The
suite runs as root (scripts/test); the unpermitted case drops CAP_SYS_NICE with capsh."""

from __future__ import annotations

import os
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
    """The proxy, its 'listening on' line and its forwarding process's policy."""
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
    return proc, line, os.sched_getscheduler(kids[0])


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_the_forwarder_runs_normally_or_in_real_time_when_asked_and_the_display_below():
    proc, line, policy = _start(_proxy_command())
    try:
        assert policy == os.SCHED_OTHER and "forwarding at normal priority" in line
    finally:
        _stop(proc)
    proc, line, policy = _start(_proxy_command("--forwarder-priority", "realtime"))
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


def _forwarding_threads(pid: int) -> dict[str, int]:
    """The policy of each thread of ``pid`` that moves a connection's bytes."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        if name.startswith("kdissect-"):
            out[name] = os.sched_getscheduler(int(task.name))
    return out


def test_in_real_time_the_threads_that_move_the_bytes_are_real_time_too():
    """Each connection's two threads are started by the event loop's thread, and Linux
    does not pass SCHED_RESET_ON_FORK's policy on to new threads: they take it."""
    upstream = socket.create_server(("127.0.0.1", 0))  # (a broker's place: only accepts)
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
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            assert "listening on" in line, line + proc.stderr.read()
            (forwarder,) = [
                int(pid)
                for task in Path(f"/proc/{proc.pid}/task").iterdir()
                for pid in (task / "children").read_text().split()
            ]
            client = socket.create_connection(("127.0.0.1", listen), timeout=10)
            broker, _ = upstream.accept()
            threads: dict[str, int] = {}
            deadline = time.monotonic() + 10
            while len(threads) < 2 and time.monotonic() < deadline:
                threads = _forwarding_threads(forwarder)
                time.sleep(0.05)
            policy = expected | (os.SCHED_RESET_ON_FORK if asked == "realtime" else 0)
            assert threads == {"kdissect-up": policy, "kdissect-down": policy}
            client.close()
            broker.close()
        finally:
            _stop(proc)
    upstream.close()
