"""Long work in the TUIs (record filters, byte search, statistics, export): a job runs in
a worker thread (its heavy part in forked children: work.py) while a line above the list
says what runs and how far; Esc cancels it. The same line shows loading's progress. And
the bars (filter, search) under the list, and the search from the cursor. Both apps
(exchanges, kdissect log) mix this in; they keep ``loaded``, ``_progress`` (done, total of
the loading, or None), ``stop`` (an Event ending the loading), ``_stopped``, ``table``
(the list), ``shown`` (its rows) and ``needle_text``."""

from __future__ import annotations

import re
import threading
import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, ProgressBar, Static

from .work import scan

IN_WORKERS = 200  # record filters and searches over more rows run in workers
_SAY_EVERY = 0.1  # seconds between a job's progress reports to the screen

WORK_CSS = """
    #work { height: 1; }
    #work.done { display: none; }
    #work-label { width: auto; max-width: 60%; padding: 0 1; color: $text-muted; }
    #progress { width: 1fr; }
"""


# The keys that move the focus (open a bar, close it) are priority bindings:
# Textual runs them as the key is read, before the next key is handed to the widget
# with the focus. As ordinary bindings they ran once the list had taken the key from its
# queue, and the keys typed meanwhile (`/api`: `api`) had already been queued for the
# list: lost, or run as list commands. An Input consumes printable keys, so `/` typed in
# a bar stays a character; ``check_action`` leaves them to a modal screen on top.
BAR_BINDINGS = [
    Binding("slash", "filter", "Filter", priority=True),
    Binding("ctrl+f", "search", "Search", show=False, priority=True),
    Binding("escape", "close_bars", "Close bar", show=False, priority=True),
    # Textual's own ctrl+c only says how to quit; a terminal tool quits (an Input with
    # the focus keeps ctrl+c as its copy)
    Binding("ctrl+c", "quit", "Quit", show=False),
]
_BAR_ACTIONS = frozenset({"filter", "search", "close_bars"})


SEARCH_FORMS = "type text, or hex as 0x0a0b or hex: 0a 0b"


def parse_needle(text: str) -> bytes:
    """Search text as bytes: ``0x0a0b``, ``hex: 0a 0b`` or plain text (UTF-8); a
    ValueError says what is wrong with it."""
    t = text.strip()
    hexpart = (
        t[4:] if t.lower().startswith("hex:") else t[2:] if t.lower().startswith("0x") else None
    )
    if hexpart is None:
        if not t:
            raise ValueError(SEARCH_FORMS)
        return t.encode()
    digits = re.sub(r"[\s:]", "", hexpart)
    bad = re.search(r"[^0-9a-fA-F]", digits)
    if bad:
        raise ValueError(f"{bad[0]!r} is not a hex digit (0-9, a-f); {SEARCH_FORMS}")
    if len(digits) % 2:
        raise ValueError(f"hex takes two digits a byte: {digits!r} has {len(digits)}")
    if not digits:
        raise ValueError(SEARCH_FORMS)
    return bytes.fromhex(digits)


def set_text(line: Static, content, layout: bool = True) -> None:
    """``line`` shows ``content``, redrawn only when it changed: the lines redrawn as a
    source loads cost a layout of the screen each (``layout=False``: a line whose size
    stays, as the active filter's)."""
    if getattr(line, "_kd_shown", None) != content:
        line._kd_shown = content  # type: ignore[attr-defined]
        line.update(content, layout=layout)


def work_line() -> ComposeResult:
    """What runs and how far: a line of its own, so it never covers the title."""
    with Horizontal(id="work", classes="done"):
        yield Static(id="work-label")
        yield ProgressBar(id="progress", show_eta=True)


class WorkMoved(Message):
    """The job under way got further (its worker thread says so every _SAY_EVERY s)."""


class Jobs:
    """The job under way and the work line (a mixin of a Textual App)."""

    _job: tuple[str, threading.Event] | None = None  # (what, cancel)
    _job_progress: tuple[int, int] | None = None
    needle: bytes | None = None  # what ctrl+f looks for (n: the next)

    def check_action(self, action: str, parameters) -> bool | None:
        """The bar keys act on the main screen only (a modal one on top has its own
        Esc); in a bar, `/` is a character (a path, a regular expression), not a key
        that opens the filter bar again."""
        if action in _BAR_ACTIONS and len(self.screen_stack) > 1:  # type: ignore[attr-defined]
            return False
        if action == "filter" and isinstance(self.focused, Input):  # type: ignore[attr-defined]
            return False
        return True

    def _show_work(self) -> None:
        """The work line: the job under way, else loading (when the source says how far
        it is); hidden when there is neither."""
        # the main screen's line, also while a modal screen (help, statistics) is on top
        stack = getattr(self, "screen_stack", [])
        lines = stack[0].query("#work") if stack else None
        bars = stack[0].query(ProgressBar) if stack else None
        labels = stack[0].query("#work-label") if stack else None
        if not lines or not bars or not labels:  # starting, or closing (widgets leave one by one)
            return
        line, bar, label = lines.first(), bars.first(), labels.first(Static)
        progress = getattr(self, "_progress", None)
        if self._job is not None:
            what = f"{self._job[0]} · Esc cancels"
            done, total = self._job_progress or (0, None)
        elif not getattr(self, "loaded", True) and progress is not None:
            what = "loading · Esc stops (rows so far stay)"
            done, total = progress
        else:
            line.add_class("done")
            return
        set_text(label, what)
        bar.update(total=total, progress=done)
        line.remove_class("done")

    def run_job(self, what: str, work, finish) -> None:
        """``work(progress, cancel)`` in a worker thread (its heavy part in forked
        children: see work.py), the work line saying ``what`` and how far; then
        ``finish(result)`` here, with None when Esc cancelled it."""
        if self._job is not None:
            self._job[1].set()  # a new job replaces the one under way
        cancel = threading.Event()
        self._job, self._job_progress = (what, cancel), None
        self._show_work()

        said = 0.0

        def progress(done: int, total: int) -> None:
            nonlocal said
            self._job_progress = (done, total)
            if time.monotonic() - said >= _SAY_EVERY:
                said = time.monotonic()
                self.post_message(WorkMoved())  # type: ignore[attr-defined]

        def run() -> None:
            result = work(progress, cancel)
            self.call_from_thread(done, None if cancel.is_set() else result)  # type: ignore[attr-defined]

        def done(result) -> None:
            if self._job is not None and self._job[1] is cancel:
                self._job = None
                self._show_work()
            if not cancel.is_set() and result is not None:
                finish(result)

        self.run_worker(run, thread=True, group="job")  # type: ignore[attr-defined]

    def on_work_moved(self, message: WorkMoved) -> None:
        self._show_work()

    def cancel_job(self) -> bool:
        """Esc: cancel the job under way, else stop loading; True if there was one."""
        if self._job is not None:
            what, cancel = self._job
            cancel.set()
            self._job = None
            self._show_work()
            self.notify(f"cancelled: {what}; the list is as it was", timeout=3)  # type: ignore[attr-defined]
            return True
        stop = getattr(self, "stop", None)
        if not getattr(self, "loaded", True) and stop is not None and not stop.is_set():
            self._stopped = True
            stop.set()
            return True
        return False

    # -- the bars -------------------------------------------------------------------------

    def _open_bar(self, name: str) -> None:
        for bar in self.query(".bar"):  # type: ignore[attr-defined]
            bar.remove_class("visible")
        box = self.query_one(f"#{name}", Input)  # type: ignore[attr-defined]
        box.add_class("visible")
        # focus now, not on the next idle: keys typed right after `/` (a paste, a fast
        # typist) must land in the bar, not run as list keys
        self.screen.set_focus(box)  # type: ignore[attr-defined]

    def action_filter(self) -> None:
        self._open_bar("filter")
        box = self.query_one("#filter", Input)  # type: ignore[attr-defined]
        box.value = getattr(self, "filter_text", "") or ""  # what is in effect, to edit
        box.cursor_position = len(box.value)

    def action_search(self) -> None:
        self._open_bar("search")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in a bar. (As a priority binding, Enter right after Backspace in one
        read of a real terminal was lost: tests/test_tui_terminal.py.)"""
        if event.input.id == "filter":
            self.submit_filter(event.value)
        elif event.input.id == "search":
            self.submit_search(event.value)

    def submit_filter(self, text: str) -> None:
        """Apply the filter typed; a bad one keeps the bar open, its reason under it."""
        if self.apply_filter(text) is not None:  # type: ignore[attr-defined]
            return  # the reason stays shown under the bar, caret and all
        self.action_close_bars()

    def submit_search(self, text: str) -> None:
        try:
            self.needle = parse_needle(text)
        except ValueError as why:
            self.needle = None
            self.notify(str(why), severity="error")  # type: ignore[attr-defined]
            return
        self.needle_text = text.strip()
        self.action_close_bars()
        self.action_search_next()  # type: ignore[attr-defined]

    def action_close_bars(self) -> None:
        """Esc: close the bar that is open, else cancel the work under way (a filter, a
        search, the statistics) or stop loading."""
        bars = self.query(".bar")  # type: ignore[attr-defined]
        if not any(bar.has_class("visible") for bar in bars):
            self.cancel_job()
        for bar in bars:
            bar.remove_class("visible")
        self.query_one("#filter-error").remove_class("visible")  # type: ignore[attr-defined]
        self.table.focus()  # type: ignore[attr-defined]

    def search_from_cursor(self, test, found, nothing: str) -> None:
        """``found(row)`` with the next row after the cursor (wrapping) passing ``test``,
        else ``nothing`` is said; over many rows on all cores in the background."""
        rows = self.shown  # type: ignore[attr-defined]
        n = len(rows)
        at = self.table.cursor_row  # type: ignore[attr-defined]
        order = [rows[(at + step) % n] for step in range(1, n + 1)]

        def finish(hits: list[int]) -> None:
            if hits:
                found(order[hits[0]])
            else:
                self.notify(nothing, severity="warning")  # type: ignore[attr-defined]

        if n > IN_WORKERS:
            self.run_job(
                f"search {self.needle_text}",
                lambda progress, cancel: scan(order, test, progress, cancel, first_only=True),
                finish,
            )
        else:
            finish(next(([i] for i, row in enumerate(order) if test(row)), []))
