"""The proxy's address options as a user types them: a bare port for its own addresses
(--listen, --metrics) means 127.0.0.1; a wrong one names its option; a port in use says
which one it is (the metrics port was once reported as the listener's) and what to do;
the banner names each broker with its port (--upstream HOST means HOST:9092)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[1]


def _proxy(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kdissect", "proxy", "--no-tui", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _ended(*args: str) -> subprocess.CompletedProcess:
    p = _proxy(*args)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@pytest.mark.parametrize(
    "option, value", [("--listen", "127.0.0.1:x"), ("--metrics", "host:"), ("--upstream", ":9")]
)
def test_a_wrong_address_names_its_option(option, value):
    args = {"--upstream": "127.0.0.1:1", "--listen": f"127.0.0.1:{free_port()}"}
    args[option] = value
    done = _ended(*(x for kv in args.items() for x in kv))
    assert done.returncode == 2
    assert f"Invalid value for {option}: {value!r} is not HOST:PORT" in done.stderr


def test_a_port_in_use_says_which_option_to_change():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        free = free_port()
        done = _ended(
            "--upstream",
            "127.0.0.1:1",
            "--listen",
            f"127.0.0.1:{free}",
            "--metrics",
            f"127.0.0.1:{busy}",
        )
        assert done.returncode == 1
        assert f"cannot serve metrics on 127.0.0.1:{busy}" in done.stderr
        assert "give --metrics a free HOST:PORT" in done.stderr
        assert f"on 127.0.0.1:{free}" not in done.stderr  # (the listener was free)
        done = _ended("--upstream", "127.0.0.1:1", "--listen", f"127.0.0.1:{busy}")
        assert done.returncode == 1
        assert f"cannot start the proxy on 127.0.0.1:{busy}" in done.stderr
        assert "give --listen a free HOST:PORT" in done.stderr


def test_bare_ports_are_local_and_the_banner_names_the_brokers_port():
    listen, metrics = free_port(), free_port()
    p = _proxy("--upstream", "127.0.0.1", "--listen", str(listen), "--metrics", str(metrics))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=1) as r:
                    assert b"kdissect_proxy_connections_open" in r.read()
                break
            except OSError:
                assert time.monotonic() < deadline and p.poll() is None, p.stderr
                time.sleep(0.1)
        socket.create_connection(("127.0.0.1", listen), timeout=5).close()
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert f"listening on 127.0.0.1:{listen} for Kafka clients; brokers: 127.0.0.1:9092 " in err


def _lines_until(
    p: subprocess.Popen, wanted: str, timeout: float = 30
) -> tuple[list[str], threading.Thread]:
    """stderr's lines, as they come, once one holds ``wanted`` (or ``timeout`` passed);
    and the thread that reads them to the end (joined once ``p`` has ended)."""
    got: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert p.stderr is not None
        for line in p.stderr:
            got.append(line)
            if wanted in line:
                done.set()
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    done.wait(timeout)
    return got, reader


def _stop(p: subprocess.Popen, reader: threading.Thread) -> None:
    p.send_signal(signal.SIGINT)
    p.wait(30)
    reader.join(30)
    assert p.stderr is not None and p.stdout is not None
    p.stderr.close()
    p.stdout.close()


def test_an_upstream_nobody_answers_is_said_at_start_not_first_at_a_client():
    dead = free_port()
    p = _proxy("--upstream", f"127.0.0.1:{dead}", "--listen", str(free_port()))
    lines, reader = _lines_until(p, "no --upstream broker answers")
    _stop(p, reader)
    said = [line for line in lines if "no --upstream broker answers" in line]
    assert said and f"127.0.0.1:{dead} (Connection refused)" in said[0]
    assert "clients are closed (so that they retry) until one does" in said[0]


def test_an_upstream_that_answers_is_not_warned_about():
    with socket.socket() as broker:  # (reachability is all the start looks at)
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        p = _proxy(
            "--upstream", f"127.0.0.1:{broker.getsockname()[1]}", "--listen", str(free_port())
        )
        lines, reader = _lines_until(p, "listening on")
        try:
            broker.settimeout(30)
            broker.accept()[0].close()  # the start's look came...
            time.sleep(0.5)  # ...and its answer was taken
        finally:
            _stop(p, reader)
    assert any("listening on" in line for line in lines), lines
    assert "no --upstream broker answers" not in "".join(lines)
