"""The real `kdissect` command in a real terminal (tmux): the TUI starts by itself on a
terminal, shows the exchanges, answers keys and quits cleanly."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a real terminal (tmux)

ROOT = Path(__file__).resolve().parents[1]


def screen_of(session: str) -> str:
    return tmux(session, "capture-pane", "-p", "-t", session)


def tmux(session: str, *args: str) -> str:
    return subprocess.run(
        [*server(session), *args], capture_output=True, text=True, check=True
    ).stdout


def server(session: str) -> list[str]:
    """tmux on a server of the session's own (-S): the default server is shared with
    whoever else runs tmux on the machine, and a new session raced with a server that was
    exiting after its last session was killed (`tmux new-session` exit status 1)."""
    return ["tmux", "-S", str(Path(tempfile.gettempdir()) / f"{session}.tmux")]


def stop(session: str) -> None:
    """The session's server stopped and its socket removed (tmux leaves it behind)."""
    subprocess.run([*server(session), "kill-server"], capture_output=True)
    Path(server(session)[-1]).unlink(missing_ok=True)


def wait_for(session: str, text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux(session, "capture-pane", "-p", "-t", session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never showed; the screen was:\n{screen}")


def start(capture: str, width: int, height: int) -> str:
    """A tmux session of that size running `kdissect pcap CAPTURE`; its name."""
    session = f"kdissect-{uuid.uuid4().hex[:8]}"
    kdissect = f"{sys.executable} -m kdissect"
    command = f"cd {ROOT} && {kdissect} pcap {capture}; echo EXIT=$?; sleep 30"
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(
        [
            *server(session),
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            str(width),
            "-y",
            str(height),
            command,
        ],
        check=True,
        env=env,
    )
    return session


def test_pcap_opens_the_tui_in_a_terminal_and_quits_cleanly():
    assert shutil.which("tmux"), "./scripts/test installs tmux"
    session = f"kdissect-{uuid.uuid4().hex[:8]}"
    kdissect = f"{sys.executable} -m kdissect"
    command = f"cd {ROOT} && {kdissect} pcap captures/kcat.pcap; echo EXIT=$?; sleep 30"
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(
        [*server(session), "new-session", "-d", "-s", session, "-x", "160", "-y", "40", command],
        check=True,
        env=env,
    )
    try:
        wait_for(session, "14 exchanges")
        screen = wait_for(session, "q Quit")  # the footer's key hints (drawn last)
        assert "Produce" in screen and "Fetch" in screen and "kcat.pcap" in screen
        tmux(session, "send-keys", "-t", session, "?")
        wait_for(session, "this help")
        tmux(session, "send-keys", "-t", session, "Escape")
        time.sleep(1)  # else the terminal reads Escape+q as alt+q
        assert "this help" not in tmux(session, "capture-pane", "-p", "-t", session)
        tmux(session, "send-keys", "-t", session, "q")
        screen = wait_for(session, "EXIT=0")
        assert "Traceback" not in screen
    finally:
        stop(session)


def test_at_120_columns_the_error_is_in_the_list_and_tab_completes_a_filter():
    session = start("captures/kafka-sasl.pcap", 120, 40)
    try:
        wait_for(session, "122 exchanges")
        tmux(session, "send-keys", "-t", session, "/")
        time.sleep(0.3)  # a person's pace
        tmux(session, "send-keys", "-t", session, "-l", "api == SaslAuth")
        time.sleep(0.5)  # the suggestion comes
        tmux(session, "send-keys", "-t", session, "Tab")
        wait_for(session, "api == SaslAuthenticate")
        tmux(session, "send-keys", "-t", session, "-l", " and e")  # into the bar, not keys
        wait_for(session, "api == SaslAuthenticate and e")
        tmux(
            session,
            "send-keys",
            "-t",
            session,
            "BSpace",
            "BSpace",
            "BSpace",
            "BSpace",
            "BSpace",
            "BSpace",
            "Enter",
        )
        screen = wait_for(session, "of 122 exchanges")
        rows = [line for line in screen.splitlines() if "SaslAuthenticate" in line and "ms" in line]
        assert any("SASL_AUTHENTICATION_FAILED" in line for line in rows), screen  # in the list
        tmux(session, "send-keys", "-t", session, "q")
        screen = wait_for(session, "EXIT=0")
        assert "Traceback" not in screen
        assert not list(ROOT.glob("kdissect-exchange-*.json"))  # `e` did not export
    finally:
        stop(session)


@pytest.mark.slow
def test_keys_typed_in_one_burst_run_in_their_order():
    """ctrl+u, Tab and the letters after them, sent at once (a fast typist, a paste,
    tmux): ctrl+u used to run after the letters behind it, clearing them."""
    session = start("captures/kafka-sasl.pcap", 120, 40)
    try:
        wait_for(session, "122 exchanges")
        tmux(session, "send-keys", "-t", session, "/")
        time.sleep(0.3)
        burst = ["x", "y", "C-u", *"api", "Space", "=", "=", "Space", *"SaslAuth", "Tab"]
        tmux(session, "send-keys", "-t", session, *burst, "Space", *"or")
        wait_for(session, "api == SaslAuthenticate or ")
        tmux(session, "send-keys", "-t", session, "C-u", *"error", "Space", "!=", "Space", "0")
        screen = wait_for(session, "error != 0")
        assert "SaslAuthenticate or" not in screen
        # (Escape apart: a terminal sends Escape then q at once as alt+q)
        tmux(session, "send-keys", "-t", session, "Escape")
        time.sleep(0.3)
        tmux(session, "send-keys", "-t", session, "q")
        wait_for(session, "EXIT=0")
    finally:
        stop(session)


def test_at_80x24_p_reaches_the_offending_field_and_its_explanation_reads_in_full():
    session = start("captures/kafka-sasl.pcap", 80, 24)
    try:
        wait_for(session, "exchanges")
        for _ in range(12):  # problem after problem: a login
            tmux(session, "send-keys", "-t", session, "p")  # refused for a bad password
            time.sleep(0.4)
            if "body.error_code @" in screen_of(session):
                break
        screen = wait_for(session, "── error_code @4+2 = 58")  # the tree scrolled to it
        flat = " ".join(" ".join(screen.split()).split("│"))
        assert (
            "SASL_AUTHENTICATION_FAILED: SASL authentication failed (wrong credentials or "
            "mechanism)" in flat
        ), screen  # the explanation, not cut
        tmux(session, "send-keys", "-t", session, "v")  # the bytes instead of the tree
        screen = wait_for(session, "00000000")  # the field's line of the dump
        assert "── error_code @4+2" not in screen  # the tree gave way
        tmux(session, "send-keys", "-t", session, "q")
        screen = wait_for(session, "EXIT=0")
        assert "Traceback" not in screen
    finally:
        stop(session)
