"""The two readers of one v2 record agree: the generated fast reader
(values_readers/record_loop.py's ``located_record``, from gen_readers' record template) and
the step-by-step reader that says what is wrong in a damaged record (records._record with
no fast path). On every record of the repo captures, and on damaged copies of them (bytes
flipped, the record cut short, a byte more or less): whenever the fast reader answers,
its tree is the step reader's, node for node; and it declines every record in which the
step reader finds a problem."""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

from kdissect.protocol import Options, decode_request, decode_response
from kdissect.protocol.node import Node
from kdissect.protocol.reader import Reader
from kdissect.protocol.records import _record
from kdissect.protocol.values_readers.record_loop import located_record
from kdissect.sources.pcap import read_captures
from kdissect.stream.sink import Collect

CAPTURES = sorted((Path(__file__).parent.parent / "captures").glob("*.pcap"))


def shape(n: Node) -> tuple:
    return (
        n.name,
        n.ktype,
        n.offset,
        n.length,
        n.value,
        n.problem,
        n.code,
        n.note,
        n.hint,
        tuple(shape(c) for c in n.children),
    )


def read(
    buf: bytes,
    start: int,
    end: int,
    batch: tuple[int, int, int | None],
    fast: bool,
    bad: list | None = None,
):
    """Record 0 at ``buf[start:end]`` by one reader: (its tree or None, where it ended);
    header keys that are not UTF-8 go to ``bad``."""
    base, ts, stamp = batch
    r = Reader(buf, start, end)
    parent = Node("records", "records", start)
    decline = lambda *args: None  # noqa: E731
    rec = _record(
        r,
        parent,
        0,
        base,
        ts,
        stamp,
        False,
        located_record if fast else decline,
        bad if bad is not None else [],
    )
    node = rec if rec is not None else (parent.children[0] if parent.children else None)
    return node, r.pos


@lru_cache(maxsize=1)
def records() -> list[tuple[bytes, int, int, tuple[int, int, int | None]]]:
    """(buffer, record start, end of its batch's records, (base offset, base timestamp,
    log-append time)) of every record of a non-control batch in the repo captures."""
    out = []
    for path in CAPTURES:
        sink = Collect()
        read_captures([str(path)], sink)
        for ex in sink.exchanges:
            for m in ex.messages:
                if m.direction == "sasl" or m.api_key not in (0, 1):
                    continue
                msg = (
                    decode_request(m.data, Options())
                    if m.direction == "request"
                    else decode_response(m.data, m.api_key, m.api_version, Options())
                )
                out += batch_records(msg)
    return out


def batch_records(msg) -> list:
    out = []
    for batch in msg.tree.walk():
        if batch.ktype != "record_batch":
            continue
        fields = {c.name: c.value for c in batch.children}
        attrs = fields.get("attributes")
        if attrs is None or attrs & 0x20:  # control records: the step reader only
            continue
        holder = next((c for c in batch.children if c.buffer is not None), None)
        buf = holder.buffer if holder is not None else msg.data
        recs = [c for c in (holder or batch).children if c.ktype == "record"]
        if not recs:
            continue
        end = len(buf) if holder is not None else batch.offset + batch.length
        stamp = fields["max_timestamp"] if attrs & 0x08 else None
        for rec in recs:
            out.append(
                (buf, rec.offset, end, (fields["base_offset"], fields["base_timestamp"], stamp))
            )
    return out


def test_every_record_of_the_captures_reads_the_same_by_both_readers():
    corpus = records()
    assert len(corpus) > 1000
    for buf, start, end, batch in corpus:
        fast = located_record(
            buf,
            start,
            end,
            "record[0]",
            batch[0],
            batch[1] if batch[2] is None else batch[2],
            batch[2] is not None,
            [],
        )
        step, step_end = read(buf, start, end, batch, fast=False)
        assert fast is not None, "a clean record the fast reader declined"
        assert shape(fast) == shape(step) and fast.end == step_end


def test_damaged_records_read_the_same_or_the_fast_reader_declines():
    rng = random.Random(20)
    corpus = records()
    faulted = answered = 0
    for _ in range(4000):
        buf, start, end, batch = rng.choice(corpus)
        b = bytearray(buf)
        rec_len = max(1, min(end - start, 64))
        how = rng.randrange(3)
        if how == 0:  # flip a bit in the record
            i = start + rng.randrange(rec_len)
            b[i] ^= 1 << rng.randrange(8)
        elif how == 1:  # the record cut short
            end = start + rng.randrange(rec_len)
        else:  # a byte more or less in it
            i = start + rng.randrange(rec_len)
            if rng.random() < 0.5:
                b.insert(i, rng.randrange(256))
                end += 1
            else:
                del b[i]
                end -= 1
        data = bytes(b)
        fast_bad: list = []
        fast = located_record(
            data,
            start,
            end,
            "record[0]",
            batch[0],
            batch[1] if batch[2] is None else batch[2],
            batch[2] is not None,
            fast_bad,
        )
        step_bad: list = []
        step, step_end = read(data, start, end, batch, fast=False, bad=step_bad)
        assert step is not None
        if any(n.problem for n in step.walk()):
            faulted += 1
            assert fast is None, "the fast reader answered a record the step reader faults"
            continue
        if fast is not None:
            answered += 1
            assert shape(fast) == shape(step) and fast.end == step_end
            # the same header keys found not UTF-8 (records.py says so once a batch)
            assert [shape(n) for n in fast_bad] == [shape(n) for n in step_bad]
    assert faulted > 500 and answered > 500


def test_a_header_key_that_is_not_utf8_reads_the_same_and_is_handed_over():
    """kafka-python writes the key's bytes as its str's encode() gives them: both readers
    show it with U+FFFD and hand its node over (records.py says so once a batch)."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    class RawKey(str):
        def encode(self, *args, **kwargs) -> bytes:  # type: ignore[override]
            return b"\xfftrace"

    b = MemoryRecordsBuilder(2, 0, 1 << 20, 0, False, -1, -1, -1)
    b.append(1700000000000, b"k", b"v", [("ok", b"1"), (RawKey("x"), b"2")])
    b.close()
    buf = bytes(b.buffer())
    batch = (0, 1700000000000, None)
    fast_bad: list = []
    fast = located_record(buf, 61, len(buf), "record[0]", 0, 1700000000000, False, fast_bad)
    step_bad: list = []
    step, step_end = read(buf, 61, len(buf), batch, fast=False, bad=step_bad)
    assert fast is not None and shape(fast) == shape(step) and fast.end == step_end
    assert [n.value for n in fast_bad] == [n.value for n in step_bad] == ["\ufffdtrace"]
