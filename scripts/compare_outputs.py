"""Compare this checkout's printed output with another checkout's, byte for byte.

    python scripts/compare_outputs.py --ref ../main [--extra CAPTURE[:KEYS]]... [-j 2]

Runs ``kdissect pcap`` from both checkouts (each on PYTHONPATH in turn, the same
interpreter) on every capture of captures/ (its ``.keys`` file beside it, if any, as
--keylog) and on each ``--extra`` capture, in each view (the summary, ``--stats``,
``--format jsonl``, ``-V``), on the compiled path and with KDISSECT_PURE=1, and
reports every run whose stdout, stderr or exit status differ. Exit status 1 if any do.
A change meant to leave the output alone (a faster path) is checked with it against
the checkout it was made from.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIEWS = {"summary": [], "stats": ["--stats"], "jsonl": ["--format", "jsonl"], "verbose": ["-V"]}


def captures() -> list[tuple[Path, Path | None]]:
    found = []
    for path in sorted((ROOT / "captures").rglob("*.pcap*")):
        keys = path.with_suffix(".keys")
        found.append((path, keys if keys.exists() else None))
    return found


def run(checkout: Path, capture: Path, keys: Path | None, view: list[str], pure: bool) -> str:
    """A digest of (exit status, stdout, stderr) of one run."""
    env = {k: v for k, v in os.environ.items() if k not in ("KDISSECT_PURE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(checkout)
    if pure:
        env["KDISSECT_PURE"] = "1"
    # -P: `-m` would put the working directory first on sys.path, and run from a
    # checkout's root both runs took that checkout's code
    args = [sys.executable, "-P", "-m", "kdissect", "pcap", "--no-tui", str(capture), *view]
    if keys is not None:
        args += ["--keylog", str(keys)]
    done = subprocess.run(args, capture_output=True, env=env, timeout=3600)
    h = hashlib.sha256()
    for part in (str(done.returncode).encode(), done.stdout, b"\0stderr\0", done.stderr):
        h.update(part)
    return f"{h.hexdigest()} rc={done.returncode} out={len(done.stdout)} err={len(done.stderr)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", required=True, type=Path, help="the checkout to compare with")
    ap.add_argument("--extra", action="append", default=[], help="CAPTURE[:KEYS]")
    ap.add_argument("--views", default=",".join(VIEWS), help="of " + ",".join(VIEWS))
    ap.add_argument("--extra-views", default=None, help="views of the --extra captures")
    ap.add_argument("--no-repo", action="store_true", help="only the --extra captures")
    ap.add_argument("-j", type=int, default=2, help="runs side by side")
    opts = ap.parse_args()
    views = opts.views.split(",")
    jobs: list[tuple[Path, Path | None, str, bool]] = []
    if not opts.no_repo:
        jobs += [(c, k, v, pure) for c, k in captures() for v in views for pure in (False, True)]
    for extra in opts.extra:
        path, _, keys = extra.partition(":")
        for v in (opts.extra_views or opts.views).split(","):
            jobs += [(Path(path), Path(keys) if keys else None, v, pure) for pure in (False, True)]

    def both(job: tuple[Path, Path | None, str, bool]) -> tuple[str, str, str]:
        capture, keys, view, pure = job
        name = f"{capture.name} {view}{' pure' if pure else ''}"
        return (
            name,
            run(opts.ref.resolve(), capture, keys, VIEWS[view], pure),
            run(ROOT, capture, keys, VIEWS[view], pure),
        )

    differ = 0
    with ThreadPoolExecutor(opts.j) as pool:
        for name, ref, mine in pool.map(both, jobs):
            same = ref == mine
            differ += not same
            print(f"{'same   ' if same else 'DIFFERS'} {name}: {mine}", flush=True)
            if not same:
                print(f"        reference: {ref}", flush=True)
    print(f"{len(jobs) - differ} of {len(jobs)} runs alike")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
