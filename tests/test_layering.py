"""The layering of docs/engine.md and DESIGN.md, checked over every package: imports
point down the flow (sources and sinks → stream → protocol), never back, and the
packages' import graph has no cycle."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package (or top-level module) -> the kdissect packages it may import
ALLOWED: dict[str, set[str]] = {
    "protocol": {"_native"},                             # pure functions of bytes; _native:
                                                         # the compiled Avro reader (pure too)
    "bounded": {"protocol"},                             # input files read within limits
    "capture": {"protocol", "_native", "bounded"},                  # _native: the compiled packet path                             # packets, TCP, TLS, pcapng writing
    "stream": {"protocol"},                              # framing, pairing, enrichment, engine
    "schemas_source": {"protocol", "bounded"},
    "blob": set(),                                       # pasted text -> bytes
    "filters": {"protocol", "stream", "filter_values"},
    "filter_values": {"protocol", "stream"},             # filters into decoded record values
    "sources": {"protocol", "capture", "stream", "filter_values", "bounded"},
    "render": {"protocol", "stream", "filters", "_native"},  # _native: log record lines
    "proxy": {"protocol", "stream", "capture", "bounded"},
    "pipeline": {"protocol", "capture", "stream", "sources", "render",
                 "__version__"},                     # the version tables record
    "tui": {"protocol", "capture", "stream", "filters", "render", "blob", "sources",
            "schemas_source"},
    "crash": {"capture"},                                # names the input a bug met
    "cli": {"protocol", "capture", "stream", "sources", "filters", "render", "proxy",
            "pipeline", "tui", "blob", "schemas_source", "crash", "bounded", "__init__",
            "__version__"},
    "__main__": {"cli"},
    "__init__": set(),
}
# known exceptions, each with its reason (remove when fixed)
EXCEPTIONS = {
    # log items' record.key/value filter values reuse the JSON lines' record walk
    ("kdissect/sources/logdir.py", "render"),
    # decoded values are filtered as JSON lines show them: the JSON lines' record walk
    ("kdissect/filter_values.py", "render"),
    # record.value.PATH reads values as JSON lines show them (lazily, when a filter asks)
    ("kdissect/stream/fields.py", "filter_values"),
}


def imported_packages(path: Path, text: str | None = None) -> set[str]:
    """The kdissect packages (second name component) ``path`` imports, at any depth
    (``text``: its source, if not read from the file)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    here = list(parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            p = name.split(".")
            if p[0] == "kdissect":
                out.add(p[1] if len(p) > 1 else "__init__")
    return out


def package_of(path: Path) -> str:
    parts = path.relative_to(ROOT / "kdissect").with_suffix("").parts
    return parts[0]


@lru_cache(maxsize=1)
def graph() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the files that import it."""
    out: dict[str, dict[str, set[str]]] = {}
    for path in sorted((ROOT / "kdissect").rglob("*.py")):
        me = package_of(path)
        for other in imported_packages(path) - {me}:
            out.setdefault(me, {}).setdefault(other, set()).add(
                str(path.relative_to(ROOT)))
    return out


def test_every_package_has_a_layer():
    packages = {package_of(p) for p in (ROOT / "kdissect").rglob("*.py")}
    assert packages <= set(ALLOWED), sorted(packages - set(ALLOWED))


def test_imports_point_down():
    wrong = []
    for me, imports in graph().items():
        for other, files in imports.items():
            if other not in ALLOWED[me]:
                wrong += [(f, other) for f in sorted(files) if (f, other) not in EXCEPTIONS]
    assert wrong == [], wrong


def test_no_cycle_between_packages():
    edges = {me: {o for o, files in imports.items()
                  if any((f, o) not in EXCEPTIONS for f in files)}
             for me, imports in graph().items()}

    def reaches(start: str, target: str, seen: frozenset[str]) -> bool:
        return any(d == target or (d not in seen and reaches(d, target, seen | {d}))
                   for d in edges.get(start, ()))
    assert sorted(p for p in edges if reaches(p, p, frozenset())) == []


def test_the_checker_sees_a_wrong_import():
    """Relative imports resolve at any depth and inside functions (a test that can fail)."""
    deep = ROOT / "kdissect" / "protocol" / "values_schema" / "probe.py"
    assert imported_packages(deep, "def f():\n    from ...stream import engine\n") == {"stream"}
    assert imported_packages(deep, "from .. import node\nfrom . import avro\n") == {"protocol"}
    assert imported_packages(deep, "import kdissect.tui.app\n") == {"tui"}
