"""Which API is this? Rank (api_key, version, direction) candidates by how cleanly the
bytes decode as each: every byte consumed without a problem first, then plausibility
(printable strings, known error codes, sane timestamps), then the evidence a decode
offers (how many fields it explains)."""

from __future__ import annotations

from typing import Any

from functools import lru_cache

from . import schemas
from .context import Options
from .message import Message, decode_bare_body, decode_request, decode_response
from .names import api_name
from .node import Node
from .plain import Compared

_FULL = Options(records=False, embedded=False)
# every layout is first tried within a small node budget, so guessing costs little even
# for a huge message; only the few that get that far without a real problem are decoded
# in full (at most _FULL_TRIES of them, the ones that got furthest)
_PROBE = Options(records=False, embedded=False, max_nodes=1_000)
_FULL_TRIES = 8


class Candidate(Compared):
    """One reading of unknown bytes: which API, version and direction, and how well."""

    _fields = ("api_key", "api_version", "direction", "score", "clean", "versions", "leaves")

    def __init__(
        self,
        api_key: int,
        api_version: int,
        direction: str,
        score: float,
        clean: bool,
        versions: tuple[int, ...] = (),  # other versions that decode identically
        # the leaves of a clean decode, (name, offset, length, value): what tells it apart
        leaves: tuple[Any, ...] = (),
    ):
        self.api_key, self.api_version, self.direction = api_key, api_version, direction
        self.score, self.clean, self.versions, self.leaves = score, clean, versions, leaves

    @property
    def label(self) -> str:
        vs = self.versions or (self.api_version,)
        span = (
            f"v{vs[0]}"
            if len(vs) == 1
            else f"v{vs[0]}-v{vs[-1]}"
            if list(vs) == list(range(vs[0], vs[-1] + 1))
            else "v" + ",".join(map(str, vs))
        )
        return f"{api_name(self.api_key)} {span} {self.direction}"


def _plausibility(tree: Node) -> tuple[float, int]:
    penalty, leaves = 0.0, 0
    for n in tree.walk():
        if n.children or n.name.startswith("_"):
            continue
        leaves += 1
        v = n.value
        if n.ktype == "string" and isinstance(v, str) and v:
            bad = sum(1 for ch in v if not ch.isprintable())
            penalty += 5 * bad / len(v)
        elif n.note and n.note.startswith("UNKNOWN_ERROR_CODE"):
            penalty += 3
        elif (
            n.ktype in ("int32", "int64")
            and isinstance(v, int)
            and n.name.endswith(("_ms", "timestamp"))
            and not (-2 <= v < 2**45)
        ):
            penalty += 1
    return penalty, leaves


# problems that only say the bytes ran out: a field (or the count of one) that goes past
# their end, as in the first bytes of a longer message
_RAN_OUT = frozenset({"truncated", "bad_length", "array_past_end"})


def _score(
    msg: Message, size: int, bad: list[Node] | None = None, cut: bool = False
) -> tuple[float, bool, bool]:
    """(score, clean, whether its fields count: clean, or cut where the bytes end)."""
    bad = _problem_nodes(msg) if bad is None else bad
    if bad:
        if cut and all(n.code in _RAN_OUT and "negative" not in (n.problem or "") for n in bad):
            # the first bytes of a longer message: a decode that is plausible up to where
            # the bytes end ranks by the fields it read, above any other failure (at most
            # 50) and below every clean decode
            penalty, leaves = _plausibility(msg.tree)
            return max(0.0, 50.0 + 0.9 * min(leaves, 50) - 10 * penalty), False, True
        # how far it got before the first problem, as a weak hint
        first = min(n.offset for n in bad)
        return 50.0 * first / max(size, 1), False, False
    penalty, leaves = _plausibility(msg.tree)
    if cut:
        # a layout complete exactly where the bytes end though the prefix says more
        # follow: no better than one that ran out of them, and not clean
        return max(0.0, 50.0 + 0.9 * min(leaves, 50) - 10 * penalty), False, True
    return 100.0 - 10 * penalty + min(leaves, 50) / 10, True, True


def _problem_nodes(msg: Message) -> list[Node]:
    """The nodes with a problem, in one walk (a guess looks at hundreds of decodes)."""
    return [n for n in msg.tree.walk() if n.problem]


def _leaves(msg: Message) -> tuple[Any, ...]:
    return tuple(
        (n.name, n.offset, n.length, n.value)
        for n in msg.tree.walk()
        if not n.children and not n.name.startswith("_")
    )


def _shape(leaves: tuple[Any, ...]) -> int:
    """A fingerprint of the decoded fields (versions with the same one decode alike)."""
    return hash(tuple((name, off, length, repr(v)) for name, off, length, v in leaves))


def _budget_only(bad: list[Node]) -> bool:
    """The probe stopped only because its node budget ran out."""
    return bool(bad) and all(n.code == "node_budget" for n in bad)


def believable_request(api_key: int, api_version: int, client_id: str | None) -> bool:
    """Bytes whose header reads as this request can be one: a version kdissect knows, or
    a newer one (``schemas.readable``) behind a client id that says so (a response's
    correlation id 14 reads as a "Produce v14" header; its next bytes are no client id)."""
    if schemas.is_known(api_key, api_version):
        return True
    return (
        schemas.readable(api_key, api_version)
        and bool(client_id)
        and client_id is not None
        and client_id.isprintable()
    )


def guess(
    data: bytes,
    direction: str | None = None,
    api_key: int | None = None,
    api_version: int | None = None,
    body: bool = False,
    cut: bool = False,
) -> list[Candidate]:
    """Every candidate for a message (bytes after the size prefix; with ``body``, bytes
    of a body without its header), clean ones first, best first; versions that decode
    to the very same fields are grouped into one candidate. ``cut``: the bytes are the
    first of a longer message (its size prefix says so), so running out of them is no
    evidence against a reading."""
    scored: list[Candidate] = []
    if direction in (None, "request") and len(data) >= 8 and not body:
        msg = decode_request(data, _FULL)
        if (
            msg.api_key is not None
            and msg.api_version is not None
            and believable_request(msg.api_key, msg.api_version, msg.client_id)
            and (not cut or bool(msg.client_id))  # (first bytes: the header must say more)
            and api_key in (None, msg.api_key)
            and api_version in (None, msg.api_version)
        ):
            scored.append(_candidate(msg, "request", len(data), bonus=1, cut=cut))
    directions = [
        d for d in ("response", "request") if direction in (None, d) and (body or d == "response")
    ]
    for d in directions:
        probed: list[tuple[int, int, int]] = []  # (progress, key, version) to redo
        # versions of an API with the very same layout (and header) decode alike: each
        # layout is decoded once, its result copied to the others (a quarter fewer decodes)
        alike: dict[int, Candidate | int] = {}
        for key, versions in schemas.all_versions().items():
            if api_key is not None and key != api_key:
                continue
            for version in versions:
                if api_version is not None and version != api_version:
                    continue
                sig = _signature(key, version, d, body)
                done = alike.get(sig)
                if done is None:
                    msg = _decode(data, key, version, d, body, _PROBE)
                    bad = _problem_nodes(msg)
                    done = alike[sig] = (
                        min(n.offset for n in bad)
                        if _budget_only(bad)
                        else _candidate(msg, d, len(data), bad=bad, cut=cut)
                    )
                if isinstance(done, int):
                    probed.append((done, key, version))
                else:
                    scored.append(_copy(done, version))
        probed.sort(key=lambda p: -p[0])
        full: dict[int, Candidate] = {}
        for i, (progress, key, version) in enumerate(probed):
            if i < _FULL_TRIES:
                sig = _signature(key, version, d, body)
                if sig not in full:
                    full[sig] = _candidate(
                        _decode(data, key, version, d, body, _FULL), d, len(data), cut=cut
                    )
                scored.append(_copy(full[sig], version))
            else:  # not tried in full: as far as the probe got
                scored.append(
                    Candidate(key, version, d, 50.0 * progress / max(len(data), 1), False)
                )
    groups: dict[tuple[Any, ...], Candidate] = {}
    for cand in scored:
        k = (  # (a clean decode, or one cut where the bytes end: by what it read)
            (cand.api_key, cand.direction, cand.clean, _shape(cand.leaves))
            if cand.clean or cand.leaves
            else (cand.api_key, cand.api_version, cand.direction)
        )
        best = groups.get(k)
        if best is None:
            cand.versions = (cand.api_version,)
            groups[k] = cand
        else:
            best.versions = tuple(sorted(best.versions + (cand.api_version,)))
            best.score = max(best.score, cand.score)
    ranked = sorted(groups.values(), key=lambda c: (-c.clean, -c.score, c.api_key, c.versions[0]))
    for c in ranked:
        c.api_version = c.versions[0]
    return ranked


@lru_cache(maxsize=None)
def _signature(key: int, version: int, direction: str, body: bool) -> int:
    """What decides how bytes decode as this kind (its layout, and its header's version),
    as a number alike kinds share (layouts are compared once per process: hashing one
    walks it whole)."""
    header = (
        None
        if body
        else schemas.response_header_version(key, version)
        if direction == "response"
        else schemas.request_header_version(key, version)
    )
    return _SIGNATURES.setdefault(
        (key, schemas.layout(key, version, direction), header), len(_SIGNATURES)
    )


_SIGNATURES: dict[tuple[Any, ...], int] = {}


def _copy(cand: Candidate, version: int) -> Candidate:
    return Candidate(
        cand.api_key, version, cand.direction, cand.score, cand.clean, leaves=cand.leaves
    )


def _decode(
    data: bytes, key: int, version: int, direction: str, body: bool, options: Options
) -> Message:
    if body:
        return decode_bare_body(data, key, version, direction, options)
    return decode_response(data, key, version, options)


def _candidate(
    msg: Message,
    direction: str,
    size: int,
    bonus: float = 0,
    bad: list[Node] | None = None,
    cut: bool = False,
) -> Candidate:
    score, clean, counts = _score(msg, size, bad, cut)
    assert msg.api_key is not None and msg.api_version is not None, "read as a known API"
    return Candidate(
        msg.api_key,
        msg.api_version,
        direction,
        score + bonus,
        clean,
        leaves=_leaves(msg) if counts else (),
    )


def distinguish(a: Candidate, b: Candidate) -> str:
    """Where two clean candidates first read the bytes differently."""
    for x, y in zip(a.leaves, b.leaves):
        if x[:3] != y[:3]:
            return (
                f"at byte {min(x[1], y[1])}: {a.label} reads {_leaf(x)}, {b.label} reads {_leaf(y)}"
            )
    if len(a.leaves) != len(b.leaves):
        return f"{a.label} reads {len(a.leaves)} fields, {b.label} {len(b.leaves)}"
    return f"{a.label} and {b.label} read the same fields: nothing in the bytes tells them apart"


def _leaf(leaf: tuple[Any, ...]) -> str:
    name, offset, length, value = leaf
    shown = repr(value) if not isinstance(value, (bytes, bytearray)) else f"{len(value)} bytes"
    if len(shown) > 30:
        shown = shown[:27] + "..."
    return f"{name} = {shown} ({length} byte{'s' if length != 1 else ''} at {offset})"


SHORT = 20  # responses shorter than this are too short to tell most APIs apart


def confidence(cands: list[Candidate], size: int | None = None) -> str:
    """A one-line verdict on the top candidate."""
    if not cands or not cands[0].clean:
        return "no API decodes these bytes cleanly; showing the closest attempt"
    clean = [c for c in cands if c.clean]
    top = clean[0]
    if len(top.leaves) == 1 and isinstance(top.leaves[0][3], (bytes, bytearray)):
        # (SaslAuthenticate v0's body: one length-prefixed field reads any bytes)
        return f"low: {top.label} reads every byte as one field, as it would any bytes"
    if len(clean) == 1:
        return "high: the only API/version that decodes every byte cleanly"
    if size is not None and size < SHORT and cands[0].direction == "response":
        return (
            f"ambiguous: {size} bytes are too few to tell {len(clean)} clean candidates "
            f"apart; give --api/--version"
        )
    gap = clean[0].score - clean[1].score
    level = "high" if gap >= 5 else "medium" if gap >= 1 else "low"
    return (
        f"{level}: {len(clean)} candidates decode cleanly; runner-up "
        f"{clean[1].label} scores {gap:.1f} lower"
    )
