#!/usr/bin/env python3
"""Write crafted hostile inputs: what an attacker would feed a packet dissector.

    python scripts/make_hostile.py OUTDIR

Captures (OUTDIR/*.pcap, *.pcapng): a bomb of every codec, many bombs in one message,
record-count amplification, compressed wrappers of wrappers, zstd of many tiny frames,
2^31 lengths at every level (Kafka size, string, array, pcap record, pcapng block),
pcapng blocks shorter than their fixed part, odd if_tsresol values, an empty capture,
and real captures with random bytes damaged. Blobs (OUTDIR/blob/*): the Kafka messages of
the captures as hex, and pasted-text traps (prose, BOMs, deep literals, a 1 MiB request).
Round 3 (issue 22): a SASL SCRAM flood (capture and blob), display filters (OUTDIR/filter/)
and grammar files (OUTDIR/grammar/) that crashed their parsers.
tests/test_hostile.py runs the CLI on each; the budget and the findings they trigger are
documented in docs/internals/protocol.md.
"""

from __future__ import annotations

import functools
import gzip
import random
import struct
import sys
import zlib
from pathlib import Path

import crc32c
import lz4.frame
import snappy
import zstandard

ROOT = Path(__file__).resolve().parents[1]
PORT = 9092
MiB = 1 << 20


# -- Kafka bytes -------------------------------------------------------------------------


def kstr(s: bytes | str) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(b)) + b


def record_batch(records: bytes, count: int, codec: int = 0) -> bytes:
    """RecordBatch v2 around ``records`` (already compressed when ``codec``)."""
    after_crc = (
        struct.pack(">hiqqqhii", codec, max(count - 1, 0), 0, 0, -1, -1, -1, count) + records
    )
    crc = crc32c.crc32c(after_crc)
    body = struct.pack(">ibI", 0, 2, crc) + after_crc  # epoch, magic, crc
    return struct.pack(">qi", 0, len(body)) + body


def message_v1(value: bytes, codec: int = 0, offset: int = 0) -> bytes:
    after_crc = (
        struct.pack(">bbq", 1, codec, 0)
        + struct.pack(">i", -1)
        + struct.pack(">i", len(value))
        + value
    )
    body = struct.pack(">I", zlib.crc32(after_crc)) + after_crc
    return struct.pack(">qi", offset, len(body)) + body


def produce(records: bytes, version: int = 3, corr: int = 1) -> bytes:
    """A Produce request (v2: MessageSet; v3: RecordBatch) with one partition."""
    head = struct.pack(">hhi", 0, version, corr) + kstr("hostile")
    body = (struct.pack(">h", -1) if version >= 3 else b"") + struct.pack(">hi", 1, 1000)
    body += struct.pack(">i", 1) + kstr("t") + struct.pack(">ii", 1, 0)
    body += struct.pack(">i", len(records)) + records
    msg = head + body
    return struct.pack(">i", len(msg)) + msg


def metadata_v0(topics: list[bytes], count: int | None = None, corr: int = 2) -> bytes:
    msg = struct.pack(">hhi", 3, 0, corr) + kstr("hostile")
    msg += struct.pack(">i", len(topics) if count is None else count) + b"".join(topics)
    return struct.pack(">i", len(msg)) + msg


MINIMAL_RECORD = bytes([6 << 1, 0, 0, 0, 1, 1, 0])  # length 6, no key, no value, no headers


def zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=19).compress(data)


@functools.cache
def kafka_messages() -> dict[str, bytes]:
    """name -> a stream of size-prefixed Kafka requests (made once: the captures and the
    blobs both hold them; callers must not change the dict)."""
    zeros = bytes(200 * MiB)
    out = {
        "bomb-gzip": produce(record_batch(gzip.compress(zeros, 9), 10, 1)),
        # raw snappy says its length up front: a claim of 4 GiB in 5 bytes
        "bomb-snappy-claim": produce(record_batch(b"\xff\xff\xff\xff\x0f" + bytes(64), 10, 2)),
        "bomb-snappy": produce(record_batch(snappy.compress(bytes(80 * MiB)), 10, 2)),
        "bomb-xerial": produce(
            record_batch(
                b"\x82SNAPPY\x00"
                + struct.pack(">ii", 1, 1)
                + b"".join(
                    struct.pack(">i", len(c)) + c for c in [snappy.compress(bytes(30 * MiB))] * 4
                ),
                10,
                2,
            )
        ),
        "bomb-lz4": produce(record_batch(lz4.frame.compress(bytes(100 * MiB)), 10, 3)),
        "bomb-zstd": produce(record_batch(zstd(bytes(1024 * MiB)), 10, 4)),
        # every one under a per-payload cap, together 1.4 GB (24 copies of one batch:
        # compressed once, not 24 times)
        "bombs-24-zstd": produce(record_batch(zstd(bytes(60 * MiB)), 10, 4) * 24),
        # a count of 4 Mi over records that cost 7 bytes each: 36 M fields
        "record-count-4Mi": produce(record_batch(zstd(MINIMAL_RECORD * (4 << 20)), 4 << 20, 4)),
        # zero-length records never advance: a loop over 4 Mi nothings
        "records-zero-length": produce(record_batch(zstd(bytes(4 * MiB)), 4 << 20, 4)),
        "zstd-tiny-frames": produce(
            record_batch(
                b"".join(zstandard.ZstdCompressor().compress(b"x") for _ in range(30000)), 10, 4
            )
        ),
        "gzip-corrupt": produce(record_batch(gzip.compress(bytes(1000))[:-30] + bytes(30), 1, 1)),
        "lz4-corrupt": produce(record_batch(lz4.frame.compress(bytes(1000))[:40], 1, 3)),
        "wrappers-of-wrappers": produce(_nested_wrappers(64, 6), version=2),
        "wrapper-self-similar": produce(_nested_wrappers(2, 40), version=2),
        # 2^31 - 1 everywhere a length goes
        "string-2^31": _with_size(
            struct.pack(">hhi", 3, 0, 3) + struct.pack(">h", 0x7FFF) + b"x" * 10
        ),
        "array-2^31": metadata_v0([], count=0x7FFFFFFF),
        "records-2^31": produce(b"")[:-4] + struct.pack(">i", 0x7FFFFFFF) + bytes(16),
        "batch-length-2^31": produce(struct.pack(">qi", 0, 0x7FFFFFFF) + bytes(64)),
        "record-length-2^31": produce(record_batch(b"\xfe\xff\xff\xff\x0f" + bytes(32), 1)),
        "many-topics": metadata_v0([kstr("t%d" % i) for i in range(200_000)]),
    }
    out["size-2^31"] = struct.pack(">i", 0x7FFFFFFF) + out["many-topics"][4:100]
    return out


def _with_size(msg: bytes) -> bytes:
    return struct.pack(">i", len(msg)) + msg


def _nested_wrappers(copies: int, depth: int) -> bytes:
    """A MessageSet whose compressed wrapper holds ``copies`` wrappers, each holding
    ``copies``... ``depth`` levels: tiny on the wire, copies^depth messages inside."""
    inner = message_v1(b"v" * 16)
    for _ in range(depth):
        inner = message_v1(zstd(inner * copies), codec=4)
    return inner


# -- capture files -----------------------------------------------------------------------


def frames(stream: bytes, client_to_broker: bool = True, mss: int = 60000) -> list[bytes]:
    """Ethernet/IPv4/TCP frames carrying ``stream`` between 10.0.0.1:40000 and :9092."""
    src, dst, sport, dport = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02", 40000, PORT
    if not client_to_broker:
        src, dst, sport, dport = dst, src, dport, sport
    out, seq = [], 1000
    for i in range(0, max(len(stream), 1), mss):
        payload = stream[i : i + mss]
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 65535, 0, 0)
        ip = struct.pack(
            ">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6, 0, src, dst
        )
        out.append(b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp + payload)
        seq += len(payload)
    return out


def pcap(packets: list[bytes], ts: int = 1_700_000_000) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    for i, p in enumerate(packets):
        out += struct.pack("<IIII", ts + i, 0, len(p), len(p)) + p
    return out


def block(btype: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


SHB = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(options: bytes = b"") -> bytes:
    return block(1, struct.pack("<HHI", 1, 0, 262144) + options)


def epb(packet: bytes, ts: int = 1_700_000_000_000_000) -> bytes:
    return block(
        6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(packet), len(packet)) + packet
    )


def tsresol(value: int) -> bytes:
    return struct.pack("<HHB", 9, 1, value) + b"\0\0\0" + struct.pack("<HH", 0, 0)


def captures() -> dict[str, bytes]:
    out = {f"{name}.pcap": pcap(frames(stream)) for name, stream in kafka_messages().items()}
    meta = frames(metadata_v0([kstr("orders")]))[0]
    short = lambda btype, n: struct.pack("<II", btype, n) + bytes(n - 12) + struct.pack("<I", n)  # noqa: E731
    out.update(
        {
            "empty.pcap": pcap([]),
            "header-cut.pcap": pcap([])[:10],
            "record-incl-2^31.pcap": pcap([meta])[:24]
            + struct.pack("<IIII", 0, 0, 0x80000000, 0x80000000)
            + meta,
            "block-2^31.pcapng": SHB + idb() + struct.pack("<II", 6, 0x80000000) + bytes(64),
            "short-idb.pcapng": SHB + short(1, 12) + idb() + epb(meta),
            "short-epb.pcapng": SHB + idb() + short(6, 16) + epb(meta),
            "short-spb.pcapng": SHB + idb() + short(3, 12) + epb(meta),
            "short-opb.pcapng": SHB + idb() + short(2, 20) + epb(meta),
            "epb-incl-past-block.pcapng": SHB
            + idb()
            + block(6, struct.pack("<IIIII", 0, 0, 0, 0x7FFFFFFF, 0x7FFFFFFF) + meta),
            "tsresol-at-end.pcapng": SHB
            + block(1, struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 9, 1))
            + epb(meta),
            "tsresol-0.pcapng": SHB + idb(tsresol(0)) + epb(meta, (1 << 64) - 1),
            "tsresol-0x80.pcapng": SHB + idb(tsresol(0x80)) + epb(meta, (1 << 64) - 1),
            "tsresol-0xff.pcapng": SHB + idb(tsresol(0xFF)) + epb(meta, (1 << 64) - 1),
            "gzip-cut.pcap.gz": gzip.compress(pcap([meta] * 50))[:-40],
        }
    )
    rng = random.Random(11)
    for name in ("kafka-python-codecs", "aiokafka", "legacy-0.8.2", "confluent-group"):
        real = (ROOT / "captures" / f"{name}.pcap").read_bytes()
        for k in range(4):
            buf = bytearray(real)
            for _ in range(rng.randint(1, 40)):
                i = rng.randrange(24, len(buf))
                buf[i] = rng.randrange(256)
            out[f"damaged-{name}-{k}.pcap"] = bytes(buf)
    return out


def blobs() -> dict[str, bytes]:
    out = {
        f"{name}.hex": stream[4 : 4 + 2 * MiB].hex().encode()
        for name, stream in kafka_messages().items()
    }
    big = produce(record_batch(bytes(range(256)) * 4096, 1))  # a 1 MiB request
    out.update(
        {
            "big-request.hex": big.hex(" ").encode(),
            "hello.txt": b"hello world",
            "bom-utf8.txt": b"\xef\xbb\xbf" + metadata_v0([kstr("a")]).hex().encode(),
            "bom-utf16.txt": "\ufeff".encode("utf-16-le")
            + metadata_v0([kstr("a")]).hex().encode("utf-16-le"),
            "deep-literal.txt": b"bytes([" + b"-" * 100_000 + b"1])",
            "deep-parens.txt": b"(" * 100_000 + b"b'x'" + b")" * 100_000,
            "deep-list.txt": b"[" * 50_000 + b"]" * 50_000,
            "binary.bin": bytes(range(256)) * 64,
            "empty.txt": b"",
        }
    )
    return out


# -- reassembly and memory: many segments, many connections, big partial messages ---------


def _frame(
    src: int,
    sport: int,
    seq: int,
    payload: bytes,
    to_broker: bool = True,
    flags: int = 0x18,
    ack: int = 0,
) -> bytes:
    """An Ethernet/IPv4/TCP frame between 10.x.y.z:sport (``src``: the low 24 bits) and
    10.0.0.2:9092, either way."""
    a, b = struct.pack(">I", 0x0A000000 | src), b"\x0a\x00\x00\x02"
    ports = (sport, PORT) if to_broker else (PORT, sport)
    if not to_broker:
        a, b = b, a
    tcp = struct.pack(">HHIIBBHHH", *ports, seq & 0xFFFFFFFF, ack, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, a, b)
    return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp + payload


def _records(frames, ts: int = 1_700_000_000):
    for i, f in enumerate(frames):
        yield struct.pack("<IIII", ts + i // 1_000_000, i % 1_000_000, len(f), len(f)) + f


def _write_pcap(path: Path, frames, compress: bool = False) -> None:
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    with gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb") as f:
        f.write(head)
        chunk = []
        for rec in _records(frames):
            chunk.append(rec)
            if len(chunk) >= 4096:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))


def many_connections(path: Path, count: int) -> None:
    """``count`` connections of one Metadata request and its answer each, none closed
    (benchmarks/many_connections.py makes it too)."""
    request = metadata_v0([kstr("t")], corr=1)
    answer = struct.pack(">i", 12) + struct.pack(">iii", 1, 0, 0)  # Metadata v0: nothing

    def frames():
        for i in range(count):
            src, sport = 1 + i // 50_000, 10_000 + i % 50_000
            yield _frame(src, sport, 1000, request)
            yield _frame(src, sport, 5000, answer, to_broker=False, ack=1000 + len(request))

    _write_pcap(path, frames())


def reassembly_captures(out: Path) -> list[str]:
    """Inputs that were quadratic or unbounded in the TCP and stream layers (issue 22,
    classes 4, 6 and 7); written straight to ``out`` (some are large). Returns names."""
    stream = produce(record_batch(bytes(60_000), 1))
    n = len(stream)
    # 1-byte segments arriving last-first (4.3 MB)
    _write_pcap(
        out / "tcp-1byte-last-first.pcap",
        (_frame(1, 40000, 1000 + i, stream[i : i + 1]) for i in range(n - 1, -1, -1)),
    )
    # 60,000 segments, each after a hole that never fills
    _write_pcap(
        out / "tcp-holes-60k.pcap",
        (
            _frame(1, 40000, 1000 + 20 * i, stream[i * 10 : i * 10 + 10] or b"x" * 10)
            for i in range(60_000)
        ),
    )
    many_connections(out / "connections-200k.pcap", 200_000)
    # four connections each announcing a 300 MB request and sending 200 MB of it
    size = 300 * MiB
    head = struct.pack(">ihhi", size, 0, 3, 1) + kstr("hostile")
    piece = bytes(60_000)

    def partials():
        sent = [0] * 4
        for c in range(4):
            yield _frame(100 + c, 40000, 1000, head)
            sent[c] = len(head)
        while sent[0] < 200 * MiB:
            for c in range(4):
                yield _frame(100 + c, 40000, 1000 + sent[c], piece)
                sent[c] += len(piece)

    _write_pcap(out / "partials-4x300M.pcap.gz", partials(), compress=True)
    return [
        "tcp-1byte-last-first.pcap",
        "tcp-holes-60k.pcap",
        "connections-200k.pcap",
        "partials-4x300M.pcap.gz",
    ]


# -- round 3 (issue 22): SASL fields without bound, filter and grammar traps -----------


def sasl_scram_flood() -> bytes:
    """A SaslAuthenticate v0 request whose 4.5 MB SCRAM token is ``a=,`` 1.5 million
    times: one field per attribute, unless the node budget holds."""
    token = b"n,," + b"a=," * 1_500_000
    return struct.pack(">hhih", 36, 0, 1, 1) + b"c" + struct.pack(">i", len(token)) + token


def round3_captures() -> dict[str, bytes]:
    msg = _with_size(sasl_scram_flood())
    return {"sasl-scram-flood.pcap": pcap(frames(msg))}


def round3_blobs() -> dict[str, bytes]:
    return {"sasl-scram-flood.hex": sasl_scram_flood().hex().encode()}


def round3_filters() -> dict[str, str]:
    """Display filters that crashed the parser or the evaluator (``-Y``)."""
    return {
        "escape-x.txt": 'client_id == "\\x"',
        "escape-N.txt": 'client_id == "\\N{NO SUCH NAME}"',
        "escape-u-short.txt": 'client_id == "\\u12"',
        "escape-U-beyond.txt": 'client_id == "\\U00110000"',
        "number-5000-digits.txt": "version == " + "1" * 5000,
        "parens-300.txt": "(" * 300 + "api" + ")" * 300,
        "nots-1000.txt": "not " * 1000 + "api",
        "and-5000.txt": " and ".join(["api"] * 5000),
        "or-5000.txt": " or ".join(["version == 99"] * 5000),
        "error-with-unit.txt": "error == 50ms",
    }


def round3_grammars() -> dict[str, str]:
    """Grammar files with numbers int() refuses (``blob --grammar``)."""
    return {
        "version-5000-digits.bnf": f"M Request (Version: {'1' * 5000}) => a\n  a => INT8\n",
        "tag-5000-digits.bnf": f"M => a@{'9' * 5000}\na => INT8\n",
    }


def write_round3(out: Path) -> None:
    for name, data in round3_captures().items():
        (out / name).write_bytes(data)
    for name, data in round3_blobs().items():
        (out / "blob" / name).write_bytes(data)
    for folder, texts in (("filter", round3_filters()), ("grammar", round3_grammars())):
        (out / folder).mkdir(exist_ok=True)
        for name, text in texts.items():
            (out / folder / name).write_text(text)


def main(outdir: str) -> None:
    out = Path(outdir)
    (out / "blob").mkdir(parents=True, exist_ok=True)
    for name, data in captures().items():
        (out / name).write_bytes(data)
    for name, data in blobs().items():
        (out / "blob" / name).write_bytes(data)
    reassembly_captures(out)
    write_round3(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    main(sys.argv[1])
