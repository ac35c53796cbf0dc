"""Hostile input, round 4 (issue 39): the files and services kdissect reads besides
captures -- Kafka's log dirs, schema files and registries, key logs, the proxy's own
options -- through the real CLI. Each run is held to test_hostile's limits (no
traceback, exit 0/1/2 with a message, < 30 CPU-s, < 1 GiB peak RSS, measured)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.broker import free_port
from tests.test_hostile import KDISSECT, ROOT, check

_spec = importlib.util.spec_from_file_location("make_hostile", ROOT / "scripts" / "make_hostile.py")
assert _spec is not None and _spec.loader is not None
mh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mh)


def _uvarint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def _varint(n: int) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63))  # zigzag


def tcp_pcap(stream: bytes) -> bytes:
    """A capture of ``stream`` from 10.0.0.1:40000 to 10.0.0.2:9092 after a TCP handshake
    (a capture without one reads as begun inside the connection)."""
    shake = [
        mh._frame(1, 40000, 999, b"", True, 0x02),
        mh._frame(1, 40000, 4999, b"", False, 0x12, ack=1000),
        mh._frame(1, 40000, 1000, b"", True, 0x10, ack=5000),
    ]
    return mh.pcap(shake + mh.frames(stream))


def produce_pcap(path: Path, value: bytes) -> Path:
    """A capture of one Produce request to topic "t" whose one record holds ``value``."""
    body = b"\0" + _varint(0) + _varint(0) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    records = _varint(len(body)) + body
    path.write_bytes(tcp_pcap(mh.produce(mh.record_batch(records, 1))))
    return path


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\0" + struct.pack(">i", schema_id) + payload


def stdout_of(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    out = tmp_path / "stdout.txt"
    code, err = check(args, tmp_path, stdout=out)
    return code, out.read_text(errors="replace"), err


def stdouts_of(runs: list[list[str]], tmp_path: Path, **limits) -> list[tuple[int, str, str]]:
    """``stdout_of`` of independent runs, one per core at a time: each is its own process,
    measured and held to check()'s limits on its own (CPU-s and RSS are per process), in
    a directory of its own (its stderr, report and output)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int, args: list[str]) -> tuple[int, str, str]:
        cwd = tmp_path / f"run{i}"
        cwd.mkdir()
        out = cwd / "stdout.txt"
        code, err = check(args, cwd, stdout=out, **limits)
        return code, out.read_text(errors="replace"), err

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return list(pool.map(one, range(len(runs)), runs))


# -- kdissect log ------------------------------------------------------------------------


def _log_dir(root: Path) -> Path:
    """A small log dir: meta.properties, two partitions with leader-epoch checkpoints."""
    root.mkdir()
    (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=x\n")
    for name in ("a-0", "b-0"):
        (root / name).mkdir()
        (root / name / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (root / name / "partition.metadata").write_text("version: 0\ntopic_id: x\n")
    return root


def _segments_of_one_record(root: Path, *partitions: str) -> bytes:
    """A first segment of one record ("hello") in each of ``partitions`` under ``root``;
    returns the batch."""
    body = b"\0" + _varint(0) + _varint(0) + _varint(-1) + _varint(5) + b"hello" + _varint(0)
    batch = mh.record_batch(_varint(len(body)) + body, 1)
    for name in partitions:
        (root / name).mkdir(exist_ok=True)
        (root / name / "00000000000000000000.log").write_bytes(batch)
    return batch


def test_checkpoint_not_a_number_is_what_stops_a_broker(tmp_path):
    """``0 abc`` in a leader-epoch-checkpoint crashed the run (TypeError) and lost every
    partition after it: now a finding that says Kafka refuses the file, and the other
    partitions are still read."""
    root = _log_dir(tmp_path / "logs")
    (root / "a-0" / "leader-epoch-checkpoint").write_text("0\n1\n0 abc\n")
    code, out, _ = stdout_of(["log", "--format", "jsonl", str(root)], tmp_path)
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines()]
    files = {Path(o["file"]).parent.name + "/" + Path(o["file"]).name for o in objs}
    assert "b-0/leader-epoch-checkpoint" in files and "b-0/partition.metadata" in files
    bad = [o for o in objs if o["file"].endswith("a-0/leader-epoch-checkpoint")]
    text = json.dumps(bad)
    assert "malformed_field" in text and "Malformed line in checkpoint file" in text
    code, out, _ = stdout_of(["log", str(root / "a-0" / "leader-epoch-checkpoint")], tmp_path)
    assert code == 0 and "'abc'" in out and "start-up" in out


def test_checkpoint_numbers_past_int32_are_marked(tmp_path):
    """Java reads a checkpoint's version and count lines, a partition and an epoch with
    Integer.parseInt: a value past int32 was taken as a number (an epoch of 3000000000,
    partition 4294967296). Now each is a malformed field that says so, the broker's
    high watermarks and epochs take none of them, and the rest of the log dir is read."""
    root = _log_dir(tmp_path / "logs")
    (root / "a-0" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3000000000 5\n")
    (root / "replication-offset-checkpoint").write_text("0\n1\na 4294967296 5\n")
    (root / "recovery-point-offset-checkpoint").write_text("2147483648\n0\n")
    code, out, _ = stdout_of(["log", "--format", "jsonl", str(root)], tmp_path)
    assert code == 0
    objs = {
        Path(o["file"]).parent.name + "/" + Path(o["file"]).name: o
        for o in map(json.loads, out.splitlines())
    }
    assert "b-0/leader-epoch-checkpoint" in objs
    for name, where, value in (
        ("a-0/leader-epoch-checkpoint", "entries.[1].epoch", "3000000000"),
        ("logs/replication-offset-checkpoint", "entries.[0].partition", "4294967296"),
        ("logs/recovery-point-offset-checkpoint", "version", "2147483648"),
    ):
        found = [f for f in objs[name]["findings"] if f["where"].endswith(where)]
        assert [f["code"] for f in found] == ["malformed_field"], (name, objs[name])
        said = found[0]["detail"]
        assert f"past int32 (Java's Integer.parseInt refuses it): '{value}'" in said, said
        assert "Malformed line in checkpoint file" in said
    entries = objs["a-0/leader-epoch-checkpoint"]["content"]["entries"]
    assert entries[1] == {"epoch": "3000000000", "start_offset": 5}  # the text, kept
    code, out, _ = stdout_of(["log", str(root / "replication-offset-checkpoint")], tmp_path)
    assert code == 0 and "partition is past int32" in out


def test_unreadable_entries_are_said_and_the_rest_is_read(tmp_path):
    """A dangling link named like a segment and a directory named like an index (and,
    not as root, an unreadable file): each one item with unreadable_file, the rest read."""
    root = _log_dir(tmp_path / "logs")
    (root / "a-0" / "00000000000000000000.log").symlink_to(tmp_path / "nowhere")
    (root / "a-0" / "00000000000000000000.index").mkdir()
    code, out, _ = stdout_of(["log", "--format", "jsonl", str(root)], tmp_path)
    assert code == 0
    assert out.count("unreadable_file") == 2, out
    assert "b-0/leader-epoch-checkpoint" in out


def _without_root_reads() -> list[str]:
    """A prefix that runs a command unable to read what its mode forbids. As root (the
    tests' user here), setpriv drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    bounding set: the kernel then checks the mode bits as for any user (another uid
    could not even start the interpreter, which lives under /root, 0700). Not as root,
    the mode bits hold already."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop the right to read")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def _run_unprivileged(args: list[str]) -> tuple[int, str, str]:
    run = subprocess.run(
        [*_without_root_reads(), *KDISSECT, *args],
        cwd=ROOT,
        capture_output=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    out, err = run.stdout.decode(errors="replace"), run.stderr.decode(errors="replace")
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    return run.returncode, out, err


@pytest.mark.slow  # seven CLI runs without the right to read: seconds
def test_permission_denied_for_real(tmp_path):
    """Files and directories kdissect may not read (the tests run as root, who reads
    everything: here without that right): in a log dir, an unreadable segment and an
    unreadable partition directory are each said, the rest decoded (exit 0: damage is
    reported as findings); an unreadable file named alone says what to do (exit 1); an
    unreadable capture beside a readable one is said and the other decoded (exit 1, as
    for a capture that is not one; click refused the whole command line before, exit 2)."""
    root = _log_dir(tmp_path / "logs")
    batch = _segments_of_one_record(root, "a-0", "b-0", "c-0")
    ok, denied = tmp_path / "ok.pcap", tmp_path / "denied.pcap"
    ok.write_bytes(tcp_pcap(mh.produce(batch)))
    denied.write_bytes(ok.read_bytes())
    closed = [root / "b-0" / "00000000000000000000.log", root / "c-0", denied]
    for path in closed:
        path.chmod(0)
    try:
        code, out, err = _run_unprivileged(["log", "--format", "jsonl", str(root)])
        assert code == 0, err
        objs = [json.loads(line) for line in out.splitlines()]
        unreadable = {
            Path(o["file"]).relative_to(root).as_posix(): o
            for o in objs
            if any(f["code"] == "unreadable_file" for f in o["findings"])
        }
        assert sorted(unreadable) == ["b-0/00000000000000000000.log", "c-0"], unreadable
        assert all("Permission denied" in json.dumps(o) for o in unreadable.values())
        assert any(
            o["type"] == "batch" and o["file"].endswith("a-0/00000000000000000000.log")
            for o in objs
        )
        code, out, _ = _run_unprivileged(["log", "--no-tui", str(root)])
        assert code == 0 and out.count("Permission denied") == 2 and "offsets 0..0" in out
        for alone in closed[:2]:
            code, _, err = _run_unprivileged(["log", "--no-tui", str(alone)])
            assert code == 1 and "Permission denied (run kdissect as a user who can read it)" in err
        for view in ([], ["--format", "jsonl"]):
            code, out, err = _run_unprivileged(["pcap", "--no-tui", *view, str(denied), str(ok)])
            assert code == 1 and "Produce" in out, (view, err)
            assert (
                f"{denied}: cannot read it: Permission denied (run kdissect as a user who "
                f"can read it)" in err
            ), view
        code, out, err = _run_unprivileged(["pcap", "--no-tui", str(denied)])
        assert code == 1 and out == "" and "Permission denied" in err
    finally:
        for path in closed:
            path.chmod(0o755)


def test_fifo_and_empty_dir_exit_1(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, err = check(["log", str(fifo)], tmp_path)
    assert code == 1 and "not a regular file" in err
    (tmp_path / "empty").mkdir()
    code, err = check(["log", str(tmp_path / "empty")], tmp_path)
    assert code == 1 and "no Kafka files" in err  # as `kdissect log --help` says


@pytest.mark.slow  # (6 s)
def test_quorum_state_deep_and_wide(tmp_path):
    """200k-deep JSON crashed (RecursionError); 100k keys took minutes (a search from the
    start of the text per key): now a finding, and linear."""
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    qs = part / "quorum-state"
    qs.write_text("[" * 200_000 + "]" * 200_000)
    code, out, _ = stdout_of(["log", str(qs)], tmp_path)
    assert code == 0 and "nested too deeply" in out
    qs.write_text(json.dumps({f"k{i}": i for i in range(100_000)}))
    code, out, _ = stdout_of(["log", "--format", "jsonl", str(qs)], tmp_path)
    assert code == 0 and '"k99999"' in out


@pytest.mark.slow  # 40 MB of files written and read back: seconds
def test_full_index_and_huge_checkpoint_are_bounded(tmp_path):
    """A 10 MiB .index with every entry used (Kafka's default size: 1.3 M entries took
    3.3 GB) and a 21 MB leader-epoch-checkpoint (1.5 GB): the entries past a bound are
    kept as bytes with a node_budget finding, under the RSS limit (check())."""
    part = tmp_path / "t-0"
    part.mkdir()
    n = (10 << 20) // 8
    (part / "00000000000000000000.index").write_bytes(
        b"".join(struct.pack(">ii", i + 1, 64 * (i + 1)) for i in range(n))
    )
    n = (10 << 20) // 12
    (part / "00000000000000000000.timeindex").write_bytes(
        b"".join(struct.pack(">qi", 1_700_000_000_000 + i, i + 1) for i in range(n))
    )
    (part / "00000000000000000000.log").write_bytes(mh.record_batch(b"", 0))
    other = tmp_path / "t-1"  # (not in t-0: the run of t-0 reads what the test gave it)
    other.mkdir()
    lines = ["0", "2000000"] + [f"{i} {i}" for i in range(2_000_000)]
    (other / "leader-epoch-checkpoint").write_text("\n".join(lines) + "\n")
    index, both, checkpoint = stdouts_of(
        [
            ["log", "--format", "jsonl", str(part / "00000000000000000000.index")],
            ["log", "--format", "jsonl", str(part)],  # .index and .timeindex, checked
            ["log", str(other / "leader-epoch-checkpoint")],
        ],
        tmp_path,
    )
    assert index[0] == 0 and "node_budget" in index[1]
    assert both[0] == 0 and both[1].count("node_budget") >= 2
    assert checkpoint[0] == 0 and "node_budget" in checkpoint[1]


# -- values, schemas, registries ----------------------------------------------------------


def test_json_value_with_a_huge_integer_and_many_keys(tmp_path):
    """A 5,000-digit integer crashed (Python's int limit); 100k keys were quadratic."""
    pcap = produce_pcap(tmp_path / "big.pcap", b'{"a": ' + b"9" * 5000 + b"}")
    code, _, _ = stdout_of(["pcap", "--values", "--format", "jsonl", str(pcap)], tmp_path)
    assert code == 0
    many = b"{" + b",".join(b'"k%d": 1' % i for i in range(100_000)) + b"}"
    pcap = produce_pcap(tmp_path / "keys.pcap", many)
    code, out, _ = stdout_of(["pcap", "--values", "--format", "jsonl", str(pcap)], tmp_path)
    assert code == 0 and "k99999" in out


def _deep_avsc(depth: int) -> str:
    text = ""
    for i in range(depth):
        text += '{"type": "record", "name": "R%d", "fields": [{"name": "f", "type": ' % i
    return text + '"int"' + "}]}" * depth


def test_deep_schema_file(tmp_path):
    (tmp_path / "deep.avsc").write_text(_deep_avsc(400))
    pcap = produce_pcap(tmp_path / "v.pcap", b"\x02")
    code, err = check(
        ["pcap", "--value-schema", f"t={tmp_path / 'deep.avsc'}", str(pcap)], tmp_path
    )
    assert code == 1 and "nested too deeply" in err


class _Registry:
    """A loopback HTTP server answering every GET with the next of ``answers`` (bytes,
    or (status, headers) for a redirect); remembers the Authorization headers seen."""

    def __init__(self, answers):
        self.answers, self.auth = list(answers), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.auth.append(self.headers.get("Authorization"))
                answer = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                if isinstance(answer, tuple):
                    self.send_response(answer[0])
                    for k, v in answer[1].items():
                        self.send_header(k, v)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


ORDER = {"type": "record", "name": "O", "fields": [{"name": "x", "type": "int"}]}
WRONG_SHAPES = {
    "number": b"42",
    "schema-number": b'{"schema": 42}',
    "references-string": json.dumps({"schema": json.dumps(ORDER), "references": "oops"}).encode(),
    "reference-no-subject": json.dumps(
        {"schema": json.dumps(ORDER), "references": [{"name": "x", "version": 1}]}
    ).encode(),
    "deep-json": b"[" * 100_000 + b"]" * 100_000,
    "deep-schema": json.dumps({"schema": _deep_avsc(400)}).encode(),
    "not-json": b"<html>hello</html>",
}


@pytest.mark.parametrize("shape", sorted(WRONG_SHAPES))
def test_registry_answers_of_the_wrong_shape(tmp_path, shape):
    registry = _Registry([WRONG_SHAPES[shape]])
    pcap = produce_pcap(tmp_path / "v.pcap", framed(1, b"\x02"))
    try:
        code, out, err = stdout_of(
            [
                "pcap",
                "--format",
                "jsonl",
                "--registry",
                registry.url,
                "--registry-cache",
                str(tmp_path / "cache"),
                str(pcap),
            ],
            tmp_path,
        )
    finally:
        registry.close()
    assert code == 0 and '"api_name": "Produce"' in out
    assert f"registry {registry.url}" in err or "id 1: nested too deeply" in err
    assert "unreachable" not in err  # it answered: not said to be offline


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_registry_cache_corrupt_or_a_file(tmp_path):
    """A damaged cache entry is asked again (it made every later run fail); a cache
    path that is a file is a usage error."""
    registry = _Registry([json.dumps({"schema": json.dumps(ORDER)}).encode()])
    pcap = produce_pcap(tmp_path / "v.pcap", framed(1, b"\x02"))
    cache = tmp_path / "cache"
    args = [
        "pcap",
        "--format",
        "jsonl",
        "--registry",
        registry.url,
        "--registry-cache",
        str(cache),
        str(pcap),
    ]
    try:
        code, out, _ = stdout_of(args, tmp_path)
        assert code == 0 and '"x": 1' in out
        (entry,) = cache.rglob("*.json")
        entry.write_text("{not json")
        code, out, _ = stdout_of(args, tmp_path)
        assert code == 0 and '"x": 1' in out
        assert json.loads(entry.read_text())["schema"]
    finally:
        registry.close()
    (tmp_path / "afile").write_text("x")
    code, err = check(
        [
            "pcap",
            "--registry",
            registry.url,
            "--registry-cache",
            str(tmp_path / "afile"),
            str(pcap),
        ],
        tmp_path,
    )
    assert code == 2 and "--registry-cache" in err


def test_registry_credentials_from_userinfo_never_printed_nor_redirected(tmp_path):
    other = _Registry([json.dumps({"schema": json.dumps(ORDER)}).encode()])
    first = _Registry(
        [(302, {"Location": other.url.replace("127.0.0.1", "localhost") + "/schemas/ids/1"})]
    )
    pcap = produce_pcap(tmp_path / "v.pcap", framed(1, b"\x02"))
    url = first.url.replace("http://", "http://alice:s3cr3t-pw@")
    try:
        code, out, err = stdout_of(
            ["pcap", "--format", "jsonl", "--registry", url, "--registry-cache", "none", str(pcap)],
            tmp_path,
        )
    finally:
        first.close()
        other.close()
    assert code == 0 and '"x": 1' in out
    assert first.auth[0] and first.auth[0].startswith("Basic ")  # userinfo used
    assert other.auth == [None]  # not sent to the other host
    assert "s3cr3t-pw" not in out + err
    # unreachable: the error names the registry without the password
    code, out, err = stdout_of(
        [
            "pcap",
            "--format",
            "jsonl",
            "--registry",
            "http://bob:hunter2-pw@127.0.0.1:9",
            "--registry-cache",
            "none",
            str(pcap),
        ],
        tmp_path,
    )
    assert "hunter2-pw" not in out + err and "unreachable" in err


@pytest.mark.slow  # seconds of waiting on the clock
def test_registry_that_trickles_is_given_up(tmp_path, monkeypatch):
    """One byte every 0.2 s: the per-read timeout (10 s) never fires; the whole answer
    has a deadline after which the run goes on without it. The deadline is lowered from
    30 s to 2 s (in process): the property is the same, the wait is not."""
    from click.testing import CliRunner

    from kdissect import schemas_source
    from kdissect.cli import main

    monkeypatch.setattr(schemas_source, "DEADLINE", 2.0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(4096)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
            try:
                while not stop.wait(0.2):
                    conn.sendall(b" ")
            except OSError:
                pass
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    pcap = produce_pcap(tmp_path / "v.pcap", framed(1, b"\x02"))
    try:
        res = CliRunner().invoke(
            main,
            [
                "pcap",
                "--no-tui",
                "--format",
                "jsonl",
                "--registry",
                f"http://127.0.0.1:{listener.getsockname()[1]}",
                "--registry-cache",
                "none",
                str(pcap),
            ],
        )
    finally:
        stop.set()
        listener.close()
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 0 and "longer than 2 s" in res.stderr, res.stderr
    assert '"api_name": "Produce"' in res.stdout, res.stdout  # the run went on without it


# -- key logs, the proxy's options, live ---------------------------------------------------


@pytest.mark.slow  # 200 MB of newlines written and read: seconds
def test_keylog_of_newlines(tmp_path):
    """200 MB of newlines took 1.8 GB (a list of empty lines)."""
    keys = tmp_path / "nl.keys"
    with open(keys, "wb") as f:
        for _ in range(200):
            f.write(b"\n" * 1_000_000)
    check(["pcap", "--keylog", str(keys), str(ROOT / "captures" / "tls13.pcap")], tmp_path)


def test_proxy_bad_ca_file_and_keylog_dir(tmp_path):
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    code, err = check(
        [
            "proxy",
            "--upstream",
            "127.0.0.1:9",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--ca-file",
            str(tmp_path / "ca.pem"),
        ],
        tmp_path,
    )
    assert code == 2 and "--ca-file" in err and "PEM" in err
    code, err = check(
        [
            "proxy",
            "--upstream",
            "127.0.0.1:9",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--upstream-tls",
            "--keylog",
            str(tmp_path / "missing" / "k.log"),
        ],
        tmp_path,
    )
    assert code in (1, 2) and "k.log" in err and "No such file" in err


def test_proxy_keylog_and_recording_are_private(tmp_path):
    """--keylog and -w files hold secrets: created 0600."""
    from tests.test_hostile import KDISSECT
    import signal
    import subprocess
    import time

    keylog, rec = tmp_path / "k.log", tmp_path / "r.pcapng"
    proc = subprocess.Popen(
        [
            *KDISSECT,
            "proxy",
            "--upstream",
            "127.0.0.1:9",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--upstream-tls",
            "--keylog",
            str(keylog),
            "-w",
            str(rec),
            "--format",
            "text",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while (
            not (keylog.exists() and rec.exists())
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    assert stat.S_IMODE(keylog.stat().st_mode) == 0o600
    assert stat.S_IMODE(rec.stat().st_mode) == 0o600


def test_live_bad_capture_filter(tmp_path):
    code, err = check(["live", "-i", "lo", "-f", "tcp port ((((", "--format", "text"], tmp_path)
    assert code == 1 and "capture filter" in err


# -- control characters in text outputs -------------------------------------------------------

FORGED_CLIENT = "cl\x1b]0;pwned\x07id\r"  # a terminal title change
FORGED_TOPIC = "top\nFORGED 10.0.0.1 → x\x1b[31mred"  # a forged line, a colour


def _control_pcap(path: Path) -> Path:
    head = struct.pack(">hhi", 0, 3, 1) + mh.kstr(FORGED_CLIENT)
    records = mh.record_batch(b"", 0)
    body = (
        struct.pack(">h", -1)
        + struct.pack(">hi", 1, 1000)
        + struct.pack(">i", 1)
        + mh.kstr(FORGED_TOPIC)
        + struct.pack(">ii", 1, 0)
        + struct.pack(">i", len(records))
        + records
    )
    msg = head + body
    path.write_bytes(tcp_pcap(struct.pack(">i", len(msg)) + msg))
    return path


@pytest.mark.parametrize(
    "view", [[], ["--stats"], ["--format", "tsv"], ["-V"]], ids=lambda v: " ".join(v) or "text"
)
def test_control_characters_escaped_in_text(tmp_path, view):
    pcap = _control_pcap(tmp_path / "ctl.pcap")
    code, out, _ = stdout_of(["pcap", "--no-tui", *view, str(pcap)], tmp_path)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert not any(line.startswith("FORGED") for line in out.splitlines())
    assert "\\x1b]0;pwned" in out or "'cl\\x1b]0;pwned" in out


def test_control_characters_escaped_on_a_terminal(tmp_path):
    """On a TTY (rich's styled lines): no escape sequence from the input reaches it."""
    import pty
    import subprocess
    import sys

    pcap = _control_pcap(tmp_path / "ctl.pcap")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kdissect", "pcap", "--no-tui", str(pcap)],
        stdout=slave,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"},
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(120)
    os.close(master)
    text = out.decode("utf-8", "replace")
    assert proc.returncode == 0 and "Produce" in text
    assert "\x1b]0;pwned" not in text and "\x1b[31mred" not in text and "\x07" not in text
    assert "\\x1b]0;pwned" in text


def test_preallocated_segment_and_07_log_zero_tails(tmp_path):
    """A 1 GiB segment as log.preallocate=true leaves it (2 GB: the zero tail copied
    whole) and a 0.7 .kafka log with a 1 GiB zero tail: the tail is found by seeking
    (holes are never read) and reported as preallocated space, under the limits."""
    part = tmp_path / "t-0"
    part.mkdir()
    seg = part / "00000000000000000000.log"
    seg.write_bytes(mh.record_batch(b"", 0))
    os.truncate(seg, 1 << 30)
    code, out, _ = stdout_of(["log", str(seg)], tmp_path)
    assert code == 0 and "log_zero_tail" in out and "preallocated" in out
    old = part / "0.kafka"
    old.write_bytes(b"\0" * 8)
    os.truncate(old, 1 << 30)
    code, out, _ = stdout_of(["log", str(old)], tmp_path)
    assert code == 0 and "log_zero_tail" in out


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_huge_avro_decimals(tmp_path):
    """A 600 KB decimal (25 CPU-s, then decimal.Overflow: exit 70) and three of 400 KB
    (34 CPU-s): more digits than the precision allows is said, the bytes are kept."""
    schema = {
        "type": "record",
        "name": "D",
        "fields": [
            {
                "name": f"d{i}",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2},
            }
            for i in range(3)
        ],
    }
    (tmp_path / "d.avsc").write_text(json.dumps(schema))
    runs = []
    for i, sizes in enumerate(((600_000, 1, 1), (400_000, 400_000, 400_000))):
        value = b"".join(_varint(n) + b"\x7f" * n for n in sizes)
        pcap = produce_pcap(tmp_path / f"d{i}.pcap", value)
        for fmt in ("text", "jsonl"):
            runs.append(
                ["pcap", "--format", fmt, "--value-schema", f"t={tmp_path / 'd.avsc'}", str(pcap)]
            )
    assert [code for code, _, _ in stdouts_of(runs, tmp_path)] == [0, 0, 0, 0]
    value = _varint(2) + b"\x30\x39" + _varint(1) + b"\x01" + _varint(1) + b"\xff"
    pcap = produce_pcap(tmp_path / "ok.pcap", value)
    code, out, _ = stdout_of(
        ["pcap", "--format", "jsonl", "--value-schema", f"t={tmp_path / 'd.avsc'}", str(pcap)],
        tmp_path,
    )
    assert code == 0 and '"123.45"' in out and '"-0.01"' in out


def test_tls_resync_after_a_gap_is_bounded():
    """After lost bytes, each fake record header (17 03 03 ..) got 4,096 trial
    decryptions (1.4 MB: 42 CPU-s); the trials after one loss are now capped in all, and
    the direction is then given up with a finding."""
    import time
    from kdissect.capture.tls.session import TlsFacts, TlsSession
    from tests.support.tls_synth import Conversation
    from tests.test_tls import keys_of

    conv = Conversation()
    conv.client += conv.c_app.seal(23, b"hello" * 50)
    whole = bytes(conv.client)
    session = TlsSession(
        TlsFacts(("c", 1), ("s", 2)), keys_of(conv), lambda *a: None, lambda *a: None
    )
    session.data(0, whole, 0.0, 1)
    session.data(1, bytes(conv.server), 0.0, 1)
    session.gap(0, 1_000_000, 0.0, 2)  # a big loss: many tries per header
    fake = (b"\x17\x03\x03\x00\x10" + bytes(16)) * (1_400_000 // 21)
    start = time.process_time()
    for i in range(0, len(fake), 1460):
        session.data(0, fake[i : i + 1460], 0.0, 3 + i)
    spent = time.process_time() - start
    facts = session.finish()
    assert spent < 10, spent
    assert any(f.code == "tls_decrypt_failed" and "tries" in f.detail for f in facts.findings)


def test_protobuf_message_index_path_is_bounded(tmp_path):
    """A framed Protobuf value whose message-index path counts 2 M levels (4 MB took
    1.4 GB: a list and a node per index, never charged to the budget)."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.proto").write_text('syntax = "proto3"; message R { int32 x = 1; }\n')
    n = 2_000_000
    pcap = produce_pcap(tmp_path / "p.pcap", framed(1, _varint(n) + b"\0" * n + b"\x08\x01"))
    code, out, _ = stdout_of(
        ["pcap", "--format", "jsonl", "--schemas", str(schemas), str(pcap)], tmp_path
    )
    assert code == 0 and "message index path" in out


@pytest.mark.slow  # seven runs of values of 160 KB-1.4 MB: seconds
def test_protobuf_repeated_keys_are_linear(tmp_path):
    """A later occurrence of a Protobuf field or map key replaced the earlier one after a
    search of the message's fields: a 160 KB value of unknown fields each followed by the
    same singular field took 24 CPU-s (a 1 MB one, minutes), a map of distinct keys was
    quadratic too; JSON values' duplicate keys likewise (1.4 MB: 44 CPU-s with -V).
    Now each takes a lookup, and the last occurrence still wins."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.proto").write_text(
        'syntax = "proto3";\n'
        "message R { int32 x = 6; map<string, int32> m = 5; repeated int32 u = 2 [packed=false]; }\n"
    )
    n = 150_000  # (two fields of 4 bytes: 300,000 nodes, within the budget)
    unknown_then_x = (b"\x48\x01" + b"\x30\x01") * (n - 1) + b"\x48\x01\x30\x07"  # #9, then x
    keys = [str(i).encode() for i in range(n // 2)]
    mapped = (
        b"".join(
            b"\x2a" + bytes([len(k) + 4]) + b"\x0a" + bytes([len(k)]) + k + b"\x10\x01"
            for k in keys
        )
        + b"\x2a\x05\x0a\x01\x30\x10\x02"
    )  # "0" again: 2
    unpacked = b"\x10\x05" * n
    cases = [
        (unknown_then_x, ['"x": 7']),
        (mapped, ['"99": 1', '"0": 2']),
        (unpacked, ["5, 5, 5"]),
    ]
    runs = []
    for i, (value, _) in enumerate(cases):
        pcap = produce_pcap(tmp_path / f"p{i}.pcap", framed(1, b"\0" + value))
        for view in (["-V"], ["--format", "jsonl"]):
            runs.append(["pcap", *view, "--schemas", str(schemas), str(pcap)])
    # JSON: the last of 60,000 keys again 60,000 times (each removal searched the keys)
    text = (
        b"{"
        + b",".join([b'"k%d": 1' % i for i in range(60_000)] + [b'"k59999": 2'] * 60_000)
        + b"}"
    )
    runs.append(["pcap", "-V", "--values", str(produce_pcap(tmp_path / "j.pcap", text))])
    results = stdouts_of(runs, tmp_path, time_limit=10)
    assert all(code == 0 for code, _, _ in results), [r[2][-500:] for r in results]
    for (_, expect), (_, jsonl, _) in zip(cases, results[1::2]):
        assert all(e in jsonl for e in expect), expect  # (JSON lines)
    assert "k0  number" in results[-1][1]  # (the located tree)


@pytest.mark.slow  # two runs over a 3,000-field type: seconds
def test_protobuf_repeated_field_of_a_big_type(tmp_path):
    """A 160 KB Protobuf value with a repeated field (34 CPU-s in the issue): each element
    of a repeated message rebuilt its type's field index (a type of 3,000 fields: 42
    CPU-s), each element of a packed repeated enum its names (an enum of 5,000 values:
    minutes). Both are made once per type now."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.proto").write_text(
        'syntax = "proto3";\nmessage R { repeated Big m = 1; repeated E e = 2; }\n'
        "message Big {\n" + "".join(f"  int32 f{i} = {i};\n" for i in range(1, 3001)) + "}\n"
        "enum E {\n" + "".join(f"  V{i} = {i};\n" for i in range(5000)) + "}\n"
    )
    packed = b"\x01" * 160_000
    value = b"\x0a\x02\x08\x07" + b"\x0a\x00" * 80_000 + b"\x12" + _uvarint(len(packed)) + packed
    pcap = produce_pcap(tmp_path / "p.pcap", framed(1, b"\0" + value))
    (v, _, _), (j, text, _) = stdouts_of(
        [
            ["pcap", *view, "--schemas", str(schemas), str(pcap)]
            for view in (["-V"], ["--format", "jsonl"])
        ],
        tmp_path,
        time_limit=10,
    )
    assert v == 0 and j == 0
    assert '"m": [{"f1": 7}, {}, {}' in text and '"e": ["V1", "V1", "V1"' in text


@pytest.mark.slow  # 256 MB gzipped and inflated again: seconds
def test_pcapng_secrets_block_of_newlines(tmp_path):
    """A 282 KB .pcapng.gz whose Decryption Secrets Block inflates to 256 MB of newlines
    (> 2.6 GB: a list of empty lines): read as a key log without such a list."""
    import gzip
    from kdissect.capture.pcapfile import MAX_PACKET

    size = MAX_PACKET - 64  # the largest block a capture may hold: 256 MB
    head = mh.SHB + mh.idb()
    body_len = 8 + size
    block_len = 12 + body_len + (-body_len % 4)
    path = tmp_path / "dsb.pcapng.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(head)
        f.write(struct.pack("<II", 10, block_len) + struct.pack("<II", 0x544C534B, size))
        chunk = b"\n" * (1 << 20)
        for _ in range(size >> 20):
            f.write(chunk)
        f.write(b"\n" * (size & ((1 << 20) - 1)))
        f.write(bytes(-body_len % 4) + struct.pack("<I", block_len))
        f.write(mh.epb(mh.frames(b"\0\0\0\0")[0]))
    code, _ = check(["pcap", str(path)], tmp_path)
    assert code == 0  # read (not refused as damaged)


def test_a_capture_piped_in_is_refused_with_what_to_do():
    """`tcpdump -w - | kdissect pcap /dev/stdin`: the reader maps and seeks files; a
    pipe was refused with Python's "File or stream is not seekable" alone."""
    with open(ROOT / "captures" / "kcat.pcap", "rb") as capture:
        feeder = subprocess.Popen(["cat"], stdin=capture, stdout=subprocess.PIPE)
        piped = subprocess.run(
            [*KDISSECT, "pcap", "--no-tui", "/dev/stdin"],
            stdin=feeder.stdout,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        feeder.kill()
        feeder.wait()
    assert piped.returncode == 1 and "Traceback" not in piped.stderr
    assert "write the capture to a file first" in piped.stderr, piped.stderr


def test_a_port_range_written_backwards_is_said_so():
    from tests.support.cli import kdissect_text

    res = kdissect_text("pcap", str(ROOT / "captures" / "kcat.pcap"), "-p", "9094-9092")
    assert res.returncode == 2 and "'9094-9092' runs backwards" in res.stderr, res.stderr
    res = kdissect_text("pcap", str(ROOT / "captures" / "kcat.pcap"), "-p", "9092-70000")
    assert res.returncode == 2 and "outside 1-65535" in res.stderr, res.stderr


def test_files_a_live_broker_deletes_while_they_are_read(tmp_path, monkeypatch):
    """A live log dir: the broker deletes segments and renames partition directories
    away (retention, a deleted topic) between kdissect listing them and reading them
    (CI met it on a KRaft controller's __cluster_metadata): a segment gone before it is
    checked or before it is mapped, a partition directory gone while the one before it is
    read or between its check and its listing. Each is one unreadable_file item saying
    so, the rest read; no traceback."""
    from kdissect.protocol import Options
    from kdissect.sources import logdir
    from kdissect.sources.logunits import walk

    root = _log_dir(tmp_path / "logs")
    _segments_of_one_record(root, "a-0", "c-0", "d-0", "e-0")
    segment = "00000000000000000000.log"
    real_map, real_check, real_partition = logdir._map, logdir._unreadable, logdir._partition_dir

    def map_after_delete(path):
        if path == root / "a-0" / segment:
            path.unlink()
        return real_map(path)

    def checked_around_a_delete(path, topic, partition, want_dir=False):
        if path == root / "e-0" / segment:
            path.unlink()  # listed with its partition, gone before its check
        said = real_check(path, topic, partition, want_dir)
        if path == root / "d-0" and said is None:
            path.rename(root / "d-0.0123-delete")  # checked, gone before it is listed
        return said

    def partition_then_rename(path, *args, **kwargs):
        yield from real_partition(path, *args, **kwargs)
        if path.name == "a-0":
            (root / "b-0").rename(root / "b-0.4567-delete")  # the log dir listed it

    monkeypatch.setattr(logdir, "_map", map_after_delete)
    monkeypatch.setattr(logdir, "_unreadable", checked_around_a_delete)
    monkeypatch.setattr(logdir, "_partition_dir", partition_then_rename)
    items = list(walk([str(root)], Options(), values=False))
    gone = {
        i.path.relative_to(root).as_posix(): i.tree.problem
        for i in items
        if i.tree is not None and i.tree.code == "unreadable_file"
    }
    assert sorted(gone) == [f"a-0/{segment}", "b-0", "d-0", f"e-0/{segment}"], gone
    for why in gone.values():
        assert why == (
            "cannot read it: No such file or directory; skipped (a live log dir: the broker "
            "may have deleted or renamed it after it was listed)"
        ), why
    batches = [i.path.parent.name for i in items if i.kind == "batch"]
    assert batches == ["c-0"], [(i.kind, i.path.name) for i in items]


def test_a_url_log_dir_says_what_it_could_not_copy(tmp_path):
    """A log dir read through a URL (``file://`` here; ``s3://`` alike) is copied a
    partition at a time: a dangling link or a FIFO among its files, a partition directory
    gone between the plan and its copy, are each one unreadable_file item naming the URL,
    the rest read. Before: an internal error (FileNotFoundError)."""
    from kdissect.protocol import Options
    from kdissect.sources.logunits import items, plan

    root = _log_dir(tmp_path / "logs")
    batch = _segments_of_one_record(root, "a-0", "c-0", "d-0")
    (root / "a-0" / "00000000000000000007.log").symlink_to(tmp_path / "nowhere")
    os.mkfifo(root / "c-0" / "00000000000000000009.log")
    os.mkfifo(root / "c-0" / "notes")  # no Kafka name: not read, not said (as locally)
    (tmp_path / "elsewhere.log").write_bytes(struct.pack(">q", 5) + batch[8:])
    (root / "c-0" / "00000000000000000005.log").symlink_to(tmp_path / "elsewhere.log")
    url = root.as_uri()
    units = plan([url])
    shutil.rmtree(root / "d-0")  # planned, gone before it is copied
    got = [i for u in units for i in items(u, Options())]
    said = {i.url[len(url) + 1 :]: i.tree.problem for i in got if i.tree.code == "unreadable_file"}
    gone = "No such file or directory; skipped (a live log dir: the broker may have deleted"
    assert sorted(said) == ["a-0/00000000000000000007.log", "c-0/00000000000000000009.log", "d-0"]
    assert said["d-0"].startswith("cannot read it: " + gone), said
    for name in ("a-0/00000000000000000007.log", "c-0/00000000000000000009.log"):
        assert said[name] == (
            "not a regular file (a FIFO, socket, device or dangling link); skipped (only "
            "regular files are read)"
        ), said
    batches = sorted(i.url[len(url) + 1 :] for i in got if i.kind == "batch")
    assert batches == [
        "a-0/00000000000000000000.log",
        "c-0/00000000000000000000.log",
        "c-0/00000000000000000005.log",  # a link to a segment is read, as a local path's
    ], batches
    for named in ("a-0/00000000000000000007.log", "c-0/00000000000000000009.log"):
        code, out, err = stdout_of(["log", f"{url}/{named}"], tmp_path)  # named alone
        assert code == 1 and out == "", (out, err)
        assert err.startswith(f"kdissect log: {url}/{named}: no") and "internal" not in err, err


_TRUNCATE_WHILE_READ = """
import json, os, sys
from pathlib import Path
from kdissect.protocol import Options
from kdissect.sources.logunits import walk

partition, values = Path(sys.argv[1]), sys.argv[2] == "values"
seen = []
for item in walk([str(partition)], Options(), values=values):
    seen.append([item.kind, item.tree.code if item.tree is not None else None])
    if item.kind == "batch" and sum(k == "batch" for k, _ in seen) == 1:
        os.truncate(partition / "00000000000000000000.log", int(sys.argv[3]))  # a follower
print(json.dumps(seen))
"""


@pytest.mark.parametrize("values", ["trees", "values", "pure"])
@pytest.mark.parametrize("cut", ["pages", "last page"])
def test_a_segment_a_broker_truncates_while_it_is_read(tmp_path, values, cut):
    """A running broker may truncate a segment kdissect has mapped (a follower truncating
    its log to its leader's). Touching a page past the new end raised SIGBUS and ended the
    process; now the batches read before are shown, then one log_shrank_while_read item,
    and nothing decoded from the vanished pages. A cut inside the map's last page faults
    nothing (the rest of the page reads as zeros): it was said as a zero tail. Both the
    located trees and the compiled values path (the bulk outputs) read through the
    guarded map, and so does KDISSECT_PURE (the guard decodes nothing)."""
    part = tmp_path / "t-0"
    part.mkdir()
    # pages: each batch spans pages, the second starts past the cut (4096); last page: 20
    # small batches in one page, the last one cut off
    value = b"v" * (9000 if cut == "pages" else 100)
    body = b"\0" + _varint(0) + _varint(0) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    batch = mh.record_batch(_varint(len(body)) + body, 1)
    (part / "00000000000000000000.log").write_bytes(
        b"".join(struct.pack(">q", i) + batch[8:] for i in range(20))
    )
    to = 4096 if cut == "pages" else 19 * len(batch)
    run = subprocess.run(
        [sys.executable, "-c", _TRUNCATE_WHILE_READ, str(part), values, str(to)],
        env={**os.environ, "KDISSECT_PURE": "1" if values == "pure" else "0"},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    seen = json.loads(run.stdout)
    # what is shown is the file's: trees check the size before each item (the first
    # batch was read before the cut); the bulk paths give on the batches they read clean,
    # all before the cut (in one page: the 19 the cut kept; across pages the next one
    # faults)
    kept = 19 if (values, cut) == ("values", "last page") else 1
    assert [k for k, _ in seen].count("batch") == kept, seen
    assert ["segment", "log_shrank_while_read"] in seen, seen
    assert seen[-1] == ["segment", "log_shrank_while_read"], seen


def test_index_files_a_broker_trims_or_deletes_while_they_are_read(tmp_path, monkeypatch):
    """A broker trims a segment's preallocated index to its entries when the segment
    rolls, and deletes indexes with their segments. Trimmed between two reads of a
    chunk, kdissect kept a chunk of the old zeros (4 MiB: "4 bytes after the last whole
    12-byte entry", trailing_bytes); deleted after the listing, the item named the file
    twice and gave no hint. Now the bytes past the new end are not kept, and a deleted
    index is said as gone from a live log dir."""
    import kdissect.bounded as bounded
    from kdissect.protocol import Options
    from kdissect.sources import logdir
    from kdissect.sources.logunits import walk

    part = tmp_path / "t-0"
    _segments_of_one_record(tmp_path, "t-0")
    entries = struct.pack(">qi", 1_700_000_000_000, 0)
    timeindex = part / "00000000000000000000.timeindex"
    timeindex.write_bytes(entries + bytes(10 * 2**20 - 12))  # preallocated, as Kafka does
    index = part / "00000000000000000000.index"
    index.write_bytes(bytes(8))
    real_read, real_file_read = os.read, logdir._read

    trimmed = []

    def read_then_trim(fd, n):
        chunk = real_read(fd, n)
        if os.fstat(fd).st_ino == timeindex.stat().st_ino and not trimmed:
            os.truncate(timeindex, 12)  # the segment rolled after the first chunk
            trimmed.append(len(chunk))
        return chunk

    def read_after_delete(path):
        if path == index:
            path.unlink()
        return real_file_read(path)

    monkeypatch.setattr(bounded.os, "read", read_then_trim)
    monkeypatch.setattr(logdir, "_read", read_after_delete)
    items = {i.path.name: i for i in walk([str(part)], Options(), values=False)}
    tree = items[timeindex.name].tree
    assert trimmed == [4 * 2**20]  # (the race happened: read a chunk, then trimmed)
    assert not [f for f in tree.findings() if f[1] == "trailing_bytes"], tree.findings()
    gone = items[index.name].tree
    assert gone.code == "unreadable_file"
    assert gone.problem == (
        "cannot read it: No such file or directory; skipped (a live log dir: the broker "
        "may have deleted or renamed it after it was listed)"
    ), gone.problem


def test_a_batch_being_written_into_a_preallocated_segment_is_read_once_written(
    tmp_path, monkeypatch
):
    """A broker with log.preallocate appends into the zeros of its active segment in
    place (the size never changes), so a batch can be read half-written. A helper's
    stress of a live broker saw 29 false errors in ~300 reads of such a segment (bad
    magic, nonsense tail, a batch past the end), each clean 1.5 s later. Damage in a
    segment written since it was opened is looked at again before it is said: here the
    third batch is half there when first read, whole at the next look."""
    from kdissect.protocol import Options
    from kdissect.sources import logdir
    from kdissect.sources.logunits import walk

    batch = _segments_of_one_record(tmp_path, "t-0")
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    third = struct.pack(">q", 2) + batch[8:]
    seg.write_bytes(struct.pack(">q", 0) + batch[8:] + struct.pack(">q", 1) + batch[8:])
    at = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(bytes(65536))  # preallocated
    # its time index names the third batch and a fourth, written after the segment's zeros
    # were reached (not an entry past the segment's last batch)
    (tmp_path / "t-0" / "00000000000000000000.timeindex").write_bytes(
        struct.pack(">qi", 0, 2) + struct.pack(">qi", 0, 3)
    )
    real_map = logdir._map
    looked: list[int] = []

    def map_then_begin(path):
        mm = real_map(path)
        with open(seg, "r+b") as f:  # the broker begins the third batch: its offset only
            os.pwrite(f.fileno(), third[:8], at)
        st = seg.stat()
        os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        return mm

    def pause():
        looked.append(1)
        with open(seg, "r+b") as f:  # ... and its write is done
            os.pwrite(f.fileno(), third, at)

    monkeypatch.setattr(logdir, "_map", map_then_begin)
    monkeypatch.setattr(logdir, "_pause", pause, raising=False)  # (new with the looks)
    items = list(walk([str(tmp_path / "t-0")], Options(), values=False))
    batches = [i for i in items if i.kind == "batch" and i.tree is not None]
    assert looked == [1]
    assert [b.tree.code for b in batches][:3] == [None, None, None], [
        (b.tree.code, b.tree.problem) for b in batches
    ]
    assert [b.tree.offset for b in batches][:3] == [0, len(batch), at]
    found = [f for i in items if i.tree is not None for f in i.tree.findings()]
    assert not [f for f in found if f[1] == "time_index_mismatch"], found


def test_a_batch_finished_while_the_next_one_is_searched_for_is_read_not_damage(
    tmp_path, monkeypatch
):
    """A torn batch at the end of a live preallocated segment, unchanged at the looks
    again, is searched past for intact batches; the broker may finish it (and append
    another) meanwhile. Read as damage from bytes read after the search, it was said as
    "magic byte 2, which no Kafka writes" (log_bad_magic, a helper's stress of a live
    broker). Now a batch whole after the search is read again."""
    from kdissect.protocol import Options
    from kdissect.sources import logdir
    from kdissect.sources.logunits import walk

    batch = _segments_of_one_record(tmp_path, "t-0")
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    seg.write_bytes(struct.pack(">q", 0) + batch[8:] + struct.pack(">q", 1) + batch[8:])
    at = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(struct.pack(">q", 2) + bytes(65536))  # the third begun, preallocated
    real_next = logdir._next_batch
    searched: list[int] = []

    def finished_while_searching(mm, pos, size, positions):
        searched.append(pos)
        with open(seg, "r+b") as f:  # the broker finishes the third and appends a fourth
            os.pwrite(
                f.fileno(),
                struct.pack(">q", 2) + batch[8:] + struct.pack(">q", 3) + batch[8:],
                at,
            )
        return real_next(mm, pos, size, positions)

    monkeypatch.setattr(logdir, "_pause", lambda: None)
    monkeypatch.setattr(logdir, "_next_batch", finished_while_searching)
    items = list(walk([str(tmp_path / "t-0")], Options(), values=False))
    batches = [i for i in items if i.kind == "batch" and i.tree is not None]
    assert searched[0] == at
    assert [(b.tree.offset, b.tree.code) for b in batches][:4] == [
        (0, None),
        (len(batch), None),
        (at, None),
        (at + len(batch), None),
    ], [(b.tree.code, b.tree.problem) for b in batches]


def test_a_batch_written_between_its_size_and_its_magic_byte_is_read_again(tmp_path, monkeypatch):
    """A batch's size is read once, its length and magic byte as they are asked for: a
    broker writing into a preallocated segment's zeros meanwhile gave a size from before
    the write (12 bytes: no length yet) and a magic byte from after. kdissect read a
    12-byte batch, then the rest as damage (log_bad_batch and a false sequence_gap, in
    a helper's stress of a live broker). A batch whose size and length disagree is read
    again."""
    from kdissect.protocol import Options
    from kdissect.sources import logdir
    from kdissect.sources.logunits import walk

    batch = _segments_of_one_record(tmp_path, "t-0")
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    seg.write_bytes(struct.pack(">q", 0) + batch[8:])
    at = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(struct.pack(">q", 1) + bytes(65536))  # the second begun: its offset only
    real = logdir.Batch
    landed: list[int] = []

    class WrittenAfterItsSizeWasRead(real):  # type: ignore[misc,valid-type]
        def __init__(self, buf, start, end=None):
            super().__init__(buf, start, end)
            if start == at and end is None and not landed:
                with open(seg, "r+b") as f:  # the rest of the write lands now
                    os.pwrite(f.fileno(), struct.pack(">q", 1) + batch[8:], at)
                landed.append(start)

    monkeypatch.setattr(logdir, "Batch", WrittenAfterItsSizeWasRead)
    for values in (False, True):
        landed.clear()
        items = list(walk([str(tmp_path / "t-0")], Options(), values=values))
        batches = [i for i in items if i.kind == "batch"]
        assert landed == [at]
        whole = [
            i.values[0]["position"] if values else (i.tree.offset, i.tree.length)
            for i in batches[:2]
            if (i.values is not None) == values and (values or i.tree is not None)
        ]
        assert whole == ([0, at] if values else [(0, len(batch)), (at, len(batch))]), [
            i.tree and (i.tree.code, i.tree.problem) for i in batches
        ]
        found = [f for i in items if i.tree is not None for f in i.tree.findings()]
        found += [f for i in items for f in i.findings]
        assert [f[1] for f in found] == ["log_zero_tail"], found


def test_a_segment_the_cleaner_swaps_in_is_not_judged_by_its_predecessors_index(
    tmp_path, monkeypatch
):
    """The log cleaner swaps a cleaned segment in file by file (renames): a listing may
    pair the new segment with the old one's index, read before its own replaces it. The
    old index's entries then named positions past the new, smaller segment
    (index_past_end and time_index_mismatch, in a helper's stress of a live broker).
    Entries about to be said to name no batch, of a segment changed in the last seconds,
    are looked at a moment later: an index replaced meanwhile is not judged. An index
    that stays is (a log dir copied a moment ago, damaged)."""
    from kdissect.protocol import Options
    from kdissect.sources import logdir
    from kdissect.sources.logunits import walk

    batch = _segments_of_one_record(tmp_path, "t-0")
    part = tmp_path / "t-0"
    seg = part / "00000000000000000000.log"
    seg.write_bytes(batch)  # the cleaned segment: one batch of the old three
    old_index = struct.pack(">ii", 0, 0) + struct.pack(">ii", 2, 2 * len(batch))
    (part / "00000000000000000000.index").write_bytes(old_index)
    swapped_in = part / "00000000000000000000.index.swap"
    swapped_in.write_bytes(bytes(8))  # the cleaned segment's own index (no entry yet)

    def pause():
        if swapped_in.exists():  # the cleaner's next rename
            os.replace(swapped_in, part / "00000000000000000000.index")

    monkeypatch.setattr(logdir, "_pause", pause)
    items = list(walk([str(part)], Options(), values=False))
    found = [f for i in items if i.tree is not None for f in i.tree.findings()]
    assert not [f for f in found if f[1] in ("index_past_end", "index_bad_entry")], found
    assert not swapped_in.exists()  # (the rename happened while it was read)
    # the same pairing, not swapped: said
    (part / "00000000000000000000.index").write_bytes(old_index)
    items = list(walk([str(part)], Options(), values=False))
    found = [f for i in items if i.tree is not None for f in i.tree.findings()]
    assert [f[1] for f in found if f[1].startswith("index")] == ["index_past_end"], found


def test_a_url_log_dir_copied_while_its_broker_trims_and_appends(tmp_path, monkeypatch):
    """A URL's partition is copied file by file. An index trimmed while copied kept the old
    zeros past its new end (a false trailing_bytes, in a helper's stress of a live
    broker); an index copied after its segment named batches appended since (a false
    time_index_mismatch). Now the copy keeps nothing past the file's size after it, and
    segments are copied last."""
    from fsspec.implementations.local import LocalFileSystem

    from kdissect.protocol import Options
    from kdissect.sources.logunits import walk

    root = _log_dir(tmp_path / "logs")
    batch = _segments_of_one_record(root, "a-0")
    timeindex = root / "a-0" / "00000000000000000000.timeindex"
    timeindex.write_bytes(struct.pack(">qi", 0, 0) + bytes(10 * 2**20 - 12))  # preallocated
    later = root / "a-0" / "00000000000000000003.log"
    later.write_bytes(struct.pack(">q", 3) + batch[8:])
    real_get = LocalFileSystem.get_file
    copied: list[str] = []

    def get_then_trim(self, rpath, lpath, *args, **kwargs):
        real_get(self, rpath, lpath, *args, **kwargs)
        copied.append(Path(rpath).name)
        if Path(rpath) == timeindex:
            os.truncate(timeindex, 12)  # the segment rolled while the index was copied
        if Path(rpath) == later:
            later.unlink()  # deleted once copied (retention): kept as copied

    monkeypatch.setattr(LocalFileSystem, "get_file", get_then_trim)
    items = list(walk([root.as_uri()], Options(), values=False))
    assert timeindex.name in copied
    a0 = [n for n in copied if n.startswith("000")]
    assert a0[-1].endswith(".log"), copied  # the segment last
    found = [f for i in items if i.tree is not None for f in i.tree.findings()]
    assert not [f for f in found if f[1] == "trailing_bytes"], found
    # a segment deleted once copied (retention) is read as copied
    batches = [i.path.name for i in items if i.kind == "batch" and i.tree is not None]
    assert later.name in batches
    assert not [i for i in items if i.tree is not None and i.tree.code == "unreadable_file"]


def test_a_url_log_dir_copied_while_the_cleaner_swaps_a_segment_in(tmp_path, monkeypatch):
    """The log cleaner swaps a cleaned segment in file by file (renames). A URL's copy
    took the old index, then the new, smaller segment: the index named positions past
    its end (index_past_end, in a helper's stress of a live broker). A partition with a
    file replaced while it was copied is copied again."""
    from fsspec.implementations.local import LocalFileSystem

    from kdissect.protocol import Options
    from kdissect.sources.logunits import walk

    root = _log_dir(tmp_path / "logs")
    batch = _segments_of_one_record(root, "a-0")
    part = root / "a-0"
    index = part / "00000000000000000000.index"
    seg = part / "00000000000000000000.log"
    seg.write_bytes(batch * 3)  # before cleaning: three batches, an entry for the third
    index.write_bytes(struct.pack(">ii", 2, 2 * len(batch)))
    real_get = LocalFileSystem.get_file
    swapped: list[str] = []

    def get_then_swap(self, rpath, lpath, *args, **kwargs):
        real_get(self, rpath, lpath, *args, **kwargs)
        if Path(rpath) == index and not swapped:  # the cleaner swaps its segment in now
            cleaned = part / "cleaned.tmp"
            cleaned.write_bytes(batch)
            os.replace(cleaned, seg)
            cleaned.write_bytes(bytes(8))  # its index: no entry
            os.replace(cleaned, index)
            swapped.append(rpath)

    monkeypatch.setattr(LocalFileSystem, "get_file", get_then_swap)
    items = list(walk([root.as_uri()], Options(), values=False))
    assert swapped
    found = [f for i in items if i.tree is not None for f in i.tree.findings()]
    assert not [f for f in found if f[1].startswith("index")], found
    batches = [i for i in items if i.kind == "batch" and i.tree is not None]
    assert [b.path.name for b in batches] == [seg.name]


def test_a_url_log_dir_copied_while_the_cleaner_merges_segments(tmp_path, monkeypatch):
    """The cleaner merges segments into the first of them and deletes the others. Copied
    before the merge, the others stayed in the copy beside the merged segment copied
    again: their batches overlapped it (offset_not_monotonic, in a helper's fourth stress
    of a live broker). A partition with a file replaced while it was copied is copied
    again whole, from a new listing."""
    from fsspec.implementations.local import LocalFileSystem

    from kdissect.protocol import Options
    from kdissect.sources.logunits import walk

    root = _log_dir(tmp_path / "logs")
    batch = _segments_of_one_record(root, "a-0")
    part = root / "a-0"
    first, second = part / "00000000000000000000.log", part / "00000000000000000003.log"
    third = struct.pack(">q", 3) + batch[8:]
    second.write_bytes(third)
    real_get = LocalFileSystem.get_file
    merged: list[str] = []

    def get_then_merge(self, rpath, lpath, *args, **kwargs):
        real_get(self, rpath, lpath, *args, **kwargs)
        if Path(rpath) == second and not merged:  # both copied: the cleaner merges them
            swap = part / "00000000000000000000.log.swap"
            swap.write_bytes(batch + third)
            os.replace(swap, first)
            second.unlink()
            merged.append(rpath)

    monkeypatch.setattr(LocalFileSystem, "get_file", get_then_merge)
    items = list(walk([root.as_uri()], Options(), values=False))
    assert merged
    found = [f[1] for i in items if i.tree is not None for f in i.tree.findings()]
    found += [f.code for i in items for f in i.findings]
    assert "offset_not_monotonic" not in found, found  # (offsets 1..2: compacted away)
    batches = [i for i in items if i.kind == "batch" and i.tree is not None]
    assert [(b.path.name, b.tree.offset) for b in batches] == [
        (first.name, 0),
        (first.name, len(batch)),
    ]
