"""The forwarding process's scheduling priority (``--forwarder-priority``).

The forwarder uses little CPU (about half a millisecond per MB forwarded) but each byte
waits for it twice, once each way. On a machine whose cores the brokers and clients keep
busy, a forwarder at normal priority waits for a core at every wake-up. Real-time
scheduling (``SCHED_RR`` 1) takes a core at once on wake-up: measured beside a flooding
Java producer on one Apache Kafka node (load 6-14 on two cores), a small request's round
trip added 0.12 ms at p50 through the proxy against 0.85-1.2 ms at normal priority (three
nodes, the machine otherwise idle: 0.32 against 4.6 ms). It is not the default: woken at
once, the forwarder moves smaller reads, more often (its CPU per run +15-45 %), and on a
machine loaded besides, Java produce fell from 91 to 79 % of direct and consume from 77
to 59 % in the same rounds (with the machine otherwise idle: within the noise). The
kernel's real-time throttling leaves other tasks 5 % of each core should the forwarder
ever spin; children do not inherit it (``SCHED_RESET_ON_FORK``), and the display's
process, forked before, keeps its nice 10. Linux applies that flag to new threads too:
the thread forwarder's threads take the policy of the thread that starts them
themselves (native/src/sched.rs, ``Scheduling``)."""

from __future__ import annotations

import os

POLICIES = ("normal", "realtime")
RT_PRIORITY = 1  # the lowest real-time priority: above every normal task, below the kernel's

HOW = (
    "real-time scheduling needs CAP_SYS_NICE or an RLIMIT_RTPRIO of 1 or more "
    "(root; `ulimit -r 1` where the hard limit allows it; a container started with "
    "--cap-add SYS_NICE); or leave out --forwarder-priority"
)


class PriorityRefused(Exception):
    """``realtime`` was asked for and the system does not allow it."""


def raise_forwarding(policy: str) -> str:
    """Set the calling process's scheduling for forwarding (one of ``POLICIES``); what
    was set, in words. ``realtime`` raises ``PriorityRefused`` when not permitted."""
    if policy != "realtime":
        return "normal priority"
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None:  # not Linux (macOS has no such call in os)
        raise PriorityRefused("--forwarder-priority realtime: not available on this system")
    try:
        setter(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(RT_PRIORITY))
    except PermissionError:
        raise PriorityRefused(f"--forwarder-priority realtime: {HOW}") from None
    return "real-time priority"
