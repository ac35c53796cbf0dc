"""TLS in the TUI, driven with Textual's pilot on the repo's TLS capture (a real client,
Python's ssl, talking TLS 1.3 to a real broker; its key log beside it): decrypted
exchanges are marked in the list, the detail names the connection's TLS facts, the
statistics list every TLS connection with its state, without keys the empty screen says
why, and `E` exports the decrypted exchanges with the key log in a Decryption Secrets
Block (read back by kdissect without keys, and by tshark)."""

from __future__ import annotations

import io
import struct
import subprocess
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from kdissect.capture.tls import KeyLog
from kdissect.sources.pcap import capture_loader, exchanges_in
from kdissect.tui.app import KdissectApp
from kdissect.tui.detail import Detail
from kdissect.tui.exchange_list import LOCK
from kdissect.tui.screens import StatsScreen
from tests.support.tui import drive, settle
from tests.test_tui_workflow import line_of

TLS = Path(__file__).resolve().parents[1] / "captures" / "tls" / "kafka-tls.pcap"
KEYS = TLS.with_suffix(".keys")

pytestmark = pytest.mark.slow  # Textual's pilot: seconds per test


def key_log() -> KeyLog:
    keys = KeyLog()
    keys.add_file(str(KEYS))
    return keys


def run(body, keys: KeyLog | None, size=(160, 45)) -> None:
    drive(KdissectApp(capture_loader([str(TLS)], keys=keys), title=TLS.name, keys=keys), body, size)


def secrets_blocks(path: Path) -> list[bytes]:
    """The key logs in a pcapng's Decryption Secrets Blocks."""
    data, pos, found = path.read_bytes(), 0, []
    while pos + 12 <= len(data):
        kind, length = struct.unpack_from("<II", data, pos)
        if kind == 10:
            secrets_type, size = struct.unpack_from("<II", data, pos + 8)
            assert secrets_type == 0x544C534B  # TLS key log
            found.append(data[pos + 16 : pos + 16 + size])
        pos += length
    return found


def test_decrypted_exchanges_say_so_and_the_statistics_list_the_connections():
    async def body(app, pilot):
        assert len(app.shown) == 23 and all(v.ex.tls is not None for v in app.shown)
        assert line_of(app.table, 0).lstrip().startswith(LOCK)
        await settle(app, pilot)
        detail = app.query_one(Detail)
        assert f"{LOCK} TLS" in str(detail.field_tree.root.label)
        # the connection's TLS facts: a tree beside the request and response
        tls = detail.items[-1]
        assert str(tls.label).startswith("TLS connection: decrypted")
        facts = {n.name: n.value for n in tls.root.children}
        assert facts["version"] == "TLS 1.3" and facts["cipher"] == "TLS_AES_256_GCM_SHA384"
        assert facts["state"] == "decrypted" and facts["records_decrypted"] > 0
        cipher = next(n for n in tls.root.children if n.name == "cipher")
        detail.select(len(detail.items) - 1, cipher)
        await pilot.pause()
        assert "TLS_AES_256_GCM_SHA384" in str(app.query_one("#field-line").render())
        await pilot.press("s")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, StatsScreen) and len(screen.tls) == 4
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(screen.query_one("#tls", Static).content)
        table = console.export_text()
        assert table.count("decrypted") >= 4 and "TLS_AES_256_GCM_SHA384" in table

    run(body, key_log())


def test_without_keys_the_screen_says_they_are_tls_and_what_to_give():
    async def body(app, pilot):
        assert not app.shown and len(app.tls_connections) == 4
        assert {f.state for f in app.tls_connections} == {"no keys"}
        empty = str(app.query_one("#empty").render())
        assert "4 TLS connections to 127.0.0.1:57655" in empty and "--keylog" in empty

    run(body, None)


def export(tmp_path: Path) -> Path:
    async def body(app, pilot):
        await pilot.press("E")
        await pilot.pause()

    run(body, key_log())
    (out,) = tmp_path.glob("kdissect-*.pcapng")
    return out


def test_export_keeps_the_decrypted_messages_and_the_key_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = export(tmp_path)
    assert out.name == "kdissect-kafka-tls-23-exchanges.pcapng"
    (logged,) = secrets_blocks(out)
    assert sorted(logged.splitlines()) == sorted(
        line for line in KEYS.read_bytes().splitlines() if not line.startswith(b"#")
    )
    again = exchanges_in([str(out)]).exchanges  # no key log given: none needed
    original = exchanges_in([str(TLS)], keys=key_log()).exchanges
    assert [(e.first.api_key, e.first.correlation_id) for e in again] == [
        (e.first.api_key, e.first.correlation_id) for e in original
    ]


def test_export_carries_only_its_own_connections_secrets(tmp_path, monkeypatch):
    """An SSLKEYLOGFILE holds other programs' secrets too (a browser's), and a filtered
    list a few connections: the export carries the secrets of the connections it holds,
    and no other line of the key log."""
    monkeypatch.chdir(tmp_path)
    keys = key_log()
    foreign = [(f"CLIENT_RANDOM {n:064x} {'ab' * 48}").encode() for n in range(1, 6)]
    keys.add_text(b"\n".join(foreign).decode())
    kept: list = []

    async def body(app, pilot):
        await pilot.press("/", *"stream == 1", "enter")
        await pilot.pause(0.3)
        assert app.shown and {v.ex.stream for v in app.shown} == {1}
        kept.extend(app.shown[0].ex.tls.client_randoms)
        await pilot.press("E")
        await pilot.pause()

    drive(KdissectApp(capture_loader([str(TLS)], keys=keys), title=TLS.name, keys=keys), body)
    (out,) = tmp_path.glob("kdissect-*.pcapng")
    (logged,) = secrets_blocks(out)
    lines = logged.splitlines()
    want = [
        line
        for line in KEYS.read_bytes().splitlines()
        if line and not line.startswith(b"#") and bytes.fromhex(line.split()[1].decode()) in kept
    ]
    assert len(kept) == 1 and len(want) == 5  # TLS 1.3: five secrets a connection
    assert sorted(lines) == sorted(want)
    assert not set(lines) & set(foreign)


def test_tshark_opens_the_export_decrypted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = export(tmp_path)
    ports = {e.broker[1] for e in exchanges_in([str(out)]).exchanges}
    (port,) = ports
    fields = subprocess.run(
        [
            "tshark",
            "-r",
            str(out),
            "-d",
            f"tcp.port=={port},kafka",
            "-Y",
            "kafka",
            "-T",
            "fields",
            "-e",
            "kafka.correlation_id",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(fields) == 2 * 23 - sum(
        1 for e in exchanges_in([str(out)]).exchanges if e.response is None
    )


def test_a_connection_still_read_says_decrypted_once_a_record_is():
    """The detail of an exchange shown while the capture loads is made before its
    connection ends (when the state is settled): its TLS facts say "decrypted" as soon as
    a record is, in the label, the tree's root and its state field alike."""
    from kdissect.capture.tls.session import TlsFacts
    from kdissect.tui.exchange_items import tls_item

    facts = TlsFacts(("10.0.0.1", 40000), ("10.0.0.2", 9093))
    assert facts.state == "handshake"
    item = tls_item(facts)
    assert str(item.label).startswith("TLS connection: handshake")
    facts.records = facts.decrypted = 2
    item = tls_item(facts)
    state = next(n for n in item.root.children if n.name == "state")
    assert str(item.label).startswith("TLS connection: decrypted")
    assert item.root.value == state.value == "decrypted"
    assert state.note == TlsFacts.STATES["decrypted"]
    assert facts.state == "handshake"  # (the facts themselves are the session's to settle)
