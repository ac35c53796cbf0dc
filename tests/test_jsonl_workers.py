"""`kdissect pcap --format jsonl -j N`: worker processes decode, the output is what one
process writes, byte for byte and in the same order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kdissect.protocol import Options
from kdissect.render import jsonl_workers
from kdissect.render.jsonl_workers import JsonlWorkers
from kdissect.render.lines import message_line
from kdissect.stream.dissector import load_captures

ROOT = Path(__file__).parent.parent
CAPTURES = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap"))


def test_cli_jobs_write_what_one_process_writes():
    run = lambda *a: subprocess.run([sys.executable, "-m", "kdissect", "pcap", *CAPTURES,
                                     "--format", "jsonl", *a], capture_output=True, cwd=ROOT)
    one, two = run("-j", "1"), run("-j", "2")
    assert one.returncode == two.returncode == 0
    assert one.stdout.count(b"\n") > 500
    assert two.stdout == one.stdout
    assert two.stderr == one.stderr


def test_many_small_chunks_keep_their_order(monkeypatch):
    """One message per chunk, three workers: chunks finish out of order, lines do not."""
    monkeypatch.setattr(jsonl_workers, "CHUNK_MESSAGES", 1)
    options = Options()
    messages = []
    load_captures(CAPTURES, lambda ex: messages.extend(
        m for m in (ex.request, ex.response) if m is not None and not
        (m is ex.request and ex.repeat)), lambda _w: None)
    expected = "".join(message_line(m, options) for m in messages)
    written: list[str] = []
    workers = JsonlWorkers(options, 3, written.append)
    for m in messages:
        workers.add([m])
    workers.close()
    assert len(written) == len(messages)
    assert "".join(written) == expected


def test_reader_going_away_stops_quietly():
    """`| head -1` closes the pipe: no traceback, no stray workers left running."""
    big = str(ROOT / "captures" / "mtu1500.pcap")
    proc = subprocess.run(f"{sys.executable} -m kdissect pcap {' '.join(CAPTURES)} {big} "
                          f"--format jsonl -j 2 | head -c 100", shell=True,
                          capture_output=True, cwd=ROOT, timeout=60)
    assert len(proc.stdout) == 100
    assert b"Traceback" not in proc.stderr
