"""The compiled request head (native/src/head.rs, ``message.request_head``) against its
reference, ``message.python_request_head`` (``peek_request_header`` and ``produce_acks``):
on every request of every capture under captures/ and on damaged copies of them (cut
anywhere, bytes flipped, client ids that are not UTF-8, lengths past the end, versions
newer than the tables), the same answer; where the compiled path says False, Python
reads it."""

from __future__ import annotations

import random

import pytest


from kdissect.protocol import message
from kdissect.protocol.apis import PRODUCE
from tests.fuzz.msgvalues_target import messages

from tests.support.native_check import require_compiled
from tests.support.repo_captures import every_capture

CAPTURES = every_capture()


@pytest.fixture(autouse=True)
def _compiled():
    require_compiled(message, "_REQUEST_HEAD")


_REQUESTS: list[bytes] = []


def requests() -> list[bytes]:
    if not _REQUESTS:
        _REQUESTS.extend(d for d, direction, _, _ in messages(CAPTURES) if direction == "request")
    return _REQUESTS


def same(data: bytes) -> bool:
    """Whether the compiled read is the reference's (True when it leaves it to Python)."""
    slow = message.python_request_head(data)  # (fills the header versions' table)
    fast = message._REQUEST_HEAD(data, message._HEADER_VERSIONS)
    assert fast is False or fast == slow, (data[:64], fast, slow)
    if fast is not False and fast is not None:
        assert [type(v) for v in fast] == [type(v) for v in slow]  # type: ignore[union-attr]
    assert message.request_head(data) == slow
    return fast is not False


def test_every_request_of_every_capture():
    got = requests()
    assert len(got) > 2000
    assert sum(same(d) for d in got) == len(got)
    assert any(d[:2] == PRODUCE.to_bytes(2, "big") for d in got)


def test_damaged_copies():
    rng = random.Random(43)
    base = requests()
    read = 0
    for _ in range(20000):
        d = bytearray(rng.choice(base))
        roll = rng.random()
        if roll < 0.3:
            del d[rng.randrange(len(d) + 1) :]
        elif roll < 0.5:
            for _ in range(rng.randrange(1, 4)):
                if d:
                    d[rng.randrange(min(len(d), 40))] = rng.randrange(256)
        elif roll < 0.6 and len(d) > 12:
            d[10:12] = b"\xff\xfe"  # a client id that is not UTF-8
        elif roll < 0.7 and len(d) > 10:
            d[8:10] = rng.choice([b"\x7f\xff", b"\xff\xff", b"\xff\xfe", b"\x00\x00"])
        elif roll < 0.8:
            d[2:4] = rng.randrange(0, 200).to_bytes(2, "big")  # versions past the tables
        elif roll < 0.9 and d[:2] == b"\x00\x00":
            at = rng.randrange(8, len(d))
            d[at:] = bytes(rng.choice([[0xFF] * 6, [0x80] * 5 + [1], [0, 0], [0x7F, 0xFF]]))
        same(bytes(d))
        read += 1
    assert read == 20000


def test_short_and_random_bytes():
    rng = random.Random(7)
    for n in range(0, 16):
        for _ in range(300):
            same(bytes(rng.randrange(256) for _ in range(n)))
