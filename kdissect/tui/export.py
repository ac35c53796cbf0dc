"""The exchanges in the list as a pcapng file Wireshark opens: each connection becomes a
synthetic TCP connection (the proxy's recording format) carrying only the messages of
the exchanges exported, at their capture times. Secrets are masked unless shown."""

from __future__ import annotations

import struct

from ..capture.pcapng_writer import RecordedConnection, Recorder


def write_pcapng(path: str, views, show_secrets: bool = False, load=None) -> int:
    """Write the exchanges of ``views``; returns how many were written. ``load(view)``
    gives a view's messages their bytes (they may be kept elsewhere until needed)."""
    messages = []
    for v in views:
        ex = v.ex
        for m in (ex.request, ex.response):
            if m is not None:
                side = 0 if m.direction == "request" or (m.direction == "sasl" and
                                                         m is ex.request) else 1
                messages.append((m.ts, m.index, ex, side, m, v))
    messages.sort(key=lambda item: item[:2])
    # a connection closes (FIN) right after its last message, so the packets stay in time
    # order: closing them all at the end wrote FINs after later packets, with earlier times
    last = {item[2].stream: at for at, item in enumerate(messages)}
    recorder = Recorder(path, show_secrets)
    connections: dict[int, RecordedConnection] = {}
    try:
        for at, (ts, _, ex, side, m, view) in enumerate(messages):
            if load is not None:
                load(view)
            conn = connections.get(ex.stream)
            if conn is None:
                conn = connections[ex.stream] = recorder.connection(ex.client, ex.broker, ts)
            frame = struct.pack(">i", len(m.data)) + m.data
            conn.data(side, recorder.mask(frame, side, m.direction == "sasl"), ts)
            if last[ex.stream] == at:
                conn.close(ts)
    finally:
        recorder.close()
    return len(views)
