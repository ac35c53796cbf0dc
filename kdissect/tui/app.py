"""The Textual TUI: the exchange list (growing while the source loads or stays live), the
selected exchange's field trees beside its bytes, filters, search, following a
connection, bookmarks, statistics, copy and export."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widgets import Input

from ..protocol import Message, Options
from ..render.lines import endpoint, message_json
from ..render.text import format_value
from ..stream import anomaly
from ..stream.model import Gap, KafkaMessage
from .browser import Browser, unique_path
from .detail import Detail, Item, findings_item
from .exchange_items import BROKER_TIME, ExchangeAdapter, ExchangeRows, _row, _sort_value, tls_item
from .exchange_list import LOCK, ExchangeList
from .record_match import asks_records, first_match
from .filterbar import FILTER_CSS
from .jobs import BAR_BINDINGS, WORK_CSS
from .loader import (
    GapSeen,
    ListedView,
    Row,
    TlsSeen,
    TopicNames,
    fork_loader,
    receive_rows,
    run_in_thread,
)
from .screens import StatsScreen
from .sorting import SORT_BINDINGS
from .spill import Spill

# the sort orders the `o` key cycles through (latency: slowest first)
SORT_CYCLE = ("time", BROKER_TIME, "latency", "status", "API", "client → broker", "client id", "#")
TIME_FORMATS = ("short", "utc", "local")


def long_time(ts: float, local: bool) -> str:
    when = datetime.fromtimestamp(ts, tz=timezone.utc)
    if local:
        when = when.astimezone()
    return when.strftime("%Y-%m-%d %H:%M:%S.%f ") + (when.strftime("%z") if local else "UTC")


def screenshot_dir() -> Path:
    """Where screenshots go: the Downloads folder when there is one, else here."""
    from platformdirs import user_downloads_path

    downloads = Path(user_downloads_path())
    return downloads if downloads.is_dir() else Path.cwd()


class KdissectApp(Browser):
    """Browse exchanges. ``load(sink)`` runs in a worker thread: it calls the sink's
    engine hooks (stream.sink): ``exchange`` with each exchange as it is found (rows
    appear while the source is still loading, and keep coming from a live one), ``gap``
    and ``tls`` with the holes and TLS connections, ``note`` with what the user should
    know, and ``progress(done, total)`` if it knows how far it is. With ``isolate`` (the
    default) it runs in a forked child process, so its CPU-bound decoding leaves this
    process's GIL to the UI; ``isolate=False`` keeps it in a thread (a source that needs
    this process's objects). ``stop`` is set when the app closes."""

    LIST = ExchangeRows

    TITLE = "kdissect"
    AUTO_FOCUS = "#exchanges"
    FILTER_HINT = (
        "display filter, e.g. anomaly, api == Produce and "
        "error != 0  (Tab completes, Enter applies, Esc closes)"
    )
    SEARCH_HINT = "search bytes (decompressed records too): text, or hex as 0x0001 / hex: 00 01"
    EXPORT_AS = " as JSON"
    EMPTY_HIDES = True
    SORT_CYCLE = SORT_CYCLE
    DESCENDING = frozenset({BROKER_TIME, "latency"})
    SORT_NAMES = {
        BROKER_TIME: "broker time: latency beyond the wait the client asked for, slowest first",
        "latency": "raw latency, slowest first (long polls and group waits included)",
    }
    CSS = (
        """
    #exchanges { height: 45%; }
    #empty { height: 1fr; display: none; padding: 1 2; }
    #empty.visible { display: block; }
    #detail { height: 1fr; }
    #main { height: 1fr; }
    #bars { height: auto; }
    """
        + FILTER_CSS
        + WORK_CSS
    )
    BINDINGS = [
        *BAR_BINDINGS,
        Binding("p", "next_problem", "Problem"),  # short: the footer keeps s ? q at 80
        Binding("P", "next_problem(-1)", "Previous problem", show=False),
        Binding("n", "search_next", "Next match", show=False),
        *SORT_BINDINGS,
        Binding("t", "time_format", "Time format", show=False),
        Binding("f", "follow", "Follow"),
        Binding("b", "bookmark", "Bookmark", show=False),
        Binding("B", "next_bookmark", "Next bookmark", show=False),
        Binding("x", "jump", "Req⇄Resp", show=False),
        Binding("v", "toggle_pane", "Bytes"),
        Binding("d", "toggle_values", "Values raw⇄decoded", show=False),
        Binding("c", "copy", "Copy value", show=False),
        Binding("e", "export", "Export JSON", show=False),
        Binding("E", "export_pcapng", "Export pcapng", show=False),
        Binding("J", "export_list", "Export list as JSON lines", show=False),
        Binding("s", "stats", "Stats"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        load,
        options: Options | None = None,
        title: str = "",
        stop: threading.Event | None = None,
        isolate: bool = True,
        keys=None,
        live: bool = False,
    ):
        """``live``: a source that runs until stopped (an interface, the proxy): the
        title says "live", rows without a frame number are numbered as they come, and
        the list follows new rows while its cursor is on the last one."""
        super().__init__()
        self.init_browser(title)
        self.adapter = ExchangeAdapter(self)
        self.live = live
        self.keys = keys  # the TLS key log (capture.tls.KeyLog), for `E`
        # the source's TLS connections (capture.tls.TlsFacts), decrypted or not
        self.tls_connections: list = []
        self.topic_ids: dict[str, str] = {}  # topic names the loader learned (TopicNames)
        # their final facts by Kafka connection (an exchange carries them as they were)
        self.tls_by_stream: dict[int, object] = {}
        self.isolate = isolate  # run the source in a child process
        self.load = load
        self.options = options or Options()
        self.items: list[ListedView] = []
        self.sorted_by: tuple[str, bool] = ("time", False)
        # (stream, the filter and the sort order before)
        self.following: tuple[int, str, tuple[str, bool]] | None = None
        # values the filter bar completes: topics and client ids seen so far
        self.seen["client_id"] = set()
        self.gaps: list[Gap] = []  # holes in the streams (as --stats counts them)
        self._job: tuple[str, threading.Event] | None = None  # (what, cancel)
        self._job_progress: tuple[int, int] | None = None
        self.time_format = "short"
        self.stop = stop or threading.Event()
        # record keys and values in the tree: decoded (by their schemas, else what they
        # look like) or raw bytes; `d` toggles (see tree_options)
        self.values_decoded = self.options.values is not None
        # message bytes live in a spill file, loaded when needed (a forked loader only)
        self.spill = Spill() if isolate else None

    def load_bytes(self, view: ListedView) -> ListedView:
        """``view`` with its messages' bytes loaded (they may live in the spill file)."""
        if self.spill is not None:
            self.spill.load(view)
        return view

    @property
    def views(self) -> list[ListedView]:
        """Every exchange read, in arrival order."""
        return self.items

    def on_unmount(self) -> None:  # (Textual runs Browser's too)
        self.stop.set()  # the loading stops before its spill file closes
        if self.spill is not None:
            self.spill.close()  # the unlinked file goes with its last descriptor

    # -- loading -------------------------------------------------------------------------

    def start_loading(self) -> None:
        """The source in a child forked now (``isolate``), else in the worker thread."""
        options = self.options
        if self.isolate:
            forked = fork_loader(self.load, options, _row, self.spill)
            self.load_in_worker(lambda take: receive_rows(forked, options, take, self.stop))
        else:
            self.load_in_worker(
                lambda take: run_in_thread(self.load, options, _row, lambda sent: take([sent]))
            )

    def admit(self, sent: object) -> ListedView | None:
        """A row's exchange, numbered if it has no frame; gaps and TLS connections kept
        for the statistics (gaps counted as --stats counts them)."""
        if isinstance(sent, GapSeen):
            self.gaps.append(sent.gap)
            self.noted(sent.gap.describe(), "warn")
            return None
        if isinstance(sent, TopicNames):
            self.topic_ids.update(sent.names)
            return None
        if isinstance(sent, TlsSeen):
            self.tls_connections.append(sent.facts)
            if sent.facts.stream is not None:
                self.tls_by_stream[sent.facts.stream] = sent.facts
            return None
        assert isinstance(sent, Row)
        view = sent.view
        view.topic_ids = self.topic_ids  # (filters and exports decode with them too)
        view.row, view._reasons = sent.row
        if view.row[0] in ("", "0"):  # no frame (the proxy's): by arrival
            view.row = (str(len(self.views) + 1), *view.row[1:])
        self.seen["topic"].update(view.facts().topics)
        if view.ex.request is not None and view.ex.request.client_id:
            self.seen["client_id"].add(view.ex.request.client_id)
        return view

    def on_resize(self, event: events.Resize) -> None:
        self.fit_list(event.size.height)  # (self.size is still the old size here)

    def fit_list(self, height: int | None = None) -> None:
        """The list takes its rows (and the header), at most 45% of the screen (a third
        below 30 lines): a short list leaves the room to the detail."""
        tables = self.query(ExchangeList)
        if tables:
            table = tables.first()
            height = self.size.height if height is None else height
            share = 0.45 if height >= 30 else 0.33  # small screens: the detail
            most = max(3, int(height * share))
            table.styles.height = max(3, min(most, table.row_count + 1))

    def subtitle_note(self) -> str:
        return f"  following stream {self.following[0]}" if self.following else ""

    def empty_text(self) -> Text:
        text = Text()
        if self.views:
            text.append(f"No exchange matches the filter {self.filter_text!r}", "bold yellow")
            text.append(f" ({len(self.views)} exchanges loaded).\n\n")
            text.append("/ changes the filter; an empty filter shows everything.")
            return text
        text.append(f"No Kafka exchanges in {self.title_text or 'the source'}.", "bold red")
        text.append("\n\n")
        for w in self.warnings:
            text.append(f"• {w}\n", "yellow")
        text.append(
            "\nWhat next: check the file opens (`kdissect pcap FILE --no-tui` "
            "prints the same reasons); if Kafka runs on other ports, add them "
            "with -p PORT. q quits."
        )
        return text

    # -- the list -----------------------------------------------------------------------

    def view_at(self, row: int) -> ListedView | None:
        rows = self.shown
        return rows[row] if 0 <= row < len(rows) else None

    def current_view(self) -> ListedView | None:
        return self.current()

    @property
    def detail_view(self) -> ListedView | None:
        """The exchange the detail shows."""
        return self.detail_item

    def decode_cost(self, view: ListedView) -> int:
        self.load_bytes(view)
        return sum(m.size for m in view.ex.messages)

    def decoding(self, cost: int) -> None:
        self.query_one(Detail).field_tree.root.set_label(f"decoding {cost} bytes…")

    def decode(self, view: ListedView) -> None:
        for m in view.ex.messages:
            self.tree_of(m)

    def follow_cursor(self) -> None:
        """After the rows change under the cursor (sort, filter), show what it is on."""
        self.show(self.current_view())

    def show(self, view: ListedView | None) -> None:
        if view is None:
            return
        self.detail_item = self.pending = view
        self.load_bytes(view)
        ex = view.ex
        items = []
        for m in (ex.request, ex.response):
            if m is None:
                continue
            decoded = self.tree_of(m)
            items.append(
                Item(Text(f"{decoded.title}  ({len(m.data)} bytes)", "bold"), m.data, decoded.tree)
            )
        title = Text(f"{ex.first.api_name} exchange, stream {ex.stream}, frame {ex.first.frame}")
        if ex.tls is not None:  # read from a decrypted TLS connection
            title.append(f"  {LOCK} TLS", "green")
            items.append(tls_item(self.tls_by_stream.get(ex.stream, ex.tls)))
        if ex.findings:
            items.append(findings_item(ex.findings))
        reasons = anomaly.reasons(view)
        if reasons:  # a cross for errors; a warning's mark otherwise (as on the lines)
            worst = any(f.severity == "error" for f in ex.findings) or view.facts().errors
            mark, style = ("✗", "bold red") if worst else ("!", "yellow")
            title.append(f"  {mark} {', '.join(reasons)}", style)
        detail = self.query_one(Detail)
        detail.show(title, items)
        if asks_records(self.filter):  # the record the filter matched, opened
            assert self.filter is not None
            found = first_match(self.filter, view, [i.root for i in detail.items])
            if found is not None:
                detail.select(*found)
                detail.field_tree.reveal(found[1], detail.items[found[0]].root)

    def tree_options(self) -> Options:
        """The options trees are decoded with: record keys and values raw, or decoded
        by the schemas given (without any, `d` shows what they look like: JSON, text,
        Protobuf, as ``--values`` does)."""
        if not self.values_decoded:
            return replace(self.options, values=None)
        if self.options.values is None:
            from ..schemas_source import Schemas

            self.options = replace(self.options, values=Schemas())
        return self.options

    def tree_of(self, m: KafkaMessage) -> Message:
        """The full tree of ``m``, decoded on first view and kept among the last few."""
        # (names learned meanwhile, while loading, make another tree)
        key = (m.index, self.values_decoded, len(self.topic_ids))
        decoded = self.trees.recall(key)
        if decoded is None:
            decoded = m.decoded(self.tree_options(), self.topic_ids)
            if not m.data and self.spill is not None:
                return decoded  # its bytes were let go meanwhile: not kept
            self.trees.keep(key, decoded)
        return decoded

    # -- actions ------------------------------------------------------------------------

    def action_time_format(self) -> None:
        """Time of day ⇄ date and time in UTC ⇄ date and time in the local zone."""
        self.time_format = TIME_FORMATS[(TIME_FORMATS.index(self.time_format) + 1) % 3]
        table = self.table
        table.time_of = (
            None
            if self.time_format == "short"
            else (lambda ts, local=self.time_format == "local": long_time(ts, local))
        )
        table.refresh()

    def stats_of(self, views: list) -> Callable:
        """The statistics of the exchanges shown, the gaps and warnings of the source."""
        from .screens import gather

        gaps = list(self.gaps)
        return lambda progress, cancel: gather(views, self.load_bytes, gaps, progress, cancel)

    def open_stats(self, views: list, gathered) -> None:
        self.push_screen(
            StatsScreen(views, self.load_bytes, gathered, self.warnings, tls=self.tls_connections),
            self._stats_closed,
        )

    def _stats_closed(self, view: ListedView | None) -> None:
        """The statistics screen may send back an exchange to jump to."""
        if view is not None and view in self.shown:
            self.select(view)

    def action_follow(self) -> None:
        """Only the selected exchange's connection, in capture order; again: all."""
        if self.following is not None:
            before = self.following[1]
            self.stop_following()
            self.apply_filter(before)
            self.query_one("#filter", Input).value = before
            return
        view = self.current_view()
        if view is None:
            return
        before = self.filter_text
        self.following = (view.ex.stream, before, self.sorted_by)
        self.sorted_by = ("time", False)
        self.table.set_order("time", lambda v: _sort_value(v, "time"), False, keep=view)
        self.apply_filter(f"stream == {view.ex.stream}")

    def stop_following(self) -> None:
        """Following ends: the order chosen before it comes back, on the same exchange
        (following shows capture order)."""
        assert self.following is not None, "only while following"
        order = self.following[2]
        self.following = None
        if order != self.sorted_by:
            self.sorted_by = order
            column, reverse = order
            self.table.set_order(column, self.sort_value(column), reverse, keep=self.current_view())

    def action_bookmark(self) -> None:
        view = self.current_view()
        if view is None:
            return
        view.bookmarked = not view.bookmarked
        self.table.refresh()

    def action_next_bookmark(self) -> None:
        rows = self.shown
        n = len(rows)
        for step in range(1, n + 1):
            row = (self.table.cursor_row + step) % n
            if getattr(rows[row], "bookmarked", False):
                self.table.move_cursor(row)
                return
        self.notify("no bookmarks in the list (b bookmarks an exchange)")

    def action_toggle_values(self) -> None:
        """Record keys and values as raw bytes ⇄ decoded into trees (by the schemas
        given, else by what they look like); the detail shows the same field again."""
        self.values_decoded = not self.values_decoded
        detail = self.query_one(Detail)
        path = detail.selected_path()
        self.show(self.detail_item)
        if path is not None:
            detail.select_path(*path)
        how = (
            "decoded"
            + (
                ""
                if self.options.values is not None
                and getattr(self.options.values, "framed", False)
                or getattr(self.options.values, "overrides", None)
                else " by what they look like (no schemas given: --schemas DIR, "
                "--value-schema TOPIC=FILE)"
            )
            if self.values_decoded
            else "raw bytes"
        )
        self.notify(f"record keys and values: {how}; d toggles", timeout=4)

    def action_jump(self) -> None:
        self.query_one(Detail).jump_message()

    def action_copy(self) -> None:
        detail = self.query_one(Detail)
        if detail.selected is None:
            return
        _, node = detail.selected
        value = format_value(node, self.options.show_secrets, 1 << 20)
        self.copy_to_clipboard(value)
        self.notify(f"copied {node.name}: {value[:60]}")

    def export_of(self, view: ListedView) -> tuple[Path, Callable[[Path], object]]:
        """`e`: the exchange as JSON (its messages as ``--format json`` gives them)."""
        ex = self.load_bytes(view).ex
        out = {
            "client": endpoint(ex.client),
            "broker": endpoint(ex.broker),
            "latency_ms": ex.latency * 1000 if ex.latency is not None else None,
            **{
                m.direction: message_json(m, self.options, ex, topic_ids=self.topic_ids)
                for m in (ex.request, ex.response)
                if m is not None
            },
        }
        path = unique_path(Path(f"kdissect-exchange-{ex.first.frame}.json"))
        return path, lambda to: to.write_text(json.dumps(out, indent=2, default=str))

    def action_export_list(self) -> None:
        """The exchanges listed (the filter applies), in the list's order, as JSON lines
        (``--format jsonl``'s messages), written in the background (Esc cancels)."""
        stem = Path(self.title_text).stem if self.title_text else "capture"
        options = self.options

        def work(path: Path, views: list, progress, cancel) -> int | None:
            # the owner's alone, as recordings and key logs: it holds the traffic
            with open(path, "w", opener=lambda p, flags: os.open(p, flags, 0o600)) as out:
                for done, view in enumerate(views, 1):
                    ex = self.load_bytes(view).ex
                    for m in (ex.request, ex.response):
                        if m is not None:
                            line = message_json(m, options, ex, topic_ids=self.topic_ids)
                            out.write(json.dumps(line, default=str) + "\n")
                    if done % 256 == 0:
                        if cancel.is_set():
                            return None
                        progress(done, len(views))
            return len(views)

        def finish(path: Path, count: int) -> None:
            self.notify(
                f"exported {count} exchanges to {path.resolve()} (JSON lines, a "
                f"message a line; SASL secrets masked unless --show-secrets)"
            )

        self.export_listed(
            lambda n: unique_path(Path(f"kdissect-{stem}-{n}-exchanges.jsonl")), work, finish
        )

    def action_export_pcapng(self) -> None:
        """The exchanges shown (the filter applies) as a pcapng file Wireshark opens."""
        from .export import write_pcapng

        if not self.shown:  # (as J says: no empty file left behind)
            self.notify("nothing to export: the list is empty", severity="warning")
            return
        stem = Path(self.title_text).stem if self.title_text else "capture"
        path = unique_path(Path(f"kdissect-{stem}-{len(self.shown)}-exchanges.pcapng"))
        try:
            count, secrets = write_pcapng(
                str(path), self.shown, self.options.show_secrets, self.load_bytes, self.keys
            )
        except OSError as e:
            self.notify(f"could not write {path}: {e.strerror}", severity="error")
            return
        tls = f" with its connections' {secrets} TLS secrets" if secrets else ""
        self.notify(
            f"exported {count} exchanges to {path.resolve()}{tls} (SASL secrets "
            f"masked unless --show-secrets)"
        )

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Screenshots (the command palette's) go to a folder that exists: Textual's
        default, ~/Downloads, is missing on many servers and the save then failed."""
        return super().deliver_screenshot(filename, path or str(screenshot_dir()), time_format)

    # -- filter and search bars ---------------------------------------------------------

    def submit_filter(self, text: str) -> None:
        if self.apply_filter(text) is not None:
            return  # the reason stays shown under the bar, caret and all
        if self.following is not None:  # a filter typed ends following a connection
            self.stop_following()
            self._update_subtitle()  # (apply_filter's said "following")
        self.action_close_bars()
