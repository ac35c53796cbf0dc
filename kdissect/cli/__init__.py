"""Command line: ``main`` is the click group; each command lives in its own module,
imported when the command is used (group.COMMAND_MODULES)."""

from .group import main

__all__ = ["main"]
