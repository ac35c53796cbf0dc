"""Registries used everywhere: API keys are written as numbers in one place only
(kdissect/protocol/apis.py, the API table), and Kafka's error codes come from one table
(protocol/names.py) — kio's ``ErrorCode`` is read there, never by the views."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kdissect"
REGISTRY = "kdissect/protocol/apis.py"
# the one table of error codes (from the snapshot codegen/snapshot.py makes, else kio)
KIO_ERRORS = {"kdissect/protocol/names.py"}

# an expression naming an API key: api_key, request_api_key, m.api_key, first.api_key...
_API_KEY = re.compile(r"(^|_)api(_key)?$", re.I)
# a name holding API keys: _RECORD_APIS, CONFIG_APIS, EMBEDDED_API_KEYS...
_API_SET = re.compile(r"(^|_)APIS?($|_)|API_KEYS?", re.I)


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _ints(node: ast.AST) -> list[int]:
    """The int literals ``node`` is or holds (in a tuple, set, list, or frozenset/set/tuple
    of one)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node.value]
    if (
        isinstance(node, ast.Call)
        and _name(node.func) in {"frozenset", "set", "tuple"}
        and len(node.args) == 1
    ):
        return _ints(node.args[0])
    if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
        return [i for e in node.elts for i in _ints(e)]
    return []


def _int_keys(node: ast.AST) -> list[int]:
    """A dict literal's int keys (``{38: ..., ENVELOPE: ...}`` -> [38])."""
    if isinstance(node, ast.Dict):
        return [i for k in node.keys if k is not None for i in _ints(k)]
    return []


def api_number_literals(
    source: str, api_sets: set[str] | None = None, tree: ast.Module | None = None
) -> list[tuple[int, str]]:
    """(line, what) for each API key written as a number in ``source`` (``tree``: its
    syntax tree, when parsed already):

    - compared with an API key (``api_key == 18``, ``m.api_key in (0, 1, 78)``);
    - passed as one (``layout(api_key=3, ...)``);
    - int literals, or a dict keyed by them, held in a name that says it holds APIs
      (``_RECORD_APIS = frozenset({0, 1, 78})``), or in a name some comparison in the
      module (or ``api_sets``) tests an API key against (``NAMES_LISTENERS =
      frozenset({3, 10, 60})``, then ``req.api_key in evidence.NAMES_LISTENERS``);
    - a dict keyed by int literals and indexed by an API key (``FIELDS.get(api_key)``);
    - ``api_key_of("OffsetCommit")``: a name looked up at run time (a typo is None)."""
    tree = ast.parse(source) if tree is None else tree
    out: list[tuple[int, str]] = []
    api_sets = set(api_sets or ()) | api_lookups(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _name(node.func) == "api_key_of"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            # a name looked up at run time: a typo gives None, silently
            out.append((node.lineno, f"by a literal name: {ast.unparse(node)}"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_API_KEY.search(_name(s) or "") for s in sides):
                out += [
                    (node.lineno, f"compared with an API key: {ast.unparse(s)}")
                    for s in sides
                    if _ints(s)
                ]
        elif (
            isinstance(node, ast.keyword)
            and node.arg
            and _API_KEY.search(node.arg)
            and _ints(node.value)
        ):
            out.append((node.value.lineno, f"passed as an API key: {ast.unparse(node)}"))
    _assigned_sets(tree, api_sets, out)
    return sorted(set(out))


def api_lookups(tree: ast.Module) -> set[str]:
    """The names an API key is compared with or looked up in (``m.api_key in NAMES``,
    ``TABLE[api_key]``, ``FIELDS.get(m.api_key)``)."""
    api_sets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_API_KEY.search(_name(s) or "") for s in sides):
                api_sets |= {n for s in sides if (n := _name(s)) and not _API_KEY.search(n)}
        elif (
            isinstance(node, ast.Subscript)
            and _API_KEY.search(_name(node.slice) or "")
            and (n := _name(node.value))
        ):
            api_sets.add(n)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and _API_KEY.search(_name(node.args[0]) or "")
            and (n := _name(node.func.value))
        ):
            api_sets.add(n)
    return api_sets


def _assigned_sets(tree: ast.Module, api_sets: set[str], out: list[tuple[int, str]]) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for t in targets:
            n = _name(t)
            if n and (_API_SET.search(n) or n in api_sets) and (_ints(value) or _int_keys(value)):
                out.append((node.lineno, f"API keys by number in {n}"))


def _generated(source: str) -> bool:
    head = source[:300].lower()
    return "generated" in head and "do not edit" in head


_API_NUMBERS: dict[str, list[tuple[int, str]]] = {}


def _scan() -> dict[str, list[tuple[int, str]]]:
    if not _API_NUMBERS:
        # names compared with API keys anywhere (NAMES_LISTENERS is defined in one module
        # and compared in another): a first pass collects them for every module
        from tests.support.package_source import modules

        parsed = {str(p.relative_to(ROOT)): (s, t) for p, s, t in modules()}
        looked_up = set().union(*(api_lookups(t) for _, t in parsed.values()))
        for rel, (source, tree) in parsed.items():
            # generated files write what their generator read from the table
            if rel != REGISTRY and not _generated(source):
                _API_NUMBERS[rel] = api_number_literals(source, looked_up, tree)
    return _API_NUMBERS


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_api_keys_are_named_from_the_api_table():
    found = {rel: hits for rel, hits in _scan().items() if hits}
    assert found == {}, "write API keys by their names from kdissect/protocol/apis.py"


def test_the_checker_sees_api_numbers():
    """Each shape the registry test rejects is seen (a test that can fail)."""
    assert [
        line
        for line, _ in api_number_literals(
            "if api_key == 18:\n    pass\n"
            "x = m.api_key in (0, 1, 78)\n"
            "_RECORD_APIS = frozenset({0, 1, 78})\n"
            "L = frozenset({3, 10, 60})\ny = req.api_key in evidence.L\n"
            "F: dict = {38: 1, 39: 2}\nz = F.get(api_key)\n"
            "layout(api_key=3, api_version=0)\n"
            "w = TABLE[request_api_key]\nTABLE = {0: 'a'}\n"
            "OFFSET_COMMIT = api_key_of('OffsetCommit')\n"
        )
    ] == [1, 3, 4, 5, 7, 9, 11, 12]
    # a name looked up in another module
    assert (
        api_number_literals("NAMES_LISTENERS = frozenset({3, 10, 60})\n", {"NAMES_LISTENERS"}) != []
    )
    # names from the table, versions and other numbers pass
    assert (
        api_number_literals(
            "if api_key == API_VERSIONS and api_version == 0:\n    pass\n"
            "S = frozenset({PRODUCE, FETCH})\nHEADER = {0: 'v0', 1: 'v1'}\n"
            "x = m.api_key in S\nkey = 16\nif key == 16:\n    pass\n"
        )
        == []
    )


@pytest.mark.slow  # (seconds: the package scanned, as above)
def test_error_codes_come_from_the_one_table():
    """kio's ErrorCode enum is read by the error table only (names.py): views ask
    ``protocol.names``."""
    from tests.support.package_source import modules

    wrong = []
    for path, _, tree in modules():
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("kio")
                and any(a.name == "ErrorCode" for a in node.names)
                and rel not in KIO_ERRORS
            ):
                wrong.append(rel)
            elif (
                isinstance(node, ast.Import)
                and rel.split("/")[1] != "protocol"
                and any(a.name.split(".")[0] == "kio" for a in node.names)
            ):
                wrong.append(rel)
    assert wrong == []
