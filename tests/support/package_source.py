"""The package's modules, read and parsed once per test session: several tests walk every
module's syntax tree (API numbers, kio imports, run-time compilation, layering), and one
parse of the package costs about 1.2 CPU-s. The trees are shared: read them, never
change them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kdissect"


@functools.cache
def modules() -> tuple[tuple[Path, str, ast.Module], ...]:
    """(path, source, syntax tree) of every module of the package, by path."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        out.append((path, source, ast.parse(source)))
    return tuple(out)


def tree(path: Path) -> ast.Module:
    """The syntax tree of ``path``: the shared one for a module of the package."""
    for p, _, t in modules():
        if p == path:
            return t
    return ast.parse(path.read_text(encoding="utf-8"))
