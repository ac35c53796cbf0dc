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
NEVER = (
    "textual",
    "pyarrow",
    "pyspark",
    "kio",
    "kdissect.tui",
    "kdissect.proxy",
    "kdissect.pipeline",
    "kdissect.cli.blob_cmd",
    "kdissect.cli.live_cmd",
    "kdissect.cli.proxy_cmd",
    "kdissect.cli.spark_cmd",
    "kdissect.cli.log_cmd",
    "kdissect.filters",
    "kdissect.stream.stats",
    "kdissect.render.text",
    "kdissect.protocol.values_schema.avro",
    "kdissect.protocol.values_schema.protobuf",
    "importlib.resources",
)


def loaded(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """(modules the command loaded, its stdout), stdout and stderr being pipes."""
    out = tmp_path / "modules.txt"
    run_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "SSLKEYLOGFILE")
    }
    run_env.update(env or {})
    p = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=run_env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return set(out.read_text().split()), p.stdout


def _present(modules: set[str], names) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_pcap_to_a_pipe_loads_only_its_path(tmp_path):
    modules, out = loaded(tmp_path, "pcap", "--no-tui", str(CAPTURES / "acks0.pcap"))
    assert "Produce" in out  # it did decode
    assert (
        _present(
            modules,
            NEVER
            + (
                "rich",
                "cryptography",
                "hashlib",
                "kdissect.capture.tls.session",
                "kdissect.protocol.guess",
            ),
        )
        == []
    )  # no orphan here


def installed_loaded(tmp_path: Path, *args: str) -> set[str]:
    """The modules a command loads as installed by `pip install .` (README): without
    the development install's finder, which itself imports pathlib, urllib and more."""
    import site

    out = tmp_path / "modules.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "SSLKEYLOGFILE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    p = subprocess.run(
        [sys.executable, "-S", "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return set(out.read_text().split())


@pytest.mark.parametrize("args", [["--no-tui"], ["--format", "jsonl", "-j", "1"], ["--stats"]])
def test_installed_summary_runs_load_no_file_system_helpers(tmp_path, args):
    """pathlib (and with it urllib.parse, ipaddress, fnmatch), pkgutil and the guesser
    are for value options, other inputs and orphans: a summary of a capture file reads
    its bytes without them."""
    modules = installed_loaded(tmp_path, "pcap", *args, str(CAPTURES / "acks0.pcap"))
    assert "kdissect.stream.engine" in modules  # it ran
    from kdissect.capture.native import scanner_class

    never = tuple(n for n in NEVER if not ("--stats" in args and n == "kdissect.stream.stats"))
    # (the Python packet path, KDISSECT_PURE=1, writes addresses with ipaddress)
    helpers = (
        "pathlib",
        "urllib",
        "pkgutil",
        "importlib.resources",
        "kdissect.protocol.guess",
        *(("ipaddress",) if scanner_class() is not None else ()),
    )
    assert _present(modules, never + helpers) == []


# the dataclasses a summary run still defines (modules others were changing when the
# rest became plain classes); each costs ~1 ms of every start-up: new value classes on
# these paths derive from protocol.plain instead
DATACLASSES_LEFT = {
    "kdissect.capture.pcapfile.Packet",
    "kdissect.protocol.context.Options",
    "kdissect.stream.correlation.Match",
    "kdissect.stream.correlation.Pending",
    "kdissect.stream.diagnoses._Group",
    "kdissect.stream.diagnoses._Send",
    "kdissect.stream.facts.Facts",
    "kdissect.stream.framing.Frame",
    "kdissect.stream.model.Exchange",
    "kdissect.stream.model.Gap",
    "kdissect.stream.model.KafkaMessage",
}


@pytest.mark.parametrize(
    "args",
    [
        ["--no-tui"],
        ["--format", "jsonl", "-j", "1"],
        ["--stats"],
        ["--no-tui", "--keylog", str(CAPTURES / "tls13.keys")],
    ],
)
def test_summary_runs_define_no_new_dataclasses(tmp_path, args):
    """@dataclass compiles its methods at import (0.5-1.5 ms a class: thirty of them
    were a fifth of a small capture's run): the classes these runs load are plain."""
    import dataclasses
    import importlib
    import inspect

    capture = "tls13.pcap" if "--keylog" in args else "acks0.pcap"
    modules, _ = loaded(tmp_path, "pcap", *args, str(CAPTURES / capture))
    found = set()
    for name in sorted(m for m in modules if m.startswith("kdissect")):
        for cls in vars(importlib.import_module(name)).values():
            if inspect.isclass(cls) and cls.__module__ == name and dataclasses.is_dataclass(cls):
                found.add(f"{name}.{cls.__qualname__}")
    assert found - DATACLASSES_LEFT == set()


def test_jsonl_to_a_pipe_loads_only_its_path(tmp_path):
    modules, out = loaded(
        tmp_path, "pcap", "--format", "jsonl", "-j", "1", str(CAPTURES / "acks0.pcap")
    )
    assert json.loads(out.splitlines()[0])["api_name"]
    assert _present(modules, NEVER + ("rich", "cryptography")) == []


def test_jsonl_with_workers_loads_no_pool_for_a_small_capture(tmp_path):
    """Workers start with the first full chunk: before that, no process pool machinery
    (concurrent.futures and logging: 13 ms), and the C library is found without
    ctypes.util (whose ldconfig child cost 15 ms of CPU)."""
    modules, out = loaded(
        tmp_path, "pcap", "--format", "jsonl", "-j", "2", str(CAPTURES / "acks0.pcap")
    )
    assert json.loads(out.splitlines()[0])["api_name"]
    assert "kdissect.render.jsonl_workers" in modules and "kdissect.render.heap" in modules
    assert (
        _present(
            modules, NEVER + ("rich", "concurrent", "multiprocessing", "logging", "ctypes.util")
        )
        == []
    )


def test_cryptography_only_for_tls_connections_with_keys(tmp_path):
    capture, keys = str(CAPTURES / "tls13.pcap"), str(CAPTURES / "tls13.keys")
    without, _ = loaded(tmp_path, "pcap", "--no-tui", capture)
    assert "kdissect.capture.tls.session" in without  # TLS was met and reported
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
    plain, _ = loaded(tmp_path, "pcap", "--no-tui", "--keylog", keys, str(CAPTURES / "acks0.pcap"))
    assert _present(plain, NEVER + ("rich", "cryptography")) == []


def test_help_lists_commands_without_importing_them(tmp_path):
    modules, out = loaded(tmp_path, "--help")
    assert "pcap   Decode the Kafka traffic" in out
    assert (
        _present(
            modules,
            NEVER
            + (
                "rich",
                "kdissect.cli.pcap_cmd",
                "kdissect.protocol",
                "kdissect.stream",
                "kdissect.capture",
            ),
        )
        == []
    )


def test_help_lists_each_command_once_with_its_own_summary_whole():
    """`kdissect --help` lists the commands once, in the order of use, each with the first
    paragraph of the command's own help, not cut (click cut them with "...", under a
    second hand-written list)."""
    import re

    from click.testing import CliRunner

    from kdissect.cli import group

    for width in (60, 80, 100):
        out = CliRunner().invoke(group.main, ["--help"], env={"COLUMNS": str(width)}).output
        assert out.count("Commands:") == 1
        listing = out[out.index("Commands:") :]
        assert "..." not in listing
        names = re.findall(r"^  (\w+)  ", listing, re.M)
        assert names == list(group.COMMAND_MODULES)
        for name in names:
            command = group.main.get_command(click.Context(group.main), name)
            first = " ".join(command.help.split("\n\n")[0].split())
            assert first == group.SUMMARIES[name]
            assert " ".join(first.split()) in " ".join(listing.split())


@pytest.mark.parametrize("command", ["", "pcap", "log", "live", "proxy", "blob", "spark"])
def test_help_fits_80_columns(command):
    """Every --help line fits a terminal of 80 columns (click does not wrap the
    examples and tables of its \\b blocks)."""
    from click.testing import CliRunner

    from kdissect.cli import main

    run = CliRunner().invoke(main, [*command.split(), "--help"], env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.output
    wide = [line for line in run.output.splitlines() if len(line) > 80]
    assert wide == [], wide


def test_colours_still_reach_a_forced_terminal(tmp_path):
    """FORCE_COLOR makes rich colour a pipe: the lazy console must leave that to rich."""
    modules, out = loaded(
        tmp_path, "pcap", "--no-tui", str(CAPTURES / "acks0.pcap"), env={"FORCE_COLOR": "1"}
    )
    assert "\x1b[" in out and "rich.console" in modules


@pytest.mark.parametrize(
    "text",
    [
        "4 TLS connections to 127.0.0.1:9093 (TLS 1.3, TLS_AES_256_GCM_SHA384): decrypted",
        "gap: 127.0.0.1:5 → 10.0.0.1:9092 lost 8923 bytes " * 5,
        "日本語" * 40,
        "[bold]x[/] :smile:",
        "trailing  ",
        "",
        "bell\x07 tab\tcr\r",
        "zero\u200bwidth",
    ],
)
def test_plain_lines_are_what_rich_prints(text, monkeypatch):
    from rich.console import Console
    from rich.text import Text

    from kdissect.render import console as lazy
    from kdissect.render.printable import printable

    expected = io.StringIO()
    # (control characters, which may come from the input, are escaped first)
    Console(file=expected, stderr=True, highlight=False, soft_wrap=True).print(
        Text(printable(text), style="yellow")
    )
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
    assert schemas.legacy_versions()  # not empty


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
    assert (
        "".join(written)
        == "".join(
            message_line(m, options, ex, enriched_full=False)
            for ex in exchanges
            for m in ex.messages
        )
        + "a TLS line\n"
    )


def test_plain_classes_behave_as_the_dataclasses_they_replaced():
    """repr, equality and hashing as @dataclass gave them (frozen, plain, eq=False)."""
    import dataclasses

    from kdissect.capture.packet import Segment
    from kdissect.capture.tcp import TcpConnection
    from kdissect.protocol.findings import Finding
    from kdissect.protocol.layout import Field, Struct

    def twin(obj, **kw):
        """The dataclass the object's class was: same name, fields and values."""
        cls = dataclasses.make_dataclass(type(obj).__qualname__, obj._fields, **kw)
        return cls(*obj._values())

    struct = Struct("S", (Field("a", "int8"), Field("b", "string", nullable=True)))
    for obj, kw in (
        (Finding("guessed_api", "x", "response"), {"frozen": True}),
        (struct, {"frozen": True}),
        (Segment("1.2.3.4", 1, "5.6.7.8", 9092, 7, 8, 0x18, b"ab", 0), {}),
    ):
        dc = twin(obj, **kw)
        assert repr(obj) == repr(dc)
        same = type(obj)(*obj._values())
        assert same == obj and same is not obj and obj != dc
        if kw.get("frozen"):
            assert hash(same) == hash(obj) == hash(dc)
        else:
            with pytest.raises(TypeError):
                hash(obj)
    assert Finding("guessed_api") != Finding("guessed_api", "other")
    conn = TcpConnection(1, ("a", 1), ("b", 2), 0.0, True)
    other = TcpConnection(1, ("a", 1), ("b", 2), 0.0, True)
    assert conn != other and len({conn, other}) == 2  # by identity
    assert repr(conn).startswith("TcpConnection(index=1, a=('a', 1)")
