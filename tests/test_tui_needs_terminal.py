"""--tui where there is no terminal: standard input /dev/null kept the TUI spinning a core
for good, deaf to Ctrl-C and SIGTERM (a forwarder's child left a zombie). Each command
now says what the TUI needs and exits 1 before it starts anything."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "captures" / "kafka-clients.pcap"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kdissect", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("pcap", "--tui", str(CAPTURE)),
        ("log", "--tui", str(ROOT / "captures")),
        ("live", "--tui", "-i", "lo"),
    ],
    ids=["pcap", "log", "live"],
)
def test_a_forced_tui_without_a_terminal_says_what_it_needs(args):
    done = _run(*args)
    assert done.returncode == 1, done.stderr
    assert "the terminal UI needs a terminal" in done.stderr
    assert "standard input" in done.stderr and "leave out --tui" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_proxy_refuses_a_forced_tui_without_a_terminal_before_it_listens():
    port = free_port()
    done = _run("proxy", "--upstream", "127.0.0.1:1", "--listen", f"127.0.0.1:{port}", "--tui")
    assert done.returncode == 1, done.stderr
    assert "the terminal UI needs a terminal" in done.stderr
    assert "listening on" not in done.stderr and "Traceback" not in done.stderr
    with socket.socket() as s:  # nothing was left listening
        assert s.connect_ex(("127.0.0.1", port)) != 0
