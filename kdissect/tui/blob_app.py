"""The blob screen: paste bytes in any format ``kdissect blob`` reads, optionally say
which API, version and direction they are, and watch the tree and bytes update."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.containers import Container, Horizontal, Vertical
from textual.suggester import SuggestFromList
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Select, Static, TextArea

from ..blob import BlobError, parse_blob
from ..protocol import Options
from ..protocol.names import API_NAMES, api_key_of
from ..protocol.guess import distinguish
from ..sources.paste_choice import read_paste
from ..sources.pasted import Hints
from .palette import ANSI_DARK, ANSI_LIGHT
from .detail import Detail, Item
from .filterbar import OrderedInput
from .screens import HelpScreen

BLOB_HELP = """\
[b]Blob screen[/b]
  Paste bytes the way you found them, code and all: hex (any spacing, 0x, colons, a \
label in front), xxd, hexdump -C, od, Wireshark or tcpdump -X dumps (packet headers \
left out), Erlang/Elixir <<0,0,"t"::binary>>, Python b'\\x00...' over several lines, \
C/Java/Go/Rust arrays, Node's {"type":"Buffer",...}, Go's [0 0 18], quoted hex in \
code, base64. The status line says which lines the bytes came from, or the line and \
character where reading stopped. The size prefix may be there or not; several \
messages in a row are split; a fragment is resynced (or give the offset to start at). \
What: a whole message (default), a body without its header, or a bare record batch. \
API, version and direction are optional: without them kdissect reads the request \
header, or ranks every API and version by how cleanly the bytes decode.
  tab             move between the box, the hints, the field tree and the bytes
  ← → ↑ ↓         in the bytes: move the cursor; the field under it is selected
  a paste replaces what the box held (select part of it to paste over that part only)
  ctrl+l          clear the box and the tree
  ctrl+x          next message        ctrl+r   dissect now
  ctrl+q          quit                escape   close this help"""


class PasteArea(TextArea):
    """The paste box: a paste replaces what the box held (a second blob pasted after
    the first was appended to it and read as one), unless part of it is selected."""

    async def _on_paste(self, event: events.Paste) -> None:
        if self.read_only:
            return
        if self.selection.is_empty:
            event.prevent_default()
            event.stop()
            self.load_text(event.text)
            self.move_cursor(self.document.end)
            self.post_message(TextArea.Changed(self))  # load_text does not say so
            return
        await super()._on_paste(event)


DIRECTIONS = [("either direction", "auto"), ("request", "request"), ("response", "response")]
MODES = [
    ("whole message(s)", "message"),
    ("body without header", "body"),
    ("bare record batch", "records"),
]


class BlobApp(App):
    TITLE = "kdissect blob"
    CSS = """
    #input { height: 12; }
    #paste { width: 1fr; }
    #hints { width: 56; layout: grid; grid-size: 2; grid-rows: 3; grid-gutter: 0 1; }
    #status { height: auto; max-height: 6; padding: 0 1; }
    #detail { height: 1fr; }
    """
    BINDINGS = [
        Binding("ctrl+r", "dissect", "Dissect now"),
        Binding("ctrl+l", "clear", "Clear"),
        Binding("ctrl+x", "jump", "Next message", show=False),
        Binding("f1", "help", "Help"),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(self, text: str = "", options: Options | None = None):
        super().__init__()
        self.initial = text
        self.options = options or Options()
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            with Horizontal(id="input"):
                area = PasteArea(self.initial, id="paste")
                area.border_title = "paste bytes: hex, xxd, hexdump -C, <<0,1>>, b'\\x00', base64"
                yield area
                with Container(id="hints"):
                    yield OrderedInput(
                        placeholder="API (name or key): any",
                        id="api",
                        suggester=SuggestFromList(
                            sorted(set(API_NAMES.values())), case_sensitive=False
                        ),
                    )
                    yield OrderedInput(placeholder="version: any", id="version", type="integer")
                    yield Select(DIRECTIONS, value="auto", allow_blank=False, id="direction")
                    yield Select(MODES, value="message", allow_blank=False, id="mode")
                    yield OrderedInput(placeholder="start at byte: 0", id="at", type="integer")
            yield Static(Text("paste bytes above", style="dim"), id="status")
            yield Detail(self.options.show_secrets, id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.ansi_theme_dark, self.ansi_theme_light = ANSI_DARK, ANSI_LIGHT  # legible
        self._fit_input()
        self.query_one("#paste", TextArea).focus()
        if self.initial:
            self.action_dissect()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_input(event.size)  # (the app's own size is still the old one here)

    def _fit_input(self, size: Size | None = None) -> None:
        """The paste box and hints take a third of a short screen (at 24 lines the
        tree had 5 rows under a 12-line box), 9 lines (the hints whole) to 12; on a
        narrow one the hints go under the box, in a row (beside it, at 80 columns the box
        had 22: a pasted xxd line broke into pieces)."""
        size = size or self.size
        box, hints = self.query_one("#input"), self.query_one("#hints")
        box.styles.height = max(9, min(12, size.height // 3))
        wide = size.width >= 120
        box.styles.layout = "horizontal" if wide else "vertical"
        hints.styles.width = 56 if wide else "100%"
        hints.styles.height = "1fr" if wide else 3
        hints.styles.grid_size_columns = 2 if wide else 5
        self.query_one("#api", Input).placeholder = "API (name or key): any" if wide else "API: any"
        self.query_one("#version", Input).placeholder = "version: any" if wide else "version"
        self.query_one("#at", Input).placeholder = "start at byte: 0" if wide else "at byte: 0"

    @on(TextArea.Changed)
    @on(Input.Changed)
    @on(Select.Changed)
    def _changed(self, event) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(0.3, self._settled)

    def _settled(self) -> None:
        """Typing paused: dissect, unless the app closed meanwhile (its widgets gone)."""
        try:
            self.action_dissect()
        except NoMatches:
            pass

    def hints(self) -> tuple[Hints, str | None]:
        api_text = self.query_one("#api", Input).value.strip()
        version_text = self.query_one("#version", Input).value.strip()
        direction = self.query_one("#direction", Select).value  # no blank: a str
        key = api_key_of(api_text) if api_text else None
        problem = f"unknown API {api_text!r}" if api_text and key is None else None
        version = int(version_text) if version_text.lstrip("-").isdigit() else None
        mode = self.query_one("#mode", Select).value
        at_text = self.query_one("#at", Input).value.strip()
        at = int(at_text) if at_text.isdigit() else 0
        return Hints(
            key,
            version,
            direction if isinstance(direction, str) and direction != "auto" else None,
            body=mode == "body",
            records=mode == "records",
            at=at,
        ), problem

    def action_dissect(self) -> None:
        status = self.query_one("#status", Static)
        detail = self.query_one(Detail)
        text = self.query_one("#paste", TextArea).text
        if not text.strip():
            status.update(Text("paste bytes above", style="dim"))
            detail.show("", [])
            return
        try:
            parsed = parse_blob(text)
        except BlobError as e:
            status.update(Text(str(e), style="bold red"))
            detail.show("", [])  # not the tree of the bytes pasted before
            return
        hints, problem = self.hints()
        if problem:
            status.update(
                Text(problem + "; use a name like Metadata or a key like 3", style="bold red")
            )
            detail.show("", [])
            return
        reading = read_paste(parsed.data, hints, self.options)
        items = reading.items
        lines = Text(
            f"read {len(parsed.data)} bytes ({parsed.format}, {_where(parsed)}) as {reading.label}",
            style="dim",
        )
        for item in items[:3]:
            bad = item.message.problems
            lines.append(
                f"\n{item.message.title}: {item.how}", style="bold red" if bad else "bold green"
            )
            if bad:
                lines.append(f"  ({len(bad)} problem{'s' if len(bad) != 1 else ''})", style="red")
            for f in item.findings:
                lines.append(f"\n  {f.text()}", style="yellow")
            clean = [c for c in item.candidates if c.clean]
            if len(clean) > 1:
                lines.append(
                    f"\n  {len(clean)} candidates decode cleanly: "
                    + ", ".join(c.label for c in clean[:4])
                    + (" …" if len(clean) > 4 else "")
                    + f"; {distinguish(clean[0], clean[1])}",
                    style="dim",
                )
        status.update(lines)
        detail.show(
            f"{len(items)} message{'s' if len(items) != 1 else ''}",
            [
                Item(
                    Text(
                        f"{i.message.title}  ({len(i.message.data)} bytes at @{i.offset})", "bold"
                    ),
                    i.message.data,
                    i.message.tree,
                    base=i.offset,
                )  # offsets from the paste's start
                for i in items
            ],
        )

    def action_clear(self) -> None:
        """Empty the paste box (and so the tree): ready for the next blob."""
        area = self.query_one("#paste", TextArea)
        area.load_text("")
        area.focus()
        self.action_dissect()

    def action_jump(self) -> None:
        self.query_one(Detail).jump_message()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(BLOB_HELP))


def _where(parsed) -> str:
    """Which lines the bytes came from, in a few words."""
    pieces = parsed.pieces
    if not pieces:
        return "all of it"
    lines = (
        f"line {pieces[0].line}"
        if pieces[0].line == pieces[-1].end_line
        else f"lines {pieces[0].line}-{pieces[-1].end_line}"
    )
    skipped = f"; left out {'; '.join(parsed.skipped)}" if parsed.skipped else ""
    return f"from {lines}{skipped}"
