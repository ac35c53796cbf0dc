"""The worked examples of docs/internals/engine.md are real: the ``tsv`` output format (one module
and one registry line) and the ``RawStreams`` source (one module, run by the engine)."""

from __future__ import annotations

import csv
import io
import struct
from pathlib import Path

import click
import pytest

from kdissect.protocol.findings import Finding, UnregisteredFinding
from kdissect.render.formats import FORMATS, choices
from kdissect.sources.pcap import exchanges_in
from kdissect.sources.rawstreams import RawStreams
from kdissect.stream.engine import Engine
from kdissect.stream.sink import Collect
from tests.support.cli import kdissect_text

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "captures" / "kafka-sasl.pcap"


def test_tsv_is_registered_and_offered_where_it_can_be_written():
    assert "tsv" in FORMATS and "tsv" in choices() and "tsv" in choices(files=False)
    assert "parquet" in choices() and "parquet" not in choices(files=False)
    assert "tsv" not in choices(log=True)  # kdissect log writes its own formats
    from kdissect.cli.pcap_cmd import pcap

    fmt = next(p for p in pcap.params if p.name == "fmt")
    assert isinstance(fmt.type, click.Choice) and list(fmt.type.choices) == choices()


def test_tsv_gives_one_row_per_exchange_with_the_filter_fields():
    run = kdissect_text("pcap", "--no-tui", "--format", "tsv", str(CAPTURE))
    assert run.returncode == 0, run.stderr
    out = run.stdout
    rows = list(csv.DictReader(io.StringIO(out), delimiter="\t"))
    exchanges = exchanges_in([str(CAPTURE)]).exchanges
    assert len(rows) == len(exchanges) > 0
    assert {r["api"] for r in rows} >= {"SaslHandshake", "SaslAuthenticate", "Metadata"}
    assert all(r["time"].endswith("Z") and r["stream"].isdigit() for r in rows)


def test_raw_streams_give_the_exchanges_the_capture_gives():
    exchanges = exchanges_in([str(CAPTURE)]).exchanges
    stream = exchanges[0].stream
    mine = [ex for ex in exchanges if ex.stream == stream]
    sent = [(m, 0 if m is ex.request else 1) for ex in mine for m in ex.messages]
    client, broker = (
        b"".join(
            struct.pack(">i", len(m.data)) + m.data
            for m, s in sorted(sent, key=lambda ms: ms[0].offset)
            if s == side
        )
        for side in (0, 1)
    )
    sink = Collect()
    Engine(RawStreams(client, broker), sink).run()
    key = lambda ex: (
        ex.first.direction,
        ex.first.api_key,
        ex.first.correlation_id,  # noqa: E731
        ex.response is not None,
        ex.status,
    )
    assert [key(ex) for ex in sorted(sink.exchanges, key=lambda e: e.seq)] == [
        key(ex) for ex in sorted(mine, key=lambda e: e.seq)
    ]
    assert any(ex.first.api_key == 36 for ex in sink.exchanges)


def test_an_unregistered_finding_raises_where_it_is_made():
    with pytest.raises(UnregisteredFinding):
        Finding("no_such_code")
    assert Finding("truncated").kind.group == "malformed"


def test_the_filter_docs_come_from_the_field_registry():
    from kdissect.stream.fields import FIELDS, help_list, markdown_table

    assert markdown_table() in (ROOT / "docs" / "guide" / "filters.md").read_text()
    assert all(name in help_list() for name, f in FIELDS.items() if f.get is not None)


@pytest.mark.parametrize("fmt", ["tsv", "text"])
@pytest.mark.parametrize("capture", ["kafka-sasl.pcap", "kafka-broker-killed.pcap"])
def test_writers_given_no_view_write_what_they_write_given_the_filters(fmt, capture):
    """Where no display filter runs the printer makes no ``ExchangeFields`` (the writers
    get None and make their own where they read fields): the same lines as after a
    filter that takes every exchange (which hands them its view)."""
    path = str(ROOT / "captures" / capture)
    plain = kdissect_text("pcap", "--no-tui", "--format", fmt, path)
    every = kdissect_text("pcap", "--no-tui", "--format", fmt, "-Y", "stream >= 0", path)
    assert plain.returncode == every.returncode == 0, (plain.stderr, every.stderr)
    assert plain.stdout == every.stdout and plain.stdout.count("\n") > 10
    if fmt == "text":  # (the -V trees and findings too)
        plain = kdissect_text("pcap", "--no-tui", "-V", path)
        every = kdissect_text("pcap", "--no-tui", "-V", "-Y", "stream >= 0", path)
        assert plain.stdout == every.stdout
