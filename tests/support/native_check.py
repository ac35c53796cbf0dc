"""The compiled packet path against the pure-Python one, on one capture file.

Both turn a file into the same things for the engine: the TCP segments of its packets
(frame, time, addresses, ports, sequence numbers, flags, payload, bytes cut), the TLS
key logs of pcapng Decryption Secrets Blocks (in file order with the segments), the
packet count, packets of unsupported link types, the warnings and the error of a file
that is not a capture. Everything after that is the same Python code, so equal scans
mean equal output; tests/test_native.py also compares the printed output.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from types import SimpleNamespace

from kdissect.capture.pcapfile import CaptureError, CaptureReader
from kdissect.sources.pcap import CaptureDissector


@dataclass
class Scan:
    events: list[tuple] = field(default_factory=list)
    packets: int = 0
    unsupported: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    format: str = "?"
    error: str | None = None


class _Segments:
    """Stands in for the reassembler: records what the Python path hands it."""

    def __init__(self, events: list[tuple]):
        self.events = events

    def segment(self, s, ts: float, frame: int) -> None:
        self.events.append(
            (frame, ts, s.src, s.sport, s.dst, s.dport, s.seq, s.ack, s.flags, s.payload, s.missing)
        )


def python_scan(path: str) -> Scan:
    """The Python path: the reader's packets through the dissector's own ``packet``."""
    scan = Scan()
    dissector = SimpleNamespace(packets=0, unsupported=scan.unsupported, tcp=_Segments(scan.events))
    with CaptureReader(path) as reader:
        reader.on_secrets = lambda key_log: scan.events.append((key_log,))
        try:
            for pkt in reader.packets():
                CaptureDissector.packet(dissector, pkt)  # type: ignore[arg-type]
        except CaptureError as e:
            scan.error = str(e)
        scan.packets = dissector.packets
        scan.warnings, scan.format = reader.warnings, reader.format
    return scan


def native_scan(path: str) -> Scan:
    from kdissect import _native  # type: ignore[attr-defined]

    scan = Scan()
    with CaptureReader(path) as reader:
        try:
            for batch in reader._scan(_native.Scanner()):
                scan.events += batch
        except CaptureError as e:
            scan.error = str(e)
        scanner = reader.scanned
        scan.packets, scan.unsupported = scanner.packets, dict(scanner.unsupported)
        scan.warnings, scan.format = reader.warnings, reader.format
    return scan


def divergence(path: str) -> str | None:
    """Where the two paths differ on the file at ``path``, or None."""
    py, rs = python_scan(path), native_scan(path)
    for name in ("error", "format", "packets", "unsupported", "warnings"):
        if getattr(py, name) != getattr(rs, name):
            return f"{name}: python {getattr(py, name)!r} != native {getattr(rs, name)!r}"
    for i, (a, b) in enumerate(zip(py.events, rs.events)):
        if a != b or [type(x) for x in a] != [type(x) for x in b]:
            return f"event {i}: python {a!r:.300} != native {b!r:.300}"
    if len(py.events) != len(rs.events):
        return f"python found {len(py.events)} segments, native {len(rs.events)}"
    return None


def _engine_view(
    path: str,
    pure: bool,
    budget: int | None,
    block: int | None = None,
    spent: list[int] | None = None,
    keys: str | None = None,
    passing: bool = True,
) -> list:
    """Everything the engine makes of a file before enrichment: each message (bytes,
    frame, time, offset, status, holes), exchange (pairing, findings), gap and note.
    ``block``: the bytes the reader feeds the compiled scanner at a time. ``spent``:
    gets the times the budget made a holder give up its data. ``keys``: a TLS key log
    file. ``passing``: the compiled reassembler's pass runs (CaptureDissector.passing)."""
    import gc
    import os

    from kdissect.capture import pcapfile
    from kdissect.capture.native import PURE_ENV
    from kdissect.capture.tls import KeyLog
    from kdissect.sources.pcap import CaptureDissector, read_captures
    from kdissect.stream.budget import Budget
    from kdissect.stream.sink import Collect

    def msg(m):
        return (
            None
            if m is None
            else (
                m.index,
                m.stream,
                m.direction,
                m.ts,
                m.frame,
                m.offset,
                m.data,
                m.api_key,
                m.api_version,
                m.correlation_id,
                m.client_id,
                m.pair,
                m.status,
                m.how,
                m.size,
                m.pieces,
                m.holes,
            )
        )

    before, block_before = os.environ.get(PURE_ENV), pcapfile._BLOCK
    os.environ[PURE_ENV] = "1" if pure else "0"
    pcapfile._BLOCK = block or block_before
    pass_before, CaptureDissector.passing = CaptureDissector.passing, passing
    try:
        sink = Collect()
        used = Budget(budget) if budget else Budget()
        log = None
        if keys is not None:
            log = KeyLog()
            with open(keys, "rb") as f:
                log.add_text(f.read())
        read_captures([path], sink, budget=used, keys=log)
        if spent is not None:
            spent.append(used.given_up)
    finally:
        gc.unfreeze()  # read_captures freezes what exists: a fuzzer calls it often
        pcapfile._BLOCK = block_before
        CaptureDissector.passing = pass_before
        if before is None:
            del os.environ[PURE_ENV]
        else:
            os.environ[PURE_ENV] = before
    view: list = [
        (
            msg(x.request),
            msg(x.response),
            x.client,
            x.broker,
            x.stream,
            x.seq,
            x.expected,
            [(f.code, f.detail) for f in x.findings],
            x.opened,
        )
        for x in sink.exchanges
    ]
    return (
        view
        + [(g.stream, g.direction, g.offset, g.length, g.frame, g.ts) for g in sink.gaps]
        + sink.notes
        + [f.to_json() for f in sink.tls_facts]
    )


def engine_divergence(path: str, budget: int | None = None, block: int = 2048) -> str | None:
    """Where the engine's output differs between the compiled path (scanner and TCP
    reassembly in Rust) and the pure-Python one, on the file at ``path``, or None.
    ``budget``: a memory budget in bytes (a small one makes the compiled reassembler
    hand its state to Python mid-file). ``block``: the compiled path's read size (small,
    so Kafka connections are known to Python, and their sizes tracked in Rust, after
    the first blocks even of a small file)."""
    return _compare(_engine_view(path, True, budget), _engine_view(path, False, budget, block))


def engine_divergences(path: str, budgets: list[int | None], block: int = 2048) -> str | None:
    """``engine_divergence`` under each of ``budgets`` (None: the default), or None. The
    pure path's view is made once for the budgets it never spent: its budget acts only by
    making holders give up (stream/budget.py), so a run in which none gave up is, to the
    byte, the run under any larger budget (the 200,000-connection file: 18 CPU-s a run).
    The compiled path, whose hand-over depends on the room left, runs under each."""
    from kdissect.stream.budget import DEFAULT

    order = sorted(budgets, key=lambda b: DEFAULT if b is None else b)
    py: list | None = None  # the pure view, while it holds for larger budgets
    for budget in order:
        if py is None:
            spent: list[int] = []
            view = _engine_view(path, True, budget, spent=spent)
            py = view if spent == [0] else None
        differs = _compare(py if py is not None else view, _engine_view(path, False, budget, block))
        if differs:
            return f"budget {budget}: {differs}"
    return None


def all_divergences(path: str, budgets: list[int | None]) -> str | None:
    """``divergence`` then ``engine_divergences``: the file's every comparison, or None
    (a top-level function: a process pool runs it on files side by side)."""
    return divergence(path) or engine_divergences(path, budgets)


def view_digest(view: list) -> str:
    """A digest of an engine view (``_engine_view``): each item's repr, length-prefixed.
    Equal digests mean equal reprs, so equal items (the reprs of bytes, numbers, strings
    and the containers of the view say their values and types); a view made in another
    process is compared by its digest, not by sending it over (hundreds of MB for the
    200,000-connection file). Unequal digests are no verdict: compared whole again
    (``engine_divergence``; a dict's repr follows its insertion order, == does not)."""
    import hashlib

    h = hashlib.sha256()
    for item in view:
        r = repr(item).encode()
        h.update(len(r).to_bytes(8, "little") + r)
    return h.hexdigest()


def pure_digests(path: str, budgets: list[int | None]) -> tuple[str | None, dict]:
    """The pure side of ``all_divergences`` for a process pool: ``divergence`` (both
    scans), then the digest of the pure path's view under each budget, the view made
    once for the budgets it never spent (as ``engine_divergences``). (divergence, {budget:
    digest})."""
    from kdissect.stream.budget import DEFAULT

    differs = divergence(path)
    digests: dict = {}
    holds = False  # the last view made holds for larger budgets
    digest = ""
    for budget in sorted(budgets, key=lambda b: DEFAULT if b is None else b):
        if not holds:
            spent: list[int] = []
            digest = view_digest(_engine_view(path, True, budget, spent=spent))
            holds = spent == [0]
        digests[budget] = digest
    return differs, digests


def native_digest(path: str, budget: int | None, block: int = 2048) -> str:
    """The compiled side of ``engine_divergence`` under one budget, as a digest."""
    return view_digest(_engine_view(path, False, budget, block))


def _compare(py: list, rs: list) -> str | None:
    for i, (a, b) in enumerate(zip(py, rs)):
        if a != b:
            return f"item {i}: python {a!r:.400} != native {b!r:.400}"
    if len(py) != len(rs):
        return f"python made {len(py)} items, native {len(rs)}"
    return None


def to_pcapng(
    pcap: bytes, secrets: bytes = b"", big_endian: bool = False, tsresol: int | None = None
) -> bytes:
    """A classic pcap file rewritten as pcapng (one interface; a Decryption Secrets
    Block first when ``secrets``): the pcapng reader's inputs for the fuzzer."""
    e = ">" if big_endian else "<"
    endian = "<" if pcap[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    linktype = struct.unpack_from(endian + "I", pcap, 20)[0] & 0xFFFF

    def block(kind: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack(e + "II", kind, n) + body + struct.pack(e + "I", n)

    out = [block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))]
    opts = b""
    if tsresol is not None:
        opts = struct.pack(e + "HHB3x", 9, 1, tsresol) + struct.pack(e + "HH", 0, 0)
    out.append(block(1, struct.pack(e + "HHI", linktype, 0, 262144) + opts))
    if secrets:
        out.append(block(10, struct.pack(e + "II", 0x544C534B, len(secrets)) + secrets))
    pos = 24
    while pos + 16 <= len(pcap):
        sec, frac, incl, orig = struct.unpack_from(endian + "IIII", pcap, pos)
        data = pcap[pos + 16 : pos + 16 + incl]
        ticks = sec * 1_000_000 + frac
        out.append(
            block(
                6,
                struct.pack(e + "IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, len(data), orig)
                + data,
            )
        )
        pos += 16 + incl
    return b"".join(out)


def require_compiled(module, name: str) -> None:
    """Fail, not skip, when the compiled function ``module.name`` (bound through
    ``native_ext.bind``) is missing: a differential test would compare nothing."""
    import pytest

    from kdissect.protocol import native_ext

    native_ext.refresh()  # (an earlier test may have run with KDISSECT_PURE)
    if getattr(module, name) is None:
        pytest.fail(
            "the compiled extension is not built or KDISSECT_PURE is set: install with "
            "cargo on the PATH (pip install -e ., as ./scripts/test does)"
        )
