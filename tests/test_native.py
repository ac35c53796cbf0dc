"""The compiled packet path (native/, Rust) against the pure-Python reference: the same
segments, secrets, counts and warnings (tests/support/native_check.py) on every repo
capture (also as pcapng and gzip), damaged captures and the hostile set; the same
messages, exchanges, gaps and notes after TCP reassembly (Rust's, native/src/reasm.rs,
against capture/tcp.py), also under memory budgets small enough that the compiled
reassembler hands its state to Python mid-file; and the same printed output in every
format. ./scripts/test builds the extension (pip install -e .):
a checkout without it fails here rather than testing one path twice."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kdissect.cli import main
from tests.support.damage import damage
from kdissect.capture import pcapfile
from kdissect.sources import pcap as pcap_source
from kdissect.sources.pcap import read_captures
from kdissect.stream.sink import Collect
from tests.support.native_check import divergence, engine_divergence, engine_divergences, to_pcapng

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap")) + [ROOT / "captures/tls/kafka-tls.pcap"]


@pytest.fixture(autouse=True)
def _built():
    try:
        from kdissect import _native  # noqa: F401  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail(
            "the compiled packet path is not built: install with cargo on the PATH "
            "(pip install -e ., as ./scripts/test does)"
        )


def test_version_says_which_path():
    out = subprocess.run(
        [sys.executable, "-m", "kdissect", "--version"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "packet path: compiled" in out
    pure = subprocess.run(
        [sys.executable, "-m", "kdissect", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KDISSECT_PURE": "1", "PATH": "/usr/bin"},
    )
    assert "packet path: pure Python (KDISSECT_PURE is set)" in pure.stdout


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_repo_captures_scan_alike(path, tmp_path):
    data = path.read_bytes()
    variants = {
        "pcap": data,
        "pcap.gz": gzip.compress(data, 1),
        "gz-cut": gzip.compress(data, 1)[: len(data) // 3],
        "pcapng": to_pcapng(data, b"CLIENT_RANDOM 00 11\n"),
        "pcapng-be-ns": to_pcapng(data, big_endian=True, tsresol=9),
        "pcapng-cut": to_pcapng(data)[: len(data) // 2 + 7],
    }
    for name, content in variants.items():
        f = tmp_path / name
        f.write_bytes(content)
        assert divergence(str(f)) is None, name


def test_pcap_and_pcapng_give_the_same_times(tmp_path):
    """One instant is one float from either format: the CI run that printed a Fetch as 1.3 ms
    from a pcap and 1.2 ms from the same packets in pcapng (editcap --inject-secrets)."""
    from tests.support.native_check import native_scan, python_scan

    checked = 0
    for path in CAPTURES:
        ng = tmp_path / (path.name + "ng")
        ng.write_bytes(to_pcapng(path.read_bytes()))
        for scan in (python_scan, native_scan):
            times = [e[1] for e in scan(str(path)).events if len(e) > 1]
            assert times == [e[1] for e in scan(str(ng)).events if len(e) > 1], path.name
            checked += len(times)
    assert checked > 1000


BUDGETS = [None, 200_000, 20_000]  # the default, and two that make the Rust side hand over


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_repo_captures_reassemble_alike(path):
    assert engine_divergences(str(path), BUDGETS) is None


def test_tight_budget_hands_over_mid_file(monkeypatch):
    """A budget the capture's partial messages can spend: the compiled reassembler gives
    Python's its state part-way (its giving up is the reference's) and the result is
    the pure path's, to the byte."""
    taken = []
    take_over = pcap_source.CaptureDissector._take_over
    monkeypatch.setattr(
        pcap_source.CaptureDissector,
        "_take_over",
        lambda self: (taken.append(self.packets), take_over(self)),
    )
    path = str(ROOT / "captures" / "mtu1500.pcap")
    assert engine_divergence(path, 20_000) is None
    assert taken, "the budget never got tight: the hand-over was not exercised"


# the compiled reassembler's events that hand Python a direction's bytes: data, a whole
# message, a request and an answer its pass read, a first piece where a pass ends
CHUNKS = (1, 9, 10, 11, 13)


def _chunks_and_messages(monkeypatch, capture: str) -> tuple[int, int]:
    """(data chunks Python was handed, Kafka messages) reading ``capture`` on the
    compiled path, with blocks small enough that Python learns early what is Kafka."""
    chunks = []
    rows = pcap_source.CaptureDissector.rows
    monkeypatch.setattr(
        pcap_source.CaptureDissector,
        "rows",
        lambda self, batch: (
            chunks.extend(r for r in batch if len(r) != 11 and r[0] in CHUNKS),
            rows(self, batch),
        ),
    )
    monkeypatch.delenv("KDISSECT_PURE", raising=False)
    monkeypatch.setattr(pcapfile, "_BLOCK", 4096)
    sink = Collect()
    read_captures([str(ROOT / "captures" / capture)], sink)
    messages = sum((x.request is not None) + (x.response is not None) for x in sink.exchanges)
    return len(chunks), messages


def test_kafka_sizes_tracked_in_rust(monkeypatch):
    """On MTU-1500 traffic Python gets a few chunks per message, not one per segment."""
    chunks, messages = _chunks_and_messages(monkeypatch, "mtu1500.pcap")
    segments = divergence_free_segments(ROOT / "captures" / "mtu1500.pcap")
    assert messages and chunks
    assert chunks <= 3 * messages < segments, (chunks, messages, segments)


def test_a_message_whole_within_a_batch_reaches_python_as_one_chunk(monkeypatch):
    """A message begun at a segment's start and complete before Python takes the
    compiled reassembler's events comes as one chunk, not its first bytes and then the
    rest (on a 3-node cluster's traffic: 217,000 chunks for 163,000 messages before,
    169,000 after). The memory budget's view is unchanged: tests above compare the
    exchanges and gaps under budgets that give up partial messages."""
    chunks, messages = _chunks_and_messages(monkeypatch, "kafka44-cluster.pcap")
    assert messages > 500
    assert chunks <= messages * 1.05, (chunks, messages)  # was 603 for 540


def test_whole_messages_reach_python_without_their_size(monkeypatch):
    """A size-tracked direction's chunk that is exactly one whole message, Python's
    framer holding nothing, comes as event 9: the message without its size (Python
    copied it less its size before). The exchanges are the reference's (tests above)."""
    kinds = []
    rows = pcap_source.CaptureDissector.rows
    monkeypatch.setattr(
        pcap_source.CaptureDissector,
        "rows",
        lambda self, batch: (
            kinds.extend(r[0] for r in batch if len(r) != 11 and r[0] in CHUNKS),
            rows(self, batch),
        ),
    )
    monkeypatch.delenv("KDISSECT_PURE", raising=False)
    monkeypatch.setattr(pcapfile, "_BLOCK", 4096)
    read_captures([str(ROOT / "captures" / "kafka44-cluster.pcap")], Collect())
    # (10 and 11: whole messages the compiled pass read and paired, without their size)
    whole = kinds.count(9) + kinds.count(10) + kinds.count(11)
    assert whole > len(kinds) / 2, (whole, len(kinds))  # 314 of 552


def divergence_free_segments(path: Path) -> int:
    from tests.support.native_check import python_scan

    return sum(1 for e in python_scan(str(path)).events if len(e) == 11 and e[9])


@pytest.mark.slow  # whole CLI pipelines, both paths
@pytest.mark.parametrize(
    "capture", ["kafka-python-codecs", "aiokafka", "legacy-0.8.2", "confluent-group", "mtu1500"]
)
def test_damaged_captures_scan_and_print_alike(capture, tmp_path):
    for seed in range(3):
        data, _ = damage((ROOT / "captures" / f"{capture}.pcap").read_bytes(), seed=seed)
        f = tmp_path / f"{seed}.pcap"
        f.write_bytes(data)
        assert divergence(str(f)) is None, seed
        assert engine_divergences(str(f), BUDGETS) is None, seed
        assert_same_output(f, ["--format", "jsonl"], ["--stats"], [])


def test_kdissect_pure_set_in_the_process_reaches_every_held_compiled_function():
    """A run started with KDISSECT_PURE set in this process uses none of the compiled
    functions modules hold as globals (``native_ext.bind``), and the next run without it
    uses them again: the in-process comparisons of both paths (assert_same_output) compare
    two paths, not the compiled one with itself."""
    import kdissect.protocol.internal
    import kdissect.protocol.message
    import kdissect.render.lines
    import kdissect.render.log_lines
    import kdissect.stream.record_table  # noqa: F401  (every module that binds one)
    from kdissect.protocol import native_ext

    def held() -> list[tuple[object, object]]:
        return [(getattr(sys.modules[m], n), fb) for m, n, _, fb in native_ext._BOUND]

    args = ["pcap", "--no-tui", "-j", "1", str(ROOT / "captures" / "acks0.pcap")]
    assert len(native_ext._BOUND) >= 5
    for pure in ("1", "0", "1"):
        res = CliRunner().invoke(main, args, env={"KDISSECT_PURE": pure})
        assert res.exit_code == 0, res.output
        if pure == "1":
            assert all(value is fallback for value, fallback in held())
        else:
            assert all(v is not None and v is not fallback for v, fallback in held())
    native_ext.refresh()  # as the environment is now, for the tests after this one


def assert_same_output(path: Path, *views: list[str]) -> None:
    for view in views:
        args = ["pcap", "--no-tui", "-j", "1", str(path), *view]
        runs = [CliRunner().invoke(main, args, env={"KDISSECT_PURE": pure}) for pure in ("1", "0")]
        assert [r.exit_code for r in runs][0] == runs[1].exit_code, view
        assert runs[0].output == runs[1].output, (path.name, view)


@pytest.mark.slow
def test_repo_capture_output_alike():
    """All the views of one capture (the golden digests cover every capture, run on
    whichever path is built: tests/test_golden_outputs.py)."""
    assert_same_output(
        ROOT / "captures" / "kafka-java-consumer-group.pcap",
        [],
        ["-V"],
        ["--format", "jsonl"],
        ["--stats"],
    )


@pytest.mark.slow
def test_hostile_set_scans_alike(hostile, tmp_path):
    """Every capture of the hostile set, both paths compared. The comparisons are
    independent: a pool of one process per core makes them side by side, the largest
    files first (spawned, not forked: pytest's process may hold threads). A file's pure
    side (both scans compared, then the pure engine view under each budget) is one task
    and its compiled view under each budget one more, compared by digest (native_check.
    view_digest), so that the largest file does not hold one process while the other is
    idle; a digest that differs is compared whole again, as engine_divergence.

    The 200,000-connection file (~70 CPU-s here: a pure view of 19, three compiled of
    16) is compared as a 20,000-connection one written alike, at a tenth of the cost
    (the pure path spends nothing of any budget on either, every exchange being whole;
    its connections come from one client address, the big file's from four). Its size
    is what test_hostile.py's runs through the CLI are about."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from tests.support.native_check import native_digest, pure_digests
    from tests.test_hostile_files import mh

    names = sorted(p.name for p in hostile.iterdir() if p.is_file())
    assert len(names) > 30 and "connections-200k.pcap" in names
    fewer = tmp_path / "connections-20k.pcap"
    mh.many_connections(fewer, 20_000)
    pcaps = sorted(
        [hostile / n for n in names if "pcap" in n and n != "connections-200k.pcap"] + [fewer],
        key=lambda p: p.stat().st_size,
        reverse=True,
    )
    assert len(pcaps) > 10
    with ProcessPoolExecutor(
        min(4, os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        pure, native = {}, {}
        for path in pcaps:  # submitted in this order, the largest first
            pure[path] = pool.submit(pure_digests, str(path), BUDGETS)
            for budget in BUDGETS:
                native[path, budget] = pool.submit(native_digest, str(path), budget)
        compared = 0
        for path in pcaps:
            differs, digests = pure[path].result()
            assert differs is None, (path.name, differs)
            assert set(digests) == set(BUDGETS)
            for budget in BUDGETS:
                if native[path, budget].result() != digests[budget]:
                    differs = engine_divergence(str(path), budget)
                    assert differs is None, (path.name, budget, differs)
                compared += 1
    assert compared == len(pcaps) * len(BUDGETS)


@pytest.mark.parametrize("block", [256, 2048])
def test_a_start_not_yet_confirmed_is_framed_by_python_alone(block):
    """Connections seen without their SYN (tests/data/unconfirmed-start.pcap: generated,
    several connections, some begun before the capture, reordered and lost segments):
    the compiled reassembler took over the size tracking of a framer whose first
    message was not confirmed yet, so it held bytes the framer needed to check the start
    with, and the two paths framed different messages (frames, times, pairings)."""
    path = ROOT / "tests" / "data" / "unconfirmed-start.pcap"
    assert engine_divergence(str(path), None, block) is None


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_mixed_faulty_captures_reassemble_alike(tmp_path):
    """Seeded captures of several connections with reordered, retransmitted, lost and
    odd-sized segments, some seen without their SYN (tests/support/tcp_mix.py): the
    same exchanges and gaps on both paths, at the default budget (800 such captures
    found the unconfirmed start above; small budgets: below)."""
    from tests.support.tcp_mix import mixed_capture

    for seed in range(120):
        path = tmp_path / f"{seed}.pcap"
        path.write_bytes(mixed_capture(seed))
        for block in (256, 2048):
            assert engine_divergence(str(path), None, block) is None, (seed, block)


# seeds of tcp_mix.mixed_capture that differed under a budget small enough to give up
# partial messages (out of 3,000 seeds at 4 kB, 50 kB and 200 kB)
SPENT = [(18, 200_000), (30, 200_000), (171, 200_000), (105, 4_000), (148, 4_000)]
SPENT += [(266, 4_000), (732, 4_000), (2737, 50_000)]


@pytest.mark.parametrize("seed,budget", SPENT)
def test_mixed_faulty_captures_give_up_alike_under_a_small_budget(tmp_path, seed, budget):
    """The reference gave up a partial message (the budget spent) where the compiled
    reassembler had not handed over: its headroom test missed what the reference's
    budget counts without a segment of its own. Held segments a filled hole (or an
    overdue one) hands on are counted twice until the direction's charge drops (105,
    148, 266, 732, 30); so are those the flush at the end of the file hands on, and
    the bytes tracked in Rust were never in Python's budget (18, 171); the bytes held
    while a connection seen without its start is told TLS or not reach a framer at once
    when it is (2737)."""
    from tests.support.tcp_mix import mixed_capture

    path = tmp_path / f"{seed}.pcap"
    path.write_bytes(mixed_capture(seed))
    for block in (256, 2048):
        assert engine_divergence(str(path), budget, block) is None, block


def test_tracked_bytes_handed_over_mid_batch_leave_the_headroom(tmp_path):
    """Bytes the compiled reassembler tracked for a direction go to Python's framer when
    a hole is reported: Python's budget counts them only once it has the batch's events,
    so the headroom must lose them at once. Without that, the next segment's 3000 bytes
    spent the reference's budget unseen: it gave up the request there, the compiled
    path at the end, after another connection's request (tcp_mix.handed_mid_batch)."""
    from tests.support.tcp_mix import handed_mid_batch

    for pad in range(0, 64, 7):
        path = tmp_path / f"{pad}.pcap"
        path.write_bytes(handed_mid_batch(pad))
        assert engine_divergence(str(path), 8_500, 4096) is None, pad
