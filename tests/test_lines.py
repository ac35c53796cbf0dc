"""JSON lines of messages whose bodies enrichment kept are written directly
(render/lines.py ``_values_line``): the same text as encoding ``message_json``'s
object, on every message of the repo captures, with secrets masked and shown."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kdissect.protocol import Options
from kdissect.render.lines import _encode, message_json, message_line
from kdissect.render.records import json_bytes
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream.engine import Engine
from kdissect.stream.sink import Collect

# every repo capture but the four largest (fast tier; the golden digests hold them all)
CAPTURES = [
    p
    for p in sorted((Path(__file__).resolve().parents[1] / "captures").glob("*.pcap*"))
    if p.stat().st_size < 200_000
]


class _Kept(Collect):
    values_conv = staticmethod(json_bytes)  # enrichment keeps the bodies it reads


def _lines_compared(options: Options, sink_type: type = Collect, kept_only: bool = False) -> int:
    """Every message of CAPTURES (read into a ``sink_type``; ``kept_only``: those whose
    body enrichment kept): its line is the encoding of ``message_json``'s object.
    Returns how many were compared."""
    compared = 0
    for path in CAPTURES:
        sink = sink_type()
        Engine(CaptureFiles([str(path)]), sink, options).run()
        for ex in sink.exchanges:
            for m in ex.messages:
                if kept_only and m.values is None:
                    continue
                compared += 1
                slow = (
                    _encode(message_json(dataclasses.replace(m), options, ex, enriched_full=False))
                    + "\n"
                )
                assert message_line(m, options, ex, enriched_full=False) == slow, path.name
    return compared


@pytest.mark.parametrize("show_secrets", [False, True])
def test_kept_values_lines_match_message_json(show_secrets):
    kept = _lines_compared(Options(show_secrets=show_secrets), _Kept, kept_only=True)
    assert kept > 500  # the captures hold hundreds of such messages


def test_iso_is_datetimes():
    """``iso`` (the date of the last second kept, the microseconds rounded apart) writes
    what ``datetime`` writes, at microsecond roundings too (half to even, carried into
    the next second, minute, day and year), and says invalid outside 1970..9999."""
    import random
    from datetime import datetime, timezone

    from kdissect.render.lines import INVALID_TIME, iso

    rng = random.Random(43)
    times = [rng.uniform(0, 253402300799) for _ in range(20000)]
    times += [rng.uniform(1.7e9, 1.7e9 + 5) for _ in range(20000)]  # one second after another
    edges = [1_767_225_599 + f for f in (0.9999994, 0.9999995, 0.9999996, 0.0000005)]
    times += edges + [0.0, 0.0000005, 0.0000015, 253402300799.0, 1e9 + 0.5e-6]
    for ts in times:
        want = datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="microseconds")
        assert iso(ts) == want.replace("+00:00", "Z"), ts
    assert iso(-0.5) == iso(253402300800.0) == iso(float("nan")) == INVALID_TIME


@pytest.mark.parametrize("show_secrets", [False, True])
def test_every_line_is_its_objects_encoding(show_secrets):
    """Lines of messages with records (read by the values decoder, their batches encoded
    as read) and of messages read located are the encoding of ``message_json``'s object
    too: the direct writing and the compiled reader's hand-over change no byte."""
    seen = _lines_compared(Options(show_secrets=show_secrets))
    assert seen > 1000


@pytest.mark.parametrize("compiled", [True, False])
def test_both_line_writers_write_message_json(monkeypatch, compiled):
    """The compiled writer of a values-read line (native/src/line.rs ``json_line``) and
    its Python reference each write exactly the encoding of ``message_json``'s object."""
    from kdissect.render import lines
    from tests.support.native_check import require_compiled

    if compiled:
        require_compiled(lines, "_json_line")
    else:
        monkeypatch.setattr(lines, "_json_line", None)
    assert _lines_compared(Options(), _Kept) > 1000


def test_the_compiled_line_writes_times_as_iso_does():
    """Times at every rounding edge (half to even, carried into the next second, day,
    year), random ones over 1970..9999, and those outside it (null), the other fields
    null, text with escapes and non-ASCII: the compiled line is the Python one."""
    import random

    from kdissect.render import lines
    from kdissect.stream.model import KafkaMessage
    from tests.support.native_check import require_compiled

    require_compiled(lines, "_json_line")
    rng = random.Random(4343)
    times = [rng.uniform(0, 253402300799) for _ in range(5000)]
    times += [rng.uniform(1.7e9, 1.7e9 + 5) for _ in range(5000)]
    times += [1_767_225_599 + f for f in (0.9999994, 0.9999995, 0.9999996, 0.0000005)]
    times += [0.0, 0.0000005, 253402300799.0, 253402300798.9999996, -0.5, 253402300800.0]
    times += [float("nan"), float("inf"), 951782400.0, 4107542399.9999995]  # 2000-02-29
    for i, ts in enumerate(times):
        m = KafkaMessage(i, 3, ("request", "response")[i % 2], ts, 7, 4, b"\x00" * (i % 5))
        m.api_key = None if i % 3 == 0 else i % 80
        m.client_id = (None, 'é\t"cli\\ent\x01', "plain", "\U0001f600")[i % 4]
        m.how = "paired by correlation id" if i % 2 else None
        want = lines._values_line_py(m, None, '{"a": 1}', "[]")
        assert lines._values_line(m, None, '{"a": 1}') == want, ts


def _jsonl(*args: str) -> list[dict]:
    import json

    from click.testing import CliRunner

    from kdissect.cli import main

    run = CliRunner().invoke(main, ["pcap", "--format", "jsonl", *args])
    assert run.exit_code == 0, run.output
    return [json.loads(line) for line in run.stdout.splitlines()]


def _what(line: dict) -> tuple:
    """What a message line says that does not depend on the other files of the run."""
    if "tls_connection" in line:
        return ("tls", line["tls_connection"]["frame"], line["tls_connection"]["server"])
    return (line["frame"], line["ts"], line["api_key"], line["correlation_id"], line["size"])


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_json_lines_of_several_captures_say_which_file_each_line_is_from(jobs):
    """Frame numbers start again in each file: reading several, each line ends with the
    file it is from (the TLS connection lines too); reading one, there is no such member."""
    root = Path(__file__).parent.parent / "captures"
    files = [str(root / n) for n in ("acks0.pcap", "kafka-kraft-cluster.pcap", "tls13.pcap")]
    keys = ["--keylog", str(root / "tls13.keys")]
    together = _jsonl("-j", jobs, *files, *keys)
    assert [list(line)[-1] for line in together] == ["capture"] * len(together)
    for path in files:
        alone = _jsonl("-j", jobs, path, *keys)
        assert alone and all("capture" not in line for line in alone)
        mine = [_what(line) for line in together if line["capture"] == path]
        assert mine == [_what(line) for line in alone], path
    # the files' lines in the order of the files: frames start again at each
    order = [line["capture"] for line in together]
    assert order == sorted(order, key=files.index)


def test_summaries_of_several_captures_are_headed_by_their_file():
    """The text summary of several files heads each file's lines with its name (as
    head(1) does); of one file, no heading."""
    from click.testing import CliRunner

    from kdissect.cli import main

    root = Path(__file__).parent.parent / "captures"
    files = [str(root / n) for n in ("acks0.pcap", "kcat.pcap")]

    def lines(*paths: str) -> list[str]:
        run = CliRunner().invoke(main, ["pcap", "--no-tui", *paths])
        assert run.exit_code == 0, run.output
        return run.stdout.splitlines()

    alone = [lines(path) for path in files]
    assert all(line and not line[0].startswith("==>") for line in alone)
    assert lines(*files) == [
        line for path, mine in zip(files, alone) for line in [f"==> {path} <==", *mine]
    ]


def test_trees_to_a_pipe_take_their_width_from_columns_when_set():
    """`-V` to a pipe or file wraps its trees at 160 columns unless COLUMNS says how wide
    (``COLUMNS=90 kdissect pcap -V f.pcap | less``)."""
    from click.testing import CliRunner

    from kdissect.cli import main

    capture = str(Path(__file__).parent.parent / "captures" / "kafka-java-consumer-group.pcap")

    def widest_tree_line(columns: str | None) -> int:
        run = CliRunner().invoke(main, ["pcap", "-V", capture], env={"COLUMNS": columns})
        assert run.exit_code == 0, run.output
        return max(len(line) for line in run.stdout.splitlines() if line[:1] in "├└│ ")

    assert widest_tree_line("90") <= 90
    assert 90 < widest_tree_line(None) <= 160
    assert widest_tree_line("not a number") == widest_tree_line(None)


@pytest.mark.parametrize(
    "args,says",
    [
        (["pcap", "--stats", "--format", "jsonl", "CAP"], "--stats prints its tables instead"),
        (["pcap", "--format", "tsv", "-V", "CAP"], "-V shows field trees in the text format"),
        (["log", "DIR", "-o", "OUT"], "-o/--output is for --format parquet"),
        (["log", "--format", "jsonl", "-V", "DIR"], "-V shows field trees in the text format"),
    ],
)
def test_options_one_output_cannot_honour_are_refused(tmp_path, args, says):
    """They were silently dropped (--stats printed its tables, -V nothing, -o wrote
    nothing): a wrong command line says so, status 2."""
    from click.testing import CliRunner

    from kdissect.cli import main

    capture = str(Path(__file__).parent.parent / "captures" / "kcat.pcap")
    given = {"CAP": capture, "DIR": str(tmp_path), "OUT": str(tmp_path / "out")}
    run = CliRunner().invoke(main, [given.get(a, a) for a in args])
    assert run.exit_code == 2 and says in run.output, run.output
    assert not (tmp_path / "out").exists()


def test_summary_lines_name_the_findings_nothing_else_on_them_says():
    """A failed SCRAM login (the server-final's `e=unknown-user`) was silent on its line;
    the line now names it. What the status, the error names and `✗ N problems` say is
    not named again; three codes at most, the most severe first, the rest counted."""
    from kdissect.protocol.findings import Finding
    from kdissect.render.lines import exchange_plain, python_plain

    root = Path(__file__).parent.parent / "captures"
    sink = Collect()
    Engine(CaptureFiles([str(root / "sasl-scram.pcap")]), sink, Options()).run()
    failed = [e for e in sink.exchanges if "authentication_failed" in {f.code for f in e.findings}]
    assert failed
    for ex in failed:
        assert exchange_plain(ex, Options()).endswith("  ! authentication_failed")
    import copy

    ex = copy.copy(failed[0])
    ex.findings = []
    assert "!" not in exchange_plain(ex, Options())
    ex.findings = [
        Finding("unanswered", "", "request"),  # the status says it
        Finding("error_code", "NOT_LEADER_OR_FOLLOWER", "response"),  # the error names do
        Finding("no_api_versions", "", "request"),  # a note
        Finding("slow_response", "3 s", "response"),  # a warning
        Finding("throttled", "throttled 5 ms", "response"),
        Finding("removed_version", "Produce v0", "request"),
        Finding("clock_skew", "ahead", "request"),
    ]
    ex.status = "unanswered"
    for line in (exchange_plain(ex, Options()), python_plain(ex, Options())):
        marks = line.split("[unanswered]", 1)[1]
        assert "error_code" not in marks and "unanswered" not in marks
        named = [part.split()[1] for part in marks.split("  ") if part and part[0] in "✗!·"]
        assert len(named) == 3 and marks.endswith("  +2")
        assert "no_api_versions" not in named  # a note: the least severe, counted


def test_tsv_of_several_captures_names_each_lines_file():
    from click.testing import CliRunner

    from kdissect.cli import main

    root = Path(__file__).parent.parent / "captures"
    files = [str(root / "kcat.pcap"), str(root / "acks0.pcap")]
    rows = [
        line.split("\t")
        for line in CliRunner()
        .invoke(main, ["pcap", "--format", "tsv", *files])
        .stdout.splitlines()
    ]
    assert rows[0][-1] == "capture" and len({len(r) for r in rows}) == 1
    assert [r[-1] for r in rows[1:]] == sorted((r[-1] for r in rows[1:]), key=files.index)
    assert set(r[-1] for r in rows[1:]) == set(files)
    alone = CliRunner().invoke(main, ["pcap", "--format", "tsv", files[0]]).stdout.splitlines()
    assert alone[0].split("\t")[-1] == "finding"
    assert len(alone) - 1 == sum(r[-1] == files[0] for r in rows[1:])


def test_a_capture_on_standard_input_is_read_as_a_file_named_dash():
    """`tcpdump -w - ... | kdissect pcap -`: the same lines as from the file; named `-`
    where a file's name is shown."""
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    capture = root / "captures" / "kcat.pcap"

    def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kdissect", "pcap", "--no-tui", *args],
            input=stdin,
            capture_output=True,
            cwd=root,
        )

    piped = run("-", stdin=capture.read_bytes())
    assert piped.returncode == 0 and piped.stdout == run(str(capture)).stdout != b""
    both = run("--format", "jsonl", "-", "captures/acks0.pcap", stdin=capture.read_bytes())
    names = {line.split(b'"capture": ')[1][:-1] for line in both.stdout.splitlines()}
    assert names == {b'"-"', b'"captures/acks0.pcap"'}
    junk = run("-", stdin=b"not a capture at all")
    assert junk.returncode == 1 and junk.stderr.startswith(b"-: not a pcap or pcapng file")
    twice = run("-", "-")
    assert twice.returncode == 2 and b"standard input (-) can be read once" in twice.stderr


def test_a_status_names_one_finding_the_others_are_marked():
    """The status says the first of its findings (unanswered); another that would have
    been a status (unknown_version) is still named on the line."""
    import copy

    from kdissect.protocol.findings import Finding
    from kdissect.render.lines import exchange_plain

    root = Path(__file__).parent.parent / "captures"
    sink = Collect()
    Engine(CaptureFiles([str(root / "kcat.pcap")]), sink, Options()).run()
    ex = copy.copy(sink.exchanges[0])
    ex.findings = [Finding("unanswered", "", "request"), Finding("unknown_version", "", "request")]
    ex.status = "unanswered"
    line = exchange_plain(ex, Options())
    assert "[unanswered]" in line and "unknown_version" in line
    assert "! unanswered" not in line and "· unanswered" not in line


@pytest.mark.parametrize("pure", ["1", "0"])
def test_a_message_without_a_correlation_id_shows_a_question_mark(pure):
    """A header too short to hold one printed `#None` (as `v?` for the version)."""
    from click.testing import CliRunner

    from kdissect.cli import main

    path = Path(__file__).parent / "data" / "unconfirmed-start.pcap"
    res = CliRunner().invoke(main, ["pcap", "--no-tui", str(path)], env={"KDISSECT_PURE": pure})
    assert "#None" not in res.output and "Unknown v?  #?  [malformed header]" in res.output


def test_the_tui_is_not_opened_on_a_file_that_is_no_capture(tmp_path):
    """It opened, then said the file held no Kafka traffic (add ports with -p); the
    command line says what the file is and exits 1."""
    from click.testing import CliRunner

    from kdissect.cli import main

    text = tmp_path / "README.md"
    text.write_text("# not a capture\\n")
    res = CliRunner().invoke(main, ["pcap", "--tui", str(text)])
    assert res.exit_code == 1, res.output
    assert "not a pcap or pcapng file" in res.output


@pytest.mark.parametrize("paste", ["go-bytes.go", "node-buffer.json"])
def test_a_trees_problem_is_marked_by_its_findings_severity(paste):
    """A field's problem in a tree carried ✗ whatever its severity (a warning's trailing
    bytes, a note's assumed layout): marked as the findings are on the lines
    (docs/guide/findings.md: ✗ error, ! warning, · note), by its registered code."""
    import json

    from click.testing import CliRunner

    from kdissect.cli import main
    from kdissect.protocol.findings import REGISTRY
    from kdissect.render.marks import MARKS

    path = str(Path(__file__).parent.parent / "captures" / "blobs" / "pastes" / paste)
    tree = json.loads(CliRunner().invoke(main, ["blob", "--json", path]).stdout)
    problems = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (dict, list)):  # (the tree's nodes, wherever they are)
            stack += node.values() if isinstance(node, dict) else node
        if isinstance(node, dict) and "problem" in node and "code" in node:
            problems.append((node["problem"], REGISTRY[node["code"]].severity))
    assert problems
    text = CliRunner(env={"COLUMNS": "1000"}).invoke(main, ["blob", "--no-hex", path]).stdout
    for problem, severity in problems:
        assert f"  {MARKS[severity][0]} {problem}" in text, (problem, severity)
