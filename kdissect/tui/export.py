"""The exchanges in the list as a pcapng file Wireshark opens: each connection becomes a
synthetic TCP connection (the proxy's recording format) carrying only the messages of
the exchanges exported, at their capture times. SASL secrets are masked unless shown.

The messages of decrypted TLS connections are written as the plaintext they carried, so
the export opens decrypted anywhere; with a TLS key log the export also keeps the
secrets of the connections it carries (none of the key log's other lines: an
``SSLKEYLOGFILE`` often holds a browser's too) in a Decryption Secrets Block (what
Wireshark's ``editcap --inject-secrets`` writes), so the original capture merged with it
(``mergecap``) opens decrypted too."""

from __future__ import annotations

import os
import struct
import tempfile
from typing import NamedTuple

from ..capture.pcapng_writer import RecordedConnection, Recorder


def exported_secrets(keys, views) -> list[tuple[str, bytes, bytes]]:
    """(label, client random, secret) of the key log's lines that name a TLS connection
    of ``views`` (by its ClientHellos' randoms), in the key log's order."""
    if keys is None or not len(keys):
        return []
    randoms: set[bytes] = set()
    for v in views:
        tls = v.ex.tls
        if tls is not None:
            randoms.update(getattr(tls, "client_randoms", ()))
    return [
        (label, client_random, secret)
        for (label, client_random), secret in keys.secrets.items()
        if client_random in randoms
    ]


def _keylog_file(secrets: list[tuple[str, bytes, bytes]]) -> str | None:
    """``secrets`` as an NSS key log file (the recorder reads a file), or None without
    any; the caller removes it."""
    if not secrets:
        return None
    fd, name = tempfile.mkstemp(prefix="kdissect-keys-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        for label, client_random, secret in secrets:
            f.write(f"{label} {client_random.hex()} {secret.hex()}\n")
    return name


class Exported(NamedTuple):
    exchanges: int
    secrets: int  # TLS secrets written in the Decryption Secrets Block


def write_pcapng(path: str, views, show_secrets: bool = False, load=None, keys=None) -> Exported:
    """Write the exchanges of ``views``; says how many, and how many TLS secrets went with
    them. ``load(view)``
    gives a view's messages their bytes (they may be kept elsewhere until needed);
    the secrets of ``keys`` (a capture.tls.KeyLog) that name the exported TLS
    connections go into a Decryption Secrets Block."""
    messages = []
    for v in views:
        ex = v.ex
        for m in (ex.request, ex.response):
            if m is not None:
                side = (
                    0
                    if m.direction == "request" or (m.direction == "sasl" and m is ex.request)
                    else 1
                )
                messages.append((m.ts, m.index, ex, side, m, v))
    messages.sort(key=lambda item: item[:2])
    # a connection closes (FIN) right after its last message, so the packets stay in time
    # order: closing them all at the end wrote FINs after later packets, with earlier times
    last = {item[2].stream: at for at, item in enumerate(messages)}
    secrets = exported_secrets(keys, views)
    keylog = _keylog_file(secrets)
    recorder = Recorder(path, show_secrets, keylog)
    connections: dict[int, RecordedConnection] = {}
    try:
        for at, (ts, _, ex, side, m, view) in enumerate(messages):
            if load is not None:
                load(view)
            conn = connections.get(ex.stream)
            if conn is None:
                conn = connections[ex.stream] = recorder.connection(ex.client, ex.broker, ts)
            frame = struct.pack(">i", len(m.data)) + m.data
            conn.frame(side, frame, ts, m.direction == "sasl")
            if last[ex.stream] == at:
                conn.close(ts)
    finally:
        recorder.close()
        if keylog is not None:
            os.unlink(keylog)
    return Exported(len(views), len(secrets))
