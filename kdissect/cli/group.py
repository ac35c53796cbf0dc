"""Command line: thin click commands over the library, one module per command."""

from __future__ import annotations

import importlib

import click

from .. import __version__
from ..crash import EXIT_INTERRUPTED

# each command's module, imported when that command runs: a paste answers without
# loading the capture, proxy, Spark and log machinery (start-up is most of its time)
COMMAND_MODULES = {
    "pcap": "pcap_cmd",
    "blob": "blob_cmd",
    "live": "live_cmd",
    "proxy": "proxy_cmd",
    "spark": "spark_cmd",
    "log": "log_cmd",
}

# the first paragraph of each command's help: the modules' help texts start with it, and
# `kdissect --help` lists the commands from it without importing any of their modules
SUMMARIES = {
    "pcap": "Decode the Kafka traffic in capture files: every request paired with its response.",
    "blob": "Annotate raw Kafka bytes: which API they are, and every field, byte by byte.",
    "live": "Decode Kafka traffic on a network interface as it passes.",
    "proxy": "Stand between Kafka clients and brokers, forwarding and decoding everything.",
    "spark": "Turn many and/or huge captures into Parquet tables, on Apache Spark.",
    "log": "Decode Kafka's files on disk: segments, indexes, snapshots, checkpoints.",
}


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from ..capture.native import packet_path  # only now: start-up stays quick

    click.echo(f"kdissect {__version__}\n{packet_path()}")
    ctx.exit()


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Ctrl-C ends with the shell's 130 (click's "Aborted!" and 1 said what
            # kdissect says of an input it could not read)
            raise SystemExit(EXIT_INTERRUPTED) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMAND_MODULES:
            importlib.import_module(f"{__package__}.{COMMAND_MODULES[name]}")  # registers it
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the summaries, whole (click cuts them at the width) and in the order of use;
        # through get_command every command's module would be imported
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in COMMAND_MODULES])


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and which packet path runs (compiled or Python), and exit.",
)
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,  # (taken off the command line before click: cli/entry.py)
    help="Show the traceback of an internal error instead of one line (anywhere on the "
    "command line; or KDISSECT_DEBUG=1).",
)
def main() -> None:
    """kdissect: see every byte of Kafka traffic.

    Run `kdissect COMMAND --help` for examples. Exit status: 0 decoded (damage in the
    bytes is reported, not fatal), 1 the input is not a capture / holds nothing to decode,
    2 a wrong command line, 70 an internal error (a bug: add --debug for the traceback).
    """
