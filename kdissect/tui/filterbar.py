"""The filter bar's completion: field names first, then API names after ``api``,
error names after ``error``, the topics and client ids seen so far after ``topic`` and
``client_id`` (quoted), and the words of the language."""

from __future__ import annotations

import re

from rich.text import Text
from textual import events
from textual.binding import Binding, NoBinding
from textual.suggester import Suggester
from textual.widgets import Input, Static

from ..filters import _ALIASES, FilterError, parse_filter
from ..protocol.names import API_NAMES
from ..stream.fields import FIELDS, completions

_WORDS = ("and", "or", "not", "in", "contains", "matches")
_LAST_WORD = re.compile(r"[A-Za-z_][\w.]*$")
# a quoted value being typed after one of the fields whose values the capture tells
_SEEN_VALUE = re.compile(
    r"\b(topic|client_id|client\.id|kafka\.topic_name|kafka\.client_id)"
    r"\s*(?:==|!=)\s*\"?([^\"\s]*)$"
)


def _error_names() -> list[str]:
    from ..protocol.names import error_table

    return sorted(name for name, _retriable in error_table().values())


class FilterSuggester(Suggester):
    """Completes the word being typed; → or Tab accepts (Textual's inline suggestion)."""

    def __init__(self, seen=lambda field: (), fields: list[str] | None = None) -> None:
        """``seen(field)``: the values of ``field`` ("topic", "client_id") so far;
        ``fields``: the names offered (all the language's by default)."""
        super().__init__(use_cache=False, case_sensitive=True)
        self.seen = seen
        self.fields = fields
        self.apis = sorted(set(API_NAMES.values()))
        self.errors: list[str] | None = None

    def candidates(self, before: str) -> list[str]:
        """What may come at the end of ``before`` (the text up to the word typed)."""
        field = re.search(r"([A-Za-z_][\w.]*)\s*(?:(?:==|!=|>=|<=|>|<|=)\s*|in\s*\{[^}]*)$", before)
        name = _ALIASES.get(field.group(1), field.group(1)) if field else None
        if name == "api":
            return self.apis
        if name == "error":
            if self.errors is None:
                self.errors = _error_names()
            return self.errors
        if name in FIELDS and FIELDS[name].choices:  # a closed set (codec, status)
            return [
                c if re.fullmatch(r"\w+", c) else f'"{c}"'
                for c in FIELDS[name].choices
                if not c.endswith(": ")
            ]
        fixed = completions(FIELDS[name].kind) if name in FIELDS else None
        if fixed is not None:
            return fixed
        fields = (
            self.fields
            if self.fields is not None
            else [
                *(n for n, f in FIELDS.items() if f.complete),
                *sorted(a for a in _ALIASES if a.startswith("kafka.")),
            ]
        )
        after_value = before.strip() and not re.search(
            r"(==|!=|>=|<=|[<>=~(!]|&&|\|\||\b(?:and|or|not))\s*$", before
        )
        return [*_WORDS, *fields] if after_value else [*fields, *_WORDS]

    async def get_suggestion(self, value: str) -> str | None:
        return self.suggest(value)

    def suggest(self, value: str) -> str | None:
        """The completion of ``value``, computed now (Tab right after the last letter
        must not wait for the suggestion Textual computes in the background)."""
        typed = _SEEN_VALUE.search(value)
        if typed is not None:
            field = _ALIASES.get(typed.group(1), typed.group(1))
            prefix = typed.group(2)
            for candidate in sorted(self.seen(field)):
                if candidate.startswith(prefix) and candidate != prefix:
                    return value[: typed.start(2)].rstrip('"') + f'"{candidate}"'
            return None
        word = _LAST_WORD.search(value)
        if word is None:
            return None
        prefix = word.group(0)
        candidates = self.candidates(value[: word.start()])
        lower = prefix.lower()
        if any(c.lower() == lower for c in candidates):
            # a whole name already (`Fetch`, the one Tab just completed): offering a longer
            # one (`FetchSnapshot`) showed as if Tab had inserted it, and a second Tab did
            return None
        for candidate in candidates:
            if candidate.lower().startswith(lower):
                return value[: word.start()] + candidate
        return None


class OrderedInput(Input):
    """An Input that runs its own keys (ctrl+u, ←, Backspace, Tab...) in the order they
    were typed. Textual inserts a character as the Input reads it, but hands a bound key
    up to the app, whose bindings run after the Input has read the keys queued behind
    it: a burst of ctrl+u then letters (a paste, a fast typist, tmux) cleared the
    letters typed after it."""

    async def _on_key(self, event: events.Key) -> None:
        # (Textual's own map of the widget's keys: a Textual without it keeps its order)
        lookup = getattr(self._bindings, "get_bindings_for_key", None)
        if not event.is_printable and lookup is not None:
            try:
                binding = lookup(event.key)[0]
            except NoBinding:
                binding = None
            # (an action that does nothing -- copy with nothing selected -- leaves the key
            # to the app, as Textual does: ctrl+c then quits)
            if binding is not None and await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()
                restart_blink = getattr(self, "_restart_blink", None)
                if restart_blink is not None:
                    restart_blink()  # (as Input's own key handler does)
                return
        await super()._on_key(event)


class FilterInput(OrderedInput):
    """The filter bar: Tab completes (the suggestion, shown dim) instead of moving the
    focus away, so what is typed next stays in the bar."""

    BINDINGS = [Binding("tab", "complete", "Complete", show=False)]

    def _current_suggestion(self) -> str:
        """The suggestion for the value as it is now: Textual computes it in a worker
        after each change, so a Tab typed right after the last letter found none (or
        the one of the value before)."""
        if isinstance(self.suggester, FilterSuggester) and self.value:
            return self.suggester.suggest(self.value) or ""
        return self._suggestion

    def action_complete(self) -> None:
        suggestion = self._current_suggestion()
        if suggestion and suggestion != self.value:
            self.value = suggestion
            self.cursor_position = len(self.value)

    def action_cursor_right(self, select: bool = False) -> None:
        """→ at the end accepts the completion (as Tab), computed now too."""
        if not select and self.cursor_at_end and self.selection.is_empty:
            self._suggestion = self._current_suggestion()
        super().action_cursor_right(select)


def check_filter(box: Input, problem: Static, names: list[str] | None = None) -> None:
    """As the filter is typed: a green border while it reads, else a red one and, under
    the bar, a caret under the character (past the bar's border and padding: 3 cells),
    then the reason with its did-you-mean."""
    try:
        if box.value.strip():
            parse_filter(box.value, names)
        box.styles.border = ("tall", "green")
        problem.remove_class("visible")
    except FilterError as e:
        box.styles.border = ("tall", "red")
        problem.update(
            Text.assemble(" " * (e.position + 3) + "^\n", (str(e).splitlines()[0], "bold"))
        )
        problem.add_class("visible")


# how the filter bar, its reason and the active filter line look, in every screen
# that has them (the exchanges', kdissect log's)
FILTER_CSS = """
    #active-filter { height: 1; display: none; background: $boost; padding: 0 1; }
    #active-filter.visible { display: block; }
    .bar { display: none; }
    .bar.visible { display: block; }
    #filter-error { display: none; color: $error; height: auto; max-height: 4; }
    #filter-error.visible { display: block; }
"""
