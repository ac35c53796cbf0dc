"""Reading a paste: whole or split into size-prefixed messages, whichever decodes best."""

import struct
from pathlib import Path

from kdissect.sources.paste_choice import read_paste
from kdissect.sources.pasted import Hints
from tests.support.cli import kdissect_text as kdissect

ROOT = Path(__file__).resolve().parents[1]

# An ApiVersions v0 response with correlation id 6: its first bytes also read as a chain
# of size-prefixed messages (6 bytes, then a "size" 8 made of api_key 0, min_version 8)
API_VERSIONS_V0 = (
    struct.pack(">ihi", 6, 0, 2) + struct.pack(">hhh", 0, 8, 9) + struct.pack(">hhh", 1, 0, 11)
)


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
    out = kdissect(
        "blob", API_VERSIONS_V0.hex(), "--api", "ApiVersions", "--version", "0", "--response"
    )
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
    ex = next(
        e
        for e in exchanges_in([str(capture)]).exchanges
        if e.first.api_key == 3 and e.request is not None
    )
    newest = schemas.all_versions()[3][-1]
    data = ex.request.data[:2] + struct.pack(">h", newest + 2) + ex.request.data[4:]
    msg = decode_request(data)
    assert msg.assumed_from == newest and msg.api_version == newest + 2
    assert msg.problems == [] and msg.body.plain()["topics"]
    ex.request.data, ex.request.api_version = data, newest + 2
    ex.findings.clear()
    enrich(ex, Options(), {}, {})
    assert ex.has("assumed_version")


def test_a_key_no_release_defines_is_not_given_a_layout():
    """The key after the pinned release's last (Kafka 4.4: 95) is named by its number and
    its body is not guessed (key 93 was such a key until 4.4 defined it)."""
    from kdissect.protocol import decode_request, schemas

    key = max(schemas.all_versions()) + 1
    msg = decode_request(struct.pack(">hhih", key, 0, 5, 4) + b"test" + b"\x00" + b"\x01\x02")
    assert msg.title == f"ApiKey{key} v0 Request"
    assert [text for _, text in msg.problems] == [f"API key {key} is not in kdissect's schemas"]


# -- the paste corpus (captures/blobs/pastes, made by tests/support/make_pastes.py) -------

import json  # noqa: E402

import pytest  # noqa: E402

from kdissect.blob import parse_blob  # noqa: E402
from kdissect.cli.blob_cmd import read_text  # noqa: E402

BLOBS = ROOT / "captures" / "blobs"
CORPUS = json.loads((BLOBS / "corpus.json").read_text())


@pytest.mark.parametrize("case", CORPUS, ids=[c["file"] for c in CORPUS])
def test_corpus(case):
    """Each paste: its bytes extracted exactly; the right API where the bytes say it;
    bodies and bare batches decoded with hints; findings and ambiguity where due."""
    text = (BLOBS / "pastes" / case["file"]).read_bytes()
    assert parse_blob(text).data.hex() == case["bytes"]  # the whole-text reading
    h = case.get("hints", {})
    # and what `kdissect blob` reads: the best of every candidate region
    found = read_text(
        text,
        Hints(
            h.get("api"),
            h.get("version"),
            h.get("direction"),
            h.get("body", False),
            h.get("records", False),
        ),
    )
    assert found.blob.data.hex() == case["bytes"]
    reading = found.reading
    first = reading.items[0]
    msg = first.message
    assert len(reading.items) == case.get("messages", 1)
    assert reading.skipped == case.get("skipped", 0)
    if case.get("expect") == ["records"]:
        assert msg.direction == "records" and msg.problems == []
        assert any(n.ktype in ("record_batch", "message") for n in msg.tree.walk())
    elif case.get("expect"):
        assert [msg.api_name, msg.api_version, msg.direction] == case["expect"]
    if "finding" in case:
        assert case["finding"] in [f.code for f in first.findings]
    else:
        assert all(i.message.problems == [] for i in reading.items), msg.tree.findings()
    if case.get("ambiguous"):
        assert "ambiguous" in first.how and sum(c.clean for c in first.candidates) > 1


def test_corpus_covers_every_shape_of_the_issue():
    files = {c["file"] for c in CORPUS}
    assert len(files) == len(CORPUS) >= 25
    assert {p.name for p in (BLOBS / "pastes").iterdir()} == files


def test_tcpdump_packets_are_paired_in_the_paste():
    """Real tcpdump -X output of four packets: the TCP payloads are two exchanges, and
    each response is decoded as its request's API by the correlation core."""
    blob = parse_blob((BLOBS / "pastes" / "tcpdump-X.txt").read_text())
    assert any("IP and TCP headers of 4 packet(s)" in s for s in blob.skipped)
    assert any("not dump lines" in s for s in blob.skipped)  # the summary lines
    reading = read_paste(blob.data)
    titles = [i.message.title for i in reading.items]
    assert titles == [
        "ApiVersions v3 Request",
        "ApiVersions v3 Response",
        "Metadata v12 Request",
        "Metadata v12 Response",
    ]
    assert reading.items[3].how.startswith("paired with request")


def test_body_without_hints_is_guessed():
    """A response body alone (kafkajs fixtures hold them so) is guessed over every layout."""
    case = next(c for c in CORPUS if c["file"] == "node-buffer.json")
    reading = read_paste(bytes.fromhex(case["bytes"]), Hints(body=True))
    msg = reading.items[0].message
    assert (msg.api_name, msg.direction) == ("Metadata", "response") and msg.problems == []
    assert 12 in reading.items[0].candidates[0].versions


def test_a_request_with_a_bad_body_keeps_its_header():
    data = bytes.fromhex(next(c for c in CORPUS if c["file"] == "js-concat.js")["bytes"])
    broken = data[:-6] + b"\xff\xff\xff\xff\xff\xff"
    (item,) = read_paste(broken).items
    assert item.message.direction == "request" and item.message.api_name == "FindCoordinator"
    assert item.message.client_id is not None and item.message.problems
    assert "its body does not decode cleanly" in item.how


def test_at_offset_starts_reading_there():
    data = bytes.fromhex(next(c for c in CORPUS if c["file"] == "fragment.txt")["bytes"])
    reading = read_paste(data, Hints(at=20))
    assert reading.label.startswith("2 size-prefixed messages") and reading.skipped == 20
    assert reading.items[0].offset == 24


@pytest.mark.slow
def test_snapshot_layouts_equal_kio():
    """The shipped snapshot (kdissect/protocol/kio_snapshot.json.gz) is what kio gives:
    remake it with `python -m codegen.snapshot` when this fails."""
    import gzip

    from codegen import snapshot

    shipped = json.loads(
        gzip.decompress((ROOT / "kdissect" / "protocol" / snapshot.FILE).read_bytes())
    )
    assert shipped == json.loads(json.dumps(snapshot.build()))


def test_guessing_answers_at_once():
    """No hints, the seed's 319-byte Metadata v0 response: every layout tried, well
    under a second (the benchmark, benchmarks/blob_guess.py, times the whole command)."""
    import re
    import time

    data = bytes(
        int(x) for x in re.findall(r"\d+", (BLOBS / "metadata-v0-response.erl").read_text())
    )
    read_paste(data)  # layouts loaded once
    start = time.process_time()
    reading = read_paste(data)
    assert time.process_time() - start < 1.0
    assert reading.items[0].message.title == "Metadata v0 Response"


# -- issue 40: the bytes found by search; a prefix larger than the bytes; bare messages ---

import base64  # noqa: E402

from kdissect.protocol import api_key_of  # noqa: E402

REAL = Path(__file__).parent / "data" / "real_pastes"
REQUEST = bytes.fromhex("000000140012000200000001000a636f6e73756d65722d31")  # ApiVersions v2


def _real(name: str) -> bytes:
    cases = {c["file"]: c for c in json.loads((REAL / "cases.json").read_text())}
    return bytes.fromhex(cases[name]["hex"])


SHAPES = {  # the shapes the issue names; each holds REQUEST among other text
    "markdown fence, prompt and prose": "I send this by hand:\n\n```\n$ echo -n "
    + REQUEST.hex()
    + " | xxd -r -p | nc localhost 9092\n```\nGenerating it fails. Why?",
    "prose line before a dump": "Generating the request, then xxd:\n00000000: 0000 0014 0012 "
    "0002 0000 0001 000a 636f  ..............co\n00000010: 6e73 756d 6572 2d31          "
    "            nsumer-1\n",
    "bytes in // comments": "// " + REQUEST.hex(" ") + "\nfn main() {}\n",
    'a rust vec! and b"" literals in its assert': "let v = vec!["
    + ", ".join(map(str, REQUEST))
    + '];\nassert_eq!(r.value, b"0123456789");\nassert_eq!(r.key, b"k1");\n',
    "an erlang assert with more binaries": "?assertEqual(<<"
    + ",".join(map(str, REQUEST))
    + '>>, encode(R)),\n?assertEqual(<<"consumer-1">>, client(R)),\n'
    "?assertEqual([0, 1, 2], partitions(R)).\n",
    "an array of ids after the message": "msg = bytes(["
    + ", ".join(map(str, REQUEST))
    + "])\nassert parts == [0, 1, 2, 3, 4]\n",
    "a tester table with a remote: prefix": "remote: [tester::#NH4] Hexdump of sent request:\n"
    "remote: [tester::#NH4] Idx  | Hex                                             | ASCII\n"
    + "".join(
        f"remote: [tester::#NH4] {i:04x} | {REQUEST[i : i + 16].hex(' '):47} | x\n"
        for i in range(0, len(REQUEST), 16)
    )
    + "remote: [tester::#NH4]\n",
    "base64 in a code string": 'local b64 = "'
    + base64.b64encode(REQUEST).decode()
    + '"\nlocal raw = ngx.decode_base64(b64)\n',
    "an annotated decimal list": "[0, 0, 0, 20,  // size\n 0, 18 (api key), 0, 2 (version),"
    " 0, 0, 0, 1 (correlation id),\n 0, 10, " + ", ".join(map(str, REQUEST[14:])) + "]",
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_bytes_are_found_in_any_text(name):
    found = read_text(SHAPES[name])
    assert found.blob.data == REQUEST, [
        (c.blob.format, c.blob.data.hex()) for c in found.candidates
    ]
    [item] = found.reading.items
    assert (item.message.api_name, item.message.api_version, item.clean) == ("ApiVersions", 2, True)
    assert item.message.client_id == "consumer-1"


def test_a_prefix_larger_than_the_bytes_is_a_message_cut_short():
    """A fixture that holds the first 45 bytes of a 163-byte JoinGroup v5 request (real
    bytes, tests/data/real_pastes): what is there is decoded, the rest marked missing."""
    data = _real("rust-join-group-v5-with-byte-strings.rs")[:45]
    reading = read_paste(data)
    [item] = reading.items
    assert "cut short (41 of 159 bytes)" in reading.label
    assert (item.message.api_name, item.message.api_version) == ("JoinGroup", 5)
    assert item.message.correlation_id == 3 and item.message.client_id == "rdkafka"
    assert [f.code for f in item.findings] == ["truncated"]
    assert "the last 118 are missing" in item.findings[0].detail


def test_a_hint_wins_over_guessing_for_a_message_cut_short():
    """A response has no header to tell it: without hints the guess is free; told the
    API and version, the prefix is believed and the cut-short response is read as told."""
    data = _real("rust-find-coordinator-v1-response.rs")[:40]
    told = read_paste(data, Hints(api_key_of("FindCoordinator"), 1, "response"))
    [item] = told.items
    assert (item.message.api_name, item.message.api_version, item.message.direction) == (
        "FindCoordinator",
        1,
        "response",
    )
    assert item.how == "told: API and version" and item.findings[0].code == "truncated"
    assert item.message.correlation_id == 0
    body = {c.name: c.value for c in item.message.tree.children[1].children}
    assert body["node_id"] == 1002


def test_records_reads_a_bare_v0_message_as_a_message_set_entry():
    """The Perl client's produce fixture holds a v0 message (crc, magic 0, null key,
    'Hello!'); given --records without its offset and size, it is that message, its CRC
    checked, not a partial batch."""
    message = bytes.fromhex("8dc795a20000ffffffff0000000648656c6c6f21")
    [item] = read_paste(message, Hints(records=True)).items
    [entry] = item.message.tree.children[0].children
    fields = {c.name: (c.offset, c.value, c.problem) for c in entry.children}
    assert entry.name == "message" and (entry.offset, entry.length) == (0, 20)
    assert fields["crc"] == (0, 0x8DC795A2, None)  # verifies
    assert fields["value"][:2] == (10, b"Hello!") and fields["key"][1] is None
    assert "bare v0/v1 message" in item.how and not item.message.tree.findings()


def test_show_extraction_lists_the_candidates_and_candidate_picks_one():
    text = (REAL / "tester-log-request-and-response.txt").read_text()
    res = kdissect("blob", text, "--show-extraction", "--no-hex")
    assert res.returncode == 0, res.stderr
    assert "3 candidate region(s), best first" in res.stderr
    assert (
        "1. 62 bytes (hex dumps, joined) from lines 6-14: 2 size-prefixed messages" in res.stderr
        and "<- read" in res.stderr
    )
    other = kdissect("blob", text, "--candidate", "3", "--json")
    out = json.loads(other.stdout)
    assert out["input"]["candidate"] == 3 and out["input"]["length"] == 23
    assert [m["direction"] for m in out["messages"]] == ["response"]
    plain = kdissect("blob", text, "--no-hex")
    assert plain.stderr.startswith(
        "read 62 bytes (hex dumps, joined) from lines 6-14, "
        "candidate 1 of 3 (--show-extraction lists them)"
    )
    bad = kdissect("blob", text, "--candidate", "9")
    assert bad.returncode == 2 and "there is no candidate 9" in bad.stderr


def _cut_responses(per_capture: int) -> list[tuple[bytes, int]]:
    """Real responses of captures/ (≥ 40 bytes), each cut at a random place after a
    third of it, behind its size prefix: (paste, api key)."""
    import random

    from tests.test_values import messages

    rng = random.Random(7)
    out = []
    for path in sorted((ROOT / "captures").glob("*.pcap")):
        answers = [m for m in messages(path) if m[1] == "response" and len(m[0]) >= 40]
        for data, _, key, _ in rng.sample(answers, min(per_capture, len(answers))):
            cut = rng.randint(len(data) // 3, len(data) - 2)
            out.append((struct.pack(">i", len(data)) + data[:cut], key))
    return out


@pytest.mark.slow  # (~10 s: every capture read)
def test_a_response_cut_short_is_read_up_to_where_its_bytes_end():
    """The payload of a large answer's first packet: its size prefix says more bytes than
    were pasted and no header names its API. Every reading ran out of bytes and none
    was told apart: the first bytes were read as a response without a prefix (the prefix
    as its correlation id) and an unknown API. Now running out of bytes counts against
    no reading of a message cut short, and readings rank by the plausible fields they
    read: most are read as cut short and most as the right API; told the API, all are."""
    cases = _cut_responses(6)
    assert len(cases) > 100
    short = right = told_short = told_right = 0
    for paste, key in cases:
        reading = read_paste(paste)
        short += "cut short" in reading.label
        right += reading.items[0].message.api_key == key
        told = read_paste(paste, Hints(api_key=key))
        told_short += "cut short" in told.label
        told_right += told.items[0].message.api_key == key
    # (before: 2 and 34 of 248; told, 177 and all)
    assert short >= 0.9 * len(cases) and right >= 0.5 * len(cases), (short, right, len(cases))
    assert told_short >= 0.95 * len(cases) and told_right == len(cases)


def test_the_first_bytes_of_an_api_versions_answer():
    """ApiVersions v5's answer as Kafka 4.4 sends it, its first 116 of 876 bytes: read as
    ApiVersions v3-v5 (they read those bytes alike), its 15 whole entries decoded."""
    whole = [m for m in _messages_of("kafka44-cluster") if m[1] == "response" and m[2] == 18]
    data = whole[0][0]
    paste = struct.pack(">i", len(data)) + data[:116]
    [item] = read_paste(paste).items
    assert (item.message.api_name, item.message.direction) == ("ApiVersions", "response")
    assert "first bytes of a longer message: read as ApiVersions v3-v5 response" in item.how
    assert item.findings[0].code == "truncated"
    keys = next(n for n in item.message.tree.walk() if n.name == "api_keys")
    assert len([c for c in keys.children if not c.name.startswith("_") and not c.problem]) >= 15


def _messages_of(name: str) -> list:
    from tests.test_values import messages

    return messages(ROOT / "captures" / f"{name}.pcap")


def test_a_request_newer_than_the_tables_names_its_api_without_hints():
    """Real requests of Kafka 4.4's clients (captures/kafka44-cluster.pcap) in a version
    one past the newest kdissect knows, as a newer client sends them: pasted without
    hints, each was guessed as some response ("UpdateRaftVoter v0 Response"), and a
    pasted request and answer did not pair. Each is read as its header says, with the
    newest known layout and the assumed_version note; its answer after it pairs."""
    from kdissect.protocol import schemas

    pairs: dict[int, tuple[bytes, bytes]] = {}
    msgs = _messages_of("kafka44-cluster")
    for (req, d1, key, version), (resp, d2, _, _) in zip(msgs, msgs[1:]):
        newest = max(schemas.all_versions()[key])
        if d1 == "request" and d2 == "response" and version == newest and req[4:8] == resp[:4]:
            pairs.setdefault(key, (req, resp))
    assert len(pairs) >= 5, sorted(pairs)
    for key, (req, resp) in pairs.items():
        newer = req[:2] + struct.pack(">h", max(schemas.all_versions()[key]) + 1) + req[4:]
        [item] = read_paste(struct.pack(">i", len(newer)) + newer).items
        assert (item.message.api_key, item.message.direction) == (key, "request"), key
        assert "assumed_version" in [f.code for f in item.message.tree.findings()] or (
            item.message.assumed_from is not None
        ), key
        both = b"".join(struct.pack(">i", len(m)) + m for m in (newer, resp))
        first, second = read_paste(both).items
        assert second.message.api_key == key and "paired with request" in second.how, key


def test_an_answer_is_not_a_request_of_a_version_past_the_newest():
    """Answers whose correlation id is 14-21 read as a "Produce v14-v21" request header
    (key 0, a version a newer client might speak): without a client id after it, that
    header is not believed, and each answer is read as a response, as before versions
    past the newest were read."""
    from kdissect.protocol import schemas

    newest = max(schemas.all_versions()[0])
    taken = 0
    for name in ("kafka44-cluster", "kafka-clients"):
        for data, direction, key, _ in _messages_of(name):
            corr = struct.unpack_from(">i", data)[0]
            if direction != "response" or not newest < corr <= newest + schemas.NEWER:
                continue
            for paste in (data, struct.pack(">i", len(data)) + data):
                [item] = read_paste(paste).items
                assert item.message.direction == "response", (name, key, corr)
                taken += 1
    assert taken >= 10, taken
