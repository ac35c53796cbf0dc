"""Sorting the list, shared by both TUIs (exchanges, `kdissect log`): a click on a header
sorts by its column (again: reversed), `o` cycles through the app's sort orders (some
biggest first), `O` reverses. The app says what its rows sort by (``sort_value``), the
orders `o` offers and how to name them, and what to do once the rows moved
(``after_sort``: the detail follows the cursor)."""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding

from .exchange_list import ExchangeList

SORT_BINDINGS = [
    Binding("o", "sort_next", "Sort"),
    Binding("O", "sort_reverse", "Reverse sort", show=False),
]


class Sorting:
    """The sort keys of an app (a mixin of a Textual App with a ``table``)."""

    SORT_CYCLE: tuple[str, ...] = ()  # the orders `o` cycles through
    DESCENDING: frozenset[str] = frozenset()  # those `o` starts biggest first
    SORT_NAMES: dict[str, str] = {}  # how `o` names an order (else its column)
    sorted_by: tuple[str, bool]

    def sort_value(self, column: str) -> Callable[[object], tuple]:
        """A row's (0, value) to sort by; (1, ...) for an empty cell, which stays last."""
        raise NotImplementedError

    def after_sort(self) -> None:
        """The rows moved under the cursor: show what it is on now."""

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort the list by a column; selecting it again reverses the order."""
        if reverse is None:
            reverse = not self.sorted_by[1] if self.sorted_by[0] == column else False
        self.sorted_by = (column, reverse)
        self.table.set_order(column, self.sort_value(column), reverse)  # type: ignore[attr-defined]
        self.after_sort()

    def on_exchange_list_header_selected(self, event: ExchangeList.HeaderSelected) -> None:
        self.sort_by(str(event.label))

    def action_sort_next(self) -> None:
        """The next order of SORT_CYCLE (those in DESCENDING biggest first)."""
        column = self.sorted_by[0]
        at = self.SORT_CYCLE.index(column) if column in self.SORT_CYCLE else -1
        nxt = self.SORT_CYCLE[(at + 1) % len(self.SORT_CYCLE)]
        self.sort_by(nxt, nxt in self.DESCENDING)
        self.notify(  # type: ignore[attr-defined]
            f"sorted by {self.SORT_NAMES.get(nxt, nxt)}; o: next order, O: reverse",
            timeout=3,
        )

    def action_sort_reverse(self) -> None:
        self.sort_by(self.sorted_by[0], not self.sorted_by[1])
