"""Message bytes kept out of the UI's memory: the loader (a forked child) appends each
message's bytes to an unlinked temporary file and sends only where they are; the UI
reads them back when an exchange is shown, searched, filtered on its records or
counted, and keeps the bytes of the last few such exchanges only. Memory then stays
bounded by the number of exchanges, not by the capture's Kafka payload."""

from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict

KEEP = 64  # exchanges whose bytes stay loaded (the ones used last)


class Spill:
    """One temporary file shared by the loader (writes, after fork) and the UI (reads).
    The file has no name once opened: it disappears when both processes close it."""

    def __init__(self) -> None:
        fd, path = tempfile.mkstemp(prefix="kdissect-spill-")
        os.unlink(path)
        self.fd = fd
        self.end = 0  # the writer's next offset (child side)
        self.loaded: OrderedDict[int, tuple] = OrderedDict()  # id(view) -> its messages
        self.lock = threading.Lock()  # the UI and a statistics worker both load

    # -- the loader ---------------------------------------------------------------------

    def put(self, messages) -> list[tuple[int, int]]:
        """Write the messages' bytes; their ``data`` becomes empty. Returns where."""
        spans = []
        for m in messages:
            data, at = memoryview(m.data), self.end
            while data:  # a signal may cut a write short
                n = os.pwrite(self.fd, data, at)
                data, at = data[n:], at + n
            spans.append((self.end, len(m.data)))
            self.end += len(m.data)
            m.data = b""
        return spans

    # -- the UI ---------------------------------------------------------------------------

    def load(self, view, lock: bool = True) -> None:
        """Give ``view``'s messages their bytes back (a no-op for views not spilled);
        the bytes of the least recently loaded exchanges beyond KEEP are let go.
        ``lock=False`` in a forked child: single-threaded, and a lock held by another
        thread at the fork would stay held there for ever."""
        spans = getattr(view, "spans", None)
        if not spans:
            return
        if not lock:
            self._load(view, spans)
            return
        with self.lock:
            self._load(view, spans)

    def _load(self, view, spans) -> None:
        key = id(view)
        if key in self.loaded:
            self.loaded.move_to_end(key)
            return
        messages = view.ex.messages
        for m, (offset, length) in zip(messages, spans):
            m.data = os.pread(self.fd, length, offset)
        self.loaded[key] = (messages, view)
        while len(self.loaded) > KEEP:
            _, (old, _view) = self.loaded.popitem(last=False)
            for m in old:
                m.data = b""

    def close(self) -> None:
        os.close(self.fd)
