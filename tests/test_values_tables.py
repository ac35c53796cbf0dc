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
    res = CliRunner().invoke(main, ["pcap", str(CODECS), "--format", "parquet", "-o",
                                    str(tmp_path / "x.parquet"), "--records-output",
                                    str(tmp_path / "r.parquet")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.schema.names == RECORDS.names
    rows = table.to_pylist()
    expected = capture_rows([(str(CODECS), str(CODECS))], DEFAULT_PORTS, True, True,
                            print).records
    assert len(rows) == len(expected) == 40
    assert sorted(r["offset"] for r in rows) == sorted(r["offset"] for r in expected)
    assert all(r["value_json"] is None and r["value_schema"] is None for r in rows)
    res = CliRunner().invoke(main, ["pcap", str(CODECS), "--records-output", "r.parquet"])
    assert res.exit_code == 2 and "--format parquet" in res.output
