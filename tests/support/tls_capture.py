"""Real TLS Kafka traffic, captured: kafka-python (OpenSSL through Python's ssl) talks TLS
to a TLS terminator in front of the Tansu broker, writing its key log; tcpdump records
both the TLS leg and the terminator's plaintext leg to the broker in one capture. The
plaintext leg carries the very same Kafka messages: the oracle for the decrypted leg."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .broker import Broker, free_port
from .tls import TlsTerminator, self_signed

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TlsRun:
    pcap: Path
    keylog: Path
    tls_port: int
    broker_port: int
    output: str


class Tcpdump:
    """tcpdump on loopback, stopped by PID; ``stop`` waits for every packet."""

    def __init__(self, out: Path, bpf: str):
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
                "65536",
                "-w",
                str(out),
                bpf,
            ],
            stderr=subprocess.PIPE,
        )
        self.proc.stderr.readline()  # "listening on lo ..." once it captures
        time.sleep(0.2)

    def stop(self) -> None:
        time.sleep(0.5)
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)


def openssl_conf(directory: Path, settings: list[str]) -> Path:
    """An OpenSSL config for a process (TLS 1.3 cipher suites, options)."""
    conf = directory / "openssl.cnf"
    conf.write_text(
        "openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\n"
        "system_default = sys\n[sys]\n" + "".join(f"{s}\n" for s in settings)
    )
    return conf


def run_client(
    bootstrap: str, cafile: Path, keylog: Path, *args: str, env: dict | None = None
) -> str:
    """The workload of tests.support.tls_client (its options in ``args``); its output."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.tls_client",
            bootstrap,
            str(cafile),
            str(keylog),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env or dict(os.environ),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def record_tls(
    directory: Path,
    *,
    tls12: bool = False,
    ciphers: str | None = None,
    suites13: str | None = None,
    mutual: bool = False,
    messages: int = 20,
    size: int = 100,
    broker: Broker | None = None,
    sasl: str | None = None,
    tls_port: int | None = None,
    no_etm: bool = False,
    extra: tuple[str, ...] = (),
) -> TlsRun:
    """One workload over TLS, captured. ``ciphers``: OpenSSL names for TLS 1.2 (set on the
    client); ``suites13``: TLS 1.3 suites the client offers; ``mutual``: the terminator
    asks for a client certificate; ``no_etm``: the client does not offer encrypt-then-MAC
    (CBC suites then MAC before encrypting, as TLS 1.2 without RFC 7366)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(directory)
    port = tls_port or free_port()
    own = broker is None
    broker = broker or Broker(advertised_port=port)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if ciphers:
        server.set_ciphers(ciphers)  # Python's defaults leave out the SHA-1 CBC suites
    client_cert = []
    if mutual:
        ccert_dir = directory / "client"
        ccert_dir.mkdir(exist_ok=True)
        ccert, ckey = self_signed(ccert_dir)
        server.verify_mode = ssl.CERT_REQUIRED
        server.load_verify_locations(ccert)
        client_cert = ["--cert", str(ccert), "--key", str(ckey)]
    terminator = TlsTerminator(cert, key, ("127.0.0.1", broker.port), server, port)
    pcap, keylog = directory / "tls.pcap", directory / "keys.log"
    dump = Tcpdump(pcap, f"tcp port {port} or tcp port {broker.port}")
    env = dict(os.environ)
    settings = ([f"Ciphersuites = {suites13}"] if suites13 else []) + (
        ["Options = -EncryptThenMac"] if no_etm else []
    )
    if settings:
        env["OPENSSL_CONF"] = str(openssl_conf(directory, settings))
    try:
        out = run_client(
            f"127.0.0.1:{port}",
            cert,
            keylog,
            *(["--tls12"] if tls12 else []),
            *(["--ciphers", ciphers] if ciphers else []),
            *client_cert,
            *(["--sasl", sasl] if sasl else []),
            "--messages",
            str(messages),
            "--size",
            str(size),
            *extra,
            env=env,
        )
    finally:
        dump.stop()
        terminator.close()
        if own:
            broker.stop()
    return TlsRun(pcap, keylog, port, broker.port, out)
