"""Start-up: what each command imports before it reads a byte.

Every kdissect invocation pays for its imports (a small capture's run is mostly
start-up; benchmarks/startup.py measures it). These tests run the real command line in a
subprocess, its output to a pipe, and check which modules it loaded: a behaviour test of
the lazy structure (a module the path does not need must not come back through an import
line), not a timing test.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"

# run the command line; at exit, write the names of the loaded modules to argv[1]
_PROBE = """
import atexit, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
from kdissect.cli.entry import main
main(sys.argv[2:])
"""

# loaded by no command that prints a capture to a pipe
NEVER = ("textual", "pyarrow", "pyspark", "kio", "kdissect.tui", "kdissect.proxy",
         "kdissect.pipeline", "kdissect.cli.blob_cmd", "kdissect.cli.live_cmd",
         "kdissect.cli.proxy_cmd", "kdissect.cli.spark_cmd", "kdissect.cli.log_cmd",
         "kdissect.filters", "kdissect.stream.stats", "kdissect.render.text",
         "kdissect.protocol.values_schema.avro", "kdissect.protocol.values_schema.protobuf",
         "importlib.resources")


def loaded(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """(modules the command loaded, its stdout), stdout and stderr being pipes."""
    out = tmp_path / "modules.txt"
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "SSLKEYLOGFILE")}
    run_env.update(env or {})
    p = subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], capture_output=True,
                       text=True, cwd=ROOT, env=run_env, timeout=120)
    assert p.returncode == 0, p.stderr
    return set(out.read_text().split()), p.stdout


def _present(modules: set[str], names) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_pcap_to_a_pipe_loads_only_its_path(tmp_path):
    modules, out = loaded(tmp_path, "pcap", "--no-tui", str(CAPTURES / "acks0.pcap"))
    assert "Produce" in out                                     # it did decode
    assert _present(modules, NEVER + ("rich", "cryptography", "hashlib",
                                      "kdissect.capture.tls.session")) == []


def test_jsonl_to_a_pipe_loads_only_its_path(tmp_path):
    modules, out = loaded(tmp_path, "pcap", "--format", "jsonl", "-j", "1",
                          str(CAPTURES / "acks0.pcap"))
    assert json.loads(out.splitlines()[0])["api_name"]
    assert _present(modules, NEVER + ("rich", "cryptography")) == []


def test_cryptography_only_for_tls_connections_with_keys(tmp_path):
    capture, keys = str(CAPTURES / "tls13.pcap"), str(CAPTURES / "tls13.keys")
    without, _ = loaded(tmp_path, "pcap", "--no-tui", capture)
    assert "kdissect.capture.tls.session" in without            # TLS was met and reported
    assert _present(without, NEVER + ("rich", "cryptography")) == []
    with_keys, out = loaded(tmp_path, "pcap", "--no-tui", "--keylog", keys, capture)
    assert "Fetch" in out
    # decrypted: by the compiled record layer when it was built (AES-GCM here), else by
    # cryptography, which is then needed
    from kdissect.capture.native import record_cipher_class
    compiled = record_cipher_class() is not None
    assert ("cryptography" in with_keys) is not compiled
    assert _present(with_keys, NEVER + ("rich",)) == []
    # keys but no TLS in the capture: key log read, no cryptography
    plain, _ = loaded(tmp_path, "pcap", "--no-tui", "--keylog", keys,
                      str(CAPTURES / "acks0.pcap"))
    assert _present(plain, NEVER + ("rich", "cryptography")) == []


def test_help_lists_commands_without_importing_them(tmp_path):
    modules, out = loaded(tmp_path, "--help")
    assert "pcap   Decode the Kafka traffic" in out
    assert _present(modules, NEVER + ("rich", "kdissect.cli.pcap_cmd", "kdissect.protocol",
                                      "kdissect.stream", "kdissect.capture")) == []


def test_help_listing_is_clicks_own_over_the_real_commands():
    """The stand-ins of `kdissect --help` list what click lists from the commands."""
    from kdissect.cli import group
    for name in group.COMMAND_MODULES:
        group.main.get_command(click.Context(group.main), name)   # imports all of them
    for width in (60, 80, 100):
        ctx = click.Context(group.main, max_content_width=width, terminal_width=width)
        ours, clicks = ctx.make_formatter(), ctx.make_formatter()
        group.main.format_commands(ctx, ours)
        click.Group.format_commands(group.main, ctx, clicks)
        assert ours.getvalue() == clicks.getvalue() and "spark" in ours.getvalue()


def test_colours_still_reach_a_forced_terminal(tmp_path):
    """FORCE_COLOR makes rich colour a pipe: the lazy console must leave that to rich."""
    modules, out = loaded(tmp_path, "pcap", "--no-tui", str(CAPTURES / "acks0.pcap"),
                          env={"FORCE_COLOR": "1"})
    assert "\x1b[" in out and "rich.console" in modules


@pytest.mark.parametrize("text", [
    "4 TLS connections to 127.0.0.1:9093 (TLS 1.3, TLS_AES_256_GCM_SHA384): decrypted",
    "gap: 127.0.0.1:5 → 10.0.0.1:9092 lost 8923 bytes " * 5, "日本語" * 40, "[bold]x[/] :smile:",
    "trailing  ", "", "bell\x07 tab\tcr\r", "zero\u200bwidth"])
def test_plain_lines_are_what_rich_prints(text, monkeypatch):
    from rich.console import Console
    from rich.text import Text

    from kdissect.render import console as lazy
    expected = io.StringIO()
    Console(file=expected, stderr=True, highlight=False, soft_wrap=True).print(
        Text(text, style="yellow"))
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    err = lazy.console(stderr=True, highlight=False, soft_wrap=True)
    assert err.is_terminal is False
    lazy.print_line(err, text, "yellow")
    assert sys.stderr.getvalue() == expected.getvalue()


def test_control_codes_stripped_as_rich_strips_them():
    from rich.control import strip_control_codes

    from kdissect.render.console import strip_control_codes as ours
    text = "".join(map(chr, range(0x3000)))
    assert ours(text) == strip_control_codes(text)


def test_table_versions_from_headers_match_the_parsed_tables():
    from kdissect.protocol import schemas
    for name in ("legacy.bnf", "recent.bnf"):
        assert schemas._versions(name) == {(k, v) for k, _d, v in schemas._table(name)}
    assert schemas.legacy_versions()                               # not empty


def test_jsonl_workers_start_only_for_a_full_chunk():
    """A capture smaller than one chunk is rendered in this process: no workers forked."""
    from kdissect.protocol import Options
    from kdissect.render.jsonl_workers import JsonlWorkers
    from kdissect.render.lines import message_line
    from kdissect.sources.pcap import exchanges_in
    options = Options()
    exchanges = exchanges_in([str(CAPTURES / "acks0.pcap")], options).exchanges
    written: list[str] = []
    workers = JsonlWorkers(options, 2, written.append)
    for ex in exchanges:
        workers.add(ex)
    workers.line("a TLS line\n")
    workers.close()
    assert workers.pool is None
    assert "".join(written) == "".join(message_line(m, options, ex, enriched_full=False)
                                       for ex in exchanges for m in ex.messages) + "a TLS line\n"
