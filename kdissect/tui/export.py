"""The exchanges in the list as a pcapng file Wireshark opens: each connection becomes a
synthetic TCP connection (the proxy's recording format) carrying only the messages of
the exchanges exported, at their capture times. SASL secrets are masked unless shown.

The messages of decrypted TLS connections are written as the plaintext they carried, so
the export opens decrypted anywhere; with a TLS key log the export also keeps its
secrets in a Decryption Secrets Block (what Wireshark's ``editcap --inject-secrets``
writes), so the original capture merged with it (``mergecap``) opens decrypted too."""

from __future__ import annotations

import os
import struct
import tempfile

from ..capture.pcapng_writer import RecordedConnection, Recorder


def _keylog_file(keys) -> str | None:
    """The key log's secrets as an NSS key log file (the recorder reads a file), or None
    without secrets; the caller removes it."""
    if keys is None or not len(keys):
        return None
    fd, name = tempfile.mkstemp(prefix="kdissect-keys-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        for (label, client_random), secret in keys.secrets.items():
            f.write(f"{label} {client_random.hex()} {secret.hex()}\n")
    return name


def write_pcapng(path: str, views, show_secrets: bool = False, load=None, keys=None) -> int:
    """Write the exchanges of ``views``; returns how many were written. ``load(view)``
    gives a view's messages their bytes (they may be kept elsewhere until needed);
    ``keys`` (a capture.tls.KeyLog) go into a Decryption Secrets Block."""
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
    keylog = _keylog_file(keys)
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
    return len(views)
