"""The field tree's own walks: ``Node.findings`` paths against a plain recursive
reading of what a path is (the parent's path, a dot, the name; no dot after an empty
path), on random trees with empty names, dotted names and problems anywhere."""

from __future__ import annotations

import random

from kdissect.protocol.node import Node


def _reference(node: Node, path: str = "") -> list[tuple[str, str, str]]:
    here = f"{path}.{node.name}" if path else node.name
    found = [(here, node.code or "malformed_field", node.problem)] if node.problem else []
    for child in node.children:
        found += _reference(child, here)
    return found


def _random_tree(rnd: random.Random) -> Node:
    def make() -> Node:
        return Node(
            rnd.choice(["", "a", "b.c", "records", "[0]"]),
            "t",
            0,
            problem=rnd.choice([None, None, "", "truncated"]),
            code=rnd.choice([None, "node_budget"]),
        )

    nodes = [make()]
    for _ in range(rnd.randrange(0, 60)):
        nodes.append(rnd.choice(nodes).add(make()))
    return nodes[0]


def test_findings_paths_match_the_recursive_reading():
    rnd = random.Random(22)
    for _ in range(2000):
        tree = _random_tree(rnd)
        assert tree.findings() == _reference(tree)
        assert tree.problems() == [(p, r) for p, _, r in _reference(tree)]


def test_findings_of_a_deep_tree_do_not_recurse():
    root = node = Node("m", "t", 0)
    for _ in range(5000):  # deeper than Python's recursion limit
        node = node.add(Node("x", "t", 0))
    node.problem = "bad"
    ((path, code, reason),) = root.findings()
    assert path == "m" + ".x" * 5000 and code == "malformed_field" and reason == "bad"
