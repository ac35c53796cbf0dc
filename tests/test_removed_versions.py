"""removed_version comes from Kafka's own jars: the generated table agrees with what the
kafka-clients of 3.9 and every 4.x release accept (ApiMessageType's version ranges, read
by Java), and the diagnosis names the release that refuses each version."""

import subprocess
import sys
from pathlib import Path

import pytest

from kdissect.protocol.removed_versions import REMOVED

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # Java, and mvn the first time (the jars)
def test_the_table_is_what_kafkas_jars_say():
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts/kafka/removed_versions.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]


def test_the_versions_the_issue_named():
    # KIP-896 in 4.0: JoinGroup v0-1 and ListOffsets v0 among them
    assert REMOVED[11, 0] == REMOVED[11, 1] == REMOVED[2, 0] == REMOVED[0, 2] == "4.0"
    assert (11, 2) not in REMOVED and (2, 1) not in REMOVED and (0, 3) not in REMOVED
    # Share* v0: 4.0 still accepts it (early access); 4.1 does not
    for key in (76, 77, 78, 79):
        assert REMOVED[key, 0] == "4.1"
