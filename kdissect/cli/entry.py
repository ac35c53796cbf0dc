"""The ``kdissect`` entry point: the click group run under the last-resort handler
(crash.py)."""

from __future__ import annotations

import os
import sys

from ..crash import guard


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("KDISSECT_DEBUG") == "1"
    args = [a for a in args if a != "--debug"]
    from .group import main as cli

    guard(lambda: cli.main(args=args, prog_name="kdissect", standalone_mode=True), debug)
