"""Fuzz targets of issue 39 (hostile input, round 4): the files and answers kdissect reads
besides captures -- Kafka's non-segment log files (indexes, producer snapshots,
checkpoints, properties, quorum-state), bounded JSON, schema registry answers and
schema texts, and TLS key logs (files, and pcapng Decryption Secrets Blocks, which feed
the same reader). Each input is its kind (one byte) and the bytes; only the documented
errors may escape, and the located trees must tile and render."""

from __future__ import annotations

import json
import random
import struct
from functools import lru_cache

from . import harness as h

# -- Kafka's files on disk (kdissect/protocol/ondisk.py) ---------------------------------

LOG_KINDS = (
    "offset_index",
    "time_index",
    "txn_index",
    "producer_snapshot",
    "leader-epoch-checkpoint",
    "replication-offset-checkpoint",
    "properties",
    "quorum_state",
    "kafka07",
)


@lru_cache(maxsize=1)
def _log_seeds() -> list[bytes]:
    index = b"".join(struct.pack(">ii", i + 1, 4096 * (i + 1)) for i in range(20)) + bytes(80)
    tindex = b"".join(struct.pack(">qi", 1_700_000_000_000 + i, i) for i in range(10)) + bytes(24)
    txn = struct.pack(">hqqqq", 0, 7, 10, 20, 21) * 3
    snapshot = (
        struct.pack(">hI", 1, 0)
        + struct.pack(">i", 1)
        + struct.pack(">qhiiiqiq", 7, 0, 0, 0, 0, 0, 0, 0)
    )
    epochs = b"0\n3\n0 0\n1 57\n2 1000\n"
    offsets = b"0\n2\norders 0 57\n__consumer_offsets 3 1000\n"
    # numbers at and past the edges of the int32 columns (epoch, partition, the header
    # lines) and the int64 ones: Java refuses what is past them
    edges = b"0\n2\n2147483647 -9223372036854775808\n-2147483649 9223372036854775807\n"
    offset_edges = b"2147483648\n1\nt -2147483648 9223372036854775808\n"
    props = b"#\nversion=1\nnode.id=1\ncluster.id=x\ndirectory.id=abc\n"
    metadata = b"version: 0\ntopic_id: oQJ_lJq5QXOwaPS9XhF1jA\n"
    quorum = json.dumps(
        {
            "leaderId": 1,
            "leaderEpoch": 3,
            "votedId": -1,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": 1}],
            "data_version": 1,
        }
    ).encode()
    message = b"\x00" + struct.pack(">I", 0) + b"hello"
    kafka07 = struct.pack(">i", len(message)) + message
    return [
        index,
        tindex,
        txn,
        snapshot,
        epochs,
        offsets,
        edges,
        offset_edges,
        props,
        metadata,
        quorum,
        kafka07,
    ]


def logfile_input(rng: random.Random) -> bytes:
    kind = rng.randrange(len(LOG_KINDS))
    data = h.mutate(rng, rng.choice(_log_seeds()))
    if rng.random() < 0.05:  # long runs: zero tails, many lines, deep JSON
        # log-uniform lengths up to 20,000: every size still comes, the long ones (a
        # node per line or entry, rendered and checked) no longer take 90% of the run
        n = int(20000 ** rng.random())
        data += rng.choice((b"\0", b"\n", b"0 0\n", b"[", b'{"a":', b"9")) * n
    return bytes([kind]) + data


def run_logfile(data: bytes) -> None:
    from kdissect.protocol import ondisk
    from kdissect.sources.logdir import CHECKPOINT_COLUMNS

    if not data:
        return
    kind, buf = LOG_KINDS[data[0] % len(LOG_KINDS)], data[1:]
    if kind == "offset_index":
        tree = ondisk.offset_index(buf, 100)
    elif kind == "time_index":
        tree = ondisk.time_index(buf, 100)
    elif kind == "txn_index":
        tree = ondisk.txn_index(buf)
    elif kind == "producer_snapshot":
        tree = ondisk.producer_snapshot(buf)
    elif kind in CHECKPOINT_COLUMNS:
        tree = ondisk.checkpoint(buf, kind, CHECKPOINT_COLUMNS[kind])
    elif kind == "properties":
        tree = ondisk.properties(buf, "meta.properties")
    elif kind == "quorum_state":
        tree = ondisk.quorum_state(buf)
    else:
        pos, out = 0, []
        while pos + 4 <= len(buf) and len(out) < 10_000:
            node = ondisk.kafka07_message(buf, pos, len(buf), 0)
            out.append(node)
            if node.length <= 0:
                break
            pos += node.length
        return
    json.dumps(tree.to_json(False), default=str)
    tree.findings()
    for leaf in tree.own_leaves():
        assert 0 <= leaf.offset <= leaf.end <= len(buf), (kind, leaf.name, leaf.offset, leaf.end)
        if kind in CHECKPOINT_COLUMNS and isinstance(leaf.value, int):
            # a number Java would not read (parseInt: the header lines, partition, epoch;
            # parseLong: offsets) is marked, never taken
            bits = 32 if leaf.name in ("version", "count", "partition", "epoch") else 64
            assert -(1 << (bits - 1)) <= leaf.value < 1 << (bits - 1), (kind, leaf.name, leaf.value)


# -- bounded JSON (kdissect/protocol/json_bounded.py) -------------------------------------

_JSON_SEEDS = [
    b'{"a": [1, 2.5, -3e7, "x\\u00e9", null, true, {"b": {}}]}',
    b"[[[[]]]]",
    b'"\\ud800"',
    b"123456789012345678901234567890",
    b'{"a": 1, "a": 2}',
]


def json_input(rng: random.Random) -> bytes:
    data = h.mutate(rng, rng.choice(_JSON_SEEDS))
    if rng.random() < 0.1:
        n = rng.randint(1, 5000)
        data = rng.choice(
            (
                b"[" * n + b"]" * n,
                b'{"a":' * n + b"1" + b"}" * n,
                b"9" * n,
                b"-" + b"9" * n,
                b"[" * n,
            )
        )
    return data


def run_json(data: bytes) -> None:
    from kdissect.protocol.json_bounded import MAX_DEPTH, JsonError, depth, load_json

    try:
        doc = load_json(data)
    except JsonError:
        return
    assert depth(doc) <= MAX_DEPTH


# -- schema registry answers and schema texts (kdissect/schemas_source.py) ------------------

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": ["null", "int"], "default": None},
        {
            "name": "d",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    ],
}
_ANSWER_SEEDS = [
    json.dumps(a).encode()
    for a in (
        {"schema": json.dumps(ORDER)},
        {
            "schema": json.dumps(ORDER),
            "schemaType": "AVRO",
            "references": [{"name": "shop.E", "subject": "e-value", "version": 1}],
        },
        {
            "schema": json.dumps(
                {"type": "object", "title": "T", "properties": {"a": {"type": "integer"}}}
            ),
            "schemaType": "JSON",
        },
        {"schema": '"string"'},
        42,
        {"schema": 42},
        {"schema": "{}", "references": "oops"},
    )
]


def answer_input(rng: random.Random) -> bytes:
    return h.mutate(rng, rng.choice(_ANSWER_SEEDS))


class _Answers:
    """A registry whose every answer is ``data`` (no network): the client's checks of
    an answer's shape, its references and the schema text it holds."""

    def __init__(self, data: bytes):
        from kdissect.schemas_source import Registry

        self.registry = Registry("http://registry.invalid", None)
        self.registry.get = self._get  # type: ignore[method-assign]
        self.data = data

    def _get(self, path: str):
        from kdissect.bounded import InputError, load_json
        from kdissect.schemas_source import SchemaError

        try:
            return load_json(self.data, "answer")
        except InputError as e:
            raise SchemaError(str(e)) from None


def run_answer(data: bytes) -> None:
    from kdissect.schemas_source import SchemaError

    try:
        _Answers(data).registry.schema(1)
    except SchemaError:
        pass


def schema_input(rng: random.Random) -> bytes:
    kind = rng.randrange(2)
    seed = json.dumps(ORDER if kind == 0 else json.loads(json.loads(_ANSWER_SEEDS[2])["schema"]))
    return bytes([kind]) + h.mutate(rng, seed.encode())


def run_schema(data: bytes) -> None:
    from kdissect.schemas_source import SchemaError, parse_schema

    if not data:
        return
    try:
        parse_schema(data[1:].decode("utf-8", "replace"), ("avro", "json")[data[0] % 2], "fuzz")
    except SchemaError:
        pass


# -- TLS key logs (files and pcapng Decryption Secrets Blocks) -------------------------------

_KEYLOG_SEEDS = [
    b"# comment\nCLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n",
    b"CLIENT_HANDSHAKE_TRAFFIC_SECRET " + b"01" * 32 + b" " + b"02" * 48 + b"\r\n"
    b"SERVER_TRAFFIC_SECRET_0 " + b"01" * 32 + b" " + b"03" * 32 + b"\n\n\n",
]


def keylog_input(rng: random.Random) -> bytes:
    data = h.mutate(rng, rng.choice(_KEYLOG_SEEDS))
    if rng.random() < 0.05:
        data += rng.choice((b"\n", b"\r", b" ", b"x")) * rng.randint(1, 100_000)
    return data


def run_keylog(data: bytes) -> None:
    from kdissect.capture.tls.keylog import KeyLog

    keys = KeyLog()
    keys.add_text(data)
    keys.problems()
    keys.add_text(data.decode("latin-1"))
    for (label, random_), secret in keys.secrets.items():
        assert len(random_) == 32 and 1 <= len(secret) <= 64, label


def targets() -> dict:
    """name: (make an input from an rng, run the target on it, what to save beside it)."""
    return {
        "logfile": (logfile_input, run_logfile, lambda a: (a, "")),
        "json": (json_input, run_json, lambda a: (a, "")),
        "answer": (answer_input, run_answer, lambda a: (a, "")),
        "schema": (schema_input, run_schema, lambda a: (a, "")),
        "keylog": (keylog_input, run_keylog, lambda a: (a, "")),
    }


def replay(target: str, data: bytes) -> bool:
    """Run a saved input of one of these targets; False when the target is not one."""
    found = targets().get(target)
    if found is None:
        return False
    found[1](data)
    return True
