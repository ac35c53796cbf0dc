#!/usr/bin/env python3
"""Where a `kdissect pcap` run's CPU goes per exchange, by stage (issue 43's profile):
each stage's function is wrapped to add up its CPU time (inclusive; each wrapped call
adds ~1 µs of timing), then the run's total, per exchange:

    connection.data   everything after TCP reassembly (framing, messages, pairing, below;
                      data, and message where the tree has it)
    framer.feed       Kafka framing (feed, and whole and whole_body where the tree has them)
    _emit             enrichment and the sink (what the connection hands on: the
                      dissector's _exchange)
    values body read  the values decoder (compiled or generated readers)
    facts (pair_facts or facts), diagnoses, printer (the line's or JSON line's text)

    PYTHONPATH=. .venv/bin/python benchmarks/stage_profile.py pcap --no-tui CAPTURE
    PYTHONPATH=. .venv/bin/python benchmarks/stage_profile.py pcap --format jsonl -j 1 CAPTURE

(PYTHONPATH=OTHER_TREE profiles another checkout: before/after.) The report goes to stderr.
"""

from __future__ import annotations

import collections
import inspect
import sys
import time
from typing import Any

import kdissect.render.printer as printer
import kdissect.stream.connection as connection
import kdissect.stream.diagnoses as diagnoses
import kdissect.stream.enrich as enrich
import kdissect.stream.framing as framing
import kdissect.sources.pcap as pcap

spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()


def wrap(owner: Any, name: str, label: str) -> None:
    f = getattr(owner, name)
    clock = time.process_time

    def timed(*a: Any, **k: Any) -> Any:
        t = clock()
        try:
            return f(*a, **k)
        finally:
            spent[label] += clock() - t
            calls[label] += 1

    setattr(owner, name, timed)


class _Timed:
    """A compiled values program whose ``read_plain`` is timed as a stage."""

    def __init__(self, program: Any):
        self.program = program

    def read_plain(self, *a: Any) -> Any:
        t = time.process_time()
        try:
            return self.program.read_plain(*a)
        finally:
            spent["4 values body read"] += time.process_time() - t
            calls["4 values body read"] += 1


def main() -> None:
    wrap(connection.KafkaConnection, "data", "1 connection.data")
    if hasattr(connection.KafkaConnection, "message"):  # (event 9: a whole message)
        wrap(connection.KafkaConnection, "message", "1 connection.data")
    wrap(framing.Framer, "feed", "2 framer.feed")
    if hasattr(framing.Framer, "whole"):  # (a chunk of one whole message: not fed)
        wrap(framing.Framer, "whole", "2 framer.feed")
    if hasattr(framing.Framer, "whole_body"):
        wrap(framing.Framer, "whole_body", "2 framer.feed")
    # (what the connection hands on: the dissector's, as _emit runs inline on most paths
    # now; bound when each connection is made, so wrapped before)
    wrap(pcap.CaptureDissector, "_exchange", "3 _emit (enrich + sink)")
    if "_values_body(" in inspect.getsource(enrich.enrich):
        wrap(enrich, "_values_body", "4 values body read")
    else:  # (enrich reads bodies inline: each kind's compiled program timed, and the rest)
        wrap(enrich, "body_values", "4 values body read")
        made = enrich._kind

        def kind(*a: Any, **k: Any) -> Any:
            got = made(*a, **k)
            if got is not None and got.reader is not None:
                got.reader = (_Timed(got.reader[0]), got.reader[1])
            return got

        enrich._kind = kind
    wrap(enrich, "pair_facts" if hasattr(enrich, "pair_facts") else "facts", "5 facts")
    wrap(diagnoses.Diagnoses, "observe", "6 diagnoses")
    wrap(printer.ExchangePrinter, "exchange", "7 printer")
    from kdissect.cli.entry import main as kdissect

    t0 = time.process_time()
    sys.argv = ["kdissect"] + sys.argv[1:]
    try:
        kdissect()
    except SystemExit:
        pass
    total = time.process_time() - t0
    n = calls["3 _emit (enrich + sink)"] or 1
    print(f"total {total:.2f} CPU-s, {n} exchanges, {total / n * 1e6:.1f} µs each", file=sys.stderr)
    for label in sorted(spent):
        print(
            f"{label:28} {spent[label]:6.2f} s {spent[label] / n * 1e6:7.1f} µs/exchange "
            f"({calls[label]} calls)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
