"""Real pastes, as found in public client test suites, tester logs and protocol write-ups
(tests/data/real_pastes, each file's source in cases.json): `kdissect blob` must find the
bytes in the text around them and name every message right without hints.

The truth of each case is checked by an independent decoder, kafka-python's protocol
classes (tests/support/kafka_python_oracle.py: the message must read back byte for byte,
and the fields the source's own test asserts must have the values it asserts); the
expected bytes in cases.json were written from the sources, not from kdissect."""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

import pytest

from kdissect.blob import find_candidates
from kdissect.protocol import api_key_of
from kdissect.cli.blob_cmd import read_text
from kdissect.sources.pasted import Hints
from tests.support.kafka_python_oracle import decode, field

DATA = Path(__file__).parent / "data" / "real_pastes"
CASES = json.loads((DATA / "cases.json").read_text())
GOAL = 0.9


def frames(case: dict) -> list[bytes]:
    """The expected messages' bytes (after each size prefix)."""
    data, pos, out = bytes.fromhex(case["hex"]), 0, []
    if case.get("unprefixed") or case["messages"][0].get("body"):
        return [data]  # one message (or body) without a size prefix
    for _ in case["messages"]:
        size = struct.unpack_from(">i", data, pos)[0]
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    assert pos == len(data), "cases.json: the messages do not add up to the bytes"
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_truth_is_what_kafka_python_reads(case):
    """Independent of kdissect: kafka-python reads each expected message back byte for
    byte, with the field values the source asserts."""
    for frame, m in zip(frames(case), case["messages"]):
        msg = decode(frame, m["api"], m["version"], m["direction"], m.get("body", False))
        for path, value in m["fields"].items():
            assert field(msg, path) == value, (case["file"], path)
    if "crc_mismatch" in case.get("problems", ()):
        # the fixture's message CRC really is wrong: zlib's CRC-32 of the bytes it covers
        data = bytes.fromhex(case["hex"])
        at = data.index(b"\x00\x01\xff\xff\xff\xff") - 4  # magic 0, gzip, null key
        assert zlib.crc32(data[at + 4 :]) != int.from_bytes(data[at : at + 4], "big")


def hints_of(args: list[str]) -> Hints:
    """The Hints that the command line options in cases.json stand for."""
    h = Hints()
    it = iter(args)
    for a in it:
        if a == "--body":
            h.body = True
        elif a == "--api":
            h.api_key = api_key_of(next(it))
        elif a == "--version":
            h.api_version = int(next(it))
        elif a in ("--request", "--response"):
            h.direction = a[2:]
    return h


def verdict(case: dict, hints: Hints | None = None) -> str:
    """'' when kdissect reads the paste right, else what it got wrong."""
    text = (DATA / case["file"]).read_text()
    try:
        reading = read_text(text, hints or Hints()).reading
    except ValueError as e:
        return f"refused: {e}"
    items = list(reading.items)
    for frame, m in zip(frames(case), case["messages"]):
        while items and items[0].message.data != frame:
            items.pop(0)
        if not items:
            return f"the bytes of the {m['direction']} were not found (read as {reading.label})"
        item = items.pop(0)
        msg = item.message
        versions = {msg.api_version} | set(item.candidates[0].versions if item.candidates else ())
        if (msg.api_key, msg.direction) != (m["api"], m["direction"]) or m[
            "version"
        ] not in versions:
            return f"named {msg.title}, not key {m['api']} v{m['version']} {m['direction']}"
        codes = {code for _, code, _ in msg.tree.findings()}
        if not item.clean and not (codes and codes <= set(case.get("problems", ()))):
            return f"{msg.title} does not decode cleanly"
    return ""


def names_the_hint(case: dict, hint: list[str]) -> bool:
    """kdissect's own answer, unhinted, says which option would settle it."""
    text = (DATA / case["file"]).read_text()
    said = " ".join(i.how for i in read_text(text).reading.items)
    return all(option in said for option in hint if option in ("--api", "--body"))


def score() -> tuple[float, list[str]]:
    lines, right = [], 0
    for case in CASES:
        wrong = verdict(case)
        if not wrong:
            right += 1
            continue
        hint = case.get("hint")
        fixed = (
            hint is not None and not verdict(case, hints_of(hint)) and names_the_hint(case, hint)
        )
        lines.append(
            f"  {case['file']}: {wrong}"
            + (
                f"; right with the hint {' '.join(hint)}"
                if fixed
                else "; no hint listed makes it right"
                if hint is None
                else f"; still wrong with {' '.join(hint)}"
            )
        )
    return right / len(CASES), lines


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_real_pastes_read_right_without_hints(capsys):
    share, lines = score()
    report = (
        f"{len(CASES)} real pastes: {share:.0%} read right without hints "
        f"(goal {GOAL:.0%})\n" + "\n".join(lines)
    )
    with capsys.disabled():
        print("\n" + report)
    assert len(CASES) >= 40
    assert share >= GOAL, report
    # every case that needs a hint names it, and the hint makes it right
    assert all("right with the hint" in line for line in lines), report


def test_cases_hold_text_and_several_literals():
    """At least 10 pastes have text, several literals or comments around the bytes: more
    than one region that can be bytes, a comment, or a line of three words or more."""

    def words(line: str) -> int:
        return sum(len(w) > 1 and w.isalpha() for w in re.split(r"[^A-Za-z]+", line))

    busy = []
    for case in CASES:
        text = (DATA / case["file"]).read_text()
        lines = text.splitlines()
        if (
            len(find_candidates(text)) > 1
            or any(re.search(r"(//|#|%|--) *[A-Za-z]", line) for line in lines)
            or any(words(line) >= 3 for line in lines)
        ):
            busy.append(case["file"])
    assert len(busy) >= 10, busy
    several = [c["file"] for c in CASES if len(find_candidates((DATA / c["file"]).read_text())) > 1]
    assert len(several) >= 10, several


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_pastes_with_lines_ended_by_cr_read_as_with_lf():
    """A terminal pastes each newline as CR (xterm, tmux, GNOME Terminal): a dump of many
    lines was read as its first line. Every real paste, its line ends made CR, gives the
    bytes it gives with LF."""
    for case in CASES:
        text = (DATA / case["file"]).read_text()
        want = read_text(text).blob.data
        assert "\n" in text.strip(), case["file"]
        assert read_text(text.replace("\n", "\r")).blob.data == want, case["file"]
