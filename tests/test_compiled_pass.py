"""The compiled reassembler's per-connection pass (native/src/reasm.rs ``pair``: whole
messages of a connection in the simple state framed, their request headers read and
paired with their answers in Rust, Python handed each request and each exchange)
against the Python path it stands for: everything the engine makes of a file (messages,
exchanges, findings, gaps, notes: tests/support/native_check.py) is the same with the
pass, without it (the compiled reassembler handing Python every whole message) and on
the pure-Python path, on every capture of captures/ and on damaged and cut copies, in
small and large read blocks (where batches end decides when connections are paired and
where first pieces of messages wait) and under budgets small enough to take over."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kdissect.capture import pcapfile
from kdissect.sources import pcap as pcap_source
from kdissect.sources.pcap import read_captures
from kdissect.stream.sink import Collect
from tests.support.damage import damage
from tests.support.native_check import _compare, _engine_view

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").rglob("*.pcap"))
# the captures of many small exchanges the pass is for (TLS with its keys)
DENSE = ["kafka44-cluster.pcap", "kafka-kraft-cluster.pcap", "tls/kafka44-tls.pcap"]


@pytest.fixture(autouse=True)
def _built():
    try:
        from kdissect import _native  # noqa: F401  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail("the compiled packet path is not built (pip install -e .)")


def _keys(path: Path) -> str | None:
    keys = path.with_suffix(".keys")
    return str(keys) if keys.exists() else None


def _divergence(
    path: Path, blocks: tuple[int, ...], budget: int | None = None, keys: str | None = None
) -> str | None:
    """Where the pass's view differs from the compiled path's without it or the pure
    path's, or None."""
    pure = _engine_view(str(path), True, budget, keys=keys)
    for block in blocks:
        without = _engine_view(str(path), False, budget, block, keys=keys, passing=False)
        with_pass = _engine_view(str(path), False, budget, block, keys=keys)
        for name, other in (("without the pass", without), ("pure", pure)):
            differs = _compare(other, with_pass)
            if differs:
                return f"block {block}, {name}: {differs}"
    return None


def _events(monkeypatch, path: Path, block: int, keys: str | None = None) -> Counter[int]:
    """The compiled reassembler's events by kind, reading ``path``."""
    seen: Counter[int] = Counter()
    rows = pcap_source.CaptureDissector.rows

    def counted(self, batch):
        seen.update(r[0] for r in batch if len(r) not in (1, 11))
        return rows(self, batch)

    monkeypatch.setattr(pcap_source.CaptureDissector, "rows", counted)
    monkeypatch.delenv("KDISSECT_PURE", raising=False)
    monkeypatch.setattr(pcapfile, "_BLOCK", block)
    log = None
    if keys is not None:
        from kdissect.capture.tls import KeyLog

        log = KeyLog()
        log.add_text(Path(keys).read_bytes())
    read_captures([str(path)], Collect(), keys=log)
    return seen


@pytest.mark.parametrize("name", DENSE)
def test_the_pass_pairs_most_messages_of_dense_traffic(monkeypatch, name):
    """On a cluster's traffic (and small messages over TLS) most requests and answers
    are read and paired in Rust: events 10 and 11, not 9 (a whole message for Python's
    framer and correlator) -- else the pass would be a no-op these tests cannot see."""
    path = ROOT / "captures" / name
    seen = _events(monkeypatch, path, 4096, _keys(path))
    assert seen[10] > 5 and seen[11] > 5, seen
    assert seen[10] + seen[11] > seen[9], seen


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_repo_captures_alike_with_and_without_the_pass(path):
    assert _divergence(path, (256, 4096), keys=_keys(path)) is None


@pytest.mark.parametrize("name", DENSE)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_damaged_copies_alike(tmp_path, name, seed):
    """Lost, reordered and cut segments and a start mid-stream: gaps, holes, answers
    without their requests, messages begun inside -- each hands the connection back
    to Python first."""
    path = ROOT / "captures" / name
    data, _ = damage(path.read_bytes(), seed=seed, drop=0.02 * seed, snaplen=None)
    f = tmp_path / "damaged.pcap"
    f.write_bytes(data)
    assert _divergence(f, (512, 4096), keys=_keys(path)) is None


@pytest.mark.parametrize("name", DENSE)
def test_cut_copies_alike(tmp_path, name):
    """Files that end anywhere: the flush at the end hands every paired connection back
    before it closes them (requests left unanswered, messages cut)."""
    path = ROOT / "captures" / name
    data = path.read_bytes()
    for cut in (len(data) // 7, len(data) // 3 + 11, len(data) * 2 // 3 + 5):
        f = tmp_path / f"cut{cut}.pcap"
        f.write_bytes(data[:cut])
        assert _divergence(f, (2048,), keys=_keys(path)) is None, cut


@pytest.mark.parametrize("budget", [20_000, 200_000])
def test_the_budget_taking_over_hands_back_first(budget):
    """A budget small enough that Python's reassembler takes over mid-file: the pass
    hands every paired connection back before."""
    path = ROOT / "captures" / "kafka44-cluster.pcap"
    assert _divergence(path, (1024,), budget) is None


def test_hand_backs_happen_where_first_pieces_wait(monkeypatch, tmp_path):
    """A message begun in one batch and whole in a later one hands its connection back
    where its first piece came (event 13); anything else not paired, where it comes
    (event 12). Small blocks end batches inside messages: both happen, and the result
    is the reference's (above)."""
    path = ROOT / "captures" / "kafka-kraft-cluster.pcap"
    seen = _events(monkeypatch, path, 512)
    assert seen[13] > 0 and seen[12] > 0, seen
    assert _divergence(path, (512,)) is None


@pytest.mark.slow
@pytest.mark.parametrize("name", DENSE)
def test_many_damaged_copies_alike(tmp_path, name):
    path = ROOT / "captures" / name
    for seed in range(4, 24):
        data, _ = damage(path.read_bytes(), seed=seed, drop=0.01 * (seed % 5), snaplen=None)
        f = tmp_path / f"{seed}.pcap"
        f.write_bytes(data)
        for budget in (None, 50_000):
            assert _divergence(f, (300, 2048), budget, keys=_keys(path)) is None, (seed, budget)


def test_a_hand_back_where_a_first_piece_waits_comes_first(monkeypatch, tmp_path):
    """An answer begun while its connection is paired, not whole when the events are
    taken: the connection is handed back in the answer's first piece's place (event
    13), as it stood then. Something else handed it back later in the same events (a
    request's bad size: event 12); Python takes the first hand-back, and the requests
    and answers the pass read between the two as whole messages of its own (event 9)."""
    from tests.support.tcp_mix import answer_begun_then_bad_request

    stale = []
    back = pcap_source.CaptureDissector._pass_back
    monkeypatch.setattr(
        pcap_source.CaptureDissector,
        "_pass_back",
        lambda self, cid, a, b: (stale.append(cid not in self.passes), back(self, cid, a, b)),
    )
    for pad in range(0, 60, 3):
        path = tmp_path / f"{pad}.pcap"
        path.write_bytes(answer_begun_then_bad_request(pad))
        assert _divergence(path, (4096,)) is None, pad
    assert any(stale) and not all(stale), stale


def test_connections_past_the_pass_bound_are_not_listed_each_batch(monkeypatch, tmp_path):
    """One direction only (requests never answered): a connection's pending requests
    pass the pass's bound (64) and it is never taken. Its pending requests were listed
    for the pass after every batch that brought it data (up to 4,096 of them: a one-way
    capture's --stats took 5.7x the CPU); past the bound they are not listed at all.
    The output stays the pure path's."""
    from kdissect.stream.connection import PASS_PENDING
    from kdissect.stream.correlation import Correlator
    from tests.support.tcp_mix import unanswered_requests

    listed: list[int] = []
    plain = Correlator.plain
    monkeypatch.setattr(
        Correlator, "plain", lambda self: (listed.append(len(self)), plain(self))[1]
    )
    path = tmp_path / "one-way.pcap"
    path.write_bytes(unanswered_requests(20, 400))
    assert _divergence(path, (2048,)) is None
    assert listed and max(listed) <= PASS_PENDING, max(listed)


# -- KafkaConnection's side of the pass, on its own (no extension needed) -----------------


def _requests(count: int) -> list:
    """Whole requests of a repo capture, each expecting an answer and with an id of its
    own (none that the pass leaves to Python), in the order sent."""
    from kdissect.stream.connection import _NOT_PASSED
    from tests.test_captures import dissect, messages

    capture = ROOT / "captures" / "confluent-group.pcap"
    found, ids = [], set()
    for m in messages(dissect(capture)[0]):
        if m.direction == "request" and m.api_key not in _NOT_PASSED:
            if m.correlation_id not in ids:
                ids.add(m.correlation_id)
                found.append(m)
    return found[:count]


def _connection():
    from kdissect.stream.connection import KafkaConnection

    exchanges: list = []
    counter = iter(range(10**9))
    k = KafkaConnection(
        1, ("10.0.0.1", 50000), ("10.0.0.2", 9092), exchanges.append, [].append,
        lambda: next(counter),
    )  # fmt: skip
    return k, exchanges


def _said(exchanges) -> list:
    return [
        (
            ex.request.index,
            ex.request.data,
            ex.request.correlation_id,
            ex.seq,
            ex.expected,
            [(f.code, f.text()) for f in ex.findings],
            ex.response,
        )
        for ex in exchanges
    ]


def _fed(requests, passed_from: int | None, close: bool = True, back: bool = False):
    """The exchanges of a connection given ``requests`` (each after its size, one after
    the other): as Python frames them, or from ``passed_from`` on as the pass hands
    them (event 10's rows), handed back after them with ``back``."""
    from kdissect.protocol.message import request_head

    k, exchanges = _connection()
    offset = 0
    for i, m in enumerate(requests):
        if i == passed_from:
            assert k.passing() is not None
            k.pass_on()
        if passed_from is not None and i >= passed_from:
            key, version, corr, client_id, _, _ = request_head(m.data)
            k.passed_request((10, 1, offset + 4, m.data, 1.0 + i, i, key, version, corr, client_id))
        else:
            k.message(0, offset + 4, m.data, 1.0 + i, i)
        offset += 4 + len(m.data)
    if back:
        k.pass_back(offset, -1)
    if close:
        k.close()
    return _said(exchanges)


def test_a_connection_closed_while_passed_ends_its_queued_requests():
    """The pass hands a connection back before its close; should it not, ``close``
    ends the queued requests as the Python path ends its pending ones (unanswered)."""
    requests = _requests(4)
    expected = _fed(requests, None)
    assert len(expected) == 4 and all(said[5][0][0] == "unanswered" for said in expected)
    assert _fed(requests, 2) == expected
    assert _fed(requests, 0) == expected


def test_a_hand_back_pends_what_the_usual_case_refuses():
    """The pass never queues a request the correlator's usual case refuses (an id still
    pending): should it, the hand-back pends it as ``_request`` does (a reused id said),
    not only under assertions (``python -O``)."""
    one = _requests(2)
    requests = [one[0], one[1], one[0]]  # the first's id again while it is pending
    expected = _fed(requests, None)
    assert any(code == "correlation_reused" for said in expected for code, _ in said[5])
    assert _fed(requests, 1, back=True) == expected
    assert _fed(requests, 0, back=True) == expected
