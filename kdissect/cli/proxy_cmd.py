"""`kdissect proxy`: the decoding man-in-the-middle."""

from __future__ import annotations

import os
import sys

import click
from rich.console import Console

from .common import _host_port, _run_tui, _traffic_options, on_terminal, secret_options
from .group import main


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
    from ..proxy.server import Proxy
    from ..render.printer import ExchangePrinter
    from ..stream.enrich import Enricher
    from ..stream.sink import CallbackSink

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
            from ..proxy.recording import Recorder
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
            engine = Enricher(CallbackSink(emit, warn, progress), options)
            p = make(engine.exchange, engine.gap, warn)
            asyncio.run(serve(p, stop, lambda p: warn(
                f"listening on {host}:{p.bootstrap_port}; brokers {upstream}")))
        _run_tui(load, options, f"proxy {listen} → {upstream}", filter_text,
                 display_filter, stop)
        return
    printer = ExchangePrinter(options, fmt, verbose, display_filter)
    # decoding and printing run in their own thread, fed through a bounded queue: a slow
    # terminal or pipe must never stall forwarding (what does not fit is counted)
    from ..proxy.display import Display
    engine = Enricher(printer, options, full=printer.full)
    display = Display(engine.exchange, engine.gap)
    p = make(display.exchange, display.gap, lambda text: err.print(text, style="cyan"))
    try:
        asyncio.run(serve(p, stop, lambda p: err.print(
            f"listening on {host}:{p.bootstrap_port} for Kafka clients; brokers: {upstream} "
            f"(Ctrl-C stops)", style="green")))
    except KeyboardInterrupt:
        pass
    display.close()
    try:
        printer.done()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if display.dropped:
        err.print(f"{display.dropped} exchanges were not shown: the output could not keep "
                  f"up (forwarding was not slowed)", style="yellow")
    err.print(f"{p.stats.connections} connections, {p.stats.frames} frames, "
              f"{p.stats.rewritten} responses rewritten", style="dim")


