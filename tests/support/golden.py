"""Digests of what kdissect prints for every capture and paste in the repository.

The refactors of the engine and the decoders must not change a byte of output
(issue #20). `tests/test_golden_outputs.py` recomputes these; when an output is
meant to change, regenerate the table and let the diff show which outputs moved:

    .venv/bin/python -m tests.support.golden --update
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "golden" / "outputs.json"
PCAP_VIEWS: dict[str, list[str]] = {
    "summary": [], "verbose": ["-V"], "jsonl": ["--format", "jsonl"], "stats": ["--stats"],
}


def cases() -> Iterator[tuple[str, list[str]]]:
    """(name, kdissect arguments) for every output the table covers."""
    captures = sorted((ROOT / "captures").glob("*.pcap")) + sorted((ROOT / "captures").glob("*.pcapng"))
    for capture in captures:
        for view, flags in PCAP_VIEWS.items():
            yield f"pcap/{capture.name}/{view}", ["pcap", "--no-tui", str(capture), *flags]
    # every TLS capture with its key log beside it (same stem, .keys)
    for capture in sorted((ROOT / "captures" / "tls").glob("*.pcap")):
        keys = capture.with_suffix(".keys")
        for view, flags in PCAP_VIEWS.items():
            yield (f"pcap/tls/{capture.name}/{view}",
                   ["pcap", "--no-tui", str(capture), "--keylog", str(keys), *flags])
    for paste in sorted((ROOT / "captures" / "blobs" / "pastes").iterdir()):
        yield f"blob/{paste.name}/text", ["blob", str(paste)]
        yield f"blob/{paste.name}/json", ["blob", "--json", str(paste)]


ENV = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "COLUMNS": "120", "TZ": "UTC",
       "LC_ALL": "C.UTF-8"}


def run(args: list[str]) -> tuple[int, bytes]:
    """Exit status and stdout of one kdissect run (paths relative to the repository)."""
    done = subprocess.run([sys.executable, "-m", "kdissect", *args], cwd=ROOT,
                          capture_output=True, timeout=300, env=ENV)
    # absolute paths would tie the table to one checkout
    return done.returncode, done.stdout.replace(str(ROOT).encode(), b".")


def _digest(status: int, out: bytes) -> str:
    out = out.replace(str(ROOT).encode(), b".")
    return f"{status}:{len(out)}:{hashlib.sha256(out).hexdigest()[:32]}"


def digest(args: list[str]) -> str:
    return _digest(*run(args))


def compute() -> dict[str, str]:
    """Every case's digest. One process imports kdissect once and forks a child per case
    (two at a time): each child is a fresh `python -m kdissect` but for the start-up,
    which was most of the 144 runs' time (tests/test_golden_outputs.py checks that the
    digests are the ones separate processes gave)."""
    named = list(cases())
    done = subprocess.run([sys.executable, "-m", "tests.support.golden", "--serve"], cwd=ROOT,
                          input=json.dumps([a for _, a in named]), capture_output=True,
                          text=True, timeout=900, env=ENV)
    if done.returncode:
        raise RuntimeError(f"the golden runner failed: {done.stderr[-3000:]}")
    return dict(zip([n for n, _ in named], json.loads(done.stdout)))


def _child(args: list[str], out_path: str) -> None:
    """In a forked child: run kdissect as `python -m kdissect ARGS` would, stdout to
    ``out_path``; never returns."""
    import atexit
    import os
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 2)
        os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        sys.argv = [str(ROOT / "kdissect" / "__main__.py"), *args]
        from kdissect.cli.entry import main
        try:
            main(args)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        atexit._run_exitfuncs()         # as at a normal exit: workers are reaped
        sys.stdout.flush()
    finally:
        os._exit(code & 0xFF)


def serve() -> None:
    """Read the cases' argument lists (JSON) on stdin, print their digests (JSON)."""
    import os
    import shutil
    import tempfile
    import importlib
    # what the pcap and blob commands import, imported once before the forks (a child
    # imports whatever else it needs itself)
    for module in ("kdissect.cli.entry", "kdissect.cli.pcap_cmd", "kdissect.cli.blob_cmd",
                   "kdissect.render.printer", "kdissect.sources.pcap", "kdissect.stream.engine",
                   "kdissect.stream.fields", "kdissect.render.jsonl_workers"):
        importlib.import_module(module)
    cases = json.load(sys.stdin)
    digests: list[str] = [""] * len(cases)
    running: dict[int, tuple[int, str]] = {}
    tmp = tempfile.mkdtemp()        # (not TemporaryDirectory: its finalizer runs in children)
    try:
        def reap() -> None:
            pid, status = os.wait()
            i, path = running.pop(pid)
            with open(path, "rb") as f:
                digests[i] = _digest(os.waitstatus_to_exitcode(status), f.read())
        def size(args: list[str]) -> int:
            return sum(os.path.getsize(a) for a in args if os.path.isfile(a))
        # the biggest first, so that no long run is left alone at the end
        for i in sorted(range(len(cases)), key=lambda i: -size(cases[i])):
            args = cases[i]
            if len(running) >= 2:
                reap()
            path = os.path.join(tmp, f"{i}.out")
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                _child(args, path)
            running[pid] = (i, path)
        while running:
            reap()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(digests))


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
        sys.exit(0)
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.support.golden --update")
    TABLE.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {TABLE}")
