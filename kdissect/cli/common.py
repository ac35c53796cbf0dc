"""What the commands share: option groups, size and port parsing, progress, the TUI."""

from __future__ import annotations

import io
import os
import sys

from typing import TYPE_CHECKING

import click

from ..protocol import Options
from ..render.formats import choices as _choices


class FormatChoice(click.Choice):
    """--format's values, with a did-you-mean (``--format json``: jsonl)."""

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as e:
            import difflib

            text = str(value).lower()
            close = [c for c in self.choices if isinstance(c, str) and c.startswith(text)]
            close += [
                c
                for c in difflib.get_close_matches(text, [str(c) for c in self.choices], 2, 0.6)
                if c not in close
            ]
            if not close:
                raise
            self.fail(f"{e.message} (did you mean {', '.join(close[:2])}?)", param, ctx)


def format_choices(**kw) -> FormatChoice:
    """The --format values of a command (render/formats.py) as a click type."""
    return FormatChoice(_choices(**kw))


if TYPE_CHECKING:
    from rich.console import Console

SIZE_UNITS = {
    "": 1,
    "k": 1024,
    "kb": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
}


def buffer_stdout() -> None:
    """Lines for a file or a pipe go out in blocks, even where PYTHONUNBUFFERED (set in
    many container images) asked Python to write each at once: reading a capture file
    writes one line per exchange, and a system call per line was a tenth of a summary's
    CPU. A terminal, and the live commands (whose lines must show as they happen), keep
    Python's own choice."""
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper) and out.write_through and not out.isatty():
        out.reconfigure(write_through=False)


def prompt_stdout() -> None:
    """Lines for a pipe or a file go out as they are written, for the commands that show
    traffic as it happens (``live``, the proxy): Python holds up to 8 KiB for a pipe, so
    `kdissect live | grep` showed nothing for minutes of light traffic (and lost it
    when stopped by a signal). A terminal is line-buffered already."""
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper) and not out.write_through and not out.isatty():
        out.reconfigure(line_buffering=True)


def port_options(command):
    """-p/--port and --no-detect, for the commands that find Kafka in TCP traffic."""
    command = click.option(
        "--no-detect", is_flag=True, help="Only the given ports: no automatic detection."
    )(command)
    return click.option(
        "-p",
        "--port",
        "ports",
        multiple=True,
        metavar="PORT[-PORT]",
        help="Also treat these ports as Kafka (repeatable; ranges and commas allowed).",
    )(command)


def display_options(command):
    """-Y, --format, -V and --tui/--no-tui: how the live commands (live, proxy) show
    exchanges."""
    for option in reversed(
        (
            click.option(
                "-Y",
                "--filter",
                "filter_text",
                metavar="EXPR",
                help="Only exchanges matching this display filter.",
            ),
            click.option(
                "--format",
                "fmt",
                type=format_choices(files=False),
                default="text",
                show_default=True,
                help="Output format without the TUI.",
            ),
            click.option(
                "-V", "--verbose", is_flag=True, help="Print full field trees (without the TUI)."
            ),
            click.option(
                "--tui/--no-tui",
                default=None,
                help="The terminal UI (default when stdout is a terminal) or printed lines.",
            ),
        )
    ):
        command = option(command)
    return command


def secret_options(command):
    """--show-secrets and the per-message budget (--max-decompressed, --max-nodes), for the
    commands that decode messages. --max-nodes reaches ``_traffic_options`` through the
    click context, so the commands' signatures stay as they are."""
    command = budget_nodes_option(command)
    command = click.option(
        "--max-decompressed",
        default="64M",
        show_default=True,
        metavar="SIZE",
        help="Decompressed bytes one message may "
        "produce over all its compressed payloads (bomb protection; "
        "the rest stays compressed, marked).",
    )(command)
    return click.option(
        "--show-secrets", is_flag=True, help="Show SASL passwords, proofs and tokens."
    )(command)


def keylog_option(command):
    """--keylog FILE (repeatable) and SSLKEYLOGFILE: TLS session keys, as a KeyLog (or
    None when there are none), in the ``keylog`` parameter."""

    def load(_ctx, _param, paths):
        env = os.environ.get("SSLKEYLOGFILE")
        if env and not os.path.exists(env) and not paths:
            # (set for every program, it may name a file no client has written yet)
            click.echo(f"kdissect: SSLKEYLOGFILE={env} does not exist: not read", err=True)
        paths = list(paths) + ([env] if env and os.path.exists(env) else [])
        if not paths:
            return None
        from ..capture.tls.keylog import KeyLog, KeyLogError

        keys = KeyLog()
        for path in paths:
            try:
                keys.add_file(path)
            except KeyLogError as e:
                raise click.BadParameter(str(e), param_hint="--keylog") from None
        return keys

    return click.option(
        "--keylog",
        "keylog",
        multiple=True,
        metavar="FILE",
        callback=load,
        type=click.Path(dir_okay=False),
        help="TLS session keys (an NSS key log: what SSLKEYLOGFILE writes; "
        "repeatable; SSLKEYLOGFILE is read too): TLS connections are "
        "decrypted. See docs/guide/tls.md.",
    )(command)


def budget_nodes_option(command):
    def remember(ctx, _param, value):
        if value is not None:
            ctx.meta["kdissect.max_nodes"] = value
        return value

    return click.option(
        "--max-nodes",
        type=click.IntRange(1000, 1 << 40),
        default=Options.max_nodes,
        show_default=True,
        metavar="N",
        expose_value=False,
        callback=remember,
        help="Fields one message may decode into (array items, records...); "
        "the rest stays raw, marked.",
    )(command)


def memory_option(command):
    """--max-memory: the process's memory budget for bytes held across connections
    (partial messages, out-of-order segments). Read back with ``memory_budget()``."""

    def remember(ctx, _param, value):
        from ..stream.budget import parse_size

        try:
            ctx.meta["kdissect.max_memory"] = parse_size(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
        return value

    from ..stream.budget import DEFAULT

    return click.option(
        "--max-memory",
        default=f"{DEFAULT >> 20}M",
        show_default=True,
        metavar="SIZE",
        expose_value=False,
        callback=remember,
        help="Bytes held at once for messages still arriving and "
        "out-of-order segments, over all connections; when spent, the "
        "oldest partial message is given up (its header kept, marked "
        "memory_budget).",
    )(command)


def memory_budget():
    """The ``stream.budget.Budget`` the command line asked for (--max-memory)."""
    from ..stream.budget import DEFAULT, Budget

    ctx = click.get_current_context(silent=True)
    return Budget(ctx.meta.get("kdissect.max_memory", DEFAULT) if ctx else DEFAULT)


def budget(max_decompressed: str, **options) -> Options:
    """Decoding options with the budget the command line asked for."""
    ctx = click.get_current_context(silent=True)
    nodes = ctx.meta.get("kdissect.max_nodes", Options.max_nodes) if ctx else Options.max_nodes
    from .values_opts import values_source  # --schemas, --registry... (or None)

    return Options(
        max_decompressed=_size(max_decompressed, "--max-decompressed"),
        max_nodes=nodes,
        values=values_source(ctx),
        **options,
    )


def on_terminal(fmt: str, printing: bool) -> bool:
    """Whether to open the TUI by default: a terminal both ways, and nothing asked to be
    printed."""
    return sys.stdout.isatty() and sys.stdin.isatty() and fmt == "text" and not printing


MAX_SIZE = 1 << 40  # 1 TiB: more than any machine kdissect runs on can hold


def _size(text: str, option: str | None = None) -> int:
    t = text.strip().lower()
    num = t.rstrip("kmgb")
    try:
        value = float(num) * SIZE_UNITS[t[len(num) :]]
    except (ValueError, KeyError):
        raise click.BadParameter(
            f"{text!r} is not a size (examples: 1048576, 64M, 1G)", param_hint=option
        ) from None
    if not 0 <= value <= MAX_SIZE:  # also NaN and infinity ('1e400')
        raise click.BadParameter(
            f"{text!r} is out of range: a size from 0 to 1T (examples: 1048576, 64M, 1G)",
            param_hint=option,
        )
    return int(value)


def _ports(values: tuple[str, ...]) -> set[int]:
    ports: set[int] = set()
    for v in values:
        for part in v.split(","):
            lo, _, hi = part.strip().partition("-")
            try:
                a, b = int(lo), int(hi or lo)
            except ValueError:
                raise click.BadParameter(
                    f"{part!r} is not a port or range (e.g. 9093, 19092-19094)", param_hint="--port"
                ) from None
            if 0 < b < a < 65536:
                raise click.BadParameter(
                    f"{part!r} runs backwards: write the lower port first ({b}-{a})",
                    param_hint="--port",
                )
            if not (0 < a <= b < 65536):
                raise click.BadParameter(f"{part!r} is outside 1-65535", param_hint="--port")
            ports.update(range(a, b + 1))
    return ports


def _need_spark_extra(what: str, module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise click.ClickException(
            f"{what} needs {module}, which is not installed: pip install 'kdissect[spark]'"
        ) from None


def _print_warnings(err: Console, warnings: list[str], listed: int = 20) -> None:
    for w in warnings[:listed]:
        err.print(w, style="yellow")
    if len(warnings) > listed:
        err.print(f"… and {len(warnings) - listed} more warnings", style="yellow")


def check_views(fmt: str, verbose: bool, stats: bool = False) -> None:
    """Options of `pcap`, `live`, `proxy` and `log` that one output cannot honour
    together: refused, not silently dropped."""
    if stats and fmt != "text":
        raise click.UsageError(f"--stats prints its tables instead of --format {fmt}: give one")
    if stats and verbose:
        raise click.UsageError("--stats prints its tables instead of -V's trees: give one")
    if verbose and fmt != "text":
        raise click.UsageError(
            f"-V shows field trees in the text format, not in --format {fmt}: leave out "
            f"-V (--format jsonl carries every field)"
        )


def _traffic_options(filter_text, show_secrets, max_decompressed, ports):
    """(display filter, decoding options, Kafka ports) from the options `pcap` and
    `live` share."""
    from ..sources.pcap import DEFAULT_PORTS

    display_filter = None
    if filter_text:
        from ..filters import FilterError, parse_filter  # only with -Y

        try:
            display_filter = parse_filter(filter_text)
        except FilterError as e:
            raise click.BadParameter(str(e), param_hint="-Y/--filter") from None
    options = budget(max_decompressed, show_secrets=show_secrets)
    return display_filter, options, DEFAULT_PORTS | _ports(ports)


def tui_refused() -> str | None:
    """Why the terminal UI cannot open here (None: it can). Textual reads keys from
    standard input and draws on standard error; opened with --tui on standard input
    /dev/null, it spun a core for good, deaf to Ctrl-C and SIGTERM."""
    missing = [
        name
        for name, stream in (("standard input", sys.stdin), ("standard error", sys.stderr))
        if stream is None or not stream.isatty()
    ]
    if not missing:
        return None
    return (
        "the terminal UI needs a terminal: it reads keys from standard input and draws "
        f"on standard error, and {' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not one here; leave out --tui to print "
        "lines instead (--format text, jsonl...)"
    )


def need_terminal_for_tui() -> None:
    """A clear error, before anything starts, where the terminal UI cannot open."""
    why = tui_refused()
    if why is not None:
        raise click.ClickException(why)


def _run_tui(
    load,
    options: Options,
    title: str,
    filter_text: str | None = None,
    display_filter=None,
    stop=None,
    keys=None,
) -> None:
    from ..tui.app import KdissectApp

    need_terminal_for_tui()

    # a source the user stops (live, proxy) runs until then: the TUI shows it as live
    app = KdissectApp(load, options, title=title, stop=stop, keys=keys, live=stop is not None)
    if display_filter is not None:
        app.filter_text, app.filter = filter_text or "", display_filter
    app.run()


def _progress(reader, path: str, err: Console):
    """Packets, with a progress bar on stderr when it is a terminal and the file is big."""
    size = os.path.getsize(path)
    if not err.is_terminal or size < 20 * 1024 * 1024 or reader.compressed:
        yield from reader.items()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(os.path.basename(path), total=size)
        from ..sources.pcap import tracked  # not at start-up: --help stays quick

        yield from tracked(reader, path, lambda done, total: bar.update(task, completed=done))


def _host_port(
    text: str,
    default_port: int | None = None,
    option: str | None = None,
    local: bool = False,
) -> tuple[str, int]:
    """(host, port) of ``text``: HOST:PORT, or HOST alone with ``default_port``, or
    (``local``: an address of the proxy's own) a bare PORT on 127.0.0.1."""
    if local and text.strip().isdigit():
        text = f"127.0.0.1:{text.strip()}"
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(default_port or "")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{text!r} is not HOST:PORT (a port 1-65535, e.g. 127.0.0.1:9092)", param_hint=option
        )
    return host, int(port)
