"""What kdissect prints for every capture and paste in the repository.

The refactors of the engine and the decoders must not change a byte of output
(issue #20). Each output is kept twice: its digest (status, length, sha256) in
``tests/golden/outputs.json``, which decides, and its first ``HEAD`` bytes as a
readable file under ``tests/golden/outputs/`` (the whole output when it is small), which
``git diff`` and the failing test show. `tests/test_golden_outputs.py` recomputes them;
when an output is meant to change, regenerate both and let the diff show what moved:

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
HEADS = ROOT / "tests" / "golden" / "outputs"
HEAD = 32 * 1024  # bytes of each output kept readable (3 MB for the 156 outputs)
PCAP_VIEWS: dict[str, list[str]] = {
    "summary": [],
    "verbose": ["-V"],
    "jsonl": ["--format", "jsonl"],
    "stats": ["--stats"],
}


def cases() -> Iterator[tuple[str, list[str]]]:
    """(name, kdissect arguments) for every output the table covers."""
    captures = sorted((ROOT / "captures").glob("*.pcap")) + sorted(
        (ROOT / "captures").glob("*.pcapng")
    )
    for capture in captures:
        for view, flags in PCAP_VIEWS.items():
            yield f"pcap/{capture.name}/{view}", ["pcap", "--no-tui", str(capture), *flags]
    # every TLS capture with its key log beside it (same stem, .keys)
    for capture in sorted((ROOT / "captures" / "tls").glob("*.pcap")):
        keys = capture.with_suffix(".keys")
        for view, flags in PCAP_VIEWS.items():
            yield (
                f"pcap/tls/{capture.name}/{view}",
                ["pcap", "--no-tui", str(capture), "--keylog", str(keys), *flags],
            )
    for paste in sorted((ROOT / "captures" / "blobs" / "pastes").iterdir()):
        yield f"blob/{paste.name}/text", ["blob", str(paste)]
        yield f"blob/{paste.name}/json", ["blob", "--json", str(paste)]


ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": str(Path.home()),
    "COLUMNS": "120",
    "TZ": "UTC",
    "LC_ALL": "C.UTF-8",
}


def run(args: list[str]) -> tuple[int, bytes]:
    """Exit status and stdout of one kdissect run (paths relative to the repository)."""
    done = subprocess.run(
        [sys.executable, "-m", "kdissect", *args],
        cwd=ROOT,
        capture_output=True,
        timeout=300,
        env=ENV,
    )
    # absolute paths would tie the table to one checkout
    return done.returncode, done.stdout.replace(str(ROOT).encode(), b".")


def _digest(status: int, out: bytes) -> str:
    return f"{status}:{len(out)}:{hashlib.sha256(out).hexdigest()[:32]}"


def digest(args: list[str]) -> str:
    return _digest(*run(args))


def head(out: bytes) -> bytes:
    """The readable part of an output: all of it when small, else its first lines up to
    ``HEAD`` bytes."""
    if len(out) <= HEAD:
        return out
    cut = out.rfind(b"\n", 0, HEAD) + 1 or HEAD
    return out[:cut] + f"[... {len(out) - cut} more bytes: see outputs.json]\n".encode()


def head_path(name: str) -> Path:
    return HEADS / f"{name}.txt"


def compute() -> dict[str, tuple[str, bytes]]:
    """Every case's digest and readable head. One process imports kdissect once and
    forks a child per case (two at a time): each child is a fresh `python -m kdissect`
    but for the start-up, which was most of the 144 runs' time
    (tests/test_golden_outputs.py checks that the digests are the ones separate
    processes gave)."""
    import tempfile

    named = list(cases())
    with tempfile.TemporaryDirectory() as outs:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.golden", "--serve", outs],
            cwd=ROOT,
            input=json.dumps([a for _, a in named]),
            capture_output=True,
            text=True,
            timeout=900,
            env=ENV,
        )
        if done.returncode:
            raise RuntimeError(f"the golden runner failed: {done.stderr[-3000:]}")
        result = {}
        for i, ((name, _), status) in enumerate(zip(named, json.loads(done.stdout))):
            out = Path(outs, f"{i}.out").read_bytes().replace(str(ROOT).encode(), b".")
            result[name] = (_digest(status, out), head(out))
    return result


def update() -> None:
    results = compute()
    TABLE.write_text(
        json.dumps({n: d for n, (d, _) in results.items()}, indent=1, sort_keys=True) + "\n"
    )
    import shutil

    shutil.rmtree(HEADS, ignore_errors=True)
    for name, (_, text) in results.items():
        path = head_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)


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
        atexit._run_exitfuncs()  # as at a normal exit: workers are reaped
        sys.stdout.flush()
    finally:
        os._exit(code & 0xFF)


def serve(outs: str) -> None:
    """Read the cases' argument lists (JSON) on stdin, write case i's output to
    ``outs/i.out`` and print their exit statuses (JSON)."""
    import os
    import importlib

    # what the pcap and blob commands import, imported once before the forks (a child
    # imports whatever else it needs itself)
    for module in (
        "kdissect.cli.entry",
        "kdissect.cli.pcap_cmd",
        "kdissect.cli.blob_cmd",
        "kdissect.render.printer",
        "kdissect.sources.pcap",
        "kdissect.stream.engine",
        "kdissect.stream.fields",
        "kdissect.render.jsonl_workers",
    ):
        importlib.import_module(module)
    cases = json.load(sys.stdin)
    statuses: list[int] = [0] * len(cases)
    running: dict[int, int] = {}

    def reap() -> None:
        pid, status = os.wait()
        statuses[running.pop(pid)] = os.waitstatus_to_exitcode(status)

    def size(args: list[str]) -> int:
        return sum(os.path.getsize(a) for a in args if os.path.isfile(a))

    # the biggest first, so that no long run is left alone at the end
    for i in sorted(range(len(cases)), key=lambda i: -size(cases[i])):
        if len(running) >= 2:
            reap()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(cases[i], os.path.join(outs, f"{i}.out"))
        running[pid] = i
    while running:
        reap()
    print(json.dumps(statuses))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and len(sys.argv) == 3:
        serve(sys.argv[2])
        sys.exit(0)
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.support.golden --update")
    update()
    print(f"wrote {TABLE} and {HEADS}")
