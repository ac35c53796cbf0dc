"""A network interface as a source: sniffed packets into the same engine as files."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..capture.live import sniff
from ..stream.budget import Budget
from ..stream.sink import Sink
from .pcap import DEFAULT_PORTS, CaptureDissector


class Interface:
    """The engine's source for a network interface (``kw`` as for ``watch_interface``)."""

    def __init__(self, iface: str, stop: threading.Event, **kw):
        self.iface, self.stop, self.kw = iface, stop, kw

    def feed(self, sink: Sink) -> int:
        return watch_interface(self.iface, sink, self.stop, **self.kw)


def watch_interface(
    iface: str,
    sink: Sink,
    stop: threading.Event,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    bpf: str | None = "tcp",
    count: int = 0,
    duration: float | None = None,
    keys=None,
    budget: Budget | None = None,
) -> int:
    """Exchanges on ``iface`` to ``sink`` until ``stop``, ``count`` packets or
    ``duration`` seconds; then ``sink.done()``. Raises capture.live.LiveError when
    capturing is not possible (with what to do about it). ``keys``: a KeyLog for TLS."""
    dissector = CaptureDissector(sink, ports, detect, keys=keys, budget=budget)
    try:
        return sniff(iface, dissector.packet, stop, bpf, count, duration)
    finally:  # Ctrl-C too: what was captured is shown
        dissector.finish()
        sink.done()
