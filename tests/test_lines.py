"""JSON lines of messages whose bodies enrichment kept are written directly
(render/lines.py ``_kept_values_line``): the same text as encoding ``message_json``'s
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


@pytest.mark.parametrize("show_secrets", [False, True])
def test_kept_values_lines_match_message_json(show_secrets):
    options = Options(show_secrets=show_secrets)
    kept = 0
    for path in CAPTURES:
        sink = _Kept()
        Engine(CaptureFiles([str(path)]), sink, options).run()
        for ex in sink.exchanges:
            for m in ex.messages:
                if m.values is None:
                    continue
                kept += 1
                slow = (
                    _encode(message_json(dataclasses.replace(m), options, ex, enriched_full=False))
                    + "\n"
                )
                assert message_line(m, options, ex, enriched_full=False) == slow, path.name
    assert kept > 500  # the captures hold hundreds of such messages
