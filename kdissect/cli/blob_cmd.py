"""`kdissect blob`: annotate pasted bytes."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from typing import NoReturn

import click
from rich.console import Console
from rich.text import Text

from ..blob import _EXPECTED, BlobError, find_candidates, parse_blob
from ..capture.pcapfile import PCAP_MAGICS, PCAPNG_SHB
from ..protocol.batch import HEAD_SIZE, Batch
from ..protocol import Options, api_key_of, api_name
from ..protocol.context import Decoding
from ..protocol.decode import decode_body
from ..protocol.findings import REGISTRY
from ..protocol.grammar import GrammarError, parse_grammar
from ..protocol.names import API_NAMES
from ..render.marks import MARKS
from ..render.text import print_node
from ..protocol.guess import distinguish
from ..sources.paste_choice import NoSuchCandidate, TextReading, read_regions
from ..sources.pasted import Hints
from ..crash import quiet_stdout
from ..filters import did_you_mean
from .common import budget, budget_nodes_option
from .group import SUMMARIES, main
from .values_opts import value_options


BLOB_HELP = (
    SUMMARIES["blob"]
    + """

INPUT is the bytes as text, a file holding them, or `-` for stdin (the default when
stdin is piped). Without INPUT on a terminal, the blob screen opens: paste bytes, pick
API, version and direction if you know them, and the tree updates as you type.

Paste the bytes the way you found them: the code and text around them are skipped.
Hex (spaces, colons, 0x, a label like `Hex Stream:` in front), xxd / hexdump -C /
hexdump / od / Wireshark / tcpdump -X dumps and a frame's hex stream (the summary
lines and the packets' IP and TCP headers are left out), Erlang and Elixir binaries <<0,0,3,"topic"::binary>>,
Python b'\\x00...' literals (split over lines, in lists), arrays in C, Java, Go
([]byte{0, 't'}), Rust (0b1), Node's {"type":"Buffer","data":[...]}, Go's fmt output
[0 0 0 18], quoted hex in code ("00" + "12", echo -n "..." | xxd -r -p), base64.
The input is searched, not parsed: every region that can be bytes (each literal,
runs of dump or hex lines behind any prefix such as a log tag or prompt) is decoded,
and the one that decodes best is read. --show-extraction shows which lines the bytes
came from and lists the other candidates; --candidate N reads another. When nothing
can be bytes, the error names the line and character that stopped the reader. See
docs/guide/blob.md.

The 4-byte size prefix may be there or not (a prefix that does not match the bytes is
reported); several size-prefixed messages in a row are decoded one by one; a fragment
from mid-stream is resynced at the first request boundary (or say --at OFFSET). A
request names its API in its header; a response does not, so without --api/--version
kdissect ranks every API and version by how cleanly the bytes decode, lists the
candidates that decode cleanly and says what tells the first two apart. --body reads
a body without its header (as client test fixtures hold them), --records a bare
record batch or message set.

\b
Examples:
  kdissect blob '00 00 00 00 00 00 00 01 ...'
  kdissect blob dump.txt --api Metadata --version 0 --response
  kdissect blob fixture.go --body --api Produce --version 3 --request
  kdissect blob batch.hex --records
  tcpdump -r cap.pcap -X 'tcp port 9092' | kdissect blob --show-extraction
  xxd -p frame.bin | kdissect blob --json
  kdissect blob '<<0,0,0,1,...>>' --grammar 'Reply => CorrelationId Answer
    CorrelationId => INT32
    Answer => INT16'
"""
)


@main.command(help=BLOB_HELP)
@click.argument("input", required=False)
@click.option("--api", "api", metavar="NAME|KEY", help="API name (Metadata) or key (3).")
@click.option(
    "--version", "api_version", type=click.IntRange(0, 32767), metavar="N", help="API version."
)
@click.option("--request", "as_request", is_flag=True, help="The bytes are a request.")
@click.option("--response", "as_response", is_flag=True, help="The bytes are a response.")
@click.option(
    "--body",
    is_flag=True,
    help="The bytes are a body without its header (a client test fixture); with "
    "--api, --version and --request/--response, or guessed.",
)
@click.option(
    "--records",
    "records",
    is_flag=True,
    help="The bytes are a bare record batch or message set (any magic).",
)
@click.option(
    "--at",
    "at",
    type=click.IntRange(0),
    default=0,
    metavar="OFFSET",
    help="Start reading at this byte of the pasted bytes (a fragment).",
)
@click.option(
    "--show-extraction",
    is_flag=True,
    help="Show which lines and characters of the input the bytes came from, and "
    "the other regions of the input that could be the bytes (candidates).",
)
@click.option(
    "--candidate",
    "pick",
    type=click.IntRange(1),
    metavar="N",
    help="Read the N-th candidate region of the input (see --show-extraction) "
    "instead of the one that decodes best.",
)
@click.option(
    "--candidates",
    "shown",
    default="5",
    show_default=True,
    metavar="N|all",
    help="How many of the clean candidates a guess lists (with --json: every clean one, "
    "and this many of those that do not decode cleanly).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the tree as JSON (see docs/guide/json.md)."
)
@click.option("--show-secrets", is_flag=True, help="Show SASL passwords, proofs and tokens.")
@click.option(
    "--grammar",
    metavar="FILE|TEXT",
    help="Dissect with your own grammar in the protocol guide's BNF notation.",
)
@click.option("--no-hex", is_flag=True, help="Leave out the coloured hex dump.")
@click.option(
    "--max-decompressed",
    default="64M",
    show_default=True,
    metavar="SIZE",
    help="Decompressed bytes one message may produce over all its compressed "
    "payloads (bomb protection; the rest stays compressed, marked).",
)
@budget_nodes_option
@value_options
def blob(**params):
    try:
        _blob(**params)
        sys.stdout.flush()  # (a closed pipe is seen here, not at exit)
    except BrokenPipeError:  # the reader went away (`| head`): quietly, status 0
        quiet_stdout()
        sys.exit(0)


def _blob(
    input,
    api,
    api_version,
    as_request,
    as_response,
    body,
    records,
    at,
    show_extraction,
    pick,
    shown,
    as_json,
    show_secrets,
    grammar,
    no_hex,
    max_decompressed,
):
    if as_request and as_response:
        raise click.UsageError("--request and --response exclude each other: give one")
    direction = "request" if as_request else "response" if as_response else None
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if input is None and sys.stdin.isatty() and sys.stdout.isatty() and not as_json:
        from ..tui.blob_app import BlobApp

        BlobApp(options=budget(max_decompressed, show_secrets=show_secrets)).run()
        return
    if body and records:
        raise click.UsageError(
            "--body and --records exclude each other: a body holds "
            "record batches, --records reads one without a body"
        )
    limit = _candidate_limit(shown)
    text = _read_input(input)
    if isinstance(text, bytes) and not (api or body or records or at or grammar):
        records = _other_kind_of_file(text, input, err)
    options = budget(max_decompressed, show_secrets=show_secrets)
    if grammar is not None:
        try:
            parsed = parse_blob(text)
        except BlobError as e:
            _no_bytes(e)
        _blob_grammar(console, grammar, parsed.data, options, as_json, no_hex, parsed.format)
        return
    key = None
    if api is not None:
        key = api_key_of(api)
        if key is None:
            close = did_you_mean(api, sorted(set(API_NAMES.values())))
            raise click.BadParameter(
                f"unknown API {api!r}{close}; use a name like Metadata or a key from 0 to "
                "32767 like 3",
                param_hint="--api",
            )
        if key not in API_NAMES:
            raise click.BadParameter(
                f"API key {key} is not one kdissect knows (its tables name keys "
                f"{min(API_NAMES)}-{max(API_NAMES)}): it has no layout to read it with",
                param_hint="--api",
            )
    if body and key is not None and api_version is not None and direction is None:
        raise click.UsageError(
            "a body has no header to say its direction: add --request "
            "or --response (or leave out --api/--version to guess)"
        )
    try:
        found = read_text(
            text, Hints(key, api_version, direction, body, records, at), options, pick
        )
    except NoSuchCandidate as e:
        raise click.BadParameter(str(e), param_hint="--candidate") from None
    except BlobError as e:
        _no_bytes(e)
    parsed, reading = found.blob, found.reading
    data = parsed.data
    if show_extraction and not as_json:
        err.print(extraction_text(parsed, text))
        err.print(candidates_list(found))
    if at > len(data):
        raise click.BadParameter(
            f"offset {at} is past the end of the {len(data)} bytes read", param_hint="--at"
        )
    items = reading.items
    if as_json:
        out = {
            "input": {
                "format": parsed.format,
                "length": len(data),
                "extraction": [dataclasses.asdict(p) for p in parsed.pieces],
                "skipped": list(parsed.skipped),
                "candidate": found.chosen + 1,
                "candidates": [_candidate_json(c) for c in found.candidates],
            },
            "reading": {"as": reading.label, "why": reading.why},
            "messages": [_item_json(item, n, show_secrets, limit) for n, item in enumerate(items)],
        }
        _echo_json(out, [i.message.tree for i in items], show_secrets)
        return
    region = ""
    if len(found.candidates) > 1:  # say which region of the text was read
        region = (
            f" from {_where(parsed)}, candidate {found.chosen + 1} of "
            f"{len(found.candidates)} (--show-extraction lists them)"
        )
    err.print(
        Text(
            f"read {len(data)} bytes ({parsed.format}){region} as {reading.label}"
            + (f" ({reading.why})" if reading.why else ""),
            style="dim",
        )
    )
    for item in items:
        msg = item.message
        title = Text()
        title.append(msg.title, style="bold")
        if msg.correlation_id is not None:
            title.append(f"  correlation_id={msg.correlation_id}")
        if msg.client_id is not None:
            title.append(f"  client_id={msg.client_id!r}")
        title.append(f"  {len(msg.data)} bytes at @{item.offset}", style="dim")
        title.append(f"\n{item.how}", style="italic")
        title.append(candidates_text(item.candidates, limit))
        print_node(console, msg.data, msg.tree, show_secrets, item.offset, title, not no_hex)
        _print_problems(
            console,
            [(f.where or "message", f.code, f.detail) for f in item.findings] + msg.tree.findings(),
        )


def read_text(
    text: str | bytes,
    hints: Hints | None = None,
    options: Options | None = None,
    pick: int | None = None,
) -> TextReading:
    """Find the bytes in a pasted text: every region that can be bytes
    (blob.find_candidates) is decoded, the one that decodes best is the reading. Raises
    BlobError, naming where the readers stopped, when nothing in the text can be bytes."""
    found = find_candidates(text)
    if not found:
        parse_blob(text)  # raises the error that says what stopped it
        raise BlobError("nothing in the input can be bytes: " + _EXPECTED)
    return read_regions(found, hints, options, pick)


def _candidate_limit(shown: str) -> int | None:
    if shown == "all":
        return None
    if not shown.isdigit():
        raise click.BadParameter(f"{shown!r}: give a number or 'all'", param_hint="--candidates")
    return int(shown)


def candidates_text(cands, limit: int | None) -> Text:
    """The clean candidates after the first (``limit`` of them; None: all), grouped
    versions in one line each, and what tells the first two apart."""
    out = Text()
    clean = [c for c in cands if c.clean]
    if len(clean) < 2:
        return out
    out.append(f"\n{len(clean)} candidates decode cleanly:", style="dim")
    shown = clean if limit is None else clean[: max(limit, 2)]
    for c in shown:
        out.append(f"\n  {c.label} (score {c.score:.1f})", style="dim")
    if len(shown) < len(clean):
        out.append(f"\n  … and {len(clean) - len(shown)} more (--candidates all)", style="dim")
    out.append(f"\ntold apart {distinguish(clean[0], clean[1])}", style="dim")
    return out


def extraction_text(parsed, text) -> Text:
    """Which lines and characters of the input each run of bytes came from."""
    out = Text(f"read {len(parsed.data)} bytes as {parsed.format}:", style="dim")
    lines = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).splitlines()
    for p in parsed.pieces[:EXTRACTION_LISTED]:
        where = (
            f"line {p.line} chars {p.col}-{p.end_col}"
            if p.line == p.end_line
            else f"lines {p.line}-{p.end_line} (from char {p.col})"
        )
        source = lines[p.line - 1][p.col - 1 :][:40] if p.line <= len(lines) else ""
        out.append(
            f"\n  bytes {p.offset}-{p.offset + p.size - 1} ({p.size}) from {where}, "
            f"{p.what}" + (f": {source!r}" if p.what != "dump lines" else ""),
            style="dim",
        )
    if len(parsed.pieces) > EXTRACTION_LISTED:
        out.append(
            f"\n  … and {len(parsed.pieces) - EXTRACTION_LISTED} more pieces "
            f"(--json lists them all)",
            style="dim",
        )
    for s in parsed.skipped:
        out.append(f"\n  left out: {s}", style="dim")
    return out


EXTRACTION_LISTED = 40


def _where(blob) -> str:
    if not blob.pieces:
        return "the whole input"
    first, last = blob.pieces[0], blob.pieces[-1]
    return (
        f"line {first.line}"
        if first.line == last.end_line
        else f"lines {first.line}-{last.end_line}"
    )


def _candidate_summary(c) -> str:
    items = c.reading.items
    names = ", ".join(i.message.title for i in items[:3]) + (
        f" and {len(items) - 3} more" if len(items) > 3 else ""
    )
    state = "clean" if all(i.whole for i in items) else "does not decode cleanly"
    return (
        f"{len(c.blob.data)} bytes ({c.blob.format}) from {_where(c.blob)}: "
        f"{c.reading.label}, {names}, {state}"
    )


def candidates_list(found) -> Text:
    """Every region of the input that could be the bytes, best first; which one was read."""
    out = Text(
        f"{len(found.candidates)} candidate region(s), best first (--candidate N reads another):",
        style="dim",
    )
    for n, c in enumerate(found.candidates, 1):
        mark = "  <- read" if n - 1 == found.chosen else ""
        out.append(f"\n  {n}. {_candidate_summary(c)}{mark}", style="dim")
    return out


def _candidate_json(c) -> dict:
    return {
        "format": c.blob.format,
        "length": len(c.blob.data),
        "where": _where(c.blob),
        "reading": c.reading.label,
        "messages": [i.message.title for i in c.reading.items],
        "clean": all(i.whole for i in c.reading.items),
    }


def _other_kind_of_file(data: bytes, name: str | None, err: Console) -> bool:
    """A file given whole that is not one or a few messages: a capture is refused with
    the command that reads it; a record batch whose CRC holds (a log segment, a dumped
    batch) is read as ``--records`` (returns True), saying so."""
    if data[:4] in PCAP_MAGICS or data[:4] == PCAPNG_SHB:
        shown = name if name not in (None, "-") else "FILE"
        click.echo(
            f"kdissect blob: the input is a packet capture (pcap/pcapng), not Kafka "
            f"messages: read it with `kdissect pcap {shown}`",
            err=True,
        )
        sys.exit(1)
    first = Batch(data, 0) if len(data) >= HEAD_SIZE else None
    if first is not None and first.magic == 2 and first.fits(len(data)) and first.crc_ok:
        err.print(
            Text(
                "the bytes begin with a record batch whose CRC holds: read as --records "
                "(a log segment? `kdissect log` reads it with its index and checks)",
                style="dim",
            )
        )
        return True
    return False


def _read_input(arg: str | None) -> str | bytes:
    if arg is None or arg == "-":
        if arg is None and sys.stdin.isatty():
            raise click.UsageError(
                "give the bytes as an argument, a file, or on stdin "
                "(e.g. `xxd -p file | kdissect blob`)"
            )
        return sys.stdin.buffer.read()
    return _file_or_text(arg, "INPUT", "the bytes")


def _file_or_text(arg: str, what: str, holding: str) -> str | bytes:
    """The contents of the file ``arg`` names, else ``arg`` itself as text."""
    if len(arg) >= 4096 or "\n" in arg or "\x00" in arg:
        return arg
    if os.path.isdir(arg):
        raise click.BadParameter(
            f"{arg!r} is a directory; give a file holding {holding}, or {holding} themselves",
            param_hint=what,
        )
    if os.path.exists(arg):
        try:
            with open(arg, "rb") as f:
                return f.read()
        except OSError as e:
            raise click.BadParameter(
                f"cannot read {arg!r}: {e.strerror or e}", param_hint=what
            ) from None
    if _PATH_LIKE.match(arg):
        raise click.BadParameter(
            f"no such file: {arg!r}; give a file holding {holding}, or {holding} themselves",
            param_hint=what,
        )
    return arg


# a file's name, not bytes written out: a path (/x, ./, ../, ~/) or a name with an
# extension, without spaces (hex has neither shape, base64 no dot, and its slashes come
# in runs: a Fetch's replica id -1 is "/////")
_PATH_LIKE = re.compile(r"(?:\.{1,2}/|~/)\S*$|/(?!.*//)\S+$|\S*[^\s.]\.[A-Za-z][A-Za-z0-9]{0,5}$")


def _blob_grammar(
    console, grammar: str, data: bytes, options: Options, as_json: bool, no_hex: bool, fmt: str
) -> None:
    source = _file_or_text(grammar, "--grammar", "the grammar")
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise click.BadParameter(
                f"the grammar file is not UTF-8 text (byte {e.start} is "
                f"{source[e.start]:#04x}); save it as UTF-8",
                param_hint="--grammar",
            ) from None
    try:
        g = parse_grammar(source)
    except GrammarError as e:
        if source == grammar and "=>" not in grammar and not any(c.isspace() for c in grammar):
            # one word: most likely a file's name mistyped, not a grammar
            raise click.BadParameter(
                f"no such file: {grammar!r}, and as a grammar it has no 'name => "
                f"definition' line; give a file holding the grammar, or the grammar itself",
                param_hint="--grammar",
            ) from None
        raise click.UsageError(f"bad grammar: {e}") from None
    tree = decode_body(data, 0, g.root, g.root.name, Decoding(options))
    if as_json:
        _echo_json(
            {
                "input": {"format": fmt, "length": len(data)},
                "grammar_root": g.root.name,
                "tree": _TREE.format(0),
            },
            [tree],
            options.show_secrets,
        )
        return
    title = Text(f"{g.root.name} (your grammar)  {len(data)} bytes", style="bold")
    print_node(console, data, tree, options.show_secrets, 0, title, not no_hex)
    _print_problems(console, tree.findings())


PROBLEMS_LISTED = 50


def _print_problems(console, findings: list[tuple[str, str, str]]) -> None:
    """The problems of a tree and what else was noticed, the first PROBLEMS_LISTED of
    them (--json has all), each in its severity's colour: notes alone (a version read as
    the newest known one, all of it explained) are not called problems."""
    if not findings:
        return
    severities = [REGISTRY[c].severity if c in REGISTRY else "error" for _, c, _ in findings]
    styles = [MARKS[s][1] for s in severities]
    worst = next(s for s in ("error", "warn", "note") if s in severities)  # the heading's
    noun = "note" if worst == "note" else "problem"
    console.print(Text(f"{len(findings)} {noun}(s):", style=f"bold {MARKS[worst][1]}"))
    for (path, code, reason), style in zip(findings[:PROBLEMS_LISTED], styles):
        console.print(Text(f"  {path}: {reason} [{code}]", style=style))
    if len(findings) > PROBLEMS_LISTED:
        console.print(
            Text(
                f"  … and {len(findings) - PROBLEMS_LISTED} more (--json lists them all)",
                style="red",
            )
        )


def _item_json(item, n: int, show_secrets: bool, limit: int | None) -> dict:
    msg = item.message
    # every clean candidate, and of the others the best ``limit`` (--candidates): a
    # response is tried as every API and version, so hundreds of guesses that fail are
    # noise, not choices; how many are left out is said. Without a clean one, the best
    # other (the one read) is always listed.
    clean = [c for c in item.candidates if c.clean]
    unclean = [c for c in item.candidates if not c.clean]
    listed = clean + (unclean if limit is None else unclean[: max(limit, 0 if clean else 1)])
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
        "findings": [f.to_json() for f in item.findings],
        "candidates": [
            {
                "api_key": c.api_key,
                "api_name": api_name(c.api_key),
                "versions": list(c.versions),
                "direction": c.direction,
                "score": round(c.score, 2),
                "clean": c.clean,
            }
            for c in listed
        ],
        "candidates_left_out": len(item.candidates) - len(listed),
        "problems": [{"path": p, "code": c, "problem": r} for p, c, r in msg.tree.findings()],
        "tree": _TREE.format(n),
    }


_TREE = "\x00tree {}\x00"  # stands for a tree in the JSON until it is written out


def _no_bytes(e: Exception) -> NoReturn:
    """The input holds no bytes to decode (exit status 1, as for a file that is no
    capture): what was wrong, where, and what is read."""
    click.echo(f"kdissect blob: could not read the bytes: {e}", err=True)
    sys.exit(1)


def _echo_json(out: dict, trees: list, show_secrets: bool) -> None:
    """``out`` as indented JSON, each tree placeholder replaced by its tree written in
    pieces (a tree as dicts can take gigabytes; as text it streams). A reader that goes
    away (``| head``) ends it quietly, status 0, as every other output."""
    text = json.dumps(out, indent=2, default=str)
    write = sys.stdout.write
    try:
        for i, tree in enumerate(trees):
            marker = json.dumps(_TREE.format(i))
            head, _, text = text.partition(marker)
            write(head)
            line = head[head.rfind("\n") + 1 :]
            level = (len(line) - len(line.lstrip(" "))) // 2  # the "tree" key's depth
            for piece in tree.iter_json(show_secrets, level):
                write(piece)
        write(text + "\n")
        sys.stdout.flush()  # (a closed pipe is seen here, not at exit)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(0)
