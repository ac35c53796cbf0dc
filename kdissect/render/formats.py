"""Output formats, registered by name: the CLI's ``--format`` choices and the printer's
writers come from ``FORMATS``.

A format is a writer class in its own module, named here by ``module:Class`` so that the
CLI can list the choices without importing any writer. Adding a format is one new module
(a class following ``FormatWriter``) and one ``register(...)`` line below; see
docs/internals/engine.md for a worked example (``tsv``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.plain import Frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.console import Console

    from ..protocol import Options
    from ..stream.fields import ExchangeFields
    from ..stream.model import Exchange


class FormatWriter(Protocol):
    """What the printer asks of a format (after the display filter; not with --stats).
    ``full``: the writer shows whole field trees, so the engine decodes them once."""

    full: bool

    # ``view``: what the display filter saw; None where none ran (a writer that reads
    # fields makes its own: one per exchange was a twentieth of a summary's Python)
    def exchange(self, ex: Exchange, view: ExchangeFields | None) -> None: ...

    def tls(self, facts: Any) -> None: ...  # a TLS connection ended (capture.tls.TlsFacts)

    # the next exchanges are those of this capture file (a run reading several)
    def capture(self, path: str) -> None: ...

    def close(self) -> None: ...  # the input is done

    def abort(self) -> None: ...  # the output went away: stop, write nothing


class WriterContext(Frozen):
    """What a writer is built with. ``topic_ids``: the run's topic names (id -> name),
    filled by the engine as it learns them (``stream.engine.Engine``), for a writer that
    decodes messages itself."""

    __slots__ = _fields = ("options", "verbose", "jobs", "console", "topic_ids")

    def __init__(
        self,
        options: Options,
        verbose: bool,
        jobs: int,
        console: Console,
        topic_ids: Mapping[str, str] | None = None,
    ):
        self.options, self.verbose, self.jobs, self.console = options, verbose, jobs, console
        self.topic_ids = topic_ids


class Format(Frozen):
    """One output format: its name, its --help line, and who writes it."""

    __slots__ = _fields = ("name", "docs", "writer", "log")

    def __init__(
        self,
        name: str,
        docs: str,  # one line, for --help and docs
        writer: str = "",  # "module:Class" (relative to kdissect.render); "": a
        # file format written by its own path (parquet: -o)
        log: bool = False,
    ):  # kdissect log writes it too (its items are files and batches)
        self.name, self.docs, self.writer, self.log = name, docs, writer, log

    @property
    def streams(self) -> bool:
        """Printed to stdout by the printer (live and proxy offer only these)."""
        return bool(self.writer)

    def build(self, ctx: WriterContext) -> FormatWriter:
        if not self.writer:
            raise ValueError(f"--format {self.name} is written with -o, not printed")
        module, _, cls = self.writer.partition(":")
        return getattr(importlib.import_module(module, __package__), cls)(ctx)


FORMATS: dict[str, Format] = {}


def register(name: str, docs: str, writer: str = "", log: bool = False) -> Format:
    """Register one output format (one line per format, below)."""
    if name in FORMATS:
        raise ValueError(f"output format {name} registered twice")
    FORMATS[name] = f = Format(name, docs, writer, log)
    return f


def choices(files: bool = True, log: bool = False) -> list[str]:
    """The --format choices: every format, or (``files=False``) those printed to stdout
    (live, proxy); ``log``: those ``kdissect log`` writes."""
    return [n for n, f in FORMATS.items() if (files or f.streams) and (f.log or not log)]


# -- the registry ------------------------------------------------------------------------
register("text", "one line per exchange (-V: field trees)", ".format_text:TextWriter", log=True)
register(
    "jsonl",
    "one JSON object per Kafka message (docs/guide/jsonl.md)",
    ".format_jsonl:JsonlWriter",
    log=True,
)
register("parquet", "a Parquet table written to -o (the kdissect[spark] extra)", log=True)
register("tsv", "one tab-separated line per exchange, with a header line", ".format_tsv:TsvWriter")
