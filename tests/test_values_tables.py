"""The records table in one process (`kdissect pcap --format parquet --records-output`):
the rows the Spark job writes (tests/test_spark.py compares those with capture_rows); the
value columns stay null without schemas (tests/test_values_real.py fills them from the
real broker's values)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from kdissect.cli import main
from kdissect.pipeline.extract import capture_rows
from kdissect.pipeline.tables import RECORDS
from kdissect.sources.pcap import DEFAULT_PORTS

CODECS = Path(__file__).resolve().parents[1] / "captures" / "kafka-python-codecs.pcap"


def test_records_output_in_one_process(tmp_path: Path):
    res = CliRunner().invoke(
        main,
        [
            "pcap",
            str(CODECS),
            "--format",
            "parquet",
            "-o",
            str(tmp_path / "x.parquet"),
            "--records-output",
            str(tmp_path / "r.parquet"),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.schema.names == RECORDS.names
    rows = table.to_pylist()
    expected = capture_rows([(str(CODECS), str(CODECS))], DEFAULT_PORTS, True, True, print).records
    assert len(rows) == len(expected) == 40
    assert sorted(r["offset"] for r in rows) == sorted(r["offset"] for r in expected)
    assert all(r["value_json"] is None and r["value_schema"] is None for r in rows)
    res = CliRunner().invoke(main, ["pcap", str(CODECS), "--records-output", "r.parquet"])
    assert res.exit_code == 2 and "--format parquet" in res.output


def test_pcap_filter_into_internal_topic_values():
    """`kdissect pcap -Y` on the exchanges path: KRaft's __cluster_metadata records in
    Fetch responses, decoded by Kafka's own schemas (read located, not values-only)."""
    import json

    kraft = CODECS.parent / "kafka-kraft-cluster.pcap"

    def lines(*args: str) -> list[dict]:
        res = CliRunner().invoke(
            main,
            ["pcap", str(kraft), "--no-tui", "--format", "jsonl", "-j", "1", *args],
            catch_exceptions=False,
        )
        assert res.exit_code == 0, res.output
        return [json.loads(line) for line in res.output.splitlines()]

    def brokers(m: dict) -> set:
        text = json.dumps(m)
        return {
            int(x)
            for x in __import__("re").findall(
                r'"BrokerRegistrationChangeRecord": \{"broker_id": (\d+)', text
            )
        }

    every = lines()
    want = {m["index"] for m in every if 2 in brokers(m)}
    got = lines("-Y", "record.value.BrokerRegistrationChangeRecord.broker_id == 2")
    assert want and want <= {m["index"] for m in got}
    assert all(2 in brokers(m) for m in got if m["direction"] == "response")


def test_recent_values_are_bounded_and_shared(tmp_path: Path, monkeypatch):
    """JSON lines' cache of decoded values (values_schema/fast.py): a value seen again
    is not decoded again, counts the same toward the budget, and what is kept is
    bounded by values and by bytes."""
    import json

    from kdissect.protocol.values_schema import fast
    from kdissect.schemas_source import Schemas
    from tests.test_values_real import _orders
    from tests.test_values_schema import ORDER, avro_bytes, framed

    (tmp_path / "3.avsc").write_text(json.dumps(ORDER))
    source = Schemas(tmp_path)
    raws = [framed(3, avro_bytes(ORDER, v)) for v in _orders(30)]
    first, again = [0], [0]
    value, sid = fast.value_json(source, raws[0], "value", first)
    assert fast.value_json(source, raws[0], "value", again) == (value, 3)
    assert again == first and first[0] > 10
    recent = fast._RECENT[source.by_id(3)]
    monkeypatch.setattr(fast._Recent, "VALUES", 5 * first[0])
    monkeypatch.setattr(fast._Recent, "BYTES", 10_000)
    for raw in raws:
        fast.value_json(source, raw, "value")
    assert recent.held <= recent.VALUES and len(recent.entries) <= 5
    assert list(recent.entries)[-1] == raws[-1]  # the newest kept
    monkeypatch.setattr(fast._Recent, "BYTES", 3 * len(raws[0]))
    for raw in raws[:10]:
        fast.value_json(source, raw, "value")
    assert recent.held_bytes <= recent.BYTES and len(recent.entries) <= 3
