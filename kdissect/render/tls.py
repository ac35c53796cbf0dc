"""TLS connections for the printed views: a --stats table and a JSON line each."""

from __future__ import annotations

import json
from typing import Any

from .plain_table import Table


def tls_table(conns: list) -> Any:
    """The rich table of ``tls_rows`` (the TUI's)."""
    return tls_rows(conns)  # (a rich renderable: laid out at the width it is given)


def tls_rows(conns: list) -> Table:
    """One row per TLS connection (capture.tls.TlsFacts)."""
    table = Table(title="TLS connections", title_justify="left", box="SIMPLE_HEAD", padding=(0, 1))
    for col in (
        "#",
        "client",
        "server",
        "server name",
        "version",
        "cipher",
        "state",
        "records",
        "decrypted",
        "failed",
        "findings",
    ):
        table.add_column(
            col,
            justify="right" if col in ("records", "decrypted", "failed") else "left",
            no_wrap=col in ("client", "server"),
        )
    for f in conns:
        table.add_row(
            str(f.stream or "-"),
            f"{f.client[0]}:{f.client[1]}",
            f"{f.server[0]}:{f.server[1]}",
            f.server_name or "-",
            f.version or "-",
            f.cipher or "-",
            f.state,
            str(f.records),
            str(f.decrypted),
            str(f.failed),
            ", ".join(sorted({x.code for x in f.findings})) or "-",
        )
    return table


def tls_json_line(facts) -> str:
    """The JSON line of a TLS connection: ``{"tls_connection": {...}}`` (docs/guide/jsonl.md)."""
    return json.dumps({"tls_connection": facts.to_json()}) + "\n"
