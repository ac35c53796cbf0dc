"""Command line: thin click commands over the library, one module per command."""

from __future__ import annotations

import click

from .. import __version__


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
      log    decode Kafka's files on disk: segments, indexes, snapshots, checkpoints

    Run `kdissect COMMAND --help` for examples. Exit status: 0 decoded (damage in the
    bytes is reported, not fatal), 1 the input is not a capture / holds nothing to decode,
    2 a wrong command line, 70 an internal error (a bug: add --debug for the traceback).
    """


