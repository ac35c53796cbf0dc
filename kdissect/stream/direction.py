"""Which side of a TCP connection is the Kafka client, from the strongest evidence the
capture holds, in this order: who sent the SYN, who sent the TLS ClientHello, a Kafka
port (``-p``, 9092) or a broker listener named by the capture's own Metadata,
FindCoordinator or DescribeCluster answers, and last how the first bytes of each side
start (a request header's shape, answered by its correlation id).

The shape alone can mislead: a response whose correlation id is small reads as a
Produce request header. So when only the shape speaks, the other side's first bytes are
awaited (up to ``HOLD`` bytes a side, ``ALONE`` while one side is silent) to check that
they answer the request's correlation id.
Without the SYN either side may begin inside a message (an answer's tail can start like
a request while the client's first bytes end one): a request-shaped message is also
looked for further in, and answers by their correlation ids, within the first ``HOLD``
bytes of each side, at a cost per packet bounded whatever the bytes.
A wrong guess reads a whole connection backwards, and every "response" then becomes a
guess among hundreds of layouts.
"""

from __future__ import annotations

import itertools
import re
import struct
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from ..protocol import schemas
from ..protocol.apis import DESCRIBE_CLUSTER, FIND_COORDINATOR, METADATA
from ..protocol.values import bare_values
from .connection import plausible_request
from .framing import MAX_MESSAGE

HOLD = 2048  # bytes held per connection while the shape alone waits for an answer
# ... and while one side has said nothing and the other's first message is still
# arriving: a capture begun just before a large answer must see the client's next
# request (and its answer) before the answer's start, which may read as a request, is
# taken for the client's
ALONE = 1024 * 1024
SNIFF = 14  # bytes of a side that show a request header's start
# when a side may begin inside a message: how far into each side a request or an answer
# is looked for (the shape waits for an answer only until a side has sent this much), and
# how many places or messages are read in a call (a bound per packet, whatever the bytes)
SEARCH = HOLD
SEARCH_TRIES = 16
# what follows a request's size, as plausible_request reads it: an API key kdissect knows
# (below 256), a version up to 127, a correlation id >= 0 (found at C speed; each place
# then read in full)
_REQUEST_HEAD = re.compile(
    b"\\x00[\\x00-"
    + re.escape(bytes([min(max(schemas.all_versions()), 255)]))
    + b"]\\x00[\\x00-\\x7f][\\x00-\\x7f]"
)
NAMES_LISTENERS = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
MAX_LEARNED_PORTS = 4096  # listener ports learned per capture (a bound, not a real count)

# how sure each kind of evidence is
CERTAIN, HIGH, MEDIUM, LOW = "certain", "high", "medium", "low"
KINDS = ("SYN", "TLS ClientHello", "Kafka port", "listener port", "request shape")


class Verdict(NamedTuple):
    client: int  # the TCP direction (0: a -> b) the client sends
    by: str  # one of KINDS
    sure: str  # CERTAIN, HIGH, MEDIUM or LOW
    why: str = ""  # what the shape saw, when it decided

    @property
    def label(self) -> str:
        return f"{self.by}{': ' + self.why if self.why else ''} ({self.sure})"


NOT_KAFKA = Verdict(-1, "", "")


def decide(
    a: tuple[str, int],
    b: tuple[str, int],
    starts: Sequence[bytes | bytearray],
    *,
    syn: bool,
    hello: tuple[str, int] | None,
    ports: frozenset[int],
    listeners: AbstractSet[int],
    servers: AbstractSet[tuple[str, int]],
    detect: bool,
    held: int,
    ending: bool,
) -> Verdict | None:
    """``starts``: the first bytes of each direction (0: a -> b); ``syn``: ``a`` sent
    the SYN; ``hello``: who sent the TLS ClientHello, if seen; ``listeners``: the ports
    of listeners the capture's answers name; ``servers``: the addresses Kafka clients
    opened connections to (their SYN); ``detect``: whether the
    bytes must show Kafka (else a Kafka port said it); ``held``: bytes held so far;
    ``ending``: the connection ends (decide with what there is). None: not yet known."""
    side = _strong(a, b, syn, hello, ports, listeners, servers)
    if side is not None:
        if not detect or side.by in ("Kafka port", "listener port"):
            return side
        start = starts[side.client]
        if len(start) >= SNIFF:
            return side if plausible_request(start) else NOT_KAFKA
        # a broker never speaks first, but its answer may come before the request in
        # file order (packets reordered, timestamps kept): only a server talking alone
        # for HOLD bytes is not Kafka
        if ending or held >= HOLD:
            return NOT_KAFKA
        return None
    return _shape(starts, detect, held, ending)


def _strong(
    a: Any,
    b: Any,
    syn: bool,
    hello: Any,
    ports: frozenset[int],
    listeners: AbstractSet[int],
    servers: AbstractSet[tuple[str, int]],
) -> Verdict | None:
    if syn:
        return Verdict(0, "SYN", CERTAIN)
    if hello is not None:
        return Verdict(0 if hello == a else 1, "TLS ClientHello", CERTAIN)
    on = (a[1] in ports, b[1] in ports)
    if on[0] != on[1]:
        return Verdict(1 if on[0] else 0, "Kafka port", HIGH)
    if listeners or servers:
        # a listener named by an answer is named by host name or address: its port is
        # what can be compared; one a client opened (its SYN) is that very address
        named = (a[1] in listeners or a in servers, b[1] in listeners or b in servers)
        if named[0] != named[1]:
            return Verdict(1 if named[0] else 0, "listener port", HIGH)
    return None


class _Answered(NamedTuple):
    answers: int  # how many of a side's requests the other side answers
    framed: bool  # found by framing the other side from its first byte (not looked for)


def _answered(starts: Sequence[bytes | bytearray], d: int, at: int) -> _Answered:
    """How many of side ``d``'s requests does the other side answer (their correlation
    ids)? Side ``d``'s messages are framed from ``at`` (where its first request-shaped
    message starts) as far as their sizes chain in what was held: a capture begun
    mid-connection may hold answers to requests sent before it began, so the first ones
    need not pair. The other side's answers are framed from its first byte; when its
    sizes do not chain from there it began inside a message, and an answer is looked
    for by correlation id where a chain of sizes starts (an answer with a small
    correlation id also reads as a request: counting tells the real requests, which
    several answers pair, from such a reading, which one may pair by chance)."""
    asked = {m[8:12] for m in _framed(starts[d], 12, at=at)}
    other = starts[1 - d]
    framed = {m[4:8] for m in _framed(other, 8)}
    if not asked or _chains_from(other, 0):
        return _Answered(len(asked & framed), True)
    tries = [SEARCH_TRIES]  # (shared by the correlation ids: a bound per call)
    return _Answered(sum(1 for c in asked if c in framed or _answer_inside(other, c, tries)), False)


def _answer_inside(data: bytes | bytearray, correlation: bytes, tries: list[int]) -> bool:
    """Is there an answer with ``correlation`` in ``data``'s first ``SEARCH`` bytes
    whose sizes chain on? Looked for from the end (the latest bytes are the likeliest
    to be whole answers; a small correlation id is also a common value inside a
    message), ``tries[0]`` places at most, found at C speed."""
    end = min(len(data), SEARCH)
    while tries[0] > 0:
        found = data.rfind(correlation, 4, end)
        if found < 0:
            return False
        tries[0] -= 1
        if _chains_from(data, found - 4):
            return True
        end = found + 3  # (the next place to look ends before this one)
    return False


def _chains_from(data: bytes | bytearray, pos: int) -> bool:
    """Do size-prefixed messages follow one another from ``pos`` through what was
    held: up to its last byte, or into a last message the bytes cut after at least two
    whole ones (a garbage size is often large enough to run past the end)? Up to
    ``SEARCH_TRIES`` messages are followed."""
    whole = 0
    while pos + 4 <= len(data) and whole < SEARCH_TRIES:
        size = struct.unpack_from(">i", data, pos)[0]
        if not 4 <= size <= MAX_MESSAGE:
            return False
        if pos + 4 + size > len(data):
            return whole >= 2
        pos += 4 + size
        whole += 1
    return whole >= 1


def _request_at(data: bytes | bytearray) -> int | None:
    """Where a side's first request-shaped message starts: 0 when its first bytes start
    like a request; else (a capture begun inside a message) the first later place in
    its first ``SEARCH`` bytes that starts like one and from which sizes chain on.
    Candidates are found at C speed and at most ``SEARCH_TRIES`` of them are read: each
    call costs the same however the bytes look."""
    if plausible_request(data):
        return 0
    heads = _REQUEST_HEAD.finditer(data, 5, min(len(data), SEARCH))
    for found in itertools.islice(heads, SEARCH_TRIES):
        pos = found.start() - 4
        if plausible_request(data, pos) and _chains_from(data, pos):
            return pos
    return None


def _framed(data: bytes | bytearray, least: int, most: int = 8, at: int = 0) -> list[bytes]:
    """The first (up to ``most``) size-prefixed messages of ``data`` from ``at`` whose
    sizes chain (each at least ``least`` bytes with its size; the last may be cut where
    the bytes end, if its first ``least`` are there)."""
    out: list[bytes] = []
    pos = at
    while len(out) < most and pos + least <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        if not 4 <= size <= MAX_MESSAGE:
            break
        out.append(bytes(data[pos : pos + least]))
        pos += 4 + size
    return out


def _final(starts: Sequence[bytes | bytearray], held: int, ending: bool) -> bool:
    """Must the shape decide with what it holds? When the connection ends, at ``ALONE``
    bytes, and else once each side has sent ``HOLD`` bytes. While one side has said
    nothing, the other is held until it has sent two whole messages (its first may be
    a large answer whose start reads as a request: the silent side's next request, and
    its answer, tell) and ``HOLD`` bytes."""
    if ending or held >= ALONE:
        return True
    if starts[0] and starts[1]:
        return min(len(starts[0]), len(starts[1])) >= HOLD
    return held >= HOLD and _whole_messages(starts[0] or starts[1]) >= 2


def _whole_messages(data: bytes | bytearray) -> int:
    """How many size-prefixed messages from the start of ``data`` are whole (up to 2)."""
    pos = n = 0
    while n < 2 and pos + 4 <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        if not 4 <= size <= MAX_MESSAGE or pos + 4 + size > len(data):
            break
        pos += 4 + size
        n += 1
    return n


def _shape(
    starts: Sequence[bytes | bytearray], detect: bool, held: int, ending: bool
) -> Verdict | None:
    final = _final(starts, held, ending)
    at = [_request_at(s) for s in starts]
    if at[0] is None and at[1] is None:
        if not detect:  # on a Kafka port: the reassembler's guess
            return (
                Verdict(0, "request shape", LOW, "neither side starts like a request")
                if final or all(len(s) >= SNIFF for s in starts)
                else None
            )
        # (a capture begun inside an answer: the broker speaks first; the client's next
        # request tells, unless a side talks alone for HOLD bytes)
        if all(len(s) >= SNIFF for s in starts) or final:
            return NOT_KAFKA
        return None
    found = [_Answered(0, True) if p is None else _answered(starts, d, p) for d, p in enumerate(at)]
    answered = [n for n, _ in found]
    # Seen without its start, either side may begin inside a message: an answer's tail
    # can start like a request while the client's first bytes end one. An answer tells;
    # it is waited for while the bytes looked at are still coming in, and (as before)
    # until what was held is all there is while a side has sent next to nothing or both
    # start like requests
    lengths = [len(s) for s in starts]
    waiting = not final and (max(lengths) < SEARCH or min(lengths) < 8 or at[0] == at[1] == 0)
    if answered[0] != answered[1]:
        d = 0 if answered[0] > answered[1] else 1
        if not answered[1 - d] and (found[d].framed or answered[d] >= 2):
            return Verdict(d, "request shape", HIGH, "answered by its correlation id")
        # (an answer looked for inside bytes begun mid-message may be there by chance:
        # one alone, or more against some of the other's, is a guess)
        if answered[d] >= 2 * answered[1 - d] and (not waiting or answered[d] >= 3):
            return Verdict(
                d,
                "request shape",
                MEDIUM,
                f"{answered[d]} of its correlation ids answered, {answered[1 - d]} of the other's",
            )
    if waiting:
        return None
    if (at[0] is None) != (at[1] is None):
        d = 0 if at[0] is not None else 1
        why = (
            "the other side sent nothing"
            if not starts[1 - d]
            else "the other side does not start like one"
            if at[d] == 0
            else "a request-shaped message inside its first bytes; none in the other's"
        )
        return Verdict(d, "request shape", MEDIUM if at[d] == 0 else LOW, why)
    # both hold request-shaped messages and neither is answered by the other: a version
    # the tables know is the better sign, else the reassembler's guess (the higher port
    # is the client's)
    known = [
        schemas.is_known(*struct.unpack_from(">hh", s, 4 + (p or 0)))
        for s, p in zip(starts, at, strict=True)
    ]
    if known[0] != known[1]:
        return Verdict(
            known.index(True),
            "request shape",
            LOW,
            "both sides start like requests; one in a version kdissect knows",
        )
    return Verdict(0, "request shape", LOW, "both sides start like requests")


def listeners(data: bytes, api_key: int, api_version: int | None) -> set[tuple[str, int]]:
    """The (host, port) of the brokers an answer names."""
    if api_version is None:
        return set()
    body = bare_values(data, "response", api_key, api_version)
    found: set[tuple[str, int]] = set()
    _walk(body, found)
    return found


def _walk(value: Any, found: set[tuple[str, int]]) -> None:
    if isinstance(value, dict):
        host, port = value.get("host"), value.get("port")
        if isinstance(host, str) and type(port) is int and 0 < port < 65536:
            found.add((host, port))
        for v in value.values():
            if isinstance(v, (dict, list)):
                _walk(v, found)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list)):
                _walk(v, found)
