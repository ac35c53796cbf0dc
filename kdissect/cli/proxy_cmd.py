"""`kdissect proxy`: the decoding man-in-the-middle."""

from __future__ import annotations

import os
import signal
import sys
import threading

import click
from rich.console import Console

from ..crash import quiet_stdout
from ..stream.sink import BaseSink
from .common import (
    _host_port,
    _run_tui,
    _size,
    _traffic_options,
    check_views,
    display_options,
    need_terminal_for_tui,
    on_terminal,
    prompt_stdout,
    secret_options,
)
from .group import SUMMARIES, main


PROXY_HELP = (
    SUMMARIES["proxy"]
    + """

Clients connect to --listen (the bootstrap address); the proxy connects to the
--upstream brokers. Broker addresses in responses (Metadata, FindCoordinator,
DescribeCluster, the KIP-951 leader hints of Produce and Fetch, ShareFetch and
ShareAcknowledge) are rewritten to listeners of the proxy, one per broker, made when a
broker is first named, so clients keep talking through the proxy. Only those responses
are re-encoded; every other byte passes unchanged and in order. Entries that name no
broker (FindCoordinator errors: node -1) pass unchanged; controllers' addresses
(DescribeQuorum) are not rewritten (docs/guide/proxy.md says why).

Forwarding runs in a process of its own and parses only frame headers (and the
few responses that name brokers, skipping their records). Decoding, printing and
the TUI run beside it, fed through a buffer of --display-buffer bytes: when the
display falls behind, whole exchanges are left out of it and counted, and the
clients are never slowed. The -w recording is lossless.

On a terminal the TUI shows exchanges as they happen; --no-tui prints one line per
exchange (or JSON lines with --format jsonl). Ctrl-C or SIGTERM stops, closing open
connections, and prints the counters (bytes, requests, latency, left-out exchanges).

\b
Examples:
  kdissect proxy --upstream kafka-1:9092,kafka-2:9092
  kdissect proxy --upstream 10.0.0.5:9092 --listen 127.0.0.1:19092 \\
                 --broker-ports 19100
  kdissect proxy --upstream broker:9092 --listen 0.0.0.0:9092 \\
                 --advertise proxy.example.com
  kdissect proxy --upstream broker:9092 --no-tui -Y 'api == Produce'
  kdissect proxy --upstream broker:9092 --no-tui --format jsonl \\
      --metrics 127.0.0.1:9464 > traffic.jsonl    # metrics at :9464/metrics
"""
)


# The TUI's own process (drawing rows, keys) also yields to forwarding, less than the
# decoding does: it stays responsive on a machine that is not saturated
TUI_NICENESS = 10


DISPLAY_NICENESS = 10


def _yield_cpu() -> None:
    """Decoding for the display runs below forwarding, clients and brokers (nice 10),
    and ``backoff.CpuGate`` pauses it briefly while no core is free, then keeps it to a
    tenth of one core until one is. Not SCHED_IDLE
    and not nice 19: measured with a busy loop per core at normal priority beside the
    proxy, a SCHED_IDLE display wrote its first line after 5-7 s and decoded 5 of 130
    requests, and at nice 19 the process took ~1 s just to exit after SIGTERM (its
    threads must be scheduled to die); see docs/guide/proxy.md. On Linux this sets the
    calling thread only: threads started before keep their priority."""
    try:
        os.nice(DISPLAY_NICENESS - os.nice(0))
    except OSError:
        pass


@main.command(help=PROXY_HELP)
@click.option(
    "--upstream",
    required=True,
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Bootstrap brokers: each client connection goes to the first that answers.",
)
@click.option(
    "--listen",
    default="127.0.0.1:9092",
    show_default=True,
    metavar="HOST:PORT",
    help="Where clients connect (the address to give them as bootstrap); a bare PORT "
    "means 127.0.0.1:PORT.",
)
@click.option(
    "--broker-ports",
    metavar="BASE",
    type=click.IntRange(1, 65535),
    help="Listen for broker N on port BASE+N (default: a free port each); a "
    "broker whose BASE+N is past 65535 gets a free port (a note says which).",
)
@click.option(
    "--advertise",
    metavar="HOST",
    help="The host name clients use to reach the proxy (default: the --listen "
    "host; with a wildcard --listen such as 0.0.0.0, the address each client "
    "connected to).",
)
@click.option(
    "--map",
    "maps",
    multiple=True,
    metavar="ADVERTISED=HOST:PORT",
    help="Connect to HOST:PORT for a broker that advertises ADVERTISED (host:port), "
    "e.g. an internal name only the proxy can reach another way. Repeatable.",
)
@click.option("--upstream-tls", is_flag=True, help="Connect to the brokers over TLS.")
@click.option(
    "--ca-file",
    type=click.Path(exists=True, dir_okay=False),
    help="CA certificates to check the brokers' certificates (default: the system's).",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Do not check the brokers' certificates or host names (a warning is shown).",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    help="Certificate (PEM) for TLS towards clients: the listeners then speak TLS.",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    help="Private key (PEM) of --tls-cert.",
)
@click.option(
    "--keylog",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Append the TLS secrets of both legs (clients and brokers) to FILE, "
    "an NSS key log for Wireshark and kdissect --keylog; -w recordings "
    "carry them too (Decryption Secrets Blocks). Anyone with it can "
    "decrypt the captured traffic.",
)
@click.option(
    "-w",
    "--write",
    "write",
    metavar="FILE.pcapng",
    help="Record both directions as a capture (SASL secrets masked unless "
    "--show-secrets) that kdissect pcap and Wireshark open.",
)
@display_options
@click.option(
    "--display-buffer",
    default="64M",
    show_default=True,
    metavar="SIZE",
    help="Bytes of traffic waiting for the display at most; beyond it whole "
    "exchanges are left out of the display (and counted), never delayed.",
)
@click.option(
    "--display-lag",
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    help="When the display falls this far behind the traffic (a busy machine "
    "leaves it little CPU), it shows a sample of the exchanges (4 a second) "
    "and counts the rest until it has caught up; 0: never sample.",
)
@click.option(
    "--max-memory",
    default="512M",
    show_default=True,
    metavar="SIZE",
    help="Bytes the forwarder may hold for partial messages of all connections "
    "together; beyond it the oldest partial request is not decoded (a note "
    "says so). Every byte is still forwarded unchanged.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    metavar="N",
    help="Client connections open at once at most; more are closed at once "
    "(counted) so clients retry. Default: 10,000, fewer when the open-files "
    "limit (ulimit -n) does not allow two descriptors each.",
)
@click.option(
    "--idle-timeout",
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    help="Close a client connection after this long without traffic and without "
    "a request awaiting its answer (the brokers' own default, "
    "connections.max.idle.ms, is 600 s); 0: never.",
)
@click.option(
    "--metrics",
    "metrics_at",
    metavar="HOST:PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (a bare PORT: on "
    "127.0.0.1): bytes, requests "
    "and responses, broker latency histograms, top-level error codes and "
    "rewritten answers per API, exchanges the display did not show, "
    "connections refused or closed idle.",
)
@click.option(
    "--metrics-per-connection",
    is_flag=True,
    help="Also one series per open connection (bytes, requests, shed exchanges): "
    "thousands of clients make thousands of series.",
)
@click.option(
    "--event-loop",
    type=click.Choice(["auto", "uvloop", "asyncio"]),
    default="auto",
    show_default=True,
    help="auto: uvloop when installed (pip install 'kdissect[fast]'), else asyncio.",
)
@click.option(
    "--forwarder-priority",
    type=click.Choice(["normal", "realtime"]),
    default="normal",
    show_default=True,
    help="Scheduling of the forwarding process. realtime (SCHED_RR 1; needs root or "
    "CAP_SYS_NICE): forwarding never waits for a core the brokers and clients keep busy, "
    "so small requests beside bulk traffic wait less, at some cost in throughput on a "
    "saturated machine (docs/guide/proxy.md). The display always runs below (nice 10).",
)
@click.option(
    "--forwarder",
    "forwarder_kind",
    type=click.Choice(["auto", "event-loop", "threads"]),
    default="auto",
    show_default=True,
    help="threads: each connection forwarded by two threads of the compiled extension, "
    "outside the interpreter, so a small request never waits behind other connections' "
    "traffic (docs/guide/proxy.md, 'The thread forwarder'); plaintext only. event-loop: "
    "every connection in one asyncio loop (TLS on either leg). auto: threads when both "
    "legs are plaintext and the extension is built, else event-loop.",
)
@secret_options
def proxy(
    upstream,
    listen,
    broker_ports,
    advertise,
    maps,
    upstream_tls,
    ca_file,
    insecure,
    tls_cert,
    tls_key,
    keylog,
    write,
    filter_text,
    fmt,
    verbose,
    tui,
    display_buffer,
    display_lag,
    max_memory,
    max_connections,
    idle_timeout,
    metrics_at,
    metrics_per_connection,
    event_loop,
    forwarder_priority,
    forwarder_kind,
    show_secrets,
    max_decompressed,
):
    import signal
    import ssl
    from ..proxy import process
    from ..proxy.display import FeedDisplay
    from ..proxy.server import Proxy
    from ..render.lines import endpoint
    from ..render.printer import ExchangePrinter
    from ..stream.engine import Engine

    upstreams = [
        _host_port(u.strip(), 9092, "--upstream") for u in upstream.split(",") if u.strip()
    ]
    if not upstreams:
        raise click.BadParameter("give at least one HOST:PORT", param_hint="--upstream")
    upstream_map = {}
    for m in maps:
        advertised, sep, real = m.partition("=")
        if not sep:
            raise click.BadParameter(f"{m!r} is not ADVERTISED=HOST:PORT", param_hint="--map")
        upstream_map[_host_port(advertised, None, "--map")] = _host_port(real, None, "--map")
    host, port = _host_port(listen, None, "--listen", local=True)
    metrics_addr = _host_port(metrics_at, None, "--metrics", local=True) if metrics_at else None
    if metrics_addr is not None:
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise click.ClickException(
                "--metrics needs prometheus_client: pip install 'kdissect[metrics]'"
            ) from None
    budget = _size(display_buffer)
    memory = _size(max_memory, "--max-memory")
    check_views(fmt, verbose)
    display_filter, options, _ = _traffic_options(filter_text, show_secrets, max_decompressed, ())
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    interactive = on_terminal(fmt, verbose)
    if tui:  # (before the forwarder starts: nothing to stop)
        need_terminal_for_tui()
    tls = bool(upstream_tls or ca_file or insecure or tls_cert or tls_key)
    if forwarder_kind == "threads" and tls:
        raise click.UsageError(
            "--forwarder threads forwards plaintext only; with TLS (--tls-cert, "
            "--upstream-tls) use --forwarder event-loop"
        )
    if forwarder_kind != "event-loop":
        from ..protocol.native_ext import compiled

        built = compiled("Relay") is not None
        if forwarder_kind == "threads" and not built:
            raise click.UsageError(
                "--forwarder threads needs the compiled extension (install with cargo on "
                "the PATH: README.md); use --forwarder event-loop"
            )
        forwarder_kind = "threads" if built and not tls else "event-loop"
    upstream_ssl = server_ssl = None
    if upstream_tls or ca_file or insecure:
        try:
            upstream_ssl = ssl.create_default_context(cafile=ca_file)
        except (ssl.SSLError, OSError) as e:
            raise click.BadParameter(
                f"cannot use {ca_file} as CA certificates: "
                f"{getattr(e, 'strerror', None) or e} (give PEM "
                f"certificates: -----BEGIN CERTIFICATE-----...)",
                param_hint="--ca-file",
            ) from None
        if insecure:
            upstream_ssl.check_hostname = False
            upstream_ssl.verify_mode = ssl.CERT_NONE
            err.print(
                "warning: --insecure: broker certificates and host names are not "
                "checked; anyone on the path can pose as the brokers",
                style="bold yellow",
            )
    if tls_cert or tls_key:
        if not (tls_cert and tls_key):
            raise click.UsageError("--tls-cert and --tls-key go together")
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            server_ssl.load_cert_chain(tls_cert, tls_key)
        except (ssl.SSLError, OSError) as e:
            raise click.BadParameter(
                f"cannot use {tls_cert} / {tls_key}: {e}", param_hint="--tls-cert/--tls-key"
            ) from None
    if keylog:
        if server_ssl is None and upstream_ssl is None:
            raise click.UsageError(
                "--keylog writes TLS secrets: it needs TLS on a leg "
                "(--tls-cert/--tls-key or --upstream-tls)"
            )
        try:  # TLS secrets: readable by the owner only
            fd = os.open(keylog, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.fchmod(fd, 0o600)
            os.close(fd)
        except OSError as e:
            raise click.ClickException(f"cannot write {keylog}: {e.strerror}") from None
        for context in (server_ssl, upstream_ssl):
            if context is not None:
                context.keylog_filename = keylog
    recorder = None
    if write:
        from ..capture.pcapng_writer import Recorder

        try:
            recorder = Recorder(write, show_secrets, keylog)
        except OSError as e:
            raise click.ClickException(f"cannot write {write}: {e.strerror}") from None
        recorder.flush()  # the forwarding process writes it from here on

    if max_connections is None:
        max_connections = _default_max_connections()

    def make(feed_writer, on_note, shared) -> Proxy:
        return Proxy(
            upstreams,
            host,
            port,
            advertise,
            (lambda n: broker_ports + n) if broker_ports is not None else None,
            feed_writer,
            on_note,
            server_ssl,
            upstream_ssl,
            recorder,
            upstream_map,
            memory,
            max_connections,
            idle_timeout,
            shared,
            forwarder_kind,
            budget,
        )

    forwarder = process.start(
        make, budget, event_loop, metrics_addr, metrics_per_connection, forwarder_priority
    )
    signals = []
    displays: list[FeedDisplay] = []

    def on_signal(*_) -> None:
        """The first Ctrl-C or SIGTERM stops forwarding; the display shows what it can
        of what it has within ``display.STOP_GRACE`` and says what it left out. A second
        one also stops the display at once."""
        signals.append(1)
        forwarder.stop()
        for d in displays:
            d.stop()
        if len(signals) > 1:
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    ready = _wait_ready(forwarder, err)
    if ready is None:
        forwarder.join()
        if signals:  # stopped while starting: nothing to say
            return
        error = str(forwarder.error)
        if error.startswith("cannot serve metrics"):  # (the listener was free)
            raise click.ClickException(f"{error}; give --metrics a free HOST:PORT")
        hint = "; give --listen a free HOST:PORT" if "in use" in error else ""
        raise click.ClickException(f"cannot start the proxy on {listen}: {error}{hint}")
    bound, loop_name, scheduling = ready.rsplit("|", 2)
    listening = (
        f"listening on {bound} for Kafka clients; brokers: "
        f"{','.join(map(endpoint, upstreams))} "
        f"({loop_name}, forwarding at {scheduling}"
        + (", a thread per direction)" if forwarder_kind == "threads" else ")")
    )
    if metrics_addr is not None:
        listening += f"; metrics at http://{metrics_addr[0]}:{metrics_addr[1]}/metrics"

    if tui or (tui is None and interactive):
        stop = threading.Event()

        def load(sink):
            _yield_cpu()  # (the TUI's loader process)
            sink.note(listening, "info")
            Engine(
                FeedDisplay(lag=display_lag, fd=forwarder.fd, shared=forwarder.shared),
                sink,
                options,
            ).run()

        os.nice(TUI_NICENESS)
        _run_tui(load, options, f"proxy {listen} → {upstream}", filter_text, display_filter, stop)
        forwarder.stop()
        forwarder.join()
        return
    err.print(listening + " (Ctrl-C stops)", style="green")
    topic_ids: dict[str, str] = {}  # the run's topic names: the engine's, the writers'
    prompt_stdout()
    printer = ExchangePrinter(options, fmt, verbose, display_filter, topic_ids=topic_ids)
    shown = _Guarded(printer, err)
    display = FeedDisplay(lag=display_lag, fd=forwarder.fd, shared=forwarder.shared)
    engine = Engine(display, shown, options, full=printer.full, topic_ids=topic_ids)
    displays.append(display)
    if signals:
        display.stop()
    finished = threading.Event()

    def give_up() -> None:
        """The display did not finish in time (a low-priority process on a busy
        machine may get a few ms of CPU a second): say what it did, and end."""
        text = (
            display.summary() + "; stopped before the display had shown everything it was given\n"
        )
        os.write(2, text.encode())  # not through the console: the display may hold it
        # the forwarder's counters (it says them as soon as its connections are closed)
        # before this process ends; it is not waited for beyond that
        forwarder.process.join(2.0)
        _flush_and_exit()

    # before the display lowers its priority: the watcher thread keeps the normal one
    _watch_signals(on_signal, finished, give_up)
    _yield_cpu()  # this thread only decodes and prints now
    try:
        engine.run()
    except KeyboardInterrupt:
        err.print(
            "stopped before the display had shown everything the proxy forwarded", style="yellow"
        )
    code = forwarder.join()
    shown.done()
    finished.set()
    if code:
        raise click.ClickException(
            f"the forwarding process ended unexpectedly (exit code {code}); please report it"
        )
    if signals:
        # stopped: skip the interpreter's teardown (tens of ms of CPU, seconds for a
        # low-priority process on a busy machine); everything is written
        _flush_and_exit()


def _default_max_connections() -> int:
    """10,000, or what the open-files limit allows (raised to its hard limit first):
    each connection takes two descriptors (client and broker), and listeners, the
    recording and the display need some."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    except (ImportError, ValueError, OSError):
        return 10_000
    if soft == resource.RLIM_INFINITY:
        return 10_000
    from ..proxy.server import MAX_LISTENERS

    return max(1, min(10_000, (soft - 64 - min(MAX_LISTENERS, soft // 4)) // 2))


def _flush_and_exit(timeout: float = 0.2) -> None:
    """Flush the output and end the process; a flush the display's thread holds up
    (it may be writing, at low priority) is given ``timeout`` seconds."""

    def flush() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    t = threading.Thread(target=flush, daemon=True)
    t.start()
    t.join(timeout)
    os._exit(0)


def _watch_signals(on_signal, finished: threading.Event, give_up) -> None:
    """Ctrl-C and SIGTERM taken by a thread of normal priority instead of the main
    thread (the display, which runs at the lowest: on a busy machine it may not run
    for a second, and Python runs signal handlers in the main thread). The thread
    stops forwarding and the display at once, and ends the process itself when the
    display has not finished ``STOP_GRACE`` + 0.2 s later, or at a second signal."""
    from ..proxy.display import STOP_GRACE

    wanted = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)  # inherited by the thread

    def watch() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the display's
        received = 0
        while True:
            signal.sigwait(wanted)
            received += 1
            try:
                on_signal()
            except KeyboardInterrupt:  # (the second signal)
                pass
            if received > 1 or not finished.wait(STOP_GRACE + 0.2):
                give_up()

    threading.Thread(target=watch, name="kdissect-signals", daemon=True).start()


def _wait_ready(forwarder, err: Console) -> str | None:
    """The bound address and event loop, once the forwarder listens; None if it could
    not start (``forwarder.error`` says why)."""
    from ..proxy import feed

    forwarder.error = "the proxy process ended"
    while True:
        record = feed.read_record(forwarder.fd)
        if record is None:
            return None
        kind, payload = record[0], record[5].decode()
        if kind == feed.READY:
            return payload
        if kind == feed.ERROR:
            forwarder.error = payload
        else:
            err.print(payload, style="cyan")


class _Guarded(BaseSink):
    """The printer as the display's sink, kept from ending the display: a closed stdout
    (`| head`) stops printing, a failure to show an exchange is reported once;
    forwarding goes on either way."""

    def __init__(self, printer, err: Console):
        self.printer, self.err = printer, err
        self.closed = False
        self.failures: set[str] = set()

    def _call(self, fn, *args) -> None:
        if self.closed:
            return
        try:
            fn(*args)
        except BrokenPipeError:
            self.closed = True
            quiet_stdout()
        except Exception as e:  # a display problem must not end the proxy
            text = f"display failed for an exchange and skipped it: {type(e).__name__}: {e}"
            if text not in self.failures:
                self.failures.add(text)
                self.err.print(text, style="yellow")

    def exchange(self, ex) -> None:
        self._call(self.printer.exchange, ex)

    def gap(self, g) -> None:
        self._call(self.printer.gap, g)

    def note(self, text: str, level: str = "warn") -> None:
        self.err.print(text, style="cyan" if level == "info" else "yellow")

    def progress(self, done: int, total: int) -> None:
        pass

    def done(self) -> None:
        self._call(self.printer.done)
        self._call(sys.stdout.flush)
