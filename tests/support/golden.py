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
    tls = ROOT / "captures" / "tls"
    for view, flags in PCAP_VIEWS.items():
        yield (f"pcap/tls/kafka-tls.pcap/{view}",
               ["pcap", "--no-tui", str(tls / "kafka-tls.pcap"), "--keylog", str(tls / "kafka-tls.keys"), *flags])
    for paste in sorted((ROOT / "captures" / "blobs" / "pastes").iterdir()):
        yield f"blob/{paste.name}/text", ["blob", str(paste)]
        yield f"blob/{paste.name}/json", ["blob", "--json", str(paste)]


def run(args: list[str]) -> tuple[int, bytes]:
    """Exit status and stdout of one kdissect run (paths relative to the repository)."""
    done = subprocess.run([sys.executable, "-m", "kdissect", *args], cwd=ROOT,
                          capture_output=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "COLUMNS": "120", "TZ": "UTC",
                               "LC_ALL": "C.UTF-8"})
    # absolute paths would tie the table to one checkout
    return done.returncode, done.stdout.replace(str(ROOT).encode(), b".")


def digest(args: list[str]) -> str:
    status, out = run(args)
    return f"{status}:{len(out)}:{hashlib.sha256(out).hexdigest()[:32]}"


def compute() -> dict[str, str]:
    from concurrent.futures import ThreadPoolExecutor
    named = list(cases())
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([n for n, _ in named], pool.map(digest, [a for _, a in named])))


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.support.golden --update")
    TABLE.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {TABLE}")
