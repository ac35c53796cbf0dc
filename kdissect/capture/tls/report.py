"""What the user should know about a capture's TLS connections, in a few lines: grouped
by server, state and handshake facts ("3 TLS connections to 127.0.0.1:9093 (TLS 1.3,
TLS_AES_256_GCM_SHA384, server name localhost): no keys for them: give --keylog FILE")."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .keylog import KeyLog
    from .session import TlsFacts

_WHAT = {
    "decrypted": ("decrypted", "info"),
    "no keys": (
        "not decrypted: no keys for them; give --keylog FILE (an NSS key log, e.g. "
        "what SSLKEYLOGFILE writes; see docs/guide/tls.md)",
        "warn",
    ),
    "mid-connection": (
        "not decrypted: the capture began after their handshake (a key log "
        "is searched by the ClientHello's random)",
        "warn",
    ),
    "mid-record": (
        "not decrypted: the capture began inside a TLS record, after their "
        "handshake (found by the record headers further on)",
        "warn",
    ),
    "failed": (
        "not decrypted: their records do not authenticate with the key log's keys "
        "(keys of another session, or damaged records)",
        "warn",
    ),
    "unsupported": (
        "not decrypted: a cipher suite kdissect does not decrypt (see docs/guide/tls.md)",
        "warn",
    ),
    "handshake": ("with a handshake and no application data", "info"),
}


def tls_summary(conns: list[TlsFacts], keys: KeyLog | None) -> list[tuple[str, str]]:
    """(text, level) notes, one per group of alike connections."""
    groups: Counter = Counter()
    sizes: Counter = Counter()
    for f in conns:
        key = (f"{f.server[0]}:{f.server[1]}", f.state, f.describe())
        groups[key] += 1
        sizes[key] += f.record_bytes
    notes: list[tuple[str, str]] = []
    for (server, state, facts), n in groups.items():
        what, level = _WHAT.get(state, (state, "warn"))
        if state == "mid-record":
            what += f"; {sizes[(server, state, facts)]} bytes of TLS records"
        if state == "no keys" and keys is not None and len(keys):
            what = (
                f"not decrypted: the key log ({len(keys)} secrets) has none for them; "
                f"was it written by the client of this capture? (see docs/guide/tls.md)"
            )
        elif state == "no keys" and keys is not None and keys.files:
            what = (
                "not decrypted: the key log given holds no secret kdissect can use "
                "(an NSS key log: 'CLIENT_RANDOM ...' or TLS 1.3's '..._TRAFFIC_SECRET' "
                "lines; see docs/guide/tls.md)"
            )
        notes.append(
            (f"{n} TLS connection{'s' if n != 1 else ''} to {server} ({facts}): {what}", level)
        )
    skipped = keys.problems() if keys is not None else None
    if conns and skipped:
        notes.append((skipped, "warn"))
    return notes
