"""The compiled packet path's bytes without copies: plain files mapped (or read into one
reused block) and parsed in place by the scanner, only a record a block leaves unfinished
copied; files that shrink while mapped (no SIGBUS: a warning); and the framer's join of a
message's first and completing pieces. Each against the reference (the pure-Python path,
or the same bytes fed another way)."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kdissect.capture import pcapfile
from kdissect.stream.framing import Framer
from tests.support.native_check import divergence, engine_divergence, native_scan, to_pcapng

ROOT = Path(__file__).resolve().parents[1]
MTU = ROOT / "captures" / "mtu1500.pcap"
TLS = ROOT / "captures" / "tls" / "kafka-tls.pcap"


def _rows(pieces) -> tuple[list, list[str]]:
    from kdissect import _native  # type: ignore[attr-defined]

    scanner = _native.Scanner()
    rows: list = []
    for i, piece in enumerate(pieces):
        rows += scanner.feed(piece, i == len(pieces) - 1)
    return rows, scanner.warnings


@pytest.mark.parametrize("name", ["pcap", "pcapng", "pcap-cut", "pcapng-cut"])
def test_scanner_alike_however_the_bytes_are_cut(name):
    """Fed whole, or in random pieces of bytes, bytearrays and memoryviews (records cut
    anywhere, pieces shorter than a record header): the same rows and warnings."""
    data = MTU.read_bytes()
    data = to_pcapng(data) if name.startswith("pcapng") else data
    if name.endswith("cut"):
        data = data[: len(data) // 2 + 5]
    whole = _rows([data])
    rng = random.Random(7)
    for _ in range(3):
        pieces, at = [], 0
        while at < len(data):
            n = rng.choice([1, 3, 15, 17, 700, 1600, 5000])
            piece = data[at : at + n]
            pieces.append(rng.choice([bytes, bytearray, memoryview])(piece))
            at += n
        assert _rows(pieces) == whole
    assert whole[0]


def test_read_path_alike_when_not_mapped(monkeypatch):
    """A file that cannot be mapped is read into the reused block: the same as the
    reference too."""
    monkeypatch.setattr(pcapfile, "map_guard", lambda: None)
    for path in (MTU, TLS):
        assert divergence(str(path)) is None
        assert engine_divergence(str(path), None, block=4096) is None


def test_mapped_path_is_taken(monkeypatch):
    taken = []
    of = pcapfile._Mapped.of
    monkeypatch.setattr(pcapfile._Mapped, "of", lambda f: taken.append(of(f)) or taken[-1])
    native_scan(str(MTU))
    assert taken and taken[0] is not None


def test_file_shrinking_between_blocks(tmp_path, monkeypatch):
    """Cut while mapped, between two blocks: read on from there, as the read path would
    read the shorter file (the same segments and warnings)."""
    monkeypatch.setattr(pcapfile, "_BLOCK", 4096)
    data = MTU.read_bytes()
    keep = len(data) // 2 + 11
    short = tmp_path / "short.pcap"
    short.write_bytes(data[:keep])
    f = tmp_path / "shrinking.pcap"
    f.write_bytes(data)
    events = []
    with pcapfile.CaptureReader(str(f)) as reader:
        from kdissect import _native  # type: ignore[attr-defined]

        for i, batch in enumerate(reader._scan(_native.Scanner())):
            if i == 0:
                with open(f, "r+b") as w:
                    w.truncate(keep)
            events += batch
        warnings = reader.warnings
    expected = native_scan(str(short))
    assert warnings == expected.warnings and "file ends inside packet" in warnings[-1]
    assert events == expected.events


def test_file_growing_while_mapped(tmp_path, monkeypatch):
    """Appended to while mapped: read on past the map's end (all of it, as a file
    written whole)."""
    monkeypatch.setattr(pcapfile, "_BLOCK", 4096)
    data = MTU.read_bytes()
    f = tmp_path / "growing.pcap"
    f.write_bytes(data[: len(data) // 2])
    events = []
    with pcapfile.CaptureReader(str(f)) as reader:
        from kdissect import _native  # type: ignore[attr-defined]

        for i, batch in enumerate(reader._scan(_native.Scanner())):
            if i == 0:
                with open(f, "ab") as w:
                    w.write(data[len(data) // 2 :])
            events += batch
        warnings = reader.warnings
    expected = native_scan(str(MTU))
    assert warnings == expected.warnings == []
    assert events == expected.events


SHRINK_DURING_A_BLOCK = """
import sys
from kdissect.capture import pcapfile
from kdissect import _native
src, path = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
open(path, "wb").write(data)
big = len(data)
pcapfile._Mapped.size = lambda self: big        # the size check passes: the guard acts
pcapfile._BLOCK = 1 << 16
n = 0
with pcapfile.CaptureReader(path) as reader:
    for i, batch in enumerate(reader._scan(_native.Scanner())):
        if i == 0:
            with open(path, "r+b") as w:
                w.truncate(70000)
        n += len(batch)
    print(n, reader.warnings)
"""


def test_file_shrinking_during_a_block_is_no_sigbus(tmp_path):
    """Cut while mapped, inside the block being scanned: the vanished pages read as
    zeros, the scan stops after that packet and says so; the process lives."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(SHRINK_DURING_A_BLOCK),
            str(MTU),
            str(tmp_path / "f.pcap"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "the file shrank while it was read: stopped after packet" in r.stdout, r.stdout


def _frames(framer: Framer, pieces: list[bytes]) -> list[tuple]:
    out = []
    for p in pieces:
        out += framer.feed(p)
    return [(f.offset, f.data, type(f.data)) for f in out] + [(framer.pending, framer.base)]


def test_framer_joins_the_completing_piece():
    """A message begun in the buffer and completed by the next piece (which may hold
    more messages and the start of another): the same frames as fed a byte at a time."""
    msgs = [bytes([i]) * n for i, n in enumerate([9, 300, 4, 70000, 12, 5])]
    stream = b"".join(len(m).to_bytes(4, "big") + m for m in msgs)
    reference = _frames(Framer(), [stream[i : i + 1] for i in range(len(stream))])
    rng = random.Random(3)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 6)))
        pieces = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]
        assert _frames(Framer(), pieces) == reference


FOREIGN_SIGBUS = """
import faulthandler, mmap, sys
from kdissect.capture import pcapfile
from kdissect import _native
if sys.argv[3] == "faulthandler":
    faulthandler.enable()
with pcapfile.CaptureReader(sys.argv[1]) as reader:     # mapped: the guard is installed
    n = sum(len(b) for b in reader._scan(_native.Scanner()))
other = sys.argv[2]
open(other, "wb").write(b"x" * 65536)
f = open(other, "r+b")
mm = mmap.mmap(f.fileno(), 65536, access=mmap.ACCESS_READ)
f.truncate(0)
print("scanned", n, flush=True)
mm[40000]                                          # not a guarded map: SIGBUS as ever
print("survived", flush=True)
"""


@pytest.mark.parametrize("mode", ["plain", "faulthandler"])
def test_sigbus_elsewhere_still_ends_the_process(tmp_path, mode):
    """The guard passes a SIGBUS outside the maps it guards to the handler before it
    (faulthandler's, or the default): a real crash is not swallowed."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(FOREIGN_SIGBUS),
            str(MTU),
            str(tmp_path / "other"),
            mode,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "scanned" in r.stdout and "survived" not in r.stdout, (r.stdout, r.stderr)
    assert r.returncode == -7, (r.returncode, r.stderr[-1000:])  # SIGBUS
    if mode == "faulthandler":
        assert "Bus error" in r.stderr
