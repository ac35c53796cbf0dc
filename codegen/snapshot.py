"""Write kdissect/protocol/kio_snapshot.json.gz, kio's layouts and error codes as data
(protocol/snapshot.py reads it):

    python -m codegen.snapshot

tests/test_pasted.py checks that the shipped snapshot equals what ``build`` makes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from kdissect.protocol.layout import Field, Struct
from kdissect.protocol.snapshot import FILE


def build() -> dict:
    """The snapshot's contents, from kio (slow: imports every kio schema module)."""
    from kio.schema.errors import ErrorCode

    from kdissect.protocol import kio_schemas

    structs: list[list[Any]] = []
    ids: dict[Struct, int] = {}

    def struct_id(st: Struct) -> int:
        if st not in ids:
            row: list[Any] = [st.name, None, None, st.flexible]
            ids[st] = len(structs)
            structs.append(row)
            row[1] = [field_row(f) for f in st.fields]
            row[2] = [field_row(f) for f in st.tagged]
        return ids[st]

    def field_row(f: Field) -> list:
        return [
            f.name,
            f.type,
            f.array,
            f.nullable,
            f.tag,
            None if f.struct is None else struct_id(f.struct),
            f.hint,
            f.compact,
        ]

    versions = kio_schemas.versions()
    layouts = {}
    for key, vs in versions.items():
        for v in vs:
            for direction in ("request", "response"):
                st = kio_schemas.layout(key, v, direction)
                if st is not None:
                    layouts[f"{key}/{v}/{direction}"] = struct_id(st)
    return {
        "versions": {str(k): list(v) for k, v in versions.items()},
        "errors": {str(int(e.value)): [e.name.upper(), bool(e.retriable)] for e in ErrorCode},
        "layouts": layouts,
        "structs": structs,
    }


def main() -> None:
    path = Path(__file__).resolve().parents[1] / "kdissect" / "protocol" / FILE
    text = json.dumps(build(), separators=(",", ":"), sort_keys=True).encode()
    with open(str(path), "wb") as f:
        f.write(gzip.compress(text, 9, mtime=0))
    print(f"wrote {path} ({len(text)} bytes of JSON)")


if __name__ == "__main__":
    main()
