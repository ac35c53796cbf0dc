"""`kdissect blob`: annotate pasted bytes."""

from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.text import Text

from ..blob import BlobError, parse_blob
from ..protocol import Options, api_key_of, api_name
from ..protocol.decode import decode_body
from ..protocol.grammar import GrammarError, parse_grammar
from ..render.text import render_node
from ..stream.pasted import Hints, read_paste
from .common import budget, budget_nodes_option
from .group import main
from .values_opts import value_options


BLOB_HELP = """Annotate raw Kafka bytes: which API they are, and every field, byte by byte.

INPUT is the bytes as text, a file holding them, or `-` for stdin (the default when
stdin is piped). Without INPUT on a terminal, the blob screen opens: paste bytes, pick
API, version and direction if you know them, and the tree updates as you type. Formats are detected: plain hex (spaces, colons, 0x allowed), xxd /
hexdump -C / od -A x -t x1z / Wireshark / tcpdump -X dumps, Erlang <<0,0,3,...>>,
Python b'\\x00...' or bytes([...]), Java/C/JS arrays {0, 0, -1, ...}, and base64.

The 4-byte size prefix may be there or not; several size-prefixed messages in a row
are decoded one by one. A request names its API in its header; a response does not,
so without --api/--version kdissect ranks every API and version by how cleanly the
bytes decode and says how sure it is.

\b
Examples:
  kdissect blob '00 00 00 00 00 00 00 01 ...'
  kdissect blob dump.txt --api Metadata --version 0 --response
  xxd -p frame.bin | kdissect blob --json
  kdissect blob '<<0,0,0,1,...>>' --grammar 'Reply => CorrelationId Answer
    CorrelationId => INT32
    Answer => INT16'
"""


@main.command(help=BLOB_HELP)
@click.argument("input", required=False)
@click.option("--api", "api", metavar="NAME|KEY", help="API name (Metadata) or key (3).")
@click.option("--version", "api_version", type=click.IntRange(0, 32767), metavar="N",
              help="API version.")
@click.option("--request", "direction", flag_value="request", help="The bytes are a request.")
@click.option("--response", "direction", flag_value="response", help="The bytes are a response.")
@click.option("--json", "as_json", is_flag=True, help="Print the tree as JSON (see docs/json.md).")
@click.option("--show-secrets", is_flag=True, help="Show SASL passwords, proofs and tokens.")
@click.option("--grammar", metavar="FILE|TEXT",
              help="Dissect with your own grammar in the protocol guide's BNF notation.")
@click.option("--no-hex", is_flag=True, help="Leave out the coloured hex dump.")
@click.option("--max-decompressed", default="64M", show_default=True, metavar="SIZE",
              help="Decompressed bytes one message may produce over all its compressed "
                   "payloads (bomb protection; the rest stays compressed, marked).")
@budget_nodes_option
@value_options
def blob(input, api, api_version, direction, as_json, show_secrets, grammar, no_hex,
         max_decompressed):
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if input is None and sys.stdin.isatty() and sys.stdout.isatty() and not as_json:
        from ..tui.blob_app import BlobApp
        BlobApp(options=budget(max_decompressed, show_secrets=show_secrets)).run()
        return
    text = _read_input(input)
    try:
        parsed = parse_blob(text)
    except BlobError as e:
        raise click.UsageError(str(e)) from None
    options = budget(max_decompressed, show_secrets=show_secrets)
    data = parsed.data
    if grammar is not None:
        _blob_grammar(console, grammar, data, options, as_json, no_hex, parsed.format)
        return
    key = None
    if api is not None:
        key = api_key_of(api)
        if key is None:
            raise click.BadParameter(f"unknown API {api!r}; use a name like Metadata or a key "
                                     f"from 0 to 32767 like 3", param_hint="--api")
    reading = read_paste(data, Hints(key, api_version, direction), options)
    items = reading.items
    if as_json:
        out = {"input": {"format": parsed.format, "length": len(data)},
               "reading": {"as": reading.label, "why": reading.why},
               "messages": [_item_json(item, n, show_secrets)
                            for n, item in enumerate(items)]}
        _echo_json(out, [i.message.tree for i in items], show_secrets)
        return
    err.print(Text(f"read {len(data)} bytes ({parsed.format}) as {reading.label}"
                   + (f" ({reading.why})" if reading.why else ""), style="dim"))
    for item in items:
        msg = item.message
        title = Text()
        title.append(msg.title, style="bold")
        title.append(f"  correlation_id={msg.correlation_id}")
        if msg.client_id is not None:
            title.append(f"  client_id={msg.client_id!r}")
        title.append(f"  {len(msg.data)} bytes at @{item.offset}", style="dim")
        title.append(f"\n{item.how}", style="italic")
        for c in item.candidates[1:4]:
            if c.clean:
                title.append(f"\n  also decodes: {c.label} (score {c.score:.1f})", style="dim")
        console.print(render_node(msg.data, msg.tree, show_secrets, item.offset, title,
                                  not no_hex))
        _print_problems(console, msg.tree.findings())


def _read_input(arg: str | None) -> str | bytes:
    if arg is None or arg == "-":
        if arg is None and sys.stdin.isatty():
            raise click.UsageError("give the bytes as an argument, a file, or on stdin "
                                   "(e.g. `xxd -p file | kdissect blob`)")
        return sys.stdin.buffer.read()
    return _file_or_text(arg, "INPUT", "the bytes")


def _file_or_text(arg: str, what: str, holding: str) -> str | bytes:
    """The contents of the file ``arg`` names, else ``arg`` itself as text."""
    if len(arg) >= 4096 or "\n" in arg or "\x00" in arg:
        return arg
    if os.path.isdir(arg):
        raise click.BadParameter(f"{arg!r} is a directory; give a file holding {holding}, "
                                 f"or {holding} themselves", param_hint=what)
    if os.path.exists(arg):
        try:
            with open(arg, "rb") as f:
                return f.read()
        except OSError as e:
            raise click.BadParameter(f"cannot read {arg!r}: {e.strerror or e}",
                                     param_hint=what) from None
    return arg


def _blob_grammar(console, grammar: str, data: bytes, options: Options, as_json: bool,
                  no_hex: bool, fmt: str) -> None:
    source = _file_or_text(grammar, "--grammar", "the grammar")
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise click.BadParameter(f"the grammar file is not UTF-8 text (byte {e.start} is "
                                     f"{source[e.start]:#04x}); save it as UTF-8",
                                     param_hint="--grammar") from None
    try:
        g = parse_grammar(source)
    except GrammarError as e:
        raise click.UsageError(f"bad grammar: {e}") from None
    tree = decode_body(data, 0, g.root, g.root.name, options)
    if as_json:
        _echo_json({"input": {"format": fmt, "length": len(data)},
                    "grammar_root": g.root.name, "tree": _TREE.format(0)}, [tree],
                   options.show_secrets)
        return
    title = Text(f"{g.root.name} (your grammar)  {len(data)} bytes", style="bold")
    console.print(render_node(data, tree, options.show_secrets, 0, title, not no_hex))
    _print_problems(console, tree.findings())


PROBLEMS_LISTED = 50


def _print_problems(console, findings: list[tuple[str, str, str]]) -> None:
    """The problems of a tree, the first PROBLEMS_LISTED of them (--json has all)."""
    if not findings:
        return
    console.print(Text(f"{len(findings)} problem(s):", style="bold red"))
    for path, code, reason in findings[:PROBLEMS_LISTED]:
        console.print(Text(f"  {path}: {reason} [{code}]", style="red"))
    if len(findings) > PROBLEMS_LISTED:
        console.print(Text(f"  … and {len(findings) - PROBLEMS_LISTED} more (--json lists "
                           f"them all)", style="red"))


def _item_json(item, n: int, show_secrets: bool) -> dict:
    msg = item.message
    return {
        "offset": item.offset,
        "size_prefixed": item.size_prefixed,
        "direction": msg.direction,
        "api_key": msg.api_key,
        "api_name": api_name(msg.api_key),
        "api_version": msg.api_version,
        "correlation_id": msg.correlation_id,
        "client_id": msg.client_id,
        "how": item.how,
        "candidates": [{"api_key": c.api_key, "api_name": api_name(c.api_key),
                        "versions": list(c.versions), "direction": c.direction,
                        "score": round(c.score, 2), "clean": c.clean}
                       for c in item.candidates],
        "problems": [{"path": p, "code": c, "problem": r} for p, c, r in msg.tree.findings()],
        "tree": _TREE.format(n),
    }


_TREE = "\x00tree {}\x00"      # stands for a tree in the JSON until it is written out


def _echo_json(out: dict, trees: list, show_secrets: bool) -> None:
    """``out`` as indented JSON, each tree placeholder replaced by its tree written in
    pieces (a tree as dicts can take gigabytes; as text it streams)."""
    text = json.dumps(out, indent=2, default=str)
    write = sys.stdout.write
    for i, tree in enumerate(trees):
        marker = json.dumps(_TREE.format(i))
        head, _, text = text.partition(marker)
        write(head)
        line = head[head.rfind("\n") + 1:]
        level = (len(line) - len(line.lstrip(" "))) // 2     # the "tree" key's depth
        for piece in tree.iter_json(show_secrets, level):
            write(piece)
    write(text + "\n")


