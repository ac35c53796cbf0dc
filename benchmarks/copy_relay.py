#!/usr/bin/env python3
"""The simplest user-space hop: a TCP relay that copies bytes both ways (a thread per
direction, one 256 KiB buffer each, TCP_NODELAY), reading and writing nothing else.

What any proxy that sees the bytes pays at least on this machine (the extra copies and
wake-ups of a second hop); proxy_on_apache_kafka.py --relay runs it beside direct and
`kdissect proxy` so that the proxy's figures can be read against it.

``--splice`` (Linux) moves the bytes socket -> pipe -> socket with splice(2) instead, a
pipe per direction (1 MiB if the system allows): they never enter user space. It answers
"a zero-copy relay would do better": the same hop (a thread per direction, the same
wake-ups) without the two copies through user space, to measure what those copies cost.

    copy_relay.py [--splice] LISTEN_PORT UPSTREAM_PORT   (both on 127.0.0.1; runs until killed)
"""

from __future__ import annotations

import argparse
import fcntl
import os
import socket
import threading

CHUNK = 1 << 18
PIPE_SIZE = 1 << 20


def _copy(src: socket.socket, dst: socket.socket) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while n := src.recv_into(buf):
        dst.sendall(view[:n])


def _splice(src: socket.socket, dst: socket.socket) -> None:
    pipe_r, pipe_w = os.pipe()
    try:
        try:
            fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:  # above /proc/sys/fs/pipe-max-size: the default (64 KiB) stays
            pass
        size = fcntl.fcntl(pipe_w, fcntl.F_GETPIPE_SZ)
        s, d = src.fileno(), dst.fileno()
        # the pipe is empty before each fill, so the drain never waits on the socket in
        while n := os.splice(s, pipe_w, size, flags=os.SPLICE_F_MOVE):
            while n:
                moved = os.splice(pipe_r, d, n, flags=os.SPLICE_F_MOVE)
                if not moved:
                    return
                n -= moved
    finally:
        os.close(pipe_r)
        os.close(pipe_w)


def _pump(move, src: socket.socket, dst: socket.socket) -> None:
    try:
        move(src, dst)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--splice", action="store_true", help="splice(2) through a pipe, no copy")
    ap.add_argument("listen", type=int)
    ap.add_argument("upstream", type=int)
    args = ap.parse_args()
    move = _splice if args.splice else _copy
    server = socket.create_server(("127.0.0.1", args.listen), backlog=1024)
    while True:
        client, _ = server.accept()
        try:
            broker = socket.create_connection(("127.0.0.1", args.upstream))
        except OSError:
            client.close()
            continue
        for s in (client, broker):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(move, client, broker), daemon=True).start()
        threading.Thread(target=_pump, args=(move, broker, client), daemon=True).start()


if __name__ == "__main__":
    main()
