"""JSON from the input with its nesting depth and integer literals bounded: Python's
parser recurses per level (RecursionError past ~1,000), later walks of the document
recurse too, and turning a 5,000-digit literal into an int costs quadratic time."""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 200  # JSON nesting: real schemas and state files stay far below
MAX_DIGITS = 400  # an integer literal longer than this is no Kafka or schema number


class JsonError(ValueError):
    """Not JSON, or JSON beyond the bounds (the text says which)."""


def _int(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise JsonError(f"an integer of {len(text)} digits (at most {MAX_DIGITS})")
    return int(text)


def load_json(data: bytes | bytearray | str, max_depth: int = MAX_DEPTH) -> Any:
    too_deep = f"nested too deeply (more than {max_depth} levels)"
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        doc = json.loads(text, parse_int=_int)
    except RecursionError:
        raise JsonError(too_deep) from None
    except JsonError:
        raise
    except (UnicodeDecodeError, ValueError) as e:
        raise JsonError(f"not JSON ({e})") from None
    if depth(doc) > max_depth:
        raise JsonError(too_deep)
    return doc


def depth(doc: Any) -> int:
    """The nesting depth of a JSON value (iterative: as deep as it is)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in item)
    return deepest
