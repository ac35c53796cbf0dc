"""`kdissect pcap`: capture files to paired, decoded exchanges."""

from __future__ import annotations

import os
import sys

import click

from ..crash import quiet_stdout
from .common import (
    _print_warnings,
    _progress,
    _run_tui,
    _traffic_options,
    check_views,
    buffer_stdout,
    keylog_option,
    memory_budget,
    memory_option,
    on_terminal,
    port_options,
    secret_options,
    format_choices,
)
from .group import SUMMARIES, main
from .values_opts import value_options
from ..stream.fields import help_list


PCAP_HELP = (
    SUMMARIES["pcap"]
    + """

Reads pcap and pcapng (also gzip-compressed; - for standard input, read to its end
first), reassembles TCP, finds Kafka connections
(port 9092, any --port you add, and any connection that starts like a Kafka request),
frames the messages, pairs each response with its request by correlation id, and decodes
every field with the request's API and version. Lost data is reported as gaps and
decoding resumes at the next message boundary.

TLS connections (found on any port by their ClientHello) are decrypted with the session
keys of --keylog FILE, SSLKEYLOGFILE, or the capture's own pcapng Decryption Secrets
Blocks; without keys each is reported with its server name, version and cipher.

\b
Output: on a terminal, the TUI (exchanges, field trees, bytes; press ? in it).
Piped, or with --no-tui:
  default           one line per exchange: time, client → broker, API and
                    version, correlation id, client id, latency, topics and
                    partitions, records, errors, findings (✗ error, ! warning,
                    · note)
  -V, --verbose     the full field trees of both messages
  --format jsonl    one JSON object per Kafka message (docs/guide/jsonl.md)
  --schemas DIR, --registry URL, --value-schema TOPIC=FILE
                    record keys/values decoded (Avro, Protobuf, JSON:
                    docs/guide/values.md)

\b
Filters (-Y, see docs/guide/filters.md), over exchanges:
  api == Produce and topic == "orders"     error != 0     latency > 50ms
  client_id ~ "rdkafka"    api in {Fetch, ListOffsets} and records > 0
  anomaly (anything wrong)     record.key == "order-42" (compressed too)
{fields}
          (Wireshark's kafka.* names work too: kafka.api_key...)
  into decoded values: record.value.customer.id == "c-3"
                       record.value_schema == 2

\b
Examples:
  kdissect pcap capture.pcapng
  kdissect pcap -p 9093 -p 19092-19094 traffic.pcap.gz
  kdissect pcap capture.pcap -Y 'error != 0' -V
  kdissect pcap capture.pcap --stats
  kdissect pcap tls.pcap --keylog keys.log      # TLS: docs/guide/tls.md
  kdissect pcap capture.pcap --format jsonl | jq 'select(.api_key == 0)'
"""
)
PCAP_HELP = PCAP_HELP.replace("{fields}", help_list(width=78))


@main.command(help=PCAP_HELP)
# (readable=False: a file that cannot be read is said by the reader, the others still read)
@click.argument(
    "files",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, readable=False, allow_dash=True),
)
@port_options
@click.option("-V", "--verbose", is_flag=True, help="Print full field trees.")
@click.option(
    "--format",
    "fmt",
    type=format_choices(),
    default="text",
    show_default=True,
    help="Output format (parquet needs -o FILE.parquet; tsv: one tab-separated line per exchange).",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE.parquet",
    help="Where --format parquet writes the exchanges table.",
)
@click.option(
    "--records-output",
    metavar="FILE.parquet",
    help="With --format parquet: also write the records table there (with "
    "--schemas/--registry, keys and values as JSON: docs/guide/values.md).",
)
@click.option(
    "-Y",
    "--filter",
    "filter_text",
    metavar="EXPR",
    help="Only exchanges matching this display filter.",
)
@click.option(
    "--stats",
    is_flag=True,
    help="Print statistics (per API, errors, latency "
    "percentiles, connections) instead of the exchanges.",
)
@click.option(
    "--tui",
    is_flag=True,
    help="Open the terminal UI even when stdout is not a "
    "terminal (it is the default on a terminal).",
)
@click.option("--no-tui", is_flag=True, help="Print instead of opening the terminal UI.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Worker processes that decode --format jsonl (default: one per core; "
    "-j 1: all in this process). Output order does not change.",
)
@keylog_option
@secret_options
@memory_option
@value_options
def pcap(
    files,
    ports,
    no_detect,
    verbose,
    fmt,
    output,
    records_output,
    filter_text,
    stats,
    tui,
    no_tui,
    jobs,
    keylog,
    show_secrets,
    max_decompressed,
):
    from ..render.printer import ExchangePrinter
    from ..sources.pcap import CaptureFiles, capture_loader, unreadable
    from ..stream.engine import Engine

    check_views(fmt, verbose, stats)
    display_filter, options, kafka_ports = _traffic_options(
        filter_text, show_secrets, max_decompressed, ports
    )
    detect = not no_detect
    if "-" in files:
        if files.count("-") > 1:
            raise click.UsageError("standard input (-) can be read once")
        spooled = StdinCapture()
        files = tuple(spooled if f == "-" else f for f in files)
    if fmt == "parquet" or output or records_output:
        _write_parquet(
            files, output, fmt, kafka_ports, detect, display_filter, options, keylog, records_output
        )
        return
    interactive = on_terminal(fmt, verbose or stats)
    if (tui or interactive) and not no_tui:
        said = [unreadable(f) for f in files if isinstance(f, str)]
        if said and all(said) and len(said) == len(files):  # nothing to open the TUI on
            for reason in said:
                click.echo(reason, err=True)
            sys.exit(1)
        _run_tui(
            capture_loader(
                files,
                options,
                ports=kafka_ports,
                detect=detect,
                keys=keylog,
                budget=memory_budget(),
            ),
            options,
            ", ".join(os.path.basename(f) for f in files),
            filter_text,
            display_filter,
            keys=keylog,
        )
        return
    # the run's topic names: the engine fills them, the writers' decoders read them
    # (records of internal topics fetched by id decoded in JSON lines as in -V)
    topic_ids: dict[str, str] = {}
    buffer_stdout()
    printer = ExchangePrinter(
        options, fmt, verbose, display_filter, stats, jobs or available_cores(), topic_ids
    )
    try:
        Engine(
            CaptureFiles(
                files,
                ports=kafka_ports,
                detect=detect,
                keys=keylog,
                budget=memory_budget(),
                packets=lambda reader, path: _progress(reader, path, printer.err),
            ),
            printer,
            options,
            topic_ids=topic_ids,
        ).run()
        sys.stdout.flush()  # (buffered: a closed pipe is seen here, not at exit)
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as command-line tools do
        printer.abort()
        quiet_stdout()
        return
    except KeyboardInterrupt:
        printer.abort()  # (workers still rendering are stopped, not waited for)
        raise
    if printer.errors:
        raise SystemExit(1)  # an input could not be read, or held no Kafka traffic
    if display_filter is not None and printer.exchanges == 0:
        printer.note("nothing matched the filter", "info")  # (not a silent empty output)


class StdinCapture(os.PathLike):
    """``-``: a capture on standard input (`tcpdump -w - ... | kdissect pcap -`), spooled
    to a temporary file first (captures are mapped and seeked; the disk holds it, not
    memory), then read as a file named ``-``. Removed when the process ends."""

    def __init__(self) -> None:
        import shutil
        import tempfile

        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError(
                "- reads a capture from standard input, which is a terminal here: pipe one "
                "in (tcpdump -w - ... | kdissect pcap -), or sniff with kdissect live"
            )
        self.file = tempfile.NamedTemporaryFile(prefix="kdissect-stdin-", suffix=".pcap")
        shutil.copyfileobj(sys.stdin.buffer, self.file, 1 << 20)
        self.file.flush()

    def __fspath__(self) -> str:
        return self.file.name

    def __str__(self) -> str:
        return "-"


def available_cores() -> int:
    """The default of -j: the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _write_parquet(
    files, output, fmt, ports, detect, display_filter, options, keys=None, records_output=None
) -> None:
    if fmt != "parquet":
        raise click.UsageError(
            "-o/--output and --records-output are for --format parquet; "
            "text and jsonl go to stdout (redirect them)"
        )
    if not output:
        raise click.UsageError("--format parquet needs -o FILE.parquet")
    from ..pipeline.local import write_exchanges  # our own writer: no pyarrow
    from ..pipeline.parquet_file import WriteError
    from ..stream.fields import ExchangeFields

    def keep(ex):
        return display_filter(ExchangeFields(ex, options))

    from ..render.console import console, print_line

    # (rich only if something is printed on a terminal: its import is 5 % of a run;
    # emoji=False: rich's emoji table is an import of 9 ms, a percent of a run)
    err = console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    warnings: list[str] = []
    try:
        rows, errors = write_exchanges(
            list(files),
            output,
            ports=ports,
            detect=detect,
            warn=warnings.append,
            keep=keep if display_filter else None,
            keys=keys,
            records_out=records_output,
            values=options.values,
            packets=lambda reader, path: _progress(reader, path, err),
        )
    except WriteError as e:
        raise click.ClickException(
            f"{e}; give -o/--records-output a file in a directory that exists and is writable"
        ) from None
    _print_warnings(err, warnings)
    print_line(
        err,
        f"wrote {rows} exchange{'s' if rows != 1 else ''} to {output}"
        + (f" (records to {records_output})" if records_output else ""),
        "green",
    )
    if errors:
        raise SystemExit(1)  # an input could not be read, or held no Kafka traffic
