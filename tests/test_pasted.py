"""Reading a paste: whole or split into size-prefixed messages, whichever decodes best."""

import struct
import subprocess
import sys
from pathlib import Path

from kdissect.stream.pasted import Hints, read_paste

ROOT = Path(__file__).resolve().parents[1]

# An ApiVersions v0 response with correlation id 6: its first bytes also read as a chain
# of size-prefixed messages (6 bytes, then a "size" 8 made of api_key 0, min_version 8)
API_VERSIONS_V0 = (struct.pack(">ihi", 6, 0, 2) + struct.pack(">hhh", 0, 8, 9)
                   + struct.pack(">hhh", 1, 0, 11))


def test_hints_choose_the_whole_reading_when_the_split_decodes_badly():
    reading = read_paste(API_VERSIONS_V0, Hints(18, 0, "response"))
    assert reading.label == "one message without a size prefix"
    assert "2 size-prefixed messages" in reading.why
    (item,) = reading.items
    assert item.message.correlation_id == 6 and item.message.problems == []
    keys = item.message.body.plain()["api_keys"]
    assert [k["max_version"] for k in keys] == [9, 11]


def test_without_hints_the_candidates_scores_decide():
    reading = read_paste(API_VERSIONS_V0)
    assert reading.label == "one message without a size prefix"
    assert reading.items[0].message.api_name == "ApiVersions"


def test_a_real_chain_of_messages_is_still_split():
    capture = ROOT / "captures" / "kcat.pcap"
    from kdissect.sources.pcap import exchanges_in
    ex = next(e for e in exchanges_in([str(capture)]).exchanges if e.response is not None)
    paste = b"".join(struct.pack(">i", len(m.data)) + m.data for m in ex.messages)
    reading = read_paste(paste)
    assert reading.label == "2 size-prefixed messages"
    request, response = reading.items
    assert request.message.api_key == response.message.api_key == ex.first.api_key
    assert response.how.startswith("paired with request")


def test_the_cli_says_which_reading_it_chose():
    out = subprocess.run([sys.executable, "-m", "kdissect", "blob", API_VERSIONS_V0.hex(),
                          "--api", "ApiVersions", "--version", "0", "--response"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "as one message without a size prefix (chosen over 2 size-prefixed" in out.stderr


def test_a_version_newer_than_the_schemas_decodes_with_the_newest_layout():
    """A real Metadata v12 request from kcat, its version raised past what kdissect knows
    (Metadata's request layout has not changed since): read with the newest layout and
    flagged as assumed."""
    from kdissect.protocol import Options, decode_request, schemas
    from kdissect.sources.pcap import exchanges_in
    from kdissect.stream.enrich import enrich
    capture = ROOT / "captures" / "kcat.pcap"
    ex = next(e for e in exchanges_in([str(capture)]).exchanges
              if e.first.api_key == 3 and e.request is not None)
    newest = schemas.all_versions()[3][-1]
    data = ex.request.data[:2] + struct.pack(">h", newest + 2) + ex.request.data[4:]
    msg = decode_request(data)
    assert msg.assumed_from == newest and msg.api_version == newest + 2
    assert msg.problems == [] and msg.body.plain()["topics"]
    ex.request.data, ex.request.api_version = data, newest + 2
    ex.findings.clear()
    enrich(ex, Options(), {}, {})
    assert ex.has("assumed_version")


def test_key_93_is_not_given_a_layout_no_release_has():
    """Kafka 4.3 defines no key 93; trunk gave it to StreamsGroupTopologyDescriptionUpdate
    (an earlier trunk had GetReplicaLogInfo there): named, but the body is not guessed."""
    from kdissect.protocol import decode_request
    msg = decode_request(struct.pack(">hhih", 93, 0, 5, 4) + b"test" + b"\x00" + b"\x01\x02")
    assert msg.title == "StreamsGroupTopologyDescriptionUpdate v0 Request"
    assert [text for _, text in msg.problems] == ["API key 93 is not in kdissect's schemas"]
