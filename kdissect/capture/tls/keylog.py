"""NSS key log files (what SSLKEYLOGFILE, SSLContext.keylog_filename, jSSLKeyLog, Go's
KeyLogWriter and librdkafka's ssl.keylog.file write): one secret per line,

    LABEL <client random, 64 hex digits> <secret, hex>

``CLIENT_RANDOM`` carries a TLS 1.2 (or older) master secret; TLS 1.3 connections log
``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
``CLIENT_TRAFFIC_SECRET_0`` and ``SERVER_TRAFFIC_SECRET_0`` (and ``EXPORTER_SECRET``,
``CLIENT_EARLY_TRAFFIC_SECRET``, which are not needed). Lines kdissect cannot use are
counted, never fatal: key logs are appended to by many processes and often hold garbage.
"""

from __future__ import annotations

import os
import re

from ...protocol.plain import Compared

LABELS = frozenset(
    {
        "CLIENT_RANDOM",
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
        "EXPORTER_SECRET",
        "CLIENT_EARLY_TRAFFIC_SECRET",
        "EARLY_EXPORTER_SECRET",
    }
)
MAX_SECRET = 64  # bytes: the longest real secret is 48 (TLS 1.2) or 48 (SHA-384)
MAX_LINE = 1024  # a longer line is not a key log line (read no further into it)
MAX_FILE = 256 * 1024 * 1024
_LINE = re.compile(rb"[^\r\n]+")


class KeyLogError(Exception):
    """A key log that cannot be read at all (missing, unreadable, not text)."""


class KeyLog(Compared):
    """Secrets by (label, client random). ``add_text`` may be called many times (a
    file, the environment's SSLKEYLOGFILE, pcapng Decryption Secrets Blocks)."""

    _fields = ("secrets", "skipped", "first_skipped", "files")

    def __init__(
        self,
        secrets: dict[tuple[str, bytes], bytes] | None = None,
        skipped: int = 0,  # lines that are not usable key log lines
        first_skipped: str | None = None,  # the first of them, for the user's eyes
        files: dict[str, int] | None = None,
    ):  # path -> bytes read so far
        self.secrets = {} if secrets is None else secrets
        self.skipped, self.first_skipped = skipped, first_skipped
        self.files = {} if files is None else files

    def __len__(self) -> int:
        return len(self.secrets)

    def get(self, label: str, client_random: bytes) -> bytes | None:
        """The secret, re-reading the key log files first if they grew (live captures
        and the proxy: clients append a connection's secrets as they connect)."""
        found = self.secrets.get((label, client_random))
        if found is None and self.files:
            self.refresh()
            found = self.secrets.get((label, client_random))
        return found

    def copy(self) -> KeyLog:
        return KeyLog(dict(self.secrets), self.skipped, self.first_skipped, dict(self.files))

    def refresh(self) -> None:
        for path, done in list(self.files.items()):
            try:
                with open(path, "rb") as f:
                    f.seek(done)
                    more = f.read(MAX_FILE)
            except OSError:
                continue
            cut = more.rfind(b"\n") + 1  # a line still being written waits
            if cut:
                self.files[path] = done + cut
                self.add_text(more[:cut])

    def add_text(self, text: bytes | str) -> int:
        """Secrets in ``text`` (NSS key log lines); returns how many were new."""
        if isinstance(text, str):
            text = text.encode("utf-8", "replace")
        before = len(self.secrets)
        # the non-blank lines one at a time: a file (or a pcapng secrets block) of
        # millions of empty lines costs no list of them
        for found in _LINE.finditer(text):
            line = found.group().strip()
            if not line or line.startswith(b"#"):
                continue
            if not self._line(line):
                self.skipped += 1
                if self.first_skipped is None:
                    self.first_skipped = line[:24].decode("utf-8", "replace")
        return len(self.secrets) - before

    def _line(self, line: bytes) -> bool:
        if len(line) > MAX_LINE:
            return False
        parts = line.split()
        if len(parts) != 3:
            return False
        label = parts[0].decode("ascii", "replace")
        if label not in LABELS or len(parts[1]) != 64 or not 2 <= len(parts[2]) <= 2 * MAX_SECRET:
            return False
        try:
            client_random, secret = (
                bytes.fromhex(parts[1].decode()),
                bytes.fromhex(parts[2].decode()),
            )
        except ValueError:
            return False
        if label == "CLIENT_RANDOM" and len(secret) != 48:
            return False  # a master secret is always 48 bytes
        self.secrets[(label, client_random)] = secret
        return True

    def add_file(self, path: str) -> int:
        try:
            if os.path.getsize(path) > MAX_FILE:
                raise KeyLogError(
                    f"{path}: {os.path.getsize(path)} bytes is too big for a "
                    f"key log (at most {MAX_FILE >> 20} MiB)"
                )
            with open(path, "rb") as f:
                data = f.read(MAX_FILE)
        except OSError as e:
            raise KeyLogError(f"{path}: cannot read the key log: {e.strerror or e}") from None
        if b"\0" in data[:4096]:
            raise KeyLogError(
                f"{path}: not a key log (binary data); kdissect reads NSS "
                f"key log files: lines like 'CLIENT_RANDOM <hex> <hex>'"
            )
        self.files[path] = len(data)
        return self.add_text(data)

    def problems(self) -> str | None:
        """What the user should know about the lines that were skipped."""
        if not self.skipped:
            return None
        return (
            f"{self.skipped} key log line{'s' if self.skipped != 1 else ''} skipped (not "
            f"'LABEL <64 hex digits> <hex secret>'; the first: {self.first_skipped!r})"
        )
