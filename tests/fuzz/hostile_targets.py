"""Fuzz targets of issue 22 (hostile input, round 3), beside harness.py's: the filter
language, the proxy's framing (the frame splitter with its memory cap, and the
skip-scanner), the TCP reassembler's public interface, and the paste reader. Each
checks time too: the filter and paste targets hold every input to a budget linear in
its size (CPU seconds), so a quadratic path fails on inputs far from the 1 s limit.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from . import harness as h

# CPU seconds an input may take: a fixed part plus a part per byte of input
FILTER_BUDGET = (0.1, 10e-6)
PASTE_BUDGET = (0.1, 10e-6)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Timed work runs without the cyclic collector: in a process holding a whole test
    suite's objects, one full collection costs more than a budget (a paste of 8 KB read
    in 0.05 CPU-s was once charged 0.24)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _within(start: float, size: int, budget: tuple[float, float], what: str) -> None:
    spent = time.process_time() - start
    limit = budget[0] + budget[1] * size
    assert spent <= limit, f"{what} of {size} bytes took {spent:.3f} s of CPU (> {limit:.3f})"


# -- filters -------------------------------------------------------------------------------

_WORDS = [
    "api",
    "version",
    "client_id",
    "topic",
    "partition",
    "error",
    "records",
    "status",
    "latency",
    "anomaly",
    "finding",
    "severity",
    "record.key",
    "record.header.x",
    "kafka.api_key",
    "bytes",
    "nosuch",
    "Produce",
    "kafka",  # Wireshark's protocol filter: every exchange
    "tcp.port",  # Wireshark fields of other layers: refused with the kdissect field
    "ip.addr",
]
_OPS = ["==", "!=", "<", "<=", ">", ">=", "~", "!~", "contains", "in", "=", "matches"]
_VALUES = [
    "Produce",
    "3",
    "-1",
    "50ms",
    "1.5s",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "warn",
    "trailing_bytes",
    '"orders"',
    "'x'",
    '"\\x41"',
    '"\\u00e9"',
    '"\\U0001F600"',
    '"\\N{LATIN SMALL LETTER E}"',
    '"\\x"',
    '"\\u12"',
    '"\\U00110000"',
    '"\\N{nope}"',
    '"\\d+"',
    '"(a|b)*c"',
    '"["',
    "{Produce, Fetch}",
    "{Produce Fetch}",
    "{0 1}",
    "{0x0 0x1, 2}",
    "{1 2",
    "0x0",
    "0X1f",
    "-0x1",
    "0x",
    "0xg",
    "0x" + "f" * 40,
    "10.0.0.5",
    "{1, 2",
    "1" * 40,
    "9" * 5000,
]
_JOIN = ["and", "or", "&&", "||"]


def filter_input(rng: random.Random) -> str:
    """Filter text: grammatical terms joined, nested, negated (sometimes thousands
    deep), with literals of every kind, or a mutation of one."""
    roll = rng.random()
    if roll < 0.05:  # the hostile shapes, scaled
        n = rng.choice((10, 100, 300, 2000))
        return rng.choice(
            [
                "(" * n + "api" + ")" * n,
                "not " * n + "api",
                " and ".join(["api"] * n),
                " or ".join(["version == 1"] * n),
                "! " * n + "error",
                "kafka.api_key in {" + "0 " * n + "}",
                "api in {" + "0x1 " * n,
                "ip.addr == " + "1." * n,
                " or ".join(["kafka"] * n),
            ]
        )

    def term(depth: int) -> str:
        r = rng.random()
        if depth < 6 and r < 0.15:
            return "(" + expr(depth + 1) + ")"
        if r < 0.25:
            return rng.choice(("not ", "!")) + term(depth + 1)
        field = rng.choice(_WORDS)
        if r < 0.35:
            return field
        return f"{field} {rng.choice(_OPS)} {rng.choice(_VALUES)}"

    def expr(depth: int) -> str:
        return f" {rng.choice(_JOIN)} ".join(term(depth) for _ in range(rng.randint(1, 4)))

    text = expr(0)
    if roll < 0.3:
        text = h.mutate(rng, text.encode(), 4).decode("latin-1")
    return text


@lru_cache(maxsize=1)
def filter_views() -> list:
    """Exchanges of a real consumer-group capture, as filters see them."""
    from kdissect.sources.pcap import read_captures
    from kdissect.stream.fields import ExchangeFields
    from kdissect.stream.sink import Collect

    sink = Collect()
    read_captures([str(h.ROOT / "captures" / "confluent-group.pcap")], sink)
    return [ExchangeFields(ex) for ex in sink.exchanges][:6]


def run_filter(text: str) -> None:
    from kdissect.filters import FilterError, parse_filter

    views = filter_views()
    with _no_gc():
        start = time.process_time()
        try:
            f = parse_filter(text)
        except FilterError:
            _within(start, len(text), FILTER_BUDGET, "refusing a filter")
            return
        _within(start, len(text), FILTER_BUDGET, "parsing a filter")
        for view in views:
            start = time.process_time()
            f(view)
            _within(start, len(text), FILTER_BUDGET, "evaluating a filter")


# -- the proxy's framing --------------------------------------------------------------------


def framing_input(rng: random.Random) -> tuple[bytes, list[int], int]:
    """A stream of real messages with their size prefixes (some damaged: sizes of 2^31,
    a message announced far past the stream's end), cut into random chunks; and a cap
    on held bytes, often smaller than a message."""
    out = bytearray()
    for _ in range(rng.randint(1, 8)):
        data = rng.choice(h.seed_messages())[0]
        if rng.random() < 0.2:
            data = h.mutate(rng, data, 2)
        out += len(data).to_bytes(4, "big") + data
    if rng.random() < 0.5:
        out = bytearray(h.mutate(rng, bytes(out), 3))
    cuts = sorted(rng.randrange(len(out) + 1) for _ in range(rng.randint(0, 12)))
    return bytes(out), cuts, rng.choice((64, 1024, 1 << 20))


def run_framing(args: tuple[bytes, list[int], int]) -> None:
    """The proxy's splitter (kdissect/proxy/held.py over the framing core): the same
    messages however the stream is cut, none when they are given up; held bytes
    accounted exactly. Then the skip-scanner on each whole message read as a response."""
    from kdissect.protocol.reader import DecodeError
    from kdissect.proxy.held import HeldBytes
    from kdissect.proxy.rewrite import rewrite_same_size
    from kdissect.proxy.skipscan import endpoint_spans, response_layout, top_error_code

    stream, cuts, limit = args
    whole = HeldBytes(1 << 40)
    side = whole.side("whole")
    reference = [(f.offset, f.data) for f in whole.feed(side, stream)]
    held = HeldBytes(limit, lambda text: None)
    s = held.side("cut")
    got = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)]):
        if s.error:
            break
        got += [(f.offset, f.data) for f in held.feed(s, stream[a:b])]
        assert held.total == s.framer.pending == s.held
        assert held.total <= max(limit, 0) or not s.forwarded or len(s.head) < 4
    if held.given_up == 0 and not s.error and not side.error:
        assert got == reference
    else:
        assert set(got) <= set(reference) or s.error or side.error
    held.forget(s)
    assert held.total == 0
    for _offset, data in reference[:3]:
        if len(data) < 8:
            continue
        key, version = int.from_bytes(data[:2], "big"), int.from_bytes(data[2:4], "big")
        if response_layout(key, version) is None:
            continue
        top_error_code(data[4:], key, version)  # never raises
        try:
            spans = endpoint_spans(data[4:], key, version)
        except DecodeError:
            continue
        # a streamed answer's rewrite never changes its size, whatever the bytes
        done = rewrite_same_size(data[4:], spans, lambda sp: ("127.0.0.1", 19092))
        assert done is None or len(done[0]) == len(data) - 4


# -- TCP reassembly (the public interface of kdissect/capture/tcp.py) -------------------


class _Bytes:
    """A stream sink keeping what arrives in the client's direction."""

    def __init__(self) -> None:
        self.pieces: list[tuple[int, bytes]] = []
        self.holes: list[tuple[int, int]] = []

    def data(self, conn, direction, offset, payload, ts, frame) -> None:
        if direction == 0:
            self.pieces.append((offset, payload))

    def gap(self, conn, direction, offset, length, ts, frame) -> None:
        if direction == 0:
            self.holes.append((offset, length))

    def closed(self, conn) -> None:
        pass


def tcp_input(rng: random.Random) -> tuple[bytes, list[tuple[int, int, int]], bool]:
    """A byte stream and the segments that carry it: (start, end, flags) in any order,
    with retransmissions, overlaps, holes never filled, sometimes no SYN."""
    size = rng.choice((10, 200, 3000, 20000))
    stream = rng.randbytes(size)
    segs, pos = [], 0
    while pos < size:
        n = rng.choice((1, 1, 7, 100, 1460))
        segs.append((pos, min(size, pos + n), 0))
        pos += n
    order = rng.random()
    if order < 0.3:
        rng.shuffle(segs)
    elif order < 0.45:
        segs.reverse()
    for _ in range(rng.randint(0, 6)):  # retransmissions and overlaps
        a = rng.randrange(size)
        segs.insert(rng.randrange(len(segs) + 1), (a, min(size, a + rng.randint(1, 3000)), 0))
    if rng.random() < 0.3 and segs:  # holes never filled
        for _ in range(rng.randint(1, 5)):
            segs.pop(rng.randrange(len(segs)))
            if not segs:
                break
    return stream, segs, rng.random() < 0.7


def run_tcp(args: tuple[bytes, list[tuple[int, int, int]], bool]) -> None:
    """Whatever the order, the delivered bytes are the stream's at their offsets, in
    order, never twice; holes are reported, not filled with other bytes."""
    from kdissect.capture.packet import ACK, FIN, SYN, Segment
    from kdissect.capture.tcp import Reassembler

    stream, segs, syn = args
    sink = _Bytes()
    r = Reassembler(sink, lambda src, dst: dst[1] == 9092)
    isn = 0xFFFFFF00  # wraps around 2^32 soon
    client, broker = ("10.0.0.1", 50000), ("10.0.0.2", 9092)
    if syn:
        r.segment(Segment(*client, *broker, isn, 0, SYN, b"", 0), 0.0, 1)
    first = 0 if syn or not segs else segs[0][0]  # stream offset 0 without a SYN
    seq0 = (isn + 1) & 0xFFFFFFFF
    for i, (a, b, _flags) in enumerate(segs, 2):
        r.segment(
            Segment(*client, *broker, (seq0 + a) & 0xFFFFFFFF, 0, ACK, stream[a:b], 0), i * 1e-3, i
        )
    r.segment(
        Segment(*client, *broker, (seq0 + len(stream)) & 0xFFFFFFFF, 0, FIN | ACK, b"", 0),
        1.0,
        len(segs) + 2,
    )
    r.flush()
    end = 0
    for offset, payload in sink.pieces:
        assert offset >= end, f"bytes at {offset} delivered again or out of order"
        assert payload == stream[first + offset : first + offset + len(payload)], (
            f"the bytes at {offset} are not the stream's"
        )
        end = offset + len(payload)


# -- the paste reader (kdissect.blob's public entry point) ----------------------------


def paste_input(rng: random.Random) -> bytes:
    """Pastes in the shapes that made backtracking regular expressions quadratic: xxd
    and hexdump lines with long runs of spaces or of "| ", Erlang binaries with long
    runs of spaces or digits; or a real blob, repeated."""
    n = rng.choice((100, 1000, 4000, 8000))
    shapes = [
        "00000000: 0000 0001 " + " " * n + "x",
        "00000000  00 01 02 03  " + "| " * (n // 2),
        "<<1," + " " * n,
        "<<1," + "1" * n,
        "<<" + "1, " * (n // 3),
        "0000000 0001 0203 " + " " * n + "\n0000010",
        "b'" + "\\x00" * (n // 4),
        "[" + "0, " * (n // 3),
        "00 " * (n // 3) + "zz",
    ]
    if rng.random() < 0.8:
        text = rng.choice(shapes).encode()
    else:
        blob = rng.choice(h.seed_blobs())
        text = blob * max(1, n // max(1, len(blob)))
    return h.mutate(rng, text, 3) if rng.random() < 0.3 else text


def run_paste(data: bytes) -> None:
    from kdissect.blob import BlobError, find_candidates, parse_blob

    with _no_gc():
        start = time.process_time()
        try:
            parse_blob(data)
        except BlobError:
            pass
        _within(start, len(data), PASTE_BUDGET, "reading a paste")
        start = time.process_time()
        find_candidates(data)
        _within(start, len(data), PASTE_BUDGET, "searching a paste for bytes")


# -- registration (runner.TARGETS, harness.replay) ------------------------------------


def targets() -> dict:
    """name: (make an input from an rng, run the target on it, what to save beside it)."""
    return {
        "filter": (filter_input, run_filter, lambda a: (a.encode("utf-8", "surrogatepass"), "")),
        "framing": (
            framing_input,
            run_framing,
            lambda a: (a[0], f"{a[2]} " + " ".join(map(str, a[1]))),
        ),
        "tcp": (
            tcp_input,
            run_tcp,
            lambda a: (a[0], f"{int(a[2])} " + " ".join(f"{x}:{y}" for x, y, _ in a[1])),
        ),
        "paste": (paste_input, run_paste, lambda a: (a, "")),
    }


def replay(target: str, data: bytes, extra: str) -> bool:
    """Run a saved input of one of these targets; False when the target is not one."""
    if target == "filter":
        run_filter(data.decode("utf-8", "surrogatepass"))
    elif target == "framing":
        limit, *cuts = extra.split()
        run_framing((data, [int(c) for c in cuts], int(limit)))
    elif target == "tcp":
        syn, *segs = extra.split()
        run_tcp((data, [(int(a), int(b), 0) for a, b in (s.split(":") for s in segs)], syn == "1"))
    elif target == "paste":
        run_paste(data)
    else:
        return False
    return True
