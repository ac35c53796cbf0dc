"""The filter bar's completion: field names first, then API names after ``api``,
error names after ``error``, and the words of the language."""

from __future__ import annotations

import re

from textual.suggester import Suggester

from ..filters import FIELDS
from ..protocol.names import API_NAMES

_WORDS = ("and", "or", "not", "in", "contains", "matches")
_LAST_WORD = re.compile(r"[A-Za-z_][\w.]*$")


def _error_names() -> list[str]:
    from kio.schema.errors import ErrorCode
    return sorted(e.name.upper() for e in ErrorCode)


class FilterSuggester(Suggester):
    """Completes the word being typed; → or Tab accepts (Textual's inline suggestion)."""

    def __init__(self) -> None:
        super().__init__(use_cache=True, case_sensitive=True)
        self.apis = sorted(set(API_NAMES.values()))
        self.errors: list[str] | None = None

    def candidates(self, before: str) -> list[str]:
        """What may come at the end of ``before`` (the text up to the word typed)."""
        field = re.search(r"([A-Za-z_]\w*)\s*(?:==|!=|in\s*\{[^}]*|=)\s*[\w,\s]*$", before)
        if field and field.group(1) == "api":
            return self.apis
        if field and field.group(1) in ("error", "errors"):
            if self.errors is None:
                self.errors = _error_names()
            return self.errors
        return [*FIELDS, *_WORDS]

    async def get_suggestion(self, value: str) -> str | None:
        word = _LAST_WORD.search(value)
        if word is None:
            return None
        prefix = word.group(0)
        for candidate in self.candidates(value[:word.start()]):
            if candidate.lower().startswith(prefix.lower()) and candidate != prefix:
                return value[:word.start()] + candidate
        return None
