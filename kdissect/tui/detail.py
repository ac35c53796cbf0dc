"""The detail pane: field trees of one or more messages beside the bytes of the selected
field's buffer. Moving in the tree highlights the field's bytes (its parents shaded in
graded tones); moving the cursor in the bytes selects the innermost field there.
Decompressed records are shown as their own buffer."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from ..protocol.node import Node
from ..render.kafka_forms import kafka_form
from ..render.marks import MARKS, problem_mark
from ..render.text import PROBLEM, as_root, format_value, hexdump, leaf_colours
from .palette import PARENT_TONES, TREE_CURSOR_CSS, dark, legible

FACT = "fact"  # a node's kind when it is no bytes (TLS facts)
HIGHLIGHT = "bold #000000 on #fd971f"  # RGB: a light theme's ANSI yellow is dark
CURSOR = "reverse"
HEX_WIDTH = 16  # bytes per line when there is room (else 8)
_HEX_START = 10  # "00000000  " before the first byte
_TREE_AT_LEAST = 64  # columns the field tree keeps before the dump narrows
# below this width the tree and the bytes take turns (`v`) instead of sharing the row
NARROW = HEX_WIDTH // 2 * 4 + 18 + _TREE_AT_LEAST
WINDOW_LINES = 96  # lines dumped before the pane has a size
_OPEN_AT_FIRST = 64  # a part with more fields (a big batch's records) opens
# when asked: hundreds of rows cost a key its 100 ms


@dataclass
class Item:
    """One message in the detail pane; ``base`` is where its bytes start in what the
    user gave (a pasted blob numbers offsets from the start of the paste)."""

    label: Text
    data: bytes
    root: Node
    base: int = 0


def findings_item(findings: list) -> Item:
    """What kdissect noticed about an exchange or a log's item, each finding with its
    explanation (the lists show codes), marked by severity."""
    root = Node("findings", FACT, 0, 0, len(findings))
    for f in findings:
        mark, _style = MARKS[f.severity]
        root.add(Node(f.code, FACT, 0, 0, f.where, note=f"{mark} {f.severity}: {f.text()}"))
    return Item(Text(f"Findings ({len(findings)})", "bold yellow"), b"", root)


def locate(root: Node, target: Node) -> tuple[Node, list[Node]] | None:
    """(buffer holder, path from root to target): the holder is the innermost node on
    the path whose ``buffer`` holds the target's bytes, or ``root``."""
    path = root.path_to(target)
    if path is None:
        return None
    holder = root
    for node in path[:-1]:
        if node.buffer is not None:
            holder = node
    return holder, path


def innermost(holder: Node, offset: int) -> Node:
    """The deepest node of ``holder``'s own buffer covering ``offset``."""
    node = holder
    while True:
        if node is not holder and node.buffer is not None:
            return node  # its children live in another buffer
        nxt = next((c for c in node.children if c.offset <= offset < c.end), None)
        if nxt is None:
            return node
        node = nxt


class HexView(Static, can_focus=True):
    """A hex dump with a byte cursor (arrows move it; a click places it)."""

    BINDINGS = [
        Binding("left", "move(-1)", "Byte left", show=False),
        Binding("right", "move(1)", "Byte right", show=False),
        Binding("up", "lines(-1)", "Line up", show=False),
        Binding("down", "lines(1)", "Line down", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "move_to(0)", show=False),
        Binding("end", "move_to(-1)", show=False),
    ]

    class CursorMoved(Message):
        def __init__(self, view: HexView, offset: int):
            super().__init__()
            self.view, self.offset = view, offset

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.data = b""
        self.root: Node | None = None
        self.marks: list[tuple[int, int, str]] = []
        self.cursor = 0
        self.show_secrets = False
        self.first_line = 0  # the dump shows lines first_line... of the data
        self.per_line = HEX_WIDTH
        self.base = 0  # the address shown for byte 0
        self._colours: tuple[Node | None, dict[int, str]] = (None, {})

    @staticmethod
    def width_for(per_line: int) -> int:
        """Columns the dump takes: offset, hex, text, borders and scroll bar."""
        return _HEX_START + 4 * per_line + 4 + 2 + 2

    def set_per_line(self, per_line: int) -> None:
        if per_line != self.per_line:
            self.per_line = per_line
            self.styles.width = self.width_for(per_line)
            self.first_line = self.cursor // per_line
            self._render_dump()

    def show(
        self,
        data: bytes,
        root: Node | None,
        marks,
        cursor: int | None = None,
        title: str = "",
        base: int = 0,
    ) -> None:
        self.data, self.root, self.marks, self.base = data, root, list(marks), base
        if cursor is not None:
            self.cursor = max(0, min(cursor, len(data) - 1))
        elif self.cursor >= len(data):
            self.cursor = 0
        self.border_title = title
        self._render_dump()

    def rows(self) -> int:
        """Lines of the dump on screen (before the first layout: a generous window)."""
        height = self.content_region.height
        return height if height > 0 else WINDOW_LINES

    def _render_dump(self) -> None:
        """Dump the lines on screen, moving them to keep the cursor (the selected
        field's first byte) in view: the pane is its own viewport, so it follows the
        selection whoever moves it (the tree, a search, the keys) and a 1 MB message
        costs a screenful, not 65k lines, per refresh."""
        marks = list(self.marks)
        if self.has_focus and self.data:
            marks.append((self.cursor, self.cursor + 1, CURSOR))
        width, rows = self.per_line, self.rows()
        lines = -(-len(self.data) // width)
        line = self.cursor // width
        if not self.first_line <= line < self.first_line + rows:
            self.first_line = line - rows // 3  # a jump: some context above
        self.first_line = max(0, min(self.first_line, lines - rows))
        start = self.first_line * width
        window = (start, start + rows * width)
        if self.root is not None and self._colours[0] is not self.root:
            # a leaf's colour per tree, once: the cursor moves re-render the same tree
            self._colours = (self.root, leaf_colours(self.root))
        dump = (
            hexdump(
                self.data,
                self.root,
                self.show_secrets,
                self.base,
                self._colours[1] if self.root is not None else None,
                width=width,
                marks=marks,
                window=window,
            )
            if self.data
            else Text("no bytes", style="dim")
        )
        if lines > rows:  # say it scrolls, and where the view is
            self.border_subtitle = (
                f"{start + self.base:#x}–"
                f"{min(window[1], len(self.data)) + self.base:#x} of "
                f"{len(self.data)} bytes · ↑↓ PgUp PgDn (Tab here)"
            )
        else:
            self.border_subtitle = self.legend()
        self.update(legible(dump, dark(self)))

    def on_resize(self) -> None:
        self._render_dump()

    def visible_range(self) -> tuple[int, int]:
        """(first, end) offsets of the bytes on screen now."""
        start = self.first_line * self.per_line
        return start, min(len(self.data), start + self.rows() * self.per_line)

    def on_mouse_scroll_down(self, event) -> None:
        event.stop()
        self.move_to(self.cursor + 3 * self.per_line)

    def on_mouse_scroll_up(self, event) -> None:
        event.stop()
        self.move_to(self.cursor - 3 * self.per_line)

    def legend(self) -> str:
        """What the shading means (Textual markup, for the border)."""
        dark = self.app.current_theme.dark if self.app else True
        tones = PARENT_TONES[dark]
        return f"[{HIGHLIGHT}] field [/] [{tones[0]}] parents [/] [{PROBLEM}] problem [/]"

    def on_focus(self) -> None:
        self._render_dump()

    def on_blur(self) -> None:
        self._render_dump()

    def action_move(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_lines(self, count: int) -> None:
        self.move_to(self.cursor + count * self.per_line)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.rows() - 1) * self.per_line)

    def action_move_to(self, offset: int) -> None:
        self.move_to(offset if offset >= 0 else len(self.data) - 1)

    def move_to(self, offset: int) -> None:
        if not self.data:
            return
        self.cursor = max(0, min(offset, len(self.data) - 1))
        self._render_dump()
        self.post_message(self.CursorMoved(self, self.cursor))

    def on_click(self, event) -> None:
        inside = event.get_content_offset(self)  # past the border
        offset = self.offset_at(inside.x, inside.y) if inside is not None else None
        if offset is not None:
            self.focus()
            self.move_to(offset)

    def offset_at(self, x: int, y: int) -> int | None:
        """The byte under cell (x, y) of the dump (hex or text column)."""
        width = self.per_line
        col = x - _HEX_START
        if 0 <= col < 3 * width + 1:
            if col >= 3 * (width // 2):
                col -= 1  # the wider gap in the middle
            index = col // 3
        else:
            text_start = _HEX_START + 3 * width + 1 + 2
            index = x - text_start
            if not 0 <= index < width:
                return None
        offset = (self.first_line + y) * width + index
        return offset if 0 <= offset < len(self.data) else None


class FieldTree(Tree):
    """Field trees of the messages in the detail pane; each label shows the field's
    offset and length, its value, note and problem."""

    def render_label(self, node, base_style, style) -> Text:
        return legible(super().render_label(node, base_style, style), dark(self))

    BINDINGS = [
        Binding("asterisk", "expand_all", "Expand all", show=False),
        Binding("right", "open", "Open", show=False),
        Binding("left", "close", "Close", show=False),
    ]

    def __init__(self, **kwargs):
        super().__init__("select an exchange", **kwargs)
        self.show_secrets = False
        self.by_node: dict[int, TreeNode] = {}
        self.bases: dict[int, int] = {}  # node -> the base of its offsets

    def fill(self, title: str | Text, items: list[Item]) -> None:
        self.clear()
        self.by_node = {}
        self.bases = {}
        self.root.set_label(title)
        for index, item in enumerate(items):
            branch = self.root.add(item.label, data=(index, item.root), expand=True)
            self.by_node[id(item.root)] = branch
            self.bases[id(item.root)] = item.base
            self._populate(branch)
            for part in branch.children:  # header and body open at first
                if part.data and len(part.data[1].children) <= _OPEN_AT_FIRST:
                    self._populate(part)
                    part.expand()
        self.root.expand()

    def _populate(self, branch: TreeNode) -> None:
        """Add a node's children (once): trees of big messages are built as they are
        opened, not all at once."""
        if branch.children or not branch.data:
            return
        index, node = branch.data
        # offsets inside a decompressed buffer count from its start
        base = 0 if node.buffer is not None else self.bases.get(id(node), 0)
        for child in node.children:
            self.bases[id(child)] = base
            label = describe(
                Text(
                    child.name,
                    style="red" if child.problem else "dim" if child.name.startswith("_") else "",
                ),
                child,
                base,
                self.show_secrets,
                40,
            )
            if child.children:
                sub = branch.add(label, data=(index, child), allow_expand=True)
            else:
                sub = branch.add_leaf(label, data=(index, child))
            self.by_node[id(child)] = sub

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        self._populate(event.node)

    def action_open(self) -> None:
        """→ opens the field under the cursor; on an open one, goes to its first field
        (as file trees do)."""
        node = self.cursor_node
        if node is None or not node.allow_expand:
            return
        if not node.is_expanded:
            self._populate(node)
            node.expand()
        elif node.children:
            self.move_cursor(node.children[0])

    def action_close(self) -> None:
        """← closes the field under the cursor; on a closed one, goes to its parent."""
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded and node.allow_expand:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    def action_expand_all(self, limit: int = 5000) -> None:
        """Open everything under the cursor (a bounded number of fields: a Fetch of
        thousands of records stays quick)."""
        start = self.cursor_node or self.root
        stack, opened = [start], 0
        while stack and opened < limit:
            node = stack.pop()
            self._populate(node)
            node.expand()
            opened += 1 + len(node.children)
            stack.extend(reversed(node.children))

    def reveal(self, node: Node, root: Node | None = None) -> None:
        """Move the cursor to ``node``'s line, building and opening its parents."""
        if id(node) not in self.by_node and root is not None:
            found = locate(root, node)
            for parent in found[1][:-1] if found else []:
                tree_node = self.by_node.get(id(parent))
                if tree_node is not None:
                    self._populate(tree_node)
        tree_node = self.by_node.get(id(node))
        if tree_node is None:
            return
        up = tree_node.parent
        while up is not None:
            up.expand()
            up = up.parent
        self.call_after_refresh(self.move_cursor, tree_node)


def describe(label: Text, node: Node, base: int, show_secrets: bool, width: int) -> Text:
    """``label`` followed by the node's ``@offset+length``, value (cut to ``width``),
    decompressed size, note and problem: a tree line, or the field line in full."""
    if node.ktype != FACT:
        label.append(f" @{node.offset + base}+{node.length}", style="dim")
    # (a fact without a value, e.g. a finding about a whole file: no "= ''" or "= null")
    value = (
        ""
        if node.ktype == FACT and node.value in ("", None)
        else format_value(node, show_secrets, width)
    )
    if value:
        label.append(" = ")
        label.append(value, style="bold")
    form = kafka_form(node)
    if form is not None:
        label.append(f"  ({form})", style="cyan")
    if node.buffer is not None:
        label.append(f"  ⇢ {len(node.buffer)} bytes decompressed", style="cyan")
    if node.note:
        label.append(f"  {node.note}", style="italic cyan")
    if node.problem:  # marked by its severity, as in -V
        mark, colour, error = problem_mark(node.code)
        label.append(f"  {mark} {node.problem}", style="bold red" if error else f"bold {colour}")
    return label


def field_line(node: Node, path: list[Node], base: int, show_secrets: bool) -> Text:
    """The selected field in full: its dotted name, whole value, offset and length, note
    and problem (the tree cuts values to fit; this line wraps)."""
    names = [p.name for p in path[1:]] or [node.name]
    return describe(Text(".".join(names), style="bold"), node, base, show_secrets, 2000)


class Detail(Vertical):
    """Field trees beside the bytes (taking turns on narrow terminals: `v`), and below
    them the selected field in full; ``show(title, items)`` fills it."""

    DEFAULT_CSS = (
        """
    Detail #panes { height: 1fr; }
    Detail FieldTree { width: 1fr; }
    Detail HexView { width: 82; height: 100%; overflow: hidden; border: round $primary 40%; }
    Detail HexView:focus { border: round $accent; }
    Detail.narrow HexView { display: none; }
    Detail.narrow.bytes FieldTree { display: none; }
    Detail.narrow.bytes HexView { display: block; }
    Detail #field-line { height: auto; max-height: 4; background: $boost; padding: 0 1; }
    Detail HexView { border-title-color: $foreground; }
    """
        + TREE_CURSOR_CSS
    )

    def __init__(self, show_secrets: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.items: list[Item] = []
        self.show_secrets = show_secrets
        self.selected: tuple[int, Node] | None = None
        self.holder: Node | None = None
        self._from_hex = False

    def compose(self):
        with Horizontal(id="panes"):
            tree = FieldTree(id="fields")
            tree.show_secrets = self.show_secrets
            yield tree
            hexview = HexView(id="bytes")
            hexview.show_secrets = self.show_secrets
            yield hexview
        yield Static(id="field-line")

    def on_resize(self, event) -> None:
        """16 bytes a line when the tree keeps its room beside them, else 8; below
        NARROW columns the tree and the bytes take turns."""
        width = event.size.width
        narrow = width < NARROW
        self.set_class(narrow, "narrow")
        wide = width - HexView.width_for(HEX_WIDTH) >= (0 if narrow else _TREE_AT_LEAST)
        self.hexview.set_per_line(HEX_WIDTH if wide else HEX_WIDTH // 2)
        self.hexview.styles.width = "1fr" if narrow else HexView.width_for(self.hexview.per_line)

    def toggle_pane(self) -> None:
        """On a narrow terminal: the bytes instead of the tree, or back."""
        if not self.has_class("narrow"):
            (self.field_tree if self.hexview.has_focus else self.hexview).focus()
            return
        bytes_now = not self.has_class("bytes")
        self.set_class(bytes_now, "bytes")
        (self.hexview if bytes_now else self.field_tree).focus()

    @property
    def field_tree(self) -> FieldTree:
        return self.query_one(FieldTree)

    @property
    def hexview(self) -> HexView:
        return self.query_one(HexView)

    def show(self, title: str | Text, items: list[Item]) -> None:
        """Show ``items``, on the field selected before if the same path is there (the
        same field of the next exchange, as one reads down a list), else the first
        message."""
        path = self.selected_path() if self.items else None
        self.items = items
        self.field_tree.fill(title, items)
        if path is not None and self.path_exists(*path):
            self.select_path(*path)
        elif items:
            self.select(0, items[0].root)
        else:
            self.hexview.show(b"", None, [])
            self.query_one("#field-line", Static).update("")

    def select(self, index: int, node: Node, move_cursor: bool = True) -> None:
        """Show the bytes of ``node``'s buffer with ``node`` highlighted."""
        item = self.items[index]
        found = locate(item.root, node)
        if found is None:
            return
        holder, path = found
        self.selected, self.holder = (index, node), holder
        base = item.base if holder is item.root else 0
        if holder is item.root:
            data, view, title = item.data, item.root, f"{item.label.plain}"
        else:
            data, view = holder.buffer or b"", as_root(holder)
            title = f"decompressed {holder.note or ''} ({len(data)} bytes of {holder.name})"
        inside = path[path.index(holder) + 1 :] if holder in path else path
        parents = [p for p in inside[:-1] if p is not holder]
        tones = PARENT_TONES[self.app.current_theme.dark if self.app else True]
        marks = [
            (p.offset, p.end, tones[min(len(parents) - 1 - i, len(tones) - 1)])
            for i, p in enumerate(parents)
        ]
        if node is not item.root and node is not holder:
            marks.append((node.offset, node.end, HIGHLIGHT))
        cursor = node.offset if move_cursor and node is not item.root else None
        self.hexview.show(data, view, marks, cursor, title, base)
        self.query_one("#field-line", Static).update(
            field_line(node, path, base, self.show_secrets)
        )

    @on(Tree.NodeHighlighted, "#fields")
    def _field_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        if event.node.data:
            index, node = event.node.data
            self.select(index, node, move_cursor=not self._from_hex)
            self._from_hex = False
        elif event.node.is_root and self.items:  # the title: its first message, whole
            self.select(0, self.items[0].root, move_cursor=False)

    @on(HexView.CursorMoved)
    def _byte_selected(self, event: HexView.CursorMoved) -> None:
        event.stop()
        if self.selected is None or self.holder is None:
            return
        index, _ = self.selected
        node = innermost(self.holder, event.offset)
        if node is not self.selected[1]:
            self._from_hex = True
            self.select(index, node, move_cursor=False)
            self.field_tree.reveal(node, self.items[index].root)

    def select_at(self, index: int, holder: Node, offset: int) -> None:
        """Select the innermost field at ``offset`` of ``holder``'s buffer (the
        message's own bytes when ``holder`` is its root), with the byte cursor there."""
        node = innermost(holder, offset)
        if node is holder and holder is not self.items[index].root and holder.children:
            node = holder.children[0]  # inside the decompressed buffer
        self.select(index, node, move_cursor=False)
        self._from_hex = True  # the tree follows; the cursor stays put
        self.field_tree.reveal(node, self.items[index].root)
        self.hexview.move_to(offset)

    def selected_path(self) -> tuple[int, list[tuple[int, str]]] | None:
        """Where the selected field is: (message, (child index, name) from its root),
        to select the same field in a tree decoded again (``select_path``)."""
        if self.selected is None:
            return None
        index, node = self.selected
        path = self.items[index].root.path_to(node) or []
        return index, [
            (parent.children.index(child), child.name) for parent, child in zip(path, path[1:])
        ]

    def path_exists(self, index: int, steps: list[tuple[int, str]]) -> bool:
        """Whether the field ``selected_path`` gave is in the items shown (by name)."""
        if not 0 <= index < len(self.items):
            return False
        node = self.items[index].root
        for at, name in steps:
            if at >= len(node.children) or node.children[at].name != name:
                return False
            node = node.children[at]
        return True

    def select_path(self, index: int, steps: list[tuple[int, str]]) -> None:
        """Select the field ``selected_path`` gave, or its deepest part that is still
        there (a decoded value's field when values are shown raw again)."""
        if not 0 <= index < len(self.items):
            return
        root = node = self.items[index].root
        for at, name in steps:
            if at >= len(node.children) or node.children[at].name != name:
                break
            node = node.children[at]
        self.select(index, node)
        self.field_tree.reveal(node, root)

    def jump_message(self) -> None:
        """Move the tree cursor to the next message's top (request ⇄ response)."""
        if len(self.items) < 2 or self.selected is None:
            return
        index = (self.selected[0] + 1) % len(self.items)
        self.field_tree.reveal(self.items[index].root, self.items[index].root)
        self.select(index, self.items[index].root)
