"""``kdissect pcap --format parquet`` imports pyarrow without numpy (pipeline/lean_arrow.py)
and writes the same tables as a process where numpy was already imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import sys
{first}
from kdissect.cli.entry import main
sys.argv = ["kdissect", "pcap", "captures/kafka-python-codecs.pcap", "captures/kcat.pcap",
            "--format", "parquet", "-o", sys.argv[1], "--records-output", sys.argv[2]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print("numpy" in sys.modules)
"""


@pytest.mark.slow                      # two CLI runs with pyarrow
def test_tables_alike_without_numpy(tmp_path):
    got = {}
    for name, first in (("lean", ""), ("numpy", "import numpy")):
        ex, rec = tmp_path / f"{name}-x.parquet", tmp_path / f"{name}-r.parquet"
        res = subprocess.run([sys.executable, "-c", RUN.format(first=first), str(ex), str(rec)],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert res.returncode == 0, res.stderr
        got[name] = (res.stdout.split(), pq.read_table(ex), pq.read_table(rec))
    assert got["lean"][0] == ["False"] and got["numpy"][0] == ["True"]
    assert got["lean"][1].num_rows > 50 and got["lean"][2].num_rows > 40
    for i in (1, 2):
        assert got["lean"][i].equals(got["numpy"][i])
        assert got["lean"][i].schema.equals(got["numpy"][i].schema, check_metadata=True)
