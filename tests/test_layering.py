"""The layering of docs/internals/engine.md and DESIGN.md is import-linter's contracts in
pyproject.toml ([tool.importlinter]), which ``lint-imports`` checks in ./scripts/test:
imports point down the flow, no cycle between the modules of any package, no exceptions.
What it does not check is that every package is in a layer: a new package left out of
the layers contract would be free to import anything. This test does."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kdissect"


def _layered() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return {name.strip("()") for layer in layers for name in re.split(r"[|:\s]+", layer) if name}


def test_every_package_has_a_layer():
    tops = (
        {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
        | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
        | {p.name.split(".")[0] for p in PACKAGE.glob("_native*.so")}
    )
    assert tops - _layered() == set(), "give each package a layer in pyproject.toml"
    assert _layered() - tops <= {"_native"}, "a layer names a package that is gone"
