"""The fuzzer's targets and inputs: mostly real Kafka messages and captures from
captures/ with structure-aware damage. Each target checks kdissect's promises:

- nothing escapes but the documented errors (CaptureError, BlobError, GrammarError);
- no input takes more than a second of CPU;
- no input blows memory up (peak RSS stays under RSS_LIMIT).

Targets: the decoder with hints (a message decoded as the API/version it claims or a
drawn one, then rendered as the views render it), the decoder by guessing, the capture
reader through the whole engine to JSON lines, the blob parser and the grammar parser.
Why hypothesis and not atheris: see docs/internals/protocol.md, "Fuzzing". Used by
tests/test_fuzz.py (a bounded slice) and scripts/fuzz.py (long runs).
"""

from __future__ import annotations

import io
import os
import resource
import random
import tempfile
import time
import zlib
from functools import lru_cache
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).resolve().parent / "regressions"
RSS_LIMIT = 1 << 30
# lengths and counts an attacker picks: signs, 2^31, varint edges, -1
INTERESTING_32 = [
    0,
    1,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    0xFFFFFFFE,
]


# -- seeds -----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def seed_messages() -> list[tuple[bytes, str, int, int]]:
    """(bytes, direction, api_key, api_version) of every message in captures/*.pcap."""
    from kdissect.sources.pcap import read_captures
    from kdissect.stream.sink import Collect

    out = []
    for path in sorted((ROOT / "captures").glob("*.pcap")):
        sink = Collect()
        read_captures([str(path)], sink)
        for ex in sink.exchanges:
            req = ex.request
            for m in ex.messages:
                key = m.api_key if m.api_key is not None else (req.api_key if req else None)
                version = (
                    m.api_version
                    if m.api_version is not None
                    else (req.api_version if req else None)
                )
                if key is not None and version is not None and m.direction != "sasl":
                    out.append((m.data, m.direction, key, version))
    return out


@lru_cache(maxsize=1)
def seed_captures() -> list[bytes]:
    """The real captures, smallest first (big ones cost a second a run)."""
    files = sorted((ROOT / "captures").glob("*.pcap"), key=lambda p: p.stat().st_size)
    return [p.read_bytes() for p in files if p.stat().st_size <= 64 * 1024]


@lru_cache(maxsize=1)
def seed_blobs() -> list[bytes]:
    return [p.read_bytes() for p in sorted((ROOT / "captures" / "blobs").iterdir()) if p.is_file()]


@lru_cache(maxsize=1)
def seed_grammars() -> list[str]:
    from kdissect.protocol import embedded

    legacy = (ROOT / "kdissect" / "protocol" / "legacy.bnf").read_text()
    rules = legacy.split("\n\n")
    return [embedded._CONSUMER_PROTOCOL, *rules[:40]]


# -- damage ------------------------------------------------------------------------------


def mutate(rng: random.Random, seed: bytes, max_edits: int = 8) -> bytes:
    """``seed`` with a few edits of the kinds that break parsers: bytes flipped, a length
    overwritten with an interesting value, a cut, a piece duplicated or spliced in, a run
    of varint continuation bytes."""
    buf = bytearray(seed)
    for _ in range(rng.randint(0, max_edits)):
        op = rng.randrange(6)
        at = rng.randrange(len(buf)) if buf else 0
        if op == 0 and buf:
            buf[at] = rng.randrange(256)
        elif op == 1:
            width = rng.choice((1, 2, 4))
            value = rng.choice(INTERESTING_32) & ((1 << 8 * width) - 1)
            buf[at : at + width] = value.to_bytes(width, "big")
        elif op == 2:
            del buf[at:]
        elif op == 3:
            buf[at:at] = buf[at : at + rng.randint(1, 64)]
        elif op == 4:
            buf[at:at] = rng.randbytes(rng.randint(1, 16))
        else:
            buf[at:at] = b"\xff" * rng.randint(1, 12)
    return bytes(buf)


# -- targets -----------------------------------------------------------------------------


_held_at_reset = 0  # resident bytes when the peak was last reset


def reset_peak_memory() -> None:
    """Forget this process's peak RSS so far (Linux: clear_refs 5), so that
    ``check_memory`` judges the inputs since, not whatever the process ran before (in a
    test session: other tests, whose memory the process may still hold: a worker of
    the two-phase run's shared phase held 1.3 GiB before the fuzz slice)."""
    global _held_at_reset
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return
    _held_at_reset = _status_bytes("VmRSS:") or 0


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss() -> int:
    """Peak resident bytes since the last reset (VmHWM), else since the start."""
    peak = _status_bytes("VmHWM:")
    if peak is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak


def check_memory() -> None:
    """The inputs since the reset grew the process by less than RSS_LIMIT."""
    rss = peak_rss()
    grown = rss - _held_at_reset
    assert grown < RSS_LIMIT, (
        f"peak RSS {rss >> 20} MiB: {grown >> 20} MiB over the {_held_at_reset >> 20} MiB "
        f"held before"
    )


def render(msg, data: bytes, full_text: bool) -> None:
    """What the views do with a tree: values as JSON, the located tree as JSON, findings,
    and (``full_text``) the rich tree and hex dump."""
    from kdissect.render.records import plain_json
    from kdissect.render.text import print_node, render_node

    if full_text or zlib.crc32(data) % 4 == 0:  # the located JSON costs a decode
        for _ in msg.tree.iter_json():
            pass
    msg.tree.findings()
    body = msg.body
    if body is not None:
        plain_json(body)
    if full_text:  # rich, and the plain printer, which must print the same text
        from rich.console import Console

        by_rich, plain = io.StringIO(), io.StringIO()
        Console(file=by_rich, width=100).print(render_node(data, msg.tree))
        print_node(Console(file=plain, width=100), data, msg.tree)
        assert plain.getvalue() == by_rich.getvalue(), "plain -V text differs from rich's"


def decode_hinted(data: bytes, direction: str, key: int, version: int) -> None:
    from kdissect.protocol import decode_request, decode_response
    from kdissect.protocol.context import Options

    options = Options(max_decompressed=8 << 20, max_nodes=50_000)
    # an Envelope response's answer is read as the forwarded request's: an API and
    # version drawn from the bytes (so a saved input replays the same)
    crc = zlib.crc32(data)
    forwarded = (crc % 80, (crc >> 8) % 19) if key == 58 else None
    msg = (
        decode_request(data, options)
        if direction == "request"
        else decode_response(data, key, version, options, forwarded)
    )
    # the rich text view costs a hundred decodes: one input in 64, chosen by content
    render(msg, data, full_text=len(data) < 2048 and zlib.crc32(data) % 64 == 0)


def decode_guessed(data: bytes) -> None:
    from kdissect.protocol import decode_response, guess
    from kdissect.protocol.context import Options
    from kdissect.protocol.guess import confidence

    cands = guess(data)
    confidence(cands)
    if cands:
        top = cands[0]
        msg = decode_response(
            data, top.api_key, top.api_version, Options(max_decompressed=8 << 20, max_nodes=50_000)
        )
        render(msg, data, full_text=False)


_CAPTURE_FILE = None


def read_capture(data: bytes) -> None:
    """A capture file's bytes through the reader and the whole engine to JSON lines."""
    global _CAPTURE_FILE
    from kdissect.protocol.context import Options
    from kdissect.render.lines import exchange_line, message_json
    from kdissect.sources.pcap import read_captures
    from kdissect.stream.enrich import Enricher
    from kdissect.stream.sink import Collect

    if _CAPTURE_FILE is None:
        fd, _CAPTURE_FILE = tempfile.mkstemp(
            prefix="kdissect-fuzz-",
            suffix=".pcap",
            dir="/dev/shm" if os.path.isdir("/dev/shm") else None,
        )
        os.close(fd)
    with open(_CAPTURE_FILE, "wb") as f:
        f.write(data)
    options = Options(max_decompressed=8 << 20, max_nodes=50_000)
    sink = Collect()
    read_captures([_CAPTURE_FILE], Enricher(sink, options, full=True))
    for ex in sink.exchanges:
        exchange_line(ex, options)
        for m, d in zip(ex.messages, [d for d in (ex.decoded or ()) if d is not None]):
            message_json(m, options, ex, d)


def parse_blob_text(data: bytes) -> None:
    from kdissect.blob import BlobError, find_candidates, parse_blob

    for text in (data, data.decode("latin-1")):
        try:
            parse_blob(text)
        except BlobError:
            pass
        for blob in find_candidates(text):  # the search never raises
            assert blob.data and sum(p.size for p in blob.pieces) <= len(blob.data)
    if data and zlib.crc32(data) % 32 == 0:  # one input in 32, scaled up and timed
        timed_blob(data)


BLOB_SCALE = 64 * 1024


def timed_blob(data: bytes) -> None:
    """The input repeated to 64 KB must read in linear time: well under 2 CPU-s (about
    0.3 s at worst; the old reader's backtracking took 12-29 CPU-s on 20-40 KB)."""
    from kdissect.blob import BlobError, find_candidates, parse_blob

    big = (data * (BLOB_SCALE // len(data) + 1))[:BLOB_SCALE].decode("latin-1")

    def read() -> float:
        start = time.process_time()
        try:
            parse_blob(big)
        except BlobError:
            pass
        find_candidates(big)
        return time.process_time() - start

    # measured twice before failing: on a VM whose host is busy, time the vCPU waits
    # counts as the process's (a CI run measured 2.1 CPU-s for an input that reads in
    # 0.1); a reader that is not linear is slow both times
    spent = read()
    if spent > 2.0:
        spent = min(spent, read())
    if spent > 2.0:
        raise AssertionError(
            f"the paste reader took {spent:.1f} CPU-s on {BLOB_SCALE} "
            f"bytes of a repeated input: not linear"
        )


def parse_grammar_text(text: str, data: bytes) -> None:
    from kdissect.protocol.context import Decoding, Options
    from kdissect.protocol.decode import decode_body
    from kdissect.protocol.grammar import GrammarError, parse_grammar

    try:
        g = parse_grammar(text)
    except GrammarError:
        return
    tree = decode_body(data, 0, g.root, g.root.name, Decoding(Options(max_nodes=50_000)))
    for _ in tree.iter_json():
        pass


_SEGMENT_DIRS: dict[str, Path] = {}


@lru_cache(maxsize=1)
def seed_segments() -> list[bytes]:
    """Segments as a broker writes them (kafka-python's record encoder, every magic and
    codec) and an internal topic's records."""
    import struct
    from kafka.record.memory_records import MemoryRecordsBuilder

    out = []
    for magic, codec in ((2, 0), (2, 1), (2, 3), (2, 4), (1, 0), (1, 2), (0, 1)):
        b = MemoryRecordsBuilder(magic, codec, 1 << 16, offset=0)
        for i in range(3):
            b.append(1700000000000 + i, b"k%d" % i, b"v" * 20, [("h", b"x")] if magic == 2 else [])
        b.close()
        out.append(bytes(b.buffer()))
    key = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    value = struct.pack(">hqi", 3, 42, 7) + struct.pack(">h", 1) + b"m" + struct.pack(">q", 0)
    b = MemoryRecordsBuilder(2, 0, 1 << 16, offset=0)
    b.append(0, key, value, [])
    b.close()
    out.append(bytes(b.buffer()) * 2)
    return out


def read_segment(data: bytes) -> None:
    """Segment bytes through the log source (as __consumer_offsets-0 and as a user
    topic's, with a damaged index beside) to JSON lines and text."""
    from kdissect.cli.log_cmd import item_json, item_line
    from kdissect.protocol.context import Options
    from kdissect.sources.logunits import walk

    if not _SEGMENT_DIRS:
        root = Path(
            tempfile.mkdtemp(
                prefix="kdissect-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
            )
        )
        for name in ("__consumer_offsets-0", "t-0"):
            (root / name).mkdir()
            _SEGMENT_DIRS[name] = root / name
    for i, d in enumerate(_SEGMENT_DIRS.values()):
        (d / "00000000000000000000.log").write_bytes(data)
        (d / "00000000000000000000.index").write_bytes(data[i * 8 : i * 8 + 64])
        for item in walk([str(d)], Options(max_decompressed=8 << 20, max_nodes=50_000)):
            item_json(item, True)
            item_line(item)


# -- inputs: rng -> the target's arguments ---------------------------------------------


def hinted_input(rng: random.Random) -> tuple[bytes, str, int, int]:
    """A damaged real message as its own API (mostly), as a drawn API, or random bytes."""
    data, direction, key, version = rng.choice(seed_messages())
    roll = rng.random()
    if roll < 0.75:
        return mutate(rng, data), direction, key, version
    if roll < 0.9:
        return mutate(rng, data, 3), "response", rng.randint(0, 80), rng.randint(0, 18)
    return (
        rng.randbytes(rng.randint(0, 512)),
        rng.choice(("request", "response")),
        rng.randint(0, 80),
        rng.randint(0, 18),
    )


def guessed_input(rng: random.Random) -> bytes:
    data, _direction, _key, _version = rng.choice(seed_messages())
    return mutate(rng, data[:1024], 4)


def capture_input(rng: random.Random) -> bytes:
    return mutate(rng, rng.choice(seed_captures()), 12)


def blob_input(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.7:
        return mutate(rng, rng.choice(seed_blobs()), 6)
    if roll < 0.85:
        return rng.randbytes(rng.randint(0, 256))
    return "".join(
        rng.choice("0123456789abcdefx,:<>[](){}b'\\ \n-=") for _ in range(rng.randint(0, 256))
    ).encode()


def segment_input(rng: random.Random) -> bytes:
    seeds = seed_segments()
    data = b"".join(rng.choice(seeds) for _ in range(rng.randint(1, 3)))
    return mutate(rng, data, 6) if rng.random() < 0.9 else data + rng.randbytes(rng.randint(0, 64))


def grammar_input(rng: random.Random) -> tuple[str, bytes]:
    if rng.random() < 0.7:
        text = mutate(rng, rng.choice(seed_grammars()).encode(), 6).decode("utf-8", "replace")
    else:
        words = [
            "A",
            "B",
            "[A]",
            "[B]",
            "?A",
            "A@1",
            "=>",
            "INT8",
            "STRING",
            "TAG_BUFFER",
            "COMPACT_BYTES",
            "\n",
            "\n  ",
            "X (Version: 1)",
            "#",
        ]
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 60)))
    return text, rng.randbytes(rng.randint(0, 128))


# -- regressions -------------------------------------------------------------------------


def save_regression(target: str, data: bytes, extra: str = "") -> Path:
    """An input that failed, kept as tests/fuzz/regressions/TARGET-HASH.bin (first line of
    the .txt beside it: what the input is for the target)."""
    import hashlib

    REGRESSIONS.mkdir(exist_ok=True)
    name = f"{target}-{hashlib.sha1(data + extra.encode()).hexdigest()[:12]}"
    (REGRESSIONS / f"{name}.bin").write_bytes(data)
    if extra:
        (REGRESSIONS / f"{name}.txt").write_text(extra + "\n")
    return REGRESSIONS / f"{name}.bin"


def replay(path: Path) -> None:
    """Run a saved input through its target (named by the file's prefix)."""
    reset_peak_memory()
    target = path.name.split("-", 1)[0]
    data = path.read_bytes()
    extra_path = path.with_suffix(".txt")
    extra = extra_path.read_text().rstrip("\n") if extra_path.exists() else ""
    if target == "hinted":
        direction, key, version = extra.split()
        decode_hinted(data, direction, int(key), int(version))
    elif target == "guessed":
        decode_guessed(data)
    elif target == "capture":
        try:
            read_capture(data)
        except Exception as e:  # only the documented error may escape
            from kdissect.capture.pcapfile import CaptureError

            if not isinstance(e, CaptureError):
                raise
    elif target == "blob":
        parse_blob_text(data)
    elif target == "tls":
        from .tls_target import run_tls

        run_tls(data)
    elif target == "segment":
        read_segment(data)
    elif target == "grammar":
        parse_grammar_text(data.decode("utf-8", "replace"), bytes.fromhex(extra or ""))
    elif target == "native":
        from .native_target import run_native

        run_native(data)
    elif target == "avro":
        from .avro_target import run_avro

        run_avro(data)
    elif target == "parquet":
        from .parquet_target import run_parquet

        run_parquet(data)
    elif target == "midway":
        from .midway_target import run_midway

        run_midway(data)
    elif target == "relay":
        from .relay_target import run_relay

        run_relay(data)
    elif target in ("msgvalues", "bodyjson"):
        from .msgvalues_target import run_bodyjson, run_msgvalues

        (run_msgvalues if target == "msgvalues" else run_bodyjson)(data)
    else:
        from .files_target import replay as replay_files
        from .hostile_targets import replay as replay_hostile

        if not replay_hostile(target, data, extra) and not replay_files(target, data):
            raise ValueError(f"unknown fuzz target in {path.name}")
    check_memory()
