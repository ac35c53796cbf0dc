"""The exchanges in the list as a pcapng file Wireshark opens: each connection becomes a
synthetic TCP connection (the proxy's recording format) carrying only the messages of
the exchanges exported, at their capture times. Secrets are masked unless shown."""

from __future__ import annotations

import struct

from ..proxy.recording import Recorder


def write_pcapng(path: str, views, show_secrets: bool = False) -> int:
    """Write the exchanges of ``views``; returns how many were written."""
    messages = []
    for v in views:
        ex = v.ex
        for m in (ex.request, ex.response):
            if m is not None:
                side = 0 if m.direction == "request" or (m.direction == "sasl" and
                                                         m is ex.request) else 1
                messages.append((m.ts, m.index, ex, side, m))
    messages.sort(key=lambda item: item[:2])
    recorder = Recorder(path, show_secrets)
    connections, last = {}, {}
    try:
        for ts, _, ex, side, m in messages:
            conn = connections.get(ex.stream)
            if conn is None:
                conn = connections[ex.stream] = recorder.connection(ex.client, ex.broker, ts)
            frame = struct.pack(">i", len(m.data)) + m.data
            conn.data(side, recorder.mask(frame, side, m.direction == "sasl"), ts)
            last[ex.stream] = ts
        for stream, conn in connections.items():
            conn.close(last[stream])
    finally:
        recorder.close()
    return len(views)
