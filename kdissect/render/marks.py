"""A finding's mark on a line, by its severity (summary lines and `kdissect log`'s lines):
only an error is a cross."""

MARKS = {"error": ("✗", "red"), "warn": ("!", "yellow"), "note": ("·", "cyan")}
