"""Java programs of the tests (tests/support/java/*.java) compiled once: `java Source.java`
compiles the source again on every run (seconds of CPU on a busy 2-core machine), so the
classes are kept in the cache, keyed by a hash of the source and the classpath it was
compiled against (a changed source or jar compiles again).

    subprocess.run(java_command(source, classpath) + [args...])
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("KDISSECT_CACHE", Path.home() / ".cache" / "kdissect")) / "javac"


def _key(source: Path, classpath: str) -> str:
    h = hashlib.sha256(source.read_bytes())
    for entry in classpath.split(os.pathsep):
        jars = sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*") else [Path(entry)]
        for jar in jars:
            st = jar.stat() if jar.exists() else None  # (a missing one: javac says so)
            h.update(f"{jar}:{st and st.st_size}:{st and st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def compiled(source: Path, classpath: str) -> Path:
    """The directory holding ``source``'s classes, compiled against ``classpath`` once."""
    out = CACHE / f"{source.stem}-{_key(source, classpath)}"
    if not (out / f"{source.stem}.class").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=CACHE))
        done = subprocess.run(
            ["javac", "-nowarn", "-d", str(tmp), "-cp", classpath, str(source)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"javac {source.name} failed:\n{done.stderr[-3000:]}")
        try:
            tmp.rename(out)  # atomic: a concurrent compile of the same key wins
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def java_command(source: Path, classpath: str, *jvm: str) -> list[str]:
    """The command that runs ``source``'s main class (its file name) on ``classpath``."""
    classes = compiled(source, classpath)
    return ["java", *jvm, "-cp", os.pathsep.join([str(classes), classpath]), source.stem]
