"""TLS for the proxy tests: a self-signed certificate for 127.0.0.1 and localhost, and a
TLS terminator that stands in front of a plaintext broker (as a TLS broker would)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import threading
from pathlib import Path


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class TlsTerminator:
    """Accepts TLS on a free port and forwards the plaintext to ``upstream``."""

    def __init__(
        self,
        cert: Path,
        key: Path,
        upstream: tuple[str, int],
        context: ssl.SSLContext | None = None,
        port: int = 0,
    ):
        """``context``: the server's own (TLS versions, ciphers, client certificates)."""
        self.upstream = upstream
        self.context = context or ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.server_names: list[str | None] = []  # SNI of each client, as received
        self.context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.port = 0

        async def start():
            self.server = await asyncio.start_server(
                self._client, "127.0.0.1", port, ssl=self.context
            )
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(start(), self.loop)
        ready.wait(10)

    async def _client(self, reader, writer):
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def pump(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
