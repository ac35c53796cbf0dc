"""The repository's own captures (captures/, its subfolders too): what the differential
tests run every path over."""

from __future__ import annotations

from pathlib import Path

CAPTURES_DIR = Path(__file__).resolve().parents[2] / "captures"


def every_capture() -> list[Path]:
    """Every pcap, then every pcapng file under captures/, each group sorted."""
    return sorted(CAPTURES_DIR.glob("**/*.pcap")) + sorted(CAPTURES_DIR.glob("**/*.pcapng"))
