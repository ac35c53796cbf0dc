"""The compiled summary line (native/src/line.rs, ``lines.compiled_plain``) against its
reference, ``lines.python_plain`` (the text of ``line_parts``): on every exchange of every
capture under captures/, and on damaged copies of them (control characters and odd
Unicode in client ids, topics and statuses, missing fields, times at the rounding edges
and out of range, many topics and partitions, partitions of odd types), the same line, or
the compiled path says None and leaves the line to Python. Its UTF-8 bytes (what the text
writer hands stdout's binary layer) likewise."""

from __future__ import annotations

import copy
import random

import pytest


from kdissect.protocol import Options
from kdissect.protocol.findings import Finding
from kdissect.render import lines
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream.engine import Engine
from kdissect.stream.facts import Facts
from kdissect.stream.sink import Collect

from tests.support.native_check import require_compiled
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()


@pytest.fixture(autouse=True)
def _compiled():
    require_compiled(lines, "_SUMMARY_LINE")


_EXCHANGES: list = []


def exchanges() -> list:
    if not _EXCHANGES:
        for path in CAPTURES:
            sink = Collect()
            Engine(CaptureFiles([str(path)]), sink, Options()).run()
            _EXCHANGES.extend(sink.exchanges)
    return _EXCHANGES


def same(ex) -> bool:
    """Whether the compiled line is the reference's (True when it leaves it to Python);
    its UTF-8 form (stdout's binary layer) the reference's line and a newline encoded,
    None exactly where the line is Python's or findings mark it."""
    fast = lines.compiled_plain(ex)
    slow = lines.python_plain(ex, Options())
    assert fast is None or fast == slow, (fast, slow)
    raw = lines.compiled_plain(ex, None, True)
    if fast is None or ex.findings:
        assert raw is None
    else:
        assert raw == (slow + "\n").encode(), (raw, slow)
    return fast is not None


def test_every_exchange_of_every_capture():
    written = sum(same(ex) for ex in exchanges())
    assert len(exchanges()) > 2000
    # all but SASL tokens' lines are the compiled path's
    sasl = sum(1 for ex in exchanges() if (ex.request or ex.response).direction == "sasl")
    assert written == len(exchanges()) - sasl


_ODD = ["", "a\nb", "\x1b[31m", "x\x7fy", "\x9b", "é☃", "\u2028", "t\x00", "𝄞", "a b"]


def test_damaged_copies():
    rng = random.Random(43)
    written = 0
    base = [ex for ex in exchanges() if (ex.request or ex.response).direction != "sasl"]
    for _ in range(4000):
        ex = copy.copy(rng.choice(base))
        req = copy.copy(ex.request) if ex.request is not None else None
        resp = copy.copy(ex.response) if ex.response is not None else None
        ex.request, ex.response = req, resp
        first = req or resp
        f = ex.facts = copy.copy(ex.facts) if ex.facts is not None else Facts()
        f.topics = {t: set(ps) for t, ps in f.topics.items()}
        roll = rng.random
        if roll() < 0.3:
            first.ts = rng.choice(
                [
                    -1.0,
                    0.0,
                    253402300799.0,
                    253402300800.0,
                    float("nan"),
                    1.5e9 + rng.randrange(10**6) / 2e6,
                    1.7e9 + 0.9999995,
                    86399.9999996,
                ]
            )
        if resp is not None and req is not None and roll() < 0.3:
            resp.ts = req.ts + rng.choice([0.0, 1e-7, 0.00005, 0.00015, 0.12345, 1e7, 2.5e-4])
        if req is not None and roll() < 0.3:
            req.client_id = rng.choice(_ODD + [None])
        if roll() < 0.2:
            first.correlation_id = rng.choice([None, -1, 0, 2**31 - 1])
        if roll() < 0.2:
            first.api_version = rng.choice([None, 0, 99])
        if roll() < 0.3:
            f.topics[rng.choice(_ODD) + "t"] = set(rng.sample(range(-3, 40), rng.randrange(9)))
        if roll() < 0.2:
            f.topics["topic-id:" + rng.choice(["", "abc", "0123456789abcdef", "é☃𝄞1234567"])] = {1}
        if roll() < 0.1:
            f.topics["b"] = rng.choice([{True}, {2, True}, {2**70}, {1.5}, {"x"}])
        if roll() < 0.3:
            f.records = rng.choice([0, 1, 2, -1, 10**6])
        if roll() < 0.3:
            f.errors = rng.sample([3, 6, 7, 15, 16, 35, 58, 999], rng.randrange(4))
        if roll() < 0.3:
            ex.status = rng.choice(["ok", "unanswered", "orphan (request not captured)"] + _ODD)
        if resp is not None and roll() < 0.3:
            resp.how = rng.choice([None, "paired by correlation id"] + _ODD)
        if roll() < 0.3:
            ex.findings = list(ex.findings) + [
                Finding(rng.choice(["malformed_header", "memory_budget", "throttled"]), "x", "")
                for _ in range(rng.randrange(3))
            ]
        if roll() < 0.05:
            first.api_key = rng.choice([None, 9999])
        written += same(ex)
    assert written > 3000  # left to Python only where a partition is not an int


def test_no_extension_means_python(monkeypatch):
    ex = exchanges()[0]
    monkeypatch.setattr(lines, "_SUMMARY_LINE", None)
    assert lines.compiled_plain(ex) is None
    assert lines.exchange_plain(ex, Options()) == lines.python_plain(ex, Options())


def test_latency_and_time_roundings():
    """Milliseconds to one decimal and microseconds of the time of day as Python rounds
    them (half to even on the exact value), ties included."""
    rng = random.Random(7)
    ties = [k / 4000 for k in range(-2, 400)] + [k / 8e6 for k in range(0, 4000, 7)]
    for latency in ties + [rng.random() * 10 ** rng.randrange(-6, 4) for _ in range(20000)]:
        ts = rng.choice([0.0, 1.7e9]) + latency
        line = lines._SUMMARY_LINE(
            ts, " ", "Fetch", 1, 1, None, latency, {}, 0, None, "ok", None, 0, "topic-id:"
        )
        assert line == f"{lines.iso(ts)[11:26]} Fetch v1  #1  {latency * 1000:.1f}ms", latency


def test_the_ends_kept_per_stream_are_the_exchanges_own():
    """``compiled_plain`` keeps each stream's text between its ends: an exchange of the
    same stream number with other ends (another capture, a swapped side, a copy) gets
    its own, as the reference writes it."""
    ex = next(e for e in exchanges() if (e.request or e.response).direction != "sasl")
    assert same(ex)
    for client, broker in (
        (("10.9.8.7", 4242), ex.broker),
        (ex.client, ("::1", 9092)),
        (ex.broker, ex.client),
        (tuple(list(ex.client)), tuple(list(ex.broker))),  # (equal values, other tuples)
    ):
        other = copy.copy(ex)
        other.client, other.broker = client, broker
        assert same(other) and same(ex)
        assert lines.between_text(client, broker) in lines.compiled_plain(other)


def _written(stdout, monkeypatch, binary: bool = False) -> bytes:
    """What a summary's text writer puts on ``stdout`` (a TextIOWrapper over BytesIO):
    a line written before it, a heading, every exchange of two captures' worth, a line
    written after it."""
    import io

    from rich.console import Console

    from kdissect.render.format_text import TextWriter
    from kdissect.render.formats import WriterContext

    monkeypatch.setattr("sys.stdout", stdout)
    stdout.write("before é\n")
    w = TextWriter(WriterContext(Options(), False, 1, Console(file=io.StringIO())))
    for i, ex in enumerate(exchanges()[:3000]):
        if i % 1000 == 0:
            w.capture(f"capture {i} →")
        w.exchange(ex, None)
    assert (w._raw is not None) == binary  # (the path taken)
    w.close()
    stdout.write("after\n")
    stdout.flush()
    return stdout.buffer.getvalue()


def test_text_writer_binary_layer_as_text_layer(monkeypatch):
    """The text writer's lines through stdout's binary layer (a buffered UTF-8 stdout)
    are the bytes, in the order, that the text layer writes (where it must: writing
    through, line-buffered, another encoding)."""
    import io

    def wrapper(**kw):
        return io.TextIOWrapper(io.BytesIO(), encoding=kw.pop("encoding", "utf-8"), **kw)

    binary = _written(wrapper(), monkeypatch, True)
    assert b"\xe2\x86\x92" in binary and binary.startswith(b"before \xc3\xa9\n")
    assert binary.endswith(b"after\n")
    assert _written(wrapper(write_through=True), monkeypatch) == binary
    assert _written(wrapper(line_buffering=True), monkeypatch) == binary
    utf16 = _written(wrapper(encoding="utf-16", errors="strict"), monkeypatch)
    assert utf16.decode("utf-16") == binary.decode()
