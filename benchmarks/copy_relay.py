#!/usr/bin/env python3
"""The simplest user-space hop: a TCP relay that copies bytes both ways (a thread per
direction, one 256 KiB buffer each, TCP_NODELAY), reading and writing nothing else.

What any proxy that sees the bytes pays at least on this machine (the extra copies and
wake-ups of a second hop); proxy_on_apache_kafka.py --relay runs it beside direct and
`kdissect proxy` so that the proxy's figures can be read against it.

    copy_relay.py LISTEN_PORT UPSTREAM_PORT      (both on 127.0.0.1; runs until killed)
"""

from __future__ import annotations

import socket
import sys
import threading

CHUNK = 1 << 18


def _pump(src: socket.socket, dst: socket.socket) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while n := src.recv_into(buf):
            dst.sendall(view[:n])
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main() -> None:
    listen, upstream = int(sys.argv[1]), int(sys.argv[2])
    server = socket.create_server(("127.0.0.1", listen), backlog=1024)
    while True:
        client, _ = server.accept()
        try:
            broker = socket.create_connection(("127.0.0.1", upstream))
        except OSError:
            client.close()
            continue
        for s in (client, broker):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(client, broker), daemon=True).start()
        threading.Thread(target=_pump, args=(broker, client), daemon=True).start()


if __name__ == "__main__":
    main()
