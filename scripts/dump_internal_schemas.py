#!/usr/bin/env python3
"""Regenerate kdissect/protocol/internal_schemas.py from Apache Kafka's jars.

    scripts/dump_internal_schemas.py            # rewrite the module
    scripts/dump_internal_schemas.py --check    # exit 1 if the module is not current

Maven fetches the release's jars (scripts/internal_schemas/pom.xml), javac compiles
DumpSchemas.java, and the JVM prints the layouts it finds in the generated classes' runtime
Schema objects. Needs Java 17+ and mvn.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "scripts" / "internal_schemas"
MODULE = ROOT / "kdissect" / "protocol" / "internal_schemas.py"
PINNED = ROOT / "scripts" / "kafka" / "VERSION"


def kafka_version() -> str:
    return PINNED.read_text().strip() if PINNED.exists() else "4.3.1"


def generate(version: str) -> str:
    with tempfile.TemporaryDirectory(prefix="kdissect-schemas-") as tmp:
        cp_file = Path(tmp) / "classpath.txt"
        subprocess.run(["mvn", "-q", "-B", "-f", str(HERE / "pom.xml"), f"-Dkafka.version={version}",
                        "dependency:build-classpath", f"-Dmdep.outputFile={cp_file}"],
                       check=True, stdout=subprocess.DEVNULL)
        classpath = cp_file.read_text().strip()
        jars = [j for j in classpath.split(":")
                if "/org/apache/kafka/" in j and j.endswith(f"-{version}.jar")]
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", tmp,
                        str(HERE / "DumpSchemas.java")], check=True)
        out = subprocess.run(["java", f"-Dkafka.version={version}", "-cp", f"{tmp}:{classpath}",
                              "DumpSchemas", *jars], check=True, capture_output=True, text=True)
        return out.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say whether the module is current")
    args = ap.parse_args()
    text = generate(kafka_version())
    if args.check:
        if MODULE.read_text() != text:
            print(f"{MODULE.relative_to(ROOT)} is not current: run {Path(__file__).name}",
                  file=sys.stderr)
            return 1
        return 0
    MODULE.write_text(text)
    print(f"wrote {MODULE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
