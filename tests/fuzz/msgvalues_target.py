"""The fuzz target of the compiled read of message values (native/src/values.rs through
kdissect/protocol/values_native.py): mutated real messages (every message kind of a few
captures) read by the compiled reader and by the generated Python readers, the reference.
The compiled read must give the reference's dict (keys in order, types: a bool is not an
int) or hand over (None); a difference, an exception or a crash is a failure.

An input is: the API key (2 bytes), the version (1 byte), the direction (1 byte: 0
request, 1 response), then the message's bytes after its size."""

from __future__ import annotations

import random
import struct
from functools import lru_cache
from pathlib import Path

from . import harness as h

ROOT = Path(__file__).resolve().parents[2]
_SEED_CAPTURES = (
    "kafka-kraft-cluster.pcap",
    "kafka44-cluster.pcap",
    "kafka-python-codecs.pcap",
    "kafka-java-transactions.pcap",
)


def messages(captures) -> list[tuple[bytes, str, int, int]]:
    """(data, direction, api_key, api_version) of every message of ``captures`` that the
    summary reads by value."""
    from kdissect.sources.pcap import CaptureFiles
    from kdissect.stream.engine import Engine
    from kdissect.stream.sink import CallbackSink

    got: list = []

    def take(ex) -> None:  # (each message enrichment reads by value, if it can)
        for m in ex.messages:
            if m.api_key is not None and m.api_version is not None and m.direction != "sasl":
                got.append((bytes(m.data), m.direction, m.api_key, m.api_version))

    for capture in captures:
        Engine(CaptureFiles([str(capture)]), CallbackSink(take)).run()
    return got


def same(a, b) -> bool:
    """Equal, with the same types and dict key orders all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return (
            len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b))
            and getattr(a, "size", None) == getattr(b, "size", None)
        )
    return a == b or (a != a and b != b)  # (NaN)


def plan(key: int, version: int, direction: str) -> tuple:
    from kdissect.protocol import values

    return values._plan_of(key, version, direction)


def lean_read(data: bytes, direction: str, key: int, version: int, conv=None):
    """The lean read enrichment makes for a summary (``values.lean_reader`` with the
    names enrichment reads); "no program" where there is none."""
    from kdissect.protocol import Options, values
    from kdissect.stream.enrich import read_names

    options = Options(records="batches")
    got = values.lean_reader(key, version, direction, options, read_names())
    if got is None:
        return "no program"
    return got[0].read_plain(
        data, conv or values.NO_BYTES, options.records, got[1], options.max_nodes
    )


def pruned(whole, key: int, version: int, direction: str):
    """``whole`` (a compiled read of the body) as the lean read should give it: only the
    fields ``values_native.kept`` keeps, walked with the layout."""
    from kdissect.protocol import schemas
    from kdissect.protocol.values import BatchHeads
    from kdissect.protocol.values_native import kept
    from kdissect.stream.enrich import read_names

    keep = read_names()

    def prune(value, st):
        if not isinstance(value, dict):
            return value
        out = {}
        fields = {f.name: f for f in st.fields + st.tagged}
        for k, v in value.items():
            f = fields.get(k)
            if f is None and k.startswith("tag_"):  # an unknown tag's bytes: kept
                out[k] = v
                continue
            assert f is not None, ("a key the layout does not have", k)
            if not kept(f, keep):
                continue
            if isinstance(v, BatchHeads):  # a batch head's fields named in keep only
                heads = BatchHeads(
                    [{n: x for n, x in h.items() if n in keep or n == "records"} for h in v],
                    v.size,
                )
                v = heads
            elif f.struct is not None and isinstance(v, list):
                v = [prune(x, f.struct) for x in v]
            elif f.struct is not None:
                v = prune(v, f.struct)
            out[k] = v
        return out

    return prune(whole, schemas.layout(key, version, direction))


def damaged(rng: random.Random, data: bytes) -> bytes:
    """A cut (three times in ten) or one to three bytes changed copy of ``data``."""
    b = bytearray(data)
    if rng.random() < 0.3:
        b = b[: rng.randrange(len(b))]
    elif b:
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def python_read(data: bytes, direction: str, key: int, version: int, options, conv):
    """What the generated readers make of the message (None: they bail)."""
    from kdissect.protocol import values
    from kdissect.protocol.reader import Bail, VarintTooLong

    read, head, compact, _fast = plan(key, version, direction)
    if read is None:
        return None
    s = values._State(conv, options, compact)
    try:
        _, pos = head(data, 0, s)
        body, pos = read(data, pos, s)
    except (Bail, VarintTooLong, struct.error, IndexError, UnicodeDecodeError):
        return None
    return body if pos == len(data) else None


def compiled_read(data: bytes, direction: str, key: int, version: int, options, conv):
    """What the compiled reader makes of it; "no program" where it has none."""
    from kdissect.protocol import values

    _read, _head, compact, fast = plan(key, version, direction)
    if fast is None:
        return "no program"
    if options.records is True:  # as body_values calls it
        return fast.read(data, values._State(conv, options, compact))
    return fast.read_plain(data, conv, options.records, compact, options.max_nodes)


@lru_cache(maxsize=1)
def seeds() -> list[bytes]:
    out, kinds = [], set()
    for data, direction, key, version in messages([ROOT / "captures" / n for n in _SEED_CAPTURES]):
        if (key, version, direction) not in kinds and len(data) < 4096:
            kinds.add((key, version, direction))
            out.append(struct.pack(">hBB", key, version, direction == "response") + data)
    return out


def msgvalues_input(rng: random.Random) -> bytes:
    data = rng.choice(seeds())
    return data[:4] + h.mutate(rng, data[4:], 4) if rng.random() < 0.9 else data


def run_msgvalues(data: bytes) -> None:
    from kdissect.protocol import Options

    if len(data) < 4:
        return
    key, version, resp = struct.unpack_from(">hBB", data)
    direction = "response" if resp & 1 else "request"
    for options in (Options(records="batches"), Options(records=True)):
        want = python_read(data[4:], direction, key, version, options, bytes.hex)
        got = compiled_read(data[4:], direction, key, version, options, bytes.hex)
        if got == "no program":
            return
        assert got is None or same(got, want), f"the values differ: {got!r} != {want!r}"
    # the lean read (a summary's): read exactly when the whole compiled read reads,
    # holding the fields it keeps of it
    none = lambda b: None  # noqa: E731
    whole = compiled_read(data[4:], direction, key, version, Options(records="batches"), none)
    lean = lean_read(data[4:], direction, key, version)
    if lean == "no program":  # (enrichment reads those with body_values)
        return
    assert (lean is None) == (whole is None), "the lean read decides otherwise"
    if lean is not None:
        want = pruned(whole, key, version, direction)
        assert same(lean, want), f"the lean values differ: {lean!r} != {want!r}"


def reference_json(
    data: bytes, direction: str, key: int, version: int, options=None, topic_ids=None
) -> str | None:
    """The body's text JSON lines get from the reference: the generated readers' values
    (records read, bytes through ``json_bytes``) encoded by ``json`` as the lines encode
    them; for a message that may carry an internal topic's records, the located tree's
    (records decoded by schema) when it holds no finding. None where the line would hold
    problems (the located decoder's findings) or the readers hand the message over."""
    from kdissect.protocol import Options
    from kdissect.protocol.internal import RECORD_CARRIERS, mentions_internal_topic
    from kdissect.protocol.json_view import plain_json
    from kdissect.protocol.message import decode_request, decode_response
    from kdissect.render.lines import _encode
    from kdissect.render.records import json_bytes

    options = options or Options()
    if (key, direction) in RECORD_CARRIERS and mentions_internal_topic(data, topic_ids):
        if direction == "request":
            m = decode_request(data, options, topic_ids)
        else:
            m = decode_response(data, key, version, options, None, topic_ids)
        if m.body is None or m.tree.findings():
            return None
        return _encode(plain_json(m.body, options.show_secrets))
    body = python_read(data, direction, key, version, options, json_bytes)
    return None if body is None else _encode(body)


def written_json(data: bytes, direction: str, key: int, version: int, options=None, topic_ids=None):
    """What JSON lines' compiled writer makes of a body (as ``render.lines`` calls it);
    ``topic_ids``: the topic names learned so far."""
    from kdissect.protocol import Options
    from kdissect.protocol.json_view import internal_records_json
    from kdissect.protocol.values import body_json

    options = options or Options()
    return body_json(data, direction, key, version, options, topic_ids, internal_records_json)


def run_bodyjson(data: bytes) -> None:
    """native/src/body_json.rs against the reference: the same text, or None."""
    if len(data) < 4:
        return
    key, version, resp = struct.unpack_from(">hBB", data)
    direction = "response" if resp & 1 else "request"
    if direction == "request":
        from kdissect.protocol.message import peek_request_header

        # a request is read as its own header says (as the engine reads it): a mutated
        # header naming another API is another message than the one this input names
        head = peek_request_header(data[4:])
        if head is None or (head.api_key, head.api_version) != (key, version):
            return
    got = written_json(data[4:], direction, key, version)
    if got is not None:
        want = reference_json(data[4:], direction, key, version)
        assert got == want, f"the texts differ: {got!r} != {want!r}"
