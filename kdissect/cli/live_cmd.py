"""`kdissect live`: decode Kafka on a network interface."""

from __future__ import annotations


import click

from ..crash import quiet_stdout
from .common import (
    _run_tui,
    _traffic_options,
    check_views,
    display_options,
    keylog_option,
    memory_budget,
    memory_option,
    on_terminal,
    port_options,
    prompt_stdout,
    secret_options,
)
from .group import SUMMARIES, main


LIVE_HELP = (
    SUMMARIES["live"]
    + """

Sniffs IFACE (with libpcap, like tcpdump), reassembles TCP and shows every exchange as
its response arrives: in the TUI on a terminal, else one line per exchange (or JSON
lines, written as they come, also into a pipe) until Ctrl-C or SIGTERM, --count or
--duration. Kafka connections are found as in
`kdissect pcap` (port 9092, --port, or how they start; connections already open when
sniffing starts are picked up at the next message boundary).

Capturing needs root, or once: sudo setcap cap_net_raw,cap_net_admin=eip PYTHON,
with PYTHON the interpreter kdissect runs on (without the rights, live names it).

\b
Examples:
  sudo kdissect live -i eth0
  kdissect live -i lo -p 19092 --no-tui -Y 'error != 0'
  kdissect live -i any --format jsonl --duration 60 > kafka.jsonl
  kdissect live -i lo --keylog keys.log    # TLS: re-read as clients add keys
"""
)


@main.command(help=LIVE_HELP)
@click.option(
    "-i",
    "--interface",
    "iface",
    required=True,
    metavar="IFACE",
    help="Interface to sniff (lo, eth0, any...).",
)
@port_options
@click.option(
    "-f",
    "--capture-filter",
    "bpf",
    metavar="BPF",
    help="Capture filter in tcpdump syntax (default: tcp, or the Kafka ports with --no-detect).",
)
@display_options
@click.option("-c", "--count", type=int, default=0, metavar="N", help="Stop after N packets.")
@click.option("-a", "--duration", type=float, metavar="SECONDS", help="Stop after SECONDS.")
@keylog_option
@secret_options
@memory_option
def live(
    iface,
    ports,
    no_detect,
    bpf,
    filter_text,
    fmt,
    verbose,
    count,
    duration,
    tui,
    keylog,
    show_secrets,
    max_decompressed,
):
    import signal
    import threading
    from ..capture.live import LiveError
    from ..render.printer import ExchangePrinter
    from ..sources.live import Interface
    from ..stream.engine import Engine

    check_views(fmt, verbose)
    display_filter, options, kafka_ports = _traffic_options(
        filter_text, show_secrets, max_decompressed, ports
    )
    if bpf is None:
        bpf = (
            "tcp"
            if not no_detect
            else "tcp and (" + " or ".join(f"port {p}" for p in sorted(kafka_ports)[:64]) + ")"
        )
    stop = threading.Event()
    interactive = on_terminal(fmt, verbose)
    watch = dict(
        ports=kafka_ports,
        detect=not no_detect,
        bpf=bpf,
        count=count,
        duration=duration,
        keys=keylog,
        budget=memory_budget(),
    )
    if tui or (tui is None and interactive):

        def load(sink):
            try:
                Engine(Interface(iface, stop, **watch), sink, options).run()
            except LiveError as e:
                sink.note(str(e), "error")

        _run_tui(load, options, f"live: {iface}", filter_text, display_filter, stop)
        return
    topic_ids: dict[str, str] = {}  # the run's topic names: the engine's, the writers'
    prompt_stdout()
    # SIGTERM (a service manager, `timeout`) stops as Ctrl-C does: what was captured is
    # decoded and shown, not dropped with the process
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    printer = ExchangePrinter(options, fmt, verbose, display_filter, topic_ids=topic_ids)
    try:
        Engine(Interface(iface, stop, **watch), printer, options, topic_ids=topic_ids).run()
    except LiveError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        stop.set()
    except BrokenPipeError:
        quiet_stdout()
