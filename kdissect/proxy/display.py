"""Showing what the proxy sees without ever slowing what it forwards: exchanges go
through a bounded queue to a thread that decodes and prints them."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

QUEUE = 10000


class Display:
    def __init__(self, on_exchange: Callable, on_gap: Callable):
        self.on_exchange, self.on_gap = on_exchange, on_gap
        self.queue: queue.Queue = queue.Queue(QUEUE)
        self.dropped = 0
        self.broken = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def exchange(self, ex) -> None:
        self._put((self.on_exchange, ex))

    def gap(self, g) -> None:
        self._put((self.on_gap, g))

    def _put(self, item) -> None:
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            fn, arg = item
            if self.broken:
                continue
            try:
                fn(arg)
            except BrokenPipeError:
                self.broken = True          # the reader went away (| head): keep forwarding
            except Exception:               # a display problem must not end the proxy
                pass

    def close(self) -> None:
        """Show what is queued, then stop."""
        self.queue.put(None)
        self.thread.join(timeout=30)
