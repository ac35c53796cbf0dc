"""A finding's mark on a line, by its severity (summary lines, `kdissect log`'s lines and
the field trees' problems): only an error is a cross."""

from ..protocol.findings import severity_of

MARKS = {"error": ("✗", "red"), "warn": ("!", "yellow"), "note": ("·", "cyan")}


def problem_mark(code: str | None) -> tuple[str, str, bool]:
    """(mark, its colour, whether it is an error) of a tree field's problem by its code."""
    severity = severity_of(code)
    mark, colour = MARKS[severity]
    return mark, colour, severity == "error"
