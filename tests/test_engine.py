"""One engine for every path: each repo capture gives the same exchanges in the engine
itself, in `kdissect pcap` text, JSON lines and Parquet, in the TUI's loader, in the
Spark job and in a proxy recording read back; the acks=0 capture gives one exchange
per request; an orphan response stays an exchange everywhere. Also the layering
rules that keep it one engine."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.pipeline.local import write_exchanges
from kdissect.sources.pcap import DEFAULT_PORTS, capture_loader, exchanges_in
from kdissect.tui.loader import Row, run_in_thread

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"
NAMES = sorted(p.stem for p in CAPTURES.glob("*.pcap"))


def spark_exchanges(spark, files: list[str], out: Path) -> list[dict]:
    """The Spark job (on the session's Spark: a JVM of its own per test took ~15 s; the
    `kdissect spark` command around the same job is tests/test_spark.py's) on ``files``
    as the command runs it, the exchanges table read."""
    from kdissect.pipeline.spark_job import run_job

    run_job(spark, files, str(out), ports=DEFAULT_PORTS, detect=True)
    return pq.read_table(out / "exchanges").to_pylist()


def key(api, version, corr, status) -> tuple:
    return (api, version, corr, status)


def engine_keys(exchanges) -> list[tuple]:
    return [
        key(ex.first.api_name, ex.first.api_version, ex.first.correlation_id, ex.status)
        for ex in exchanges
    ]


def text_keys(path: Path) -> list[tuple]:
    out = subprocess.run(
        [sys.executable, "-m", "kdissect", "pcap", "--no-tui", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    ).stdout
    keys = []
    for line in out.splitlines():
        m = re.search(r"  (\w+) v(\d+|\?)  #(-?\d+|None)", line)
        if m is None:  # a SASL token line
            keys.append(("SASL token", None, None, "ok"))
            continue
        status = re.search(r"  \[([^\]]+)\]", line)
        keys.append(
            key(
                m[1],
                None if m[2] == "?" else int(m[2]),
                None if m[3] == "None" else int(m[3]),
                status[1] if status else "ok",
            )
        )
    return keys


def jsonl_keys(path: Path) -> list[tuple]:
    out = subprocess.run(
        [sys.executable, "-m", "kdissect", "pcap", "--format", "jsonl", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    ).stdout
    seen: dict[tuple, tuple] = {}
    for line in out.splitlines():
        m = json.loads(line)
        if "tls_connection" in m:  # a TLS connection's facts, not a message
            continue
        ident = (m["stream"], m["seq"])
        if ident not in seen:  # the exchange's first message names it
            seen[ident] = key(m["api_name"], m["api_version"], m["correlation_id"], m["status"])
    return list(seen.values())


def tui_keys(path: Path) -> list[tuple]:
    items = []
    run_in_thread(capture_loader([str(path)]), None, lambda view: None, items.append)
    return engine_keys(item.view.ex for item in items if isinstance(item, Row))


def row_keys(rows) -> list[tuple]:
    return [key(r["api_name"], r["api_version"], r["correlation_id"], r["status"]) for r in rows]


def recording_keys(exchanges, tmp_path: Path) -> list[tuple]:
    """The exchanges as the proxy records them (one synthetic TCP connection each),
    read back from the pcapng it wrote."""
    import struct
    from kdissect.capture.pcapng_writer import Recorder

    out = tmp_path / "recorded.pcapng"
    recorder = Recorder(str(out), show_secrets=True)
    conns = {}
    for ex in sorted(exchanges, key=lambda e: (e.stream, e.seq)):
        conn = conns.get(ex.stream)
        if conn is None:
            conn = conns[ex.stream] = recorder.connection(ex.client, ex.broker)
        for m in ex.messages:
            side = (
                0 if m.direction == "request" or (m.direction == "sasl" and ex.request is m) else 1
            )
            conn.data(side, struct.pack(">i", len(m.data)) + m.data, m.ts)
    for conn in conns.values():
        conn.close()
    recorder.close()
    return engine_keys(
        exchanges_in([str(out)], ports=DEFAULT_PORTS | {ex.broker[1] for ex in exchanges}).exchanges
    )


@pytest.mark.slow
def test_every_path_gives_the_same_exchanges(spark, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    files = [str(CAPTURES / f"{n}.pcap") for n in NAMES]
    # the CLI runs (a process each, mostly start-up) go on beside the Spark job and the
    # in-process paths, two at a time
    pool = ThreadPoolExecutor(2)
    texts, jsonls = {}, {}
    for n in NAMES:  # (in the order the checks below take them)
        texts[n] = pool.submit(text_keys, CAPTURES / f"{n}.pcap")
        jsonls[n] = pool.submit(jsonl_keys, CAPTURES / f"{n}.pcap")
    try:
        _every_path(spark, tmp_path, files, texts, jsonls)
    finally:
        pool.shutdown(cancel_futures=True)


def _every_path(spark, tmp_path, files, texts, jsonls) -> None:
    spark_rows = spark_exchanges(spark, files, tmp_path / "spark")
    spark_by_capture: dict[str, list] = {}
    for r in spark_rows:
        spark_by_capture.setdefault(Path(r["capture"]).stem, []).append(r)
    for name in NAMES:
        path = CAPTURES / f"{name}.pcap"
        exchanges = exchanges_in([str(path)]).exchanges
        want = engine_keys(exchanges)
        assert want, name
        assert texts[name].result() == want, name
        assert jsonls[name].result() == want, name
        assert tui_keys(path) == want, name
        write_exchanges(
            [str(path)],
            str(tmp_path / f"{name}.parquet"),
            ports=DEFAULT_PORTS,
            detect=True,
            warn=print,
        )
        # tables are ordered by time, not by completion: the same exchanges, in another order
        assert Counter(
            row_keys(pq.read_table(tmp_path / f"{name}.parquet").to_pylist())
        ) == Counter(want), name
        assert Counter(row_keys(spark_by_capture[name])) == Counter(want), name
        assert Counter(recording_keys(exchanges, tmp_path)) == Counter(want), name


def test_acks0_capture_gives_one_exchange_per_request():
    exchanges = exchanges_in([str(CAPTURES / "acks0.pcap")]).exchanges
    produce = [ex for ex in exchanges if ex.first.api_key == 0]
    assert produce and all(ex.request is not None for ex in produce)
    assert len({ex.request.index for ex in produce}) == len(produce)
    answered = [ex for ex in produce if ex.response is not None and not ex.expected]
    assert answered and all(ex.has("acks0_answered") for ex in answered)
    # records are counted once: as produced, in the request
    rows = [r for r in write_rows("acks0") if r["api_name"] == "Produce"]
    assert len(rows) == len(produce)
    assert sum(r["record_count"] for r in rows) == sum(ex.facts.records for ex in produce)


def write_rows(name: str) -> list[dict]:
    from kdissect.pipeline.extract import capture_rows

    path = str(CAPTURES / f"{name}.pcap")
    return capture_rows([(name, path)], DEFAULT_PORTS, True, False, print).exchanges


def cut_request(src: Path, dst: Path, api_key: int) -> int:
    """``src`` without the packet that carries the first request of ``api_key``: its
    response becomes an orphan. Returns the correlation id of that request."""
    from scapy.all import TCP, PcapReader, PcapWriter, Raw

    cut = None
    with PcapReader(str(src)) as reader, PcapWriter(str(dst), sync=True) as writer:
        for pkt in reader:
            payload = bytes(pkt[Raw].load) if pkt.haslayer(Raw) and pkt.haslayer(TCP) else b""
            if (
                cut is None
                and len(payload) >= 12
                and pkt[TCP].dport == 9092
                and int.from_bytes(payload[4:6], "big") == api_key
            ):
                cut = int.from_bytes(payload[8:12], "big")
                continue
            writer.write(pkt)
    assert cut is not None
    return cut


@pytest.mark.slow
def test_an_orphan_response_stays_an_exchange_on_every_path(spark, tmp_path):
    path = tmp_path / "orphan.pcap"
    corr = cut_request(CAPTURES / "aiokafka.pcap", path, 3)  # a Metadata request
    exchanges = exchanges_in([str(path)]).exchanges
    orphans = [ex for ex in exchanges if ex.request is None]
    assert len(orphans) == 1
    orphan = orphans[0]
    assert orphan.has("orphan_response") and orphan.response.correlation_id == corr
    assert orphan.first.api_name == "Metadata" and orphan.has("guessed_api")
    want = key("Metadata", orphan.first.api_version, corr, "orphan (request not captured)")
    assert want in text_keys(path) and want in jsonl_keys(path) and want in tui_keys(path)
    write_exchanges(
        [str(path)], str(tmp_path / "o.parquet"), ports=DEFAULT_PORTS, detect=True, warn=print
    )
    assert want in row_keys(pq.read_table(tmp_path / "o.parquet").to_pylist())
    assert want in row_keys(spark_exchanges(spark, [str(path)], tmp_path / "spark"))


# -- layering ---------------------------------------------------------------------------


def imports_of(path: Path) -> set[str]:
    """The kdissect modules ``path`` imports (resolved), at any depth of the file."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = set()
    from tests.support.package_source import tree

    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("kdissect"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("kdissect"))
    return out


def package_imports(package: str) -> dict[str, set[str]]:
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts): imports_of(p)
        for p in (ROOT / "kdissect" / package).glob("*.py")
    }


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_no_import_cycles_in_protocol():
    imports = package_imports("protocol")  # parsed once (it was once per import)
    graph = {m: {i for i in deps if i in imports and i != m} for m, deps in imports.items()}

    def reaches(start: str, target: str) -> bool:
        """A walk that visits each module once (every simple path took minutes)."""
        seen, todo = set(), list(graph[start])
        while todo:
            d = todo.pop()
            if d == target:
                return True
            if d not in seen:
                seen.add(d)
                todo.extend(graph[d])
        return False

    cycles = sorted(m for m in graph if reaches(m, m))
    assert cycles == [], cycles


def test_framing_and_pairing_live_in_one_place():
    """Nothing outside the framing core unpacks sizes in a loop over a buffer, and
    nothing outside the correlation core keeps requests by correlation id."""
    for path in (ROOT / "kdissect").rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        if rel not in ("kdissect/stream/correlation.py",):
            assert not re.search(r"pending\s*(:\s*dict\[int|=\s*\{\})", text), rel
        if rel not in ("kdissect/stream/framing.py",):
            assert "MAX_FRAME" not in text and not re.search(r"MAX_MESSAGE\s*=", text), rel


@pytest.mark.parametrize("name", ["confluent-group", "kcat"])
def test_findings_are_registered_codes(name):
    from kdissect.protocol.findings import REGISTRY

    for ex in exchanges_in([str(CAPTURES / f"{name}.pcap")]).exchanges:
        for f in ex.findings:
            assert f.code in REGISTRY, f


def test_docs_list_every_finding():
    from kdissect.protocol.findings import markdown_table

    assert markdown_table() in (ROOT / "docs" / "guide" / "findings.md").read_text()
