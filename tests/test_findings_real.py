"""Findings on real captures (Tansu with real clients; captures/README.md): normal
protocol steps are notes, a refused SCRAM login is a finding."""

from __future__ import annotations

from pathlib import Path

from kdissect.sources.pcap import exchanges_in

CAPTURES = Path(__file__).parent.parent / "captures"


def _findings(name: str) -> list:
    return [f for e in exchanges_in([str(CAPTURES / name)]).exchanges for f in e.findings]


def test_member_id_required_on_first_join_is_a_note():
    found = [f for f in _findings("confluent-group.pcap") if "MEMBER_ID_REQUIRED" in f.detail]
    assert found and all(f.code == "expected_error" and f.severity == "note" for f in found)


def test_failed_scram_login_is_a_finding():
    # Tansu answers these SCRAM logins with server-final "e=unknown-user", error_code 0
    for name in ("sasl-scram.pcap", "sasl-v0.pcap"):
        failed = [f for f in _findings(name) if f.code == "authentication_failed"]
        assert failed and all("unknown-user" in f.detail for f in failed)
