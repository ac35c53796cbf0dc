"""How often the thread forwarder's event loop takes the relay's queue: every DRAIN_EVERY,
and every DRAIN_BUSY only while the last take moved bytes at BUSY_RATE or more (waking
less often under load gave a Java consumer on three nodes 11-15 points of direct's rate;
waiting that long always held up quiet round trips: docs/guide/proxy.md). No relay, no
sockets: the loop's clock and timers and the relay's queue are stand-ins."""

from __future__ import annotations

import os

import pytest

from kdissect.proxy.threaded import BUSY_RATE, DRAIN_BUSY, DRAIN_EVERY, ThreadForwarder


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[float] = []  # delays asked of call_later

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback):
        self.timers.append(delay)
        return None


class Queue:
    def __init__(self) -> None:
        self.moved: list[int] = []  # bytes moved by each event of the next take

    def take(self):
        # (connection, kind, side, wall, mono, offset, data, moved, size): no live
        # connection has index -1, so only the bytes moved count
        events = [(-1, 0, 1, 0.0, 0.0, 0, b"", m, 0) for m in self.moved]
        self.moved = []
        return events

    def display_holds(self, held: int) -> None:
        pass


class NoProxy:
    live: dict = {}
    feed = None


@pytest.fixture
def forwarder():
    fwd = object.__new__(ThreadForwarder)  # (its __init__ starts a relay)
    fwd.loop, fwd.relay, fwd.proxy = Clock(), Queue(), NoProxy()
    fwd._wake_r, wake_w = os.pipe()
    os.set_blocking(fwd._wake_r, False)
    fwd._drain_timer = fwd._holds_timer = None
    fwd._drained_at, fwd._busy = fwd.loop.now, False
    yield fwd
    os.close(fwd._wake_r)
    os.close(wake_w)


def take_after(fwd: ThreadForwarder, seconds: float, moved: int) -> None:
    fwd.loop.now += seconds
    fwd.relay.moved = [moved // 2, moved - moved // 2]
    fwd.drain()


def next_wait(fwd: ThreadForwarder) -> float:
    """How long after the last take the loop waits when woken at once."""
    fwd.loop.timers.clear()
    fwd._woken()
    (delay,) = fwd.loop.timers
    fwd._drain_timer = None
    return delay


def test_bytes_flowing_at_the_busy_rate_make_the_loop_wait_longer(forwarder):
    take_after(forwarder, 0.01, int(BUSY_RATE * 0.01) + 2)
    assert next_wait(forwarder) == pytest.approx(DRAIN_BUSY)


def test_a_trickle_keeps_the_short_wait(forwarder):
    take_after(forwarder, 0.01, int(BUSY_RATE * 0.01) // 2)
    assert next_wait(forwarder) == pytest.approx(DRAIN_EVERY)


def test_a_busy_spell_ends_with_the_first_quiet_take(forwarder):
    take_after(forwarder, 0.01, BUSY_RATE)
    take_after(forwarder, 0.01, 100)
    assert next_wait(forwarder) == pytest.approx(DRAIN_EVERY)


@pytest.mark.parametrize("moved", [0, 1])
def test_two_takes_at_the_same_instant_are_not_busy(forwarder, moved):
    """(bytes in no time are no rate: 0 bytes in 0 seconds once counted as busy, and the
    next exchange waited the longer time for nothing)"""
    take_after(forwarder, 0.0, moved)
    assert next_wait(forwarder) == pytest.approx(DRAIN_EVERY)
