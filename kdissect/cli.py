"""Command line: thin click commands over the library."""

from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.text import Text

from . import __version__
from .blob import BlobError, parse_blob
from .protocol import Options, api_key_of, api_name
from .protocol.decode import decode_body
from .protocol.grammar import GrammarError, parse_grammar
from .render.text import render_node
from .stream.dissect import Hints, dissect

SIZE_UNITS = {"": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


def port_options(command):
    """-p/--port and --no-detect, for the commands that find Kafka in TCP traffic."""
    command = click.option("--no-detect", is_flag=True,
                           help="Only the given ports: no automatic detection.")(command)
    return click.option("-p", "--port", "ports", multiple=True, metavar="PORT[-PORT]",
                        help="Also treat these ports as Kafka (repeatable; ranges and "
                             "commas allowed).")(command)


def secret_options(command):
    """--show-secrets and --max-decompressed, for the commands that decode messages."""
    command = click.option("--max-decompressed", default="64M", show_default=True,
                           metavar="SIZE", help="Largest decompressed record payload to "
                           "accept (bomb protection).")(command)
    return click.option("--show-secrets", is_flag=True,
                        help="Show SASL passwords, proofs and tokens.")(command)


def on_terminal(fmt: str, printing: bool) -> bool:
    """Whether to open the TUI by default: a terminal both ways, and nothing asked to be
    printed."""
    return sys.stdout.isatty() and sys.stdin.isatty() and fmt == "text" and not printing


def _size(text: str) -> int:
    t = text.strip().lower()
    num = t.rstrip("kmgb")
    try:
        return int(float(num) * SIZE_UNITS[t[len(num):]])
    except (ValueError, KeyError):
        raise click.BadParameter(f"{text!r} is not a size (examples: 1048576, 64M, 1G)") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kdissect")
def main() -> None:
    """kdissect: see every byte of Kafka traffic.

    \b
    Commands:
      pcap   decode Kafka traffic in capture files (pcap, pcapng, .gz): paired exchanges
      blob   annotate bytes pasted from a debugging session (hex, dumps, b'..', <<..>>, base64)
      live   decode Kafka traffic on a network interface as it passes
      proxy  stand between Kafka clients and brokers, decoding everything live
      spark  turn many or huge captures into Parquet tables of exchanges, on Apache Spark

    Run `kdissect COMMAND --help` for examples.
    """


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
@click.option("--version", "api_version", type=int, metavar="N", help="API version.")
@click.option("--request", "direction", flag_value="request", help="The bytes are a request.")
@click.option("--response", "direction", flag_value="response", help="The bytes are a response.")
@click.option("--json", "as_json", is_flag=True, help="Print the tree as JSON (see docs/json.md).")
@click.option("--show-secrets", is_flag=True, help="Show SASL passwords, proofs and tokens.")
@click.option("--grammar", metavar="FILE|TEXT",
              help="Dissect with your own grammar in the protocol guide's BNF notation.")
@click.option("--no-hex", is_flag=True, help="Leave out the coloured hex dump.")
@click.option("--max-decompressed", default="64M", show_default=True, metavar="SIZE",
              help="Largest decompressed record payload to accept (bomb protection).")
def blob(input, api, api_version, direction, as_json, show_secrets, grammar, no_hex,
         max_decompressed):
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if input is None and sys.stdin.isatty() and sys.stdout.isatty() and not as_json:
        from .tui.blob_app import BlobApp
        BlobApp(options=Options(show_secrets=show_secrets,
                                max_decompressed=_size(max_decompressed))).run()
        return
    text = _read_input(input)
    try:
        parsed = parse_blob(text)
    except BlobError as e:
        raise click.UsageError(str(e)) from None
    options = Options(show_secrets=show_secrets, max_decompressed=_size(max_decompressed))
    data = parsed.data
    if grammar is not None:
        _blob_grammar(console, grammar, data, options, as_json, no_hex, parsed.format)
        return
    key = None
    if api is not None:
        key = api_key_of(api)
        if key is None:
            raise click.BadParameter(f"unknown API {api!r}; use a name like Metadata or a key "
                                     f"like 3", param_hint="--api")
    items = dissect(data, Hints(key, api_version, direction), options)
    if as_json:
        out = {"input": {"format": parsed.format, "length": len(data)},
               "messages": [_item_json(i, show_secrets) for i in items]}
        click.echo(json.dumps(out, indent=2, default=str))
        return
    err.print(Text(f"read {len(data)} bytes ({parsed.format}); "
                   f"{len(items)} message{'s' if len(items) != 1 else ''}", style="dim"))
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
        problems = msg.problems
        if problems:
            console.print(Text(f"{len(problems)} problem(s):", style="bold red"))
            for path, reason in problems:
                console.print(Text(f"  {path}: {reason}", style="red"))


def _read_input(arg: str | None) -> str | bytes:
    if arg is None or arg == "-":
        if arg is None and sys.stdin.isatty():
            raise click.UsageError("give the bytes as an argument, a file, or on stdin "
                                   "(e.g. `xxd -p file | kdissect blob`)")
        return sys.stdin.buffer.read()
    if len(arg) < 4096 and os.path.isfile(arg):
        with open(arg, "rb") as f:
            return f.read()
    return arg


def _blob_grammar(console, grammar: str, data: bytes, options: Options, as_json: bool,
                  no_hex: bool, fmt: str) -> None:
    source = grammar
    if len(grammar) < 4096 and os.path.isfile(grammar):
        with open(grammar, encoding="utf-8") as f:
            source = f.read()
    try:
        g = parse_grammar(source)
    except GrammarError as e:
        raise click.UsageError(f"bad grammar: {e}") from None
    tree = decode_body(data, 0, g.root, g.root.name, options)
    if as_json:
        click.echo(json.dumps({"input": {"format": fmt, "length": len(data)},
                               "grammar_root": g.root.name, "tree": tree.to_json(
                                   options.show_secrets)}, indent=2, default=str))
        return
    title = Text(f"{g.root.name} (your grammar)  {len(data)} bytes", style="bold")
    console.print(render_node(data, tree, options.show_secrets, 0, title, not no_hex))
    for path, reason in tree.problems():
        console.print(Text(f"  {path}: {reason}", style="red"))


def _item_json(item, show_secrets: bool) -> dict:
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
        "problems": [{"path": p, "problem": r} for p, r in msg.problems],
        "tree": msg.tree.to_json(show_secrets),
    }


PCAP_HELP = """Decode the Kafka traffic in capture files: every request paired with its response.

Reads pcap and pcapng (also gzip-compressed), reassembles TCP, finds Kafka connections
(port 9092, any --port you add, and any connection that starts like a Kafka request),
frames the messages, pairs each response with its request by correlation id, and decodes
every field with the request's API and version. Lost data is reported as gaps and
decoding resumes at the next message boundary.

\b
Output: on a terminal, the TUI (exchange list, field trees, bytes; press ? in it).
Piped, or with --no-tui:
  default           one line per exchange: time, client → broker, API and version,
                    correlation id, client id, latency, topics/partitions, records, errors
  -V, --verbose     the full field trees of both messages
  --format jsonl    one JSON object per Kafka message (see docs/jsonl.md)

\b
Filters (-Y, see docs/filters.md), over exchanges:
  api == Produce and topic == "orders"      error != 0        latency > 50ms
  client_id ~ "rdkafka"                     api in {Fetch, ListOffsets} and records > 0
  fields: api version correlation_id client_id latency topic partition error records
          status stream client broker bytes problems frame

\b
Examples:
  kdissect pcap capture.pcapng
  kdissect pcap -p 9093 -p 19092-19094 traffic.pcap.gz
  kdissect pcap capture.pcap -Y 'error != 0' -V
  kdissect pcap capture.pcap --stats
  kdissect pcap capture.pcap --format jsonl | jq 'select(.api_name == "Produce")'
"""


def _ports(values: tuple[str, ...]) -> set[int]:
    ports: set[int] = set()
    for v in values:
        for part in v.split(","):
            lo, _, hi = part.strip().partition("-")
            try:
                a, b = int(lo), int(hi or lo)
            except ValueError:
                raise click.BadParameter(f"{part!r} is not a port or range (e.g. 9093, "
                                         f"19092-19094)", param_hint="--port") from None
            if not (0 < a <= b < 65536):
                raise click.BadParameter(f"{part!r} is outside 1-65535", param_hint="--port")
            ports.update(range(a, b + 1))
    return ports


@main.command(help=PCAP_HELP)
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@port_options
@click.option("-V", "--verbose", is_flag=True, help="Print full field trees.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl", "parquet"]),
              default="text", show_default=True,
              help="Output format (parquet needs -o and the kdissect[spark] extra).")
@click.option("-o", "--output", metavar="FILE.parquet",
              help="Where --format parquet writes the exchanges table.")
@click.option("-Y", "--filter", "filter_text", metavar="EXPR",
              help="Only exchanges matching this display filter.")
@click.option("--stats", is_flag=True, help="Print statistics (per API, errors, latency "
              "percentiles, connections) instead of the exchanges.")
@click.option("--tui", is_flag=True, help="Open the terminal UI even when stdout is not a "
              "terminal (it is the default on a terminal).")
@click.option("--no-tui", is_flag=True, help="Print instead of opening the terminal UI.")
@secret_options
def pcap(files, ports, no_detect, verbose, fmt, output, filter_text, stats, tui, no_tui,
         show_secrets, max_decompressed):
    from .render.printer import ExchangePrinter
    from .stream.dissector import load_captures

    display_filter, options, kafka_ports = _traffic_options(filter_text, show_secrets,
                                                            max_decompressed, ports)
    detect = not no_detect
    if fmt == "parquet" or output:
        _write_parquet(files, output, fmt, kafka_ports, detect, display_filter, options)
        return
    interactive = on_terminal(fmt, verbose or stats)
    if (tui or interactive) and not no_tui:
        _run_tui(lambda emit, warn, progress: load_captures(
            files, emit, warn, on_gap=lambda g: warn(g.describe()), ports=kafka_ports,
            detect=detect, packets=lambda reader, path: _tracked(reader, path, progress)),
            options, ", ".join(os.path.basename(f) for f in files), filter_text,
            display_filter)
        return
    printer = ExchangePrinter(options, fmt, verbose, display_filter, stats)
    try:
        read_any = load_captures(files, printer.exchange, printer.warn, on_gap=printer.gap,
                                 error=printer.error, ports=kafka_ports, detect=detect,
                                 packets=lambda reader, path: _progress(reader, path,
                                                                        printer.err))
        printer.finish()
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    if not read_any:
        raise SystemExit(1)


def _need_spark_extra(what: str, module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise click.ClickException(
            f"{what} needs {module}, which is not installed: "
            f"pip install 'kdissect[spark]'") from None


def _write_parquet(files, output, fmt, ports, detect, display_filter, options) -> None:
    if fmt != "parquet":
        raise click.UsageError("-o/--output is for --format parquet; text and jsonl go "
                               "to stdout (redirect them)")
    if not output:
        raise click.UsageError("--format parquet needs -o FILE.parquet")
    _need_spark_extra("--format parquet", "pyarrow")
    from .pipeline.local import write_exchanges
    from .stream.facts import ExchangeView

    def keep(ex, topic_ids):
        view = ExchangeView(ex, options, topic_ids)
        view.learn()
        return display_filter(view)

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    warnings = []
    rows = write_exchanges(list(files), output, ports=ports, detect=detect,
                           warn=warnings.append, keep=keep if display_filter else None,
                           packets=lambda reader, path: _progress(reader, path, err))
    _print_warnings(err, warnings)
    err.print(f"wrote {rows} exchange{'s' if rows != 1 else ''} to {output}", style="green")


def _print_warnings(err: Console, warnings: list[str], listed: int = 20) -> None:
    for w in warnings[:listed]:
        err.print(w, style="yellow")
    if len(warnings) > listed:
        err.print(f"… and {len(warnings) - listed} more warnings", style="yellow")


def _traffic_options(filter_text, show_secrets, max_decompressed, ports):
    """(display filter, decoding options, Kafka ports) from the options `pcap` and
    `live` share."""
    from .filters import FilterError, parse_filter
    from .stream.session import DEFAULT_PORTS
    try:
        display_filter = parse_filter(filter_text) if filter_text else None
    except FilterError as e:
        raise click.BadParameter(str(e), param_hint="-Y/--filter") from None
    options = Options(show_secrets=show_secrets, max_decompressed=_size(max_decompressed))
    return display_filter, options, DEFAULT_PORTS | _ports(ports)


def _run_tui(load, options: Options, title: str, filter_text: str | None = None,
             display_filter=None, stop=None) -> None:
    from .tui.app import KdissectApp
    app = KdissectApp(load, options, title=title, stop=stop)
    if display_filter is not None:
        app.filter_text, app.filter = filter_text, display_filter
    app.run()


def _tracked(reader, path: str, progress):
    """Packets, telling ``progress(bytes read, file size)`` as they are read."""
    size = os.path.getsize(path)
    for i, packet in enumerate(reader.packets()):
        if i % 100 == 0:
            progress(reader.bytes_read, size)
        yield packet
    progress(size, size)


def _progress(reader, path: str, err: Console):
    """Packets, with a progress bar on stderr when it is a terminal and the file is big."""
    size = os.path.getsize(path)
    if not err.is_terminal or size < 20 * 1024 * 1024 or reader.compressed:
        yield from reader.packets()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), console=err, transient=True) as bar:
        task = bar.add_task(os.path.basename(path), total=size)
        yield from _tracked(reader, path,
                            lambda done, total: bar.update(task, completed=done))


LIVE_HELP = """Decode Kafka traffic on a network interface as it passes.

Sniffs IFACE (with libpcap, like tcpdump), reassembles TCP and shows every exchange as
its response arrives: in the TUI on a terminal, else one line per exchange (or JSON
lines) until Ctrl-C, --count or --duration. Kafka connections are found as in
`kdissect pcap` (port 9092, --port, or how they start; connections already open when
sniffing starts are picked up at the next message boundary).

Capturing needs root, or once: sudo setcap cap_net_raw,cap_net_admin=eip
$(readlink -f $(which python3))

\b
Examples:
  sudo kdissect live -i eth0
  kdissect live -i lo -p 19092 --no-tui -Y 'error != 0'
  kdissect live -i any --format jsonl --duration 60 > kafka.jsonl
"""


@main.command(help=LIVE_HELP)
@click.option("-i", "--interface", "iface", required=True, metavar="IFACE",
              help="Interface to sniff (lo, eth0, any...).")
@port_options
@click.option("-f", "--capture-filter", "bpf", metavar="BPF",
              help="Capture filter in tcpdump syntax (default: tcp, or the Kafka ports "
                   "with --no-detect).")
@click.option("-Y", "--filter", "filter_text", metavar="EXPR",
              help="Only exchanges matching this display filter.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="Output format without the TUI.")
@click.option("-V", "--verbose", is_flag=True, help="Print full field trees (without the TUI).")
@click.option("-c", "--count", type=int, default=0, metavar="N",
              help="Stop after N packets.")
@click.option("-a", "--duration", type=float, metavar="SECONDS", help="Stop after SECONDS.")
@click.option("--tui/--no-tui", default=None,
              help="The terminal UI (default when stdout is a terminal) or printed lines.")
@secret_options
def live(iface, ports, no_detect, bpf, filter_text, fmt, verbose, count, duration, tui,
         show_secrets, max_decompressed):
    import threading
    from .capture.live import LiveError, sniff
    from .render.printer import ExchangePrinter
    from .stream.dissector import CaptureDissector

    display_filter, options, kafka_ports = _traffic_options(filter_text, show_secrets,
                                                            max_decompressed, ports)
    if bpf is None:
        bpf = "tcp" if not no_detect else "tcp and (" + " or ".join(
            f"port {p}" for p in sorted(kafka_ports)[:64]) + ")"
    stop = threading.Event()
    interactive = on_terminal(fmt, verbose)
    if tui or (tui is None and interactive):
        def load(emit, warn, progress):
            dissector = CaptureDissector(emit, lambda g: warn(g.describe()), kafka_ports,
                                         not no_detect)
            try:
                sniff(iface, dissector.packet, stop, bpf, count, duration)
            except LiveError as e:
                warn(str(e))
            dissector.finish()
        _run_tui(load, options, f"live: {iface}", filter_text, display_filter, stop)
        return
    printer = ExchangePrinter(options, fmt, verbose, display_filter)
    dissector = CaptureDissector(printer.exchange, printer.gap, kafka_ports, not no_detect)
    try:
        sniff(iface, dissector.packet, stop, bpf, count, duration)
    except LiveError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        stop.set()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    dissector.finish()
    printer.finish()


PROXY_HELP = """Stand between Kafka clients and brokers, forwarding and decoding everything.

Clients connect to --listen (the bootstrap address); the proxy connects to the
--upstream brokers. Broker addresses in responses (Metadata, FindCoordinator,
DescribeCluster, the KIP-951 leader hints of Produce and Fetch, ShareFetch and
ShareAcknowledge) are rewritten to listeners of the proxy, one per broker, made when a
broker is first named, so clients keep talking through the proxy. Only those responses
are re-encoded; every other byte passes unchanged and in order.

On a terminal the TUI shows exchanges as they happen; --no-tui prints one line per
exchange (or JSON lines with --format jsonl). Ctrl-C stops.

\b
Examples:
  kdissect proxy --upstream kafka-1:9092,kafka-2:9092
  kdissect proxy --upstream 10.0.0.5:9092 --listen 127.0.0.1:19092 --broker-ports 19100
  kdissect proxy --upstream broker:9092 --listen 0.0.0.0:9092 --advertise proxy.example.com
  kdissect proxy --upstream broker:9092 --no-tui -Y 'api == Produce'
"""


def _host_port(text: str, default_port: int | None = None) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(default_port or "")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{text!r} is not HOST:PORT")
    return host, int(port)


@main.command(help=PROXY_HELP)
@click.option("--upstream", required=True, metavar="HOST:PORT[,HOST:PORT...]",
              help="Bootstrap brokers the proxy connects to.")
@click.option("--listen", default="127.0.0.1:9092", show_default=True, metavar="HOST:PORT",
              help="Where clients connect (the address to give them as bootstrap).")
@click.option("--broker-ports", metavar="BASE",  type=int,
              help="Listen for broker N on port BASE+N (default: a free port each).")
@click.option("--advertise", metavar="HOST",
              help="The host name clients use to reach the proxy (default: the --listen host).")
@click.option("--map", "maps", multiple=True, metavar="ADVERTISED=HOST:PORT",
              help="Connect to HOST:PORT for a broker that advertises ADVERTISED (host:port), "
                   "e.g. an internal name only the proxy can reach another way. Repeatable.")
@click.option("--upstream-tls", is_flag=True, help="Connect to the brokers over TLS.")
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False),
              help="CA certificates to check the brokers' certificates (default: the system's).")
@click.option("--insecure", is_flag=True,
              help="Do not check the brokers' certificates or host names (a warning is shown).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False),
              help="Certificate (PEM) for TLS towards clients: the listeners then speak TLS.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False),
              help="Private key (PEM) of --tls-cert.")
@click.option("-w", "--write", "write", metavar="FILE.pcapng",
              help="Record both directions as a capture (SASL secrets masked unless "
                   "--show-secrets) that kdissect pcap and Wireshark open.")
@click.option("-Y", "--filter", "filter_text", metavar="EXPR",
              help="Only show exchanges matching this display filter.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="Output format without the TUI.")
@click.option("-V", "--verbose", is_flag=True, help="Print full field trees (without the TUI).")
@click.option("--tui/--no-tui", default=None,
              help="The terminal UI (default when stdout is a terminal) or printed lines.")
@secret_options
def proxy(upstream, listen, broker_ports, advertise, maps, upstream_tls, ca_file, insecure,
          tls_cert, tls_key, write, filter_text, fmt, verbose, tui, show_secrets,
          max_decompressed):
    import asyncio
    import ssl
    import threading
    from .proxy.server import Proxy
    from .render.printer import ExchangePrinter

    upstreams = [_host_port(u.strip(), 9092) for u in upstream.split(",") if u.strip()]
    upstream_map = {}
    for m in maps:
        advertised, sep, real = m.partition("=")
        if not sep:
            raise click.BadParameter(f"{m!r} is not ADVERTISED=HOST:PORT", param_hint="--map")
        upstream_map[_host_port(advertised)] = _host_port(real)
    host, port = _host_port(listen)
    display_filter, options, _ = _traffic_options(filter_text, show_secrets,
                                                  max_decompressed, ())
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    interactive = on_terminal(fmt, verbose)
    upstream_ssl = server_ssl = None
    if upstream_tls or ca_file or insecure:
        upstream_ssl = ssl.create_default_context(cafile=ca_file)
        if insecure:
            upstream_ssl.check_hostname = False
            upstream_ssl.verify_mode = ssl.CERT_NONE
            err.print("warning: --insecure: broker certificates and host names are not "
                      "checked; anyone on the path can pose as the brokers", style="bold yellow")
    if tls_cert or tls_key:
        if not (tls_cert and tls_key):
            raise click.UsageError("--tls-cert and --tls-key go together")
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            server_ssl.load_cert_chain(tls_cert, tls_key)
        except (ssl.SSLError, OSError) as e:
            raise click.BadParameter(f"cannot use {tls_cert} / {tls_key}: {e}",
                                     param_hint="--tls-cert/--tls-key") from None

    def make(on_exchange, on_gap, on_note) -> Proxy:
        recorder = None
        if write:
            from .proxy.recording import Recorder
            try:
                recorder = Recorder(write, show_secrets)
            except OSError as e:
                raise click.ClickException(f"cannot write {write}: {e.strerror}") from None
        return Proxy(upstreams, host, port, advertise,
                     (lambda n: broker_ports + n) if broker_ports is not None else None,
                     on_exchange, on_gap, on_note, server_ssl, upstream_ssl, recorder,
                     upstream_map)

    async def serve(p: Proxy, stop: threading.Event, ready=None) -> None:
        try:
            await p.start()
        except OSError as e:
            raise click.ClickException(f"cannot listen on {listen}: {e.strerror or e}") from None
        if ready:
            ready(p)
        if threading.current_thread() is threading.main_thread():
            import signal               # `kill` stops it as cleanly as Ctrl-C
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await p.close()
        if p.recorder is not None:
            p.recorder.close()

    stop = threading.Event()
    if tui or (tui is None and interactive):
        def load(emit, warn, progress):
            p = make(emit, lambda g: warn(g.describe()), warn)
            asyncio.run(serve(p, stop, lambda p: warn(
                f"listening on {host}:{p.bootstrap_port}; brokers {upstream}")))
        _run_tui(load, options, f"proxy {listen} → {upstream}", filter_text,
                 display_filter, stop)
        return
    printer = ExchangePrinter(options, fmt, verbose, display_filter)
    # decoding and printing run in their own thread, fed through a bounded queue: a slow
    # terminal or pipe must never stall forwarding (what does not fit is counted)
    from .proxy.display import Display
    display = Display(printer.exchange, printer.gap)
    p = make(display.exchange, display.gap, lambda text: err.print(text, style="cyan"))
    try:
        asyncio.run(serve(p, stop, lambda p: err.print(
            f"listening on {host}:{p.bootstrap_port} for Kafka clients; brokers: {upstream} "
            f"(Ctrl-C stops)", style="green")))
    except KeyboardInterrupt:
        pass
    display.close()
    try:
        printer.finish()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if display.dropped:
        err.print(f"{display.dropped} exchanges were not shown: the output could not keep "
                  f"up (forwarding was not slowed)", style="yellow")
    err.print(f"{p.stats.connections} connections, {p.stats.frames} frames, "
              f"{p.stats.rewritten} responses rewritten", style="dim")


SPARK_HELP = """Turn many and/or huge captures into Parquet tables, on Apache Spark.

CAPTURE_OR_DIR are capture files (pcap, pcapng, .gz) or directories searched for them.
Writes OUT/exchanges (one row per request/response exchange: connection, API, version,
correlation id, client id, times, latency, sizes, error codes with names, topics and
partitions, record counts and bytes, status, problems) and, with --records,
OUT/records (topic, partition, offset, timestamp, key, value size, headers).

Each file is one task, decoded where it is read. With fewer files than cores, pcap
files larger than --shard-size are split into byte ranges read in parallel, and their
connections are then reassembled and decoded in parallel (pcapng and compressed files
are never split; --split/--no-split overrides the choice). Needs the spark extra (pip install 'kdissect[spark]') and Java 17+.

\b
Where it runs (--master, else a master set in MASTER / PYSPARK_SUBMIT_ARGS /
spark-defaults.conf / SPARK_REMOTE, else embedded local[*] on 127.0.0.1):
  local[4]            this machine, 4 cores
  spark://host:7077   a standalone cluster      yarn, k8s://https://...  those clusters
  sc://host:15002     Spark Connect (needs pyspark[connect] on this side)
On a cluster, executors must see the capture paths and have kdissect installed
(docs/spark.md shows how to ship it).

\b
Examples:
  kdissect spark captures/ --out tables/
  kdissect spark big.pcap --out tables/ --records --shard-size 128M
  kdissect spark /nfs/caps --out /nfs/tables --master spark://head:7077
Then query, e.g. with Spark SQL or DuckDB:
  SELECT api_name, percentile(latency_ms, 0.99) FROM exchanges GROUP BY api_name
"""


@main.command(help=SPARK_HELP)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True),
                metavar="CAPTURE_OR_DIR...")
@click.option("--out", required=True, metavar="DIR", help="Directory for the tables.")
@port_options
@click.option("--master", metavar="URL", help="Spark master (default: see above).")
@click.option("--records", "with_records", is_flag=True,
              help="Also write the records table (decodes every record batch).")
@click.option("--shard-size", default="128M", show_default=True, metavar="SIZE",
              help="Split pcap files larger than this into byte ranges of about this size.")
@click.option("--split/--no-split", default=None,
              help="Force splitting large pcap files, or reading every file whole.")
def spark(inputs, out, ports, no_detect, master, with_records, shard_size, split):
    _need_spark_extra("kdissect spark", "pyspark")
    _need_spark_extra("kdissect spark", "pyarrow")
    import time
    from .pipeline.spark_job import expand, get_session, run_job
    from .stream.session import DEFAULT_PORTS

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if not expand(list(inputs)):
        raise click.UsageError("no capture files (.pcap, .pcapng, .cap, .gz) in "
                               + ", ".join(inputs))
    started = time.monotonic()
    import tempfile
    log = os.path.join(tempfile.gettempdir(), f"kdissect-spark-{os.getpid()}.log")
    try:
        with err.status("starting Spark…"):
            session = get_session(master, log=log)
    except Exception as e:                      # Java missing, bad master URL...
        raise click.ClickException(
            f"Spark did not start: {_first_line(e)}\n  Check `java -version` (Java 17+), "
            f"JAVA_HOME and the --master URL; Spark's own output is in {log}") from None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    phases = {"shards": "reading shards", "connections": "decoding connections"}
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=not err.is_terminal, disable=not err.is_terminal) as bar:
        tasks = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                for t in tasks.values():            # the phase before is over
                    bar.update(t, completed=bar.tasks[t].total)
                tasks[phase] = bar.add_task(phases[phase], total=total)
            bar.update(tasks[phase], completed=done, total=total)

        try:
            result = run_job(session, list(inputs), out, ports=DEFAULT_PORTS | _ports(ports),
                             detect=not no_detect, with_records=with_records,
                             shard_bytes=_size(shard_size), split=split,
                             progress=progress)
        except Exception as e:
            raise click.ClickException(f"the Spark job failed: {_first_line(e)}") from None
        for t in tasks.values():                   # the last poll may predate the end
            bar.update(t, completed=bar.tasks[t].total)
    _print_warnings(err, result.warnings)
    tables = f"{out}/exchanges" + (f" and {out}/records" if with_records else "")
    err.print(f"wrote {result.exchanges} exchanges"
              + (f" and {result.records} records" if with_records else "")
              + f" to {tables} ({result.shards} shard{'s' if result.shards != 1 else ''}, "
              f"{result.packets} packets, {time.monotonic() - started:.1f} s)", style="green")


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
