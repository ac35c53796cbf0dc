"""`kdissect pcap --format jsonl`: bodies from the values-only decoder and enrichment from
summaries give the lines that full trees give; with -j N, worker processes write what one
process writes, byte for byte and in the same order."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kdissect.protocol import Options
from kdissect.render import jsonl_workers
from kdissect.render.jsonl_workers import JsonlWorkers
from kdissect.render.lines import message_json, message_line
from kdissect.sources.pcap import exchanges_in, read_captures
from kdissect.stream.enrich import enrich
from kdissect.stream.sink import Collect

pytestmark = pytest.mark.slow  # worker processes over whole captures

ROOT = Path(__file__).parent.parent
CAPTURES = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap"))
OPTIONS = Options()
SUMMARY = dataclasses.replace(OPTIONS, records="batches")


def raw_exchanges() -> list:
    """The exchanges of every repo capture, before enrichment."""
    sink = Collect()
    read_captures(CAPTURES, sink)
    return sink.exchanges


def both_ways(exchanges) -> tuple[list[str], list[str]]:
    """JSON lines from full-tree enrichment (the reference) and from summary enrichment
    with values-only bodies (what --format jsonl does)."""
    full, fast = [], []
    for ids, options, out, keep in (({}, OPTIONS, full, True), ({}, SUMMARY, fast, False)):
        advertised: dict = {}
        for ex in copy.deepcopy(exchanges):
            enrich(ex, options, ids, advertised, keep)
            for m, d in zip(
                ex.messages,
                [d for d in (ex.decoded or ()) if d is not None] or [None] * len(ex.messages),
            ):
                out.append(
                    json.dumps(message_json(m, OPTIONS, ex, d), default=str) + "\n"
                    if keep
                    else message_line(m, OPTIONS, ex, enriched_full=False, topic_ids=ids)
                )
    return full, fast


def test_values_bodies_and_summary_enrichment_give_the_full_lines():
    full, fast = both_ways(raw_exchanges())
    assert len(full) > 500
    assert fast == full


def test_damaged_messages_give_the_full_lines_too():
    """Record bytes flipped, messages cut: the findings a full tree adds inside records
    appear as full enrichment puts them."""
    rng = random.Random(10)
    exchanges = [ex for ex in raw_exchanges() if ex.first.api_key in (0, 1, 3)]
    damaged = []
    for _ in range(300):
        ex = copy.deepcopy(rng.choice(exchanges))
        m = rng.choice(ex.messages)
        b = bytearray(m.data)
        if rng.random() < 0.7:
            i = rng.randrange(len(b) // 2, len(b))
            b[i] ^= 1 << rng.randrange(8)
        else:
            del b[rng.randrange(8, len(b)) :]
        m.data = bytes(b)
        damaged.append(ex)
    full, fast = both_ways(damaged)
    # findings inside records: the summary never sees them, the lines still show them
    inside = [
        line for line in full if any("record" in f["where"] for f in json.loads(line)["findings"])
    ]
    assert len(inside) > 10
    assert fast == full


def test_cli_jobs_write_what_one_process_writes():
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "kdissect", "pcap", *CAPTURES, "--format", "jsonl", *a],
        capture_output=True,
        cwd=ROOT,
    )
    one, two = run("-j", "1"), run("-j", "2")
    assert one.returncode == two.returncode == 0
    assert one.stdout.count(b"\n") > 500
    assert two.stdout == one.stdout
    assert two.stderr == one.stderr


def test_many_small_chunks_keep_their_order(monkeypatch):
    """One exchange per chunk, three workers: chunks finish out of order, lines do not."""
    monkeypatch.setattr(jsonl_workers, "CHUNK_EXCHANGES", 1)
    exchanges = exchanges_in(CAPTURES, SUMMARY).exchanges
    expected = "".join(
        message_line(m, OPTIONS, ex, enriched_full=False) for ex in exchanges for m in ex.messages
    )
    written: list[str] = []
    workers = JsonlWorkers(OPTIONS, 3, written.append)
    for ex in exchanges:
        workers.add(ex)
    workers.close()
    assert len(written) == len(exchanges)
    assert "".join(written) == expected


def test_reader_going_away_stops_quietly():
    """`| head -c 100` closes the pipe: no traceback, no stray workers left running."""
    proc = subprocess.run(
        f"{sys.executable} -m kdissect pcap {' '.join(CAPTURES)} --format jsonl -j 2 | head -c 100",
        shell=True,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert len(proc.stdout) == 100
    assert b"Traceback" not in proc.stderr
