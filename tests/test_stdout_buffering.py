"""How `kdissect pcap` writes its lines: in blocks for a file or a pipe, even where
PYTHONUNBUFFERED asked Python to write each at once (a system call per line was a tenth
of a summary's CPU on captures of many small exchanges), complete, and quiet when the
reader goes away. (The live commands write each line as it comes: tests/test_live.py,
tests/test_proxy.py.)"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "captures" / "kafka44-cluster.pcap"
_PROBE = (
    "import sys; from kdissect.cli.common import buffer_stdout; buffer_stdout(); "
    "sys.stderr.write(str(sys.stdout.write_through))"
)


def _env(unbuffered: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def test_a_pipe_gets_blocks_a_terminal_keeps_its_lines():
    piped = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=_env(True), cwd=ROOT
    )
    assert piped.stderr == "False"  # was True: written through, a line at a time
    leader, follower = pty.openpty()
    try:
        tty = subprocess.run(
            [sys.executable, "-c", _PROBE],
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(True),
            cwd=ROOT,
        )
    finally:
        os.close(leader)
        os.close(follower)
    assert tty.stderr == "True"  # a terminal: as the user's environment asked


@pytest.mark.slow  # (seconds: kept out of the fast tier)
@pytest.mark.parametrize("unbuffered", [True, False])
def test_the_summary_is_whole_and_a_closed_pipe_is_quiet(unbuffered):
    run = [sys.executable, "-m", "kdissect", "pcap", "--no-tui", str(CAPTURE)]
    whole = subprocess.run(run, capture_output=True, text=True, env=_env(unbuffered), cwd=ROOT)
    reference = subprocess.run(run, capture_output=True, text=True, env=_env(False), cwd=ROOT)
    assert whole.returncode == 0 and whole.stdout == reference.stdout
    assert len(whole.stdout.splitlines()) > 200
    head = subprocess.run(
        " ".join(run) + " | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        env=_env(unbuffered),
        cwd=ROOT,
    )
    assert head.stdout == whole.stdout.splitlines(keepends=True)[0]
    assert "Traceback" not in head.stderr and "Exception" not in head.stderr, head.stderr


@pytest.mark.parametrize("args", [["-V"], [], ["--format", "jsonl"]])
def test_a_reader_that_goes_away_ends_the_run_quietly_with_0(args):
    """`| head`: the run stops, says nothing, and ends with 0 (rich's own handling of a
    closed pipe, which printed the -V trees, ended it with 1)."""
    big = ROOT / "captures" / "kafka-kraft-snapshot.pcap"
    command = " ".join([sys.executable, "-m", "kdissect", "pcap", "--no-tui", *args, str(big)])
    run = subprocess.run(
        ["bash", "-c", command + " | head -n 3 >/dev/null; exit ${PIPESTATUS[0]}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
