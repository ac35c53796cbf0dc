#!/usr/bin/env python3
"""Regenerate kdissect/protocol/internal_schemas.py from Apache Kafka's jars.

    scripts/dump_internal_schemas.py            # rewrite the module
    scripts/dump_internal_schemas.py --check    # exit 1 if the module is not current

scripts/kafka/schemas runs scripts/kafka/KafkaSchemas.java (mode ``internal``) on the release's
jars (fetched by scripts/kafka/fetch), which prints the layouts it finds in the generated
classes' runtime Schema objects. Needs Java 17+ and mvn. scripts/kafka/update regenerates
this module with every other table generated from the jars.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "scripts" / "kafka" / "schemas"
MODULE = ROOT / "kdissect" / "protocol" / "internal_schemas.py"


def generate() -> str:
    return subprocess.run(
        [str(SCHEMAS), "internal"], check=True, capture_output=True, text=True
    ).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say whether the module is current")
    args = ap.parse_args()
    text = generate()
    if args.check:
        if MODULE.read_text() != text:
            print(
                f"{MODULE.relative_to(ROOT)} is not current: run {Path(__file__).name}",
                file=sys.stderr,
            )
            return 1
        return 0
    MODULE.write_text(text)
    print(f"wrote {MODULE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
