"""Which API is this? Rank (api_key, version, direction) candidates by how cleanly the
bytes decode as each: every byte consumed without a problem first, then plausibility
(printable strings, known error codes, sane timestamps), then the evidence a decode
offers (how many fields it explains)."""

from __future__ import annotations

from dataclasses import dataclass

from . import schemas
from .context import Options
from .message import Message, decode_request, decode_response
from .names import api_name
from .node import Node

_FULL = Options(records=False, embedded=False)
# every layout is first tried within a small node budget, so guessing costs little even
# for a huge message; only the few that get that far without a real problem are decoded
# in full (at most _FULL_TRIES of them, the ones that got furthest)
_PROBE = Options(records=False, embedded=False, max_nodes=1_000)
_FULL_TRIES = 8


@dataclass
class Candidate:
    api_key: int
    api_version: int
    direction: str
    score: float
    clean: bool
    versions: tuple[int, ...] = ()      # other versions that decode identically

    @property
    def label(self) -> str:
        vs = self.versions or (self.api_version,)
        span = f"v{vs[0]}" if len(vs) == 1 else f"v{vs[0]}-v{vs[-1]}" if \
            list(vs) == list(range(vs[0], vs[-1] + 1)) else "v" + ",".join(map(str, vs))
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
        elif n.ktype in ("int32", "int64") and isinstance(v, int) and n.name.endswith(
                ("_ms", "timestamp")) and not (-2 <= v < 2**45):
            penalty += 1
    return penalty, leaves


def _score(msg: Message, size: int) -> tuple[float, bool]:
    problems = msg.tree.problems()
    if problems:
        # how far it got before the first problem, as a weak hint
        first = min((n.offset for n in msg.tree.walk() if n.problem), default=0)
        return 50.0 * first / max(size, 1), False
    penalty, leaves = _plausibility(msg.tree)
    return 100.0 - 10 * penalty + min(leaves, 50) / 10, True


def _shape(msg: Message) -> int:
    """A fingerprint of the decoded fields (versions with the same one decode alike)."""
    return hash(tuple((n.name, n.offset, n.length, repr(n.value)) for n in msg.tree.walk()
                      if not n.children))


def _budget_only(msg: Message) -> bool:
    """The probe stopped only because its node budget ran out."""
    codes = {code for _path, code, _reason in msg.tree.findings()}
    return codes == {"node_budget"}


def _first_problem(msg: Message) -> int:
    return min((n.offset for n in msg.tree.walk() if n.problem), default=0)


def guess(data: bytes, direction: str | None = None, api_key: int | None = None,
          api_version: int | None = None, limit: int = 5) -> list[Candidate]:
    """Ranked candidates for a message (bytes after the size prefix)."""
    scored: list[tuple[Candidate, int]] = []      # (candidate, shape of a clean decode)
    if direction in (None, "request") and len(data) >= 8:
        msg = decode_request(data, _FULL)
        if msg.api_key is not None and schemas.is_known(msg.api_key, msg.api_version) \
                and api_key in (None, msg.api_key) and api_version in (None, msg.api_version):
            score, clean = _score(msg, len(data))
            scored.append((Candidate(msg.api_key, msg.api_version, "request", score + 1, clean),
                           _shape(msg) if clean else 0))
    if direction in (None, "response"):
        probed: list[tuple[int, int, int]] = []         # (progress, key, version) to redo
        for key, versions in schemas.all_versions().items():
            if api_key is not None and key != api_key:
                continue
            for version in versions:
                if api_version is not None and version != api_version:
                    continue
                msg = decode_response(data, key, version, _PROBE)
                if _budget_only(msg):
                    probed.append((_first_problem(msg), key, version))
                    continue
                score, clean = _score(msg, len(data))
                scored.append((Candidate(key, version, "response", score, clean),
                               _shape(msg) if clean else 0))
        probed.sort(key=lambda p: -p[0])
        for i, (progress, key, version) in enumerate(probed):
            if i < _FULL_TRIES:
                msg = decode_response(data, key, version, _FULL)
                score, clean = _score(msg, len(data))
                shape = _shape(msg) if clean else 0
            else:                   # not tried in full: as far as the probe got
                score, clean, shape = 50.0 * progress / max(len(data), 1), False, 0
            scored.append((Candidate(key, version, "response", score, clean), shape))
    # versions that decode to the very same fields are one answer, not competitors
    groups: dict[tuple, Candidate] = {}
    for cand, shape in scored:
        k = (cand.api_key, cand.direction, shape) if cand.clean else (cand.api_key,
                                                                      cand.api_version,
                                                                      cand.direction)
        best = groups.get(k)
        if best is None:
            cand.versions = (cand.api_version,)
            groups[k] = cand
        else:
            best.versions = tuple(sorted(best.versions + (cand.api_version,)))
            best.score = max(best.score, cand.score)
    ranked = sorted(groups.values(), key=lambda c: (-c.clean, -c.score, c.api_key,
                                                    c.versions[0]))
    for c in ranked:
        c.api_version = c.versions[0]
    return ranked[:limit]


def confidence(cands: list[Candidate]) -> str:
    """A one-line verdict on the top candidate."""
    if not cands or not cands[0].clean:
        return "no API decodes these bytes cleanly; showing the closest attempt"
    clean = [c for c in cands if c.clean]
    if len(clean) == 1:
        return "high: the only API/version that decodes every byte cleanly"
    gap = clean[0].score - clean[1].score
    level = "high" if gap >= 5 else "medium" if gap >= 1 else "low"
    return (f"{level}: {len(clean)} candidates decode cleanly; runner-up "
            f"{clean[1].label} scores {gap:.1f} lower")
