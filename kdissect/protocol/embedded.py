"""Structures carried inside ``bytes`` fields: the consumer protocol's subscriptions and
assignments (JoinGroup, SyncGroup, DescribeGroups), SASL tokens (SaslAuthenticate) and
the principal an Envelope forwards. Secrets (PLAIN passwords, SCRAM proofs, OAUTHBEARER
tokens) are marked ``secret``."""

from __future__ import annotations

import struct
from functools import lru_cache
from itertools import chain
from typing import Any, Iterable, Iterator

from .apis import DESCRIBE_GROUPS, ENVELOPE, JOIN_GROUP, SASL_AUTHENTICATE, SYNC_GROUP, TABLE
from .context import Abort, Decoding, charge_nodes
from .decode import read_struct
from .grammar import parse_grammar
from .layout import Field, Struct
from .node import Node
from .reader import Reader


_CONSUMER_PROTOCOL = """
ConsumerProtocol Subscription (Version: 0) => version [topics] user_data
  version => INT16
  topics => STRING
  user_data => NULLABLE_BYTES
ConsumerProtocol Subscription (Version: 1) => version [topics] user_data [owned_partitions]
  version => INT16
  topics => STRING
  user_data => NULLABLE_BYTES
  owned_partitions => topic [partitions]
    topic => STRING
    partitions => INT32
ConsumerProtocol Subscription (Version: 2) => version [topics] user_data [owned_partitions] generation_id
  version => INT16
  topics => STRING
  user_data => NULLABLE_BYTES
  owned_partitions => topic [partitions]
    topic => STRING
    partitions => INT32
  generation_id => INT32
ConsumerProtocol Subscription (Version: 3) => version [topics] user_data [owned_partitions] generation_id rack_id
  version => INT16
  topics => STRING
  user_data => NULLABLE_BYTES
  owned_partitions => topic [partitions]
    topic => STRING
    partitions => INT32
  generation_id => INT32
  rack_id => NULLABLE_STRING
ConsumerProtocol Assignment (Version: 0) => version [assigned_partitions] user_data
  version => INT16
  assigned_partitions => topic [partitions]
    topic => STRING
    partitions => INT32
  user_data => NULLABLE_BYTES
"""


@lru_cache(maxsize=1)
def _consumer_layouts() -> dict[tuple[str, int], Struct]:
    messages = parse_grammar(_CONSUMER_PROTOCOL).messages
    return {(kind.title(), version): st for (_api, kind, version), st in messages.items()}


def _at(node: Node | None, path: str) -> Iterator[Node]:
    """Nodes under ``node`` at a path like ``members[].metadata``."""
    if node is None:
        return
    head, _, rest = path.partition(".")
    is_array = head.endswith("[]")
    child = node.child(head[:-2] if is_array else head)
    if child is None:
        return
    targets = [c for c in child.children if not c.name.startswith("_")] if is_array else [child]
    for t in targets:
        if rest:
            yield from _at(t, rest)
        else:
            yield t


def _value(node: Node | None, name: str) -> Any:
    c = node.child(name) if node is not None else None
    return c.value if c is not None else None


def _content(node: Node) -> tuple[int, int] | None:
    if not isinstance(node.value, (bytes, bytearray)) or node.children:
        return None
    return node.end - len(node.value), node.end


def _consumer(data: bytes, node: Node, kind: str, ctx: Decoding, strict: bool) -> None:
    span = _content(node)
    if span is None or span[1] - span[0] < 2:
        return
    start, end = span
    version = struct.unpack_from(">h", data, start)[0]
    if version < 0:
        return
    layout = _consumer_layouts()[(kind, min(version, 3 if kind == "Subscription" else 0))]
    r = Reader(data, start, end)
    holder = Node("", "struct", start)
    try:
        read_struct(r, layout, kind.lower(), ctx, holder)
    except Abort:
        pass  # the failing field is marked and holds the bytes that remain
    sub = holder.children[0]
    if strict and sub.problems():
        return  # nothing says these bytes are a consumer protocol structure
    prefix = Node(
        "_length",
        "int32" if start - node.offset == 4 else "uvarint",
        node.offset,
        start - node.offset,
        len(node.value),
    )
    node.children = [prefix, *sub.children]
    if r.remaining:
        node.add(
            Node(
                "_newer_fields",
                "bytes",
                r.pos,
                r.remaining,
                data[r.pos : end],
                note=f"fields of {kind.lower()} v{version} that kdissect does not know",
            )
        )
    node.note = f"consumer protocol {kind.lower()} v{version}"


def decode_consumer_bytes(data: bytes, node: Node, kind: str, ctx: Decoding) -> None:
    """Decode a ``bytes`` node holding a consumer-protocol Subscription or Assignment (as
    group metadata on __consumer_offsets stores them) in place, if it decodes cleanly."""
    _consumer(data, node, kind, ctx, strict=True)


def _consumer_fields(body: Node, data: bytes, key: int, direction: str, ctx: Decoding) -> None:
    proto = _value(body, "protocol_type")
    # without a protocol_type (older versions), decode only what decodes cleanly
    strict = proto != "consumer"
    if proto not in (None, "consumer"):
        return
    spots: list[tuple[str, str]] = []
    if key == JOIN_GROUP:
        spots = (
            [("protocols[].metadata", "Subscription")]
            if direction == "request"
            else [("members[].metadata", "Subscription")]
        )
    elif key == SYNC_GROUP:
        spots = (
            [("assignments[].assignment", "Assignment")]
            if direction == "request"
            else [("assignment", "Assignment")]
        )
    elif key == DESCRIBE_GROUPS and direction == "response":
        for group in _at(body, "groups[]"):
            if _value(group, "protocol_type") != "consumer":
                continue
            for m in _at(group, "members[].member_metadata"):
                _consumer(data, m, "Subscription", ctx, False)
            for m in _at(group, "members[].member_assignment"):
                _consumer(data, m, "Assignment", ctx, False)
        return
    for path, kind in spots:
        for node in _at(body, path):
            _consumer(data, node, kind, ctx, strict)


def _sasl(body: Node, data: bytes, ctx: Decoding) -> None:
    for node in _at(body, "auth_bytes"):
        span = _content(node)
        if span is None:
            continue
        start, end = span
        if sasl_parts(data[start:end]):
            node.add(Node("_length", "int32", node.offset, start - node.offset, end - start))
            add_sasl_fields(node, data, start, end, ctx)


def add_sasl_fields(node: Node, data: bytes, start: int, end: int, ctx: Decoding) -> None:
    """Children for the SASL token in ``data[start:end]`` (the bytes of ``node``): its
    fields, with secrets redacted in the children and masked in ``node.value``. Each
    field and separator is charged to the message's node budget; once it is spent, the
    rest of the token is one raw node (finding node_budget), secret when a secret lies
    in it, so the token's masking never depends on the budget."""
    token = data[start:end]
    parts = sasl_parts(token)
    if not parts:
        return
    kind, fields = parts
    node.note = kind
    masked = None if ctx.options.show_secrets else bytearray(token)
    has_secret = False
    pos = 0
    cut: Node | None = None
    for name, a, b, secret in fields:  # lazily: a token may hold millions
        if secret:
            has_secret = True
            if masked is not None:
                masked[a:b] = b"*" * (b - a)
        if cut is not None:
            cut.secret = cut.secret or secret
            continue
        try:
            charge_nodes(Reader(data, start + pos, end), node, ctx, 2)
        except Abort:
            cut = node.children[-1]
            cut.secret = secret
            continue
        if a > pos:
            node.add(Node("_separator", "bytes", start + pos, a - pos, token[pos:a]))
        child = node.add(
            Node(name, "string", start + a, b - a, token[a:b].decode("utf-8", "replace"))
        )
        if secret:
            child.secret = True
            if not ctx.options.show_secrets:
                child.value = "<redacted>"
        pos = b
    if cut is None and pos < len(token):
        node.add(Node("_separator", "bytes", start + pos, len(token) - pos, token[pos:]))
    if masked is not None and has_secret:
        node.value = bytes(masked)
        if cut is not None:
            cut.value = node.value[pos:]


def sasl_parts(token: bytes) -> tuple[str, Iterable[tuple[str, int, int, bool]]] | None:
    """Recognise a SASL token; return its kind and its (name, start, end, secret) spans
    (SCRAM's are produced as they are read: a hostile token may hold millions)."""
    text = token.decode("latin-1")
    if text.count("\x00") == 2 and not text.startswith(("n,", "y,", "p=")):
        a = text.index("\x00")
        b = text.index("\x00", a + 1)
        return "SASL/PLAIN", [
            ("authzid", 0, a, False),
            ("username", a + 1, b, False),
            ("password", b + 1, len(text), True),
        ]
    if "auth=Bearer " in text:
        i = text.index("auth=Bearer ") + len("auth=Bearer ")
        j = text.find("\x01", i)
        return "SASL/OAUTHBEARER", [("token", i, j if j >= 0 else len(text), True)]
    if text.startswith(("n,", "y,", "p=", "c=", "r=", "v=", "e=")) and "=" in text:
        kind = {
            "c": "client-final",
            "r": "server-first",
            "v": "server-final",
            "e": "server-error",
        }.get(text[0], "client-first")
        spans = _scram_spans(text)
        first = next(spans, None)
        if first is None:
            return None
        return f"SASL/SCRAM {kind}", chain([first], spans)
    return None


def _scram_spans(text: str) -> Iterator[tuple[str, int, int, bool]]:
    """The ``x=value`` attributes of a SCRAM message, comma-separated."""
    pos = 0
    while pos <= len(text):
        comma = text.find(",", pos)
        stop = len(text) if comma < 0 else comma
        if stop - pos >= 2 and text[pos + 1] == "=":
            yield _SCRAM_NAMES.get(text[pos], text[pos]), pos + 2, stop, text[pos] == "p"
        pos = stop + 1


_SCRAM_NAMES = {
    "n": "username",
    "r": "nonce",
    "s": "salt",
    "i": "iterations",
    "c": "channel_binding",
    "p": "proof",
    "v": "server_signature",
    "e": "error",
    "a": "authzid",
}


# Kafka's DefaultPrincipalData (clients' common/message/DefaultPrincipalData.json, v0,
# flexible), after the int16 version MessageUtil.toVersionPrefixedBytes puts first: what
# DefaultKafkaPrincipalBuilder.serialize writes into an Envelope's request_principal
_PRINCIPAL = Struct(
    "DefaultPrincipalData",
    (
        Field("version", "int16"),
        Field("type", "string"),
        Field("name", "string"),
        Field("token_authenticated", "bool"),
    ),
    flexible=True,
)


def _principal(body: Node, data: bytes, ctx: Decoding) -> None:
    """An Envelope's ``request_principal`` as Kafka's default serde writes it; bytes a
    custom principal builder (KafkaPrincipalSerde) wrote in its own format stay bytes,
    with a note saying so."""
    node = body.child("request_principal")
    span = _content(node) if node is not None else None
    if node is None or span is None:
        return
    start, end = span
    r = Reader(data, start, end)
    holder = Node("", "struct", start)
    try:
        read_struct(r, _PRINCIPAL, "principal", ctx, holder)
    except Abort:
        pass
    got = holder.children[0]
    if got.problems() or r.remaining or _value(got, "version") != 0:
        node.note = "not Kafka's DefaultPrincipalData v0: a custom KafkaPrincipalSerde's format"
        return
    prefix = Node("_length", "uvarint", node.offset, start - node.offset, len(node.value))
    node.children = [prefix, *got.children]
    node.note = f"DefaultPrincipalData v0: {_value(got, 'type')}:{_value(got, 'name')}"


def decode_embedded(
    body: Node | None, data: bytes, api_key: int | None, direction: str, ctx: Decoding
) -> None:
    """Decode the structures inside the ``bytes`` fields of a message's ``body``."""
    if body is None or not ctx.options.embedded:
        return
    if api_key == SASL_AUTHENTICATE:
        _sasl(body, data, ctx)
    elif api_key in _CONSUMER_GROUP_APIS:
        _consumer_fields(body, data, api_key, direction, ctx)
    elif api_key == ENVELOPE and direction == "request":
        _principal(body, data, ctx)


# the group APIs whose bytes fields hold consumer-protocol structures
_CONSUMER_GROUP_APIS = frozenset(k for k, a in TABLE.items() if a.embedded and not a.sasl)
