"""Field trees and hex dumps for the terminal (rich).

Each leaf field gets a colour; its name in the tree and its bytes in the hex dump share
it, so the eye can go from one to the other. Problems are red; secrets are masked."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from ..protocol.message import holds_message
from ..protocol.node import Node
from .kafka_forms import kafka_form
from .marks import problem_mark
from .plain_print import Entries, Part, Piece, PlainPrinter, prints_plain

PALETTE = [
    "cyan",
    "green",
    "magenta",
    "yellow",
    "blue",
    "bright_cyan",
    "bright_green",
    "bright_magenta",
]
PROBLEM = "bold bright_white on dark_red"  # white on ANSI red: 4:1 or less
SECRET = "bold red"
# what one printed message may cost the terminal: beyond these, a window and a note
# (--json has everything)
HEX_LIMIT = 64 * 1024  # bytes dumped per message, over all its buffers
TREE_LIMIT = 5_000  # fields listed per tree (rich draws ~1,000 a second)


def format_value(node: Node, show_secrets: bool = False, limit: int = 64) -> str:
    v = node.value
    if isinstance(v, (bytes, bytearray)) and holds_message(node):
        return f"{len(v)} bytes"  # a message (Envelope's): its fields are below, named
    if node.secret and not show_secrets:
        return "<redacted>"
    if node.ktype == "array":
        return "null" if v is None else f"{v} item{'s' if v != 1 else ''}"
    if node.ktype in ("struct", "message", "tagged_fields", "tagged"):
        return ""
    if node.ktype == "records" and isinstance(v, int):
        return f"{v} bytes"
    if v is None:
        # a batch, a records holder: their children are their value ("= null" said
        # they were null); a node without any is a null one
        return "" if node.children else "null"
    if isinstance(v, (bytes, bytearray)):
        shown = format_bytes(bytes(v), limit)
        if shown[0] not in "'\"b" and not show_secrets and any(c.secret for c in node.children):
            # (as text the masked characters read as *s; as hex as 2a, bytes never sent)
            return _masked_bytes(node, bytes(v), limit)
        return shown
    if isinstance(v, str):
        s = v if len(v) <= limit else v[:limit] + "…"
        return repr(s)
    if isinstance(v, dict):
        return ", ".join(f"{k}={val}" for k, val in v.items())
    return str(v)


def _masked_bytes(node: Node, b: bytes, limit: int) -> str:
    """A token's bytes with its secret fields' bytes as ``**`` (as the dump shows them):
    their masked value held ``*``s, shown as ``2a 2a``, as if those bytes were sent.
    The value is the node's last ``len(b)`` bytes (after any length prefix)."""
    start = node.offset + node.length - len(b)
    hidden = bytearray(len(b))
    for c in node.children:
        if c.secret:
            lo, hi = max(0, c.offset - start), min(len(b), c.offset + c.length - start)
            hidden[lo:hi] = b"\x01" * max(0, hi - lo)
    n = min(len(b), limit // 2)
    shown = " ".join("**" if hidden[i] else f"{b[i]:02x}" for i in range(n))
    return f"{shown}{' …' if len(b) > n else ''} ({len(b)} bytes, secrets masked)"


def format_bytes(b: bytes, limit: int = 64) -> str:
    if not b:
        return "b''"
    try:
        text = b.decode("utf-8")
        if all(ch.isprintable() or ch in "\n\t" for ch in text):
            return repr(text if len(text) <= limit else text[:limit] + "…") + f" ({len(b)} bytes)"
    except UnicodeDecodeError:
        pass
    shown = b[: limit // 2].hex(" ")
    return f"{shown}{' …' if len(b) > limit // 2 else ''} ({len(b)} bytes)"


def leaf_colours(root: Node) -> dict[int, str]:
    """A colour per leaf, in every buffer (the message and each decompressed one)."""
    colours: dict[int, str] = {}
    for holder in [root, *buffers(root)]:
        for i, node in enumerate(holder.own_leaves()):
            colours[id(node)] = PALETTE[i % len(PALETTE)]
    return colours


def tree_entries(
    root: Node,
    show_secrets: bool = False,
    base: int = 0,
    colours: dict[int, str] | None = None,
    title: Text | None = None,
) -> list[tuple[int, list[Part]]]:
    """The tree's labels in preorder with their depths (the root at 0), cut at
    TREE_LIMIT fields: what both the rich Tree and the plain printer draw."""
    colours = leaf_colours(root) if colours is None else colours
    out: list[tuple[int, list[Part]]] = [
        (
            0,
            [title]
            if title is not None
            else _label_parts(root, colours, show_secrets, base, False),
        )
    ]
    budget = TREE_LIMIT
    # an explicit stack: trees can be deeper than Python's recursion limit
    stack = [(root, 0, 1, root.buffer is not None)]
    while stack:
        node, i, depth, in_buffer = stack.pop()
        if i >= len(node.children):
            continue
        if budget <= 0:
            out.append(
                (
                    depth,
                    [
                        (
                            f"… {len(node.children) - i} more here; the tree is cut at "
                            f"{TREE_LIMIT} fields (--json shows every one)",
                            "italic yellow",
                        )
                    ],
                )
            )
            continue
        budget -= 1
        child = node.children[i]
        out.append((depth, _label_parts(child, colours, show_secrets, base, in_buffer)))
        stack.append((node, i + 1, depth, in_buffer))
        stack.append((child, 0, depth + 1, in_buffer or child.buffer is not None))
    return out


def tree_of(
    root: Node,
    show_secrets: bool = False,
    base: int = 0,
    colours: dict[int, str] | None = None,
    title: Text | None = None,
) -> Tree:
    return _tree(tree_entries(root, show_secrets, base, colours, title))


def _tree(entries: Entries) -> Tree:
    top = Tree(Text.assemble(*entries[0][1]))
    path = [top]
    for depth, parts in entries[1:]:
        del path[depth:]
        path.append(path[-1].add(Text.assemble(*parts)))
    return top


def _label_parts(
    node: Node, colours: dict[int, str], show_secrets: bool, base: int, in_buffer: bool
) -> list[Part]:
    style = colours.get(id(node), "bold")
    where = f"  @{node.offset}" if in_buffer else f"  @{node.offset + base}"
    t: list[Part] = [
        (node.name, style if not node.name.startswith("_") else f"dim {style}"),
        (f"  {node.ktype}", "dim"),
        (f"{where}+{node.length}", "dim"),
    ]
    if in_buffer:
        t.append((" (decompressed)", "dim"))
    value = format_value(node, show_secrets)
    if value:
        t.append("  = ")
        t.append((value, "red" if node.secret and not show_secrets else "bold"))
    form = kafka_form(node)
    if form is not None:
        t.append((f"  ({form})", "cyan"))
    if node.note:
        t.append((f"  ({node.note})", "italic cyan"))
    if node.problem:  # marked by its severity, as findings are on the lines
        mark, colour, error = problem_mark(node.code)
        t.append((f"  {mark} ", f"bold {colour}"))
        t.append((node.problem, PROBLEM if error else colour))
    return t


def hexdump(
    data: bytes,
    root: Node | None,
    show_secrets: bool = False,
    base: int = 0,
    colours: dict[int, str] | None = None,
    width: int = 16,
    marks: Sequence[tuple[int, int, str]] = (),
    window: tuple[int, int] | None = None,
) -> Text:
    """Hex + ASCII with each leaf's bytes in its colour (only leaves in ``data``'s own
    buffer: decompressed buffers get their own dump); ``marks`` are (start, end, style)
    ranges drawn over that, in order (e.g. a selected field and its parents).
    ``window`` (start, end) dumps only the rows holding those bytes."""
    out = Text()
    append = out.append
    for piece, style in hex_pieces(data, root, show_secrets, base, colours, width, marks, window):
        append(piece, style=style)
    return out


def hex_pieces(
    data: bytes,
    root: Node | None,
    show_secrets: bool = False,
    base: int = 0,
    colours: dict[int, str] | None = None,
    width: int = 16,
    marks: Sequence[tuple[int, int, str]] = (),
    window: tuple[int, int] | None = None,
) -> Iterator[tuple[str, str | None]]:
    """hexdump's text in styled pieces (joined, the plain dump)."""
    lo_row = 0 if window is None else max(0, window[0]) // width * width
    hi = len(data) if window is None else min(len(data), window[1])
    span = max(hi - lo_row, 0)
    styles: list[str | None] = [None] * span
    masked = [False] * span

    def paint(start: int, end: int, style, secret: bool = False) -> None:
        a, b = max(start, lo_row) - lo_row, min(end, hi) - lo_row
        if b > a:
            styles[a:b] = [style] * (b - a)
            if secret:
                masked[a:b] = [True] * (b - a)

    if root is not None:
        colours = leaf_colours(root) if colours is None else colours
        for node in root.own_leaves():
            if node.end <= lo_row or node.offset >= hi:
                continue
            secret = node.secret and not show_secrets
            style = SECRET if secret else PROBLEM if node.problem else colours.get(id(node))
            paint(node.offset, node.end, style, secret)
    for start, end, style in marks:
        paint(start, end, style)
    return _hex_rows(data, base, width, lo_row, hi, styles, masked)


def _hex_rows(
    data: bytes,
    base: int,
    width: int,
    lo_row: int,
    hi: int,
    styles: list[str | None],
    masked: list[bool],
) -> Iterator[tuple[str, str | None]]:
    """The dump's text in styled pieces: the layout of a row, for rich and plain."""
    for row in range(lo_row, hi, width):
        yield f"{row + base:08x}  ", "dim"
        chunk = range(row, min(row + width, hi))
        for i in chunk:
            k = i - lo_row
            yield "**" if masked[k] else f"{data[i]:02x}", styles[k]
            yield " " if (i - row) != width // 2 - 1 else "  ", None
        yield "   " * (width - len(chunk)) + (" " if len(chunk) <= width // 2 else ""), None
        yield " │", "dim"
        for i in chunk:
            k = i - lo_row
            yield "*" if masked[k] else chr(data[i]) if 32 <= data[i] < 127 else ".", styles[k]
        yield "│\n", "dim"


def buffers(root: Node) -> list[Node]:
    """Nodes that introduce a decompressed buffer (outermost first)."""
    return [n for n in root.walk() if n.buffer is not None]


def node_pieces(
    data: bytes,
    root: Node,
    show_secrets: bool = False,
    base: int = 0,
    title: Text | None = None,
    show_hex: bool = True,
) -> list[Piece]:
    """A message's tree and hex dumps (its own bytes, then each decompressed buffer's),
    cut at HEX_LIMIT bytes, as pieces for rich (render_node) or plain text (print_node)."""
    colours = leaf_colours(root)
    pieces: list[Piece] = [("tree", tree_entries(root, show_secrets, base, colours, title))]
    if show_hex:
        left = [HEX_LIMIT]
        pieces += _capped_dump(data, root, show_secrets, base, colours, left)
        holders = buffers(root)
        for i, holder in enumerate(holders):
            if left[0] <= 0:  # wrappers of wrappers can hold hundreds of buffers
                pieces.append(
                    (
                        "text",
                        [
                            (
                                f"… {len(holders) - i} more decompressed buffers "
                                f"not dumped (the dumps are cut at {HEX_LIMIT} bytes "
                                f"a message; --json has every field)",
                                "italic yellow",
                            )
                        ],
                    )
                )
                break
            pieces.append(
                (
                    "text",
                    [
                        (
                            f"decompressed {holder.note or ''} (bytes of "
                            f"{holder.name} @{holder.offset})",
                            "bold",
                        )
                    ],
                )
            )
            pieces += _capped_dump(
                holder.buffer or b"", as_root(holder), show_secrets, 0, colours, left
            )
    return pieces


def render_node(
    data: bytes,
    root: Node,
    show_secrets: bool = False,
    base: int = 0,
    title: Text | None = None,
    show_hex: bool = True,
) -> Group:
    return Group(
        *(_renderable(p) for p in node_pieces(data, root, show_secrets, base, title, show_hex))
    )


def print_node(
    console: Console,
    data: bytes,
    root: Node,
    show_secrets: bool = False,
    base: int = 0,
    title: Text | None = None,
    show_hex: bool = True,
) -> None:
    """Print render_node's output; without colours, as plain text without rich's layout
    (the same characters: render/plain_print.py)."""
    pieces = node_pieces(data, root, show_secrets, base, title, show_hex)
    if prints_plain(console):
        PlainPrinter(console).print_pieces(pieces)
    else:
        console.print(Group(*(_renderable(p) for p in pieces)))


def print_tree(console: Console, root: Node) -> None:
    """Print tree_of(root) as print_node prints its tree."""
    if prints_plain(console):
        PlainPrinter(console).print_pieces([("tree", tree_entries(root))])
    else:
        console.print(tree_of(root))


def _renderable(piece: Piece) -> RenderableType:
    kind, body = piece
    return _tree(body) if kind == "tree" else Text.assemble(*body)


def _capped_dump(
    data: bytes, root: Node, show_secrets: bool, base: int, colours: dict[int, str], left: list[int]
) -> list[Piece]:
    """The hex dump of a buffer, or of its first bytes and a note saying so: at most
    ``left[0]`` bytes (what the message has left of HEX_LIMIT)."""
    cap = max(left[0], 0)
    left[0] -= min(len(data), cap)
    if len(data) <= cap:
        return [("text", list(hex_pieces(data, root, show_secrets, base, colours)))]
    return [
        ("text", list(hex_pieces(data, root, show_secrets, base, colours, window=(0, cap)))),
        (
            "text",
            [
                (
                    f"… hex dump shows the first {cap} of {len(data)} bytes "
                    f"(--json has every field)",
                    "italic yellow",
                )
            ],
        ),
    ]


def as_root(holder: Node) -> Node:
    """A view of a buffer holder whose children are walked as if they were the root."""
    view = Node(holder.name, holder.ktype, 0, len(holder.buffer or b""))
    view.children = holder.children
    return view
