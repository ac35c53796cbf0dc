#!/usr/bin/env python3
"""The simplest user-space hop: a TCP relay that copies bytes both ways (a thread per
direction, one 256 KiB buffer each, TCP_NODELAY), reading and writing nothing else.

What any proxy that sees the bytes pays at least on this machine (the extra copies and
wake-ups of a second hop); proxy_on_apache_kafka.py --relay runs it beside direct and
`kdissect proxy` so that the proxy's figures can be read against it.

``--framed`` keeps the copy relay's threads and adds what a decoding forwarder must do
per byte besides: find each Kafka message in the stream (its 4-byte size), note each
request's correlation id, API key and version in a table the connection's two threads
share (an answer is matched and removed), and put each whole message, behind a record
header like the proxy's display channel (``kdissect/proxy/feed.py``), on a pipe that a
second process reads and throws away; a message the full pipe has no room for is shed
and counted, never waited for. It answers "what would a forwarder with a thread per
direction cost": the forwarder's share of `kdissect proxy` without its event loop (the
display's decoding is not in it).

``--splice`` (Linux) moves the bytes socket -> pipe -> socket with splice(2) instead, a
pipe per direction (1 MiB if the system allows): they never enter user space. It answers
"a zero-copy relay would do better": the same hop (a thread per direction, the same
wake-ups) without the two copies through user space, to measure what those copies cost.

    copy_relay.py [--splice | --framed] LISTEN_PORT UPSTREAM_PORT   (both on 127.0.0.1; runs until killed)
"""

from __future__ import annotations

import argparse
import fcntl
import os
import socket
import struct
import threading
import time

CHUNK = 1 << 18
PIPE_SIZE = 1 << 20


def _copy(src: socket.socket, dst: socket.socket) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while n := src.recv_into(buf):
        dst.sendall(view[:n])


_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_RECORD = struct.Struct(">BIBdQI")  # as the display channel's: kind, connection, side...
MAX_MESSAGE = 100 << 20


class _Channel:
    """The display's pipe: whole messages or nothing (shed when full)."""

    def __init__(self) -> None:
        read_end, self.fd = os.pipe()
        try:
            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass
        if os.fork() == 0:  # the reader: takes every byte, as the display's channel does
            os.close(self.fd)
            while os.read(read_end, PIPE_SIZE):
                pass
            os._exit(0)
        os.close(read_end)
        os.set_blocking(self.fd, False)
        self.lock = threading.Lock()
        self.shed = 0
        self._part = memoryview(b"")  # a record the pipe took part of: its rest goes first

    def put(self, conn: int, side: int, offset: int, body: memoryview) -> None:
        head = _RECORD.pack(1, conn, side, time.time(), offset, len(body))
        with self.lock:
            if self._part:  # (a memoryview: what is left of it costs no copy)
                self._part = self._part[self._write([self._part]) :]
                if self._part:
                    self.shed += 1
                    return
            n = self._write([head, body])
            if n == 0:
                self.shed += 1
            elif n < len(head) + len(body):
                self._part = memoryview(head + body)[n:]

    def _write(self, parts: list) -> int:
        try:
            return os.writev(self.fd, parts)
        except BlockingIOError:
            return 0


def _framed(channel: _Channel, conn: int, side: int, pending: dict):
    """A copier that also finds the messages of its direction (``side`` 0: requests)."""

    def move(src: socket.socket, dst: socket.socket) -> None:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        held = bytearray()  # the start of a message not whole yet
        at = 0  # stream offset of ``held``'s first byte
        while n := src.recv_into(buf):
            dst.sendall(view[:n])
            data = view[:n]
            if held:
                held += data
                data = memoryview(held)
            pos = 0
            while len(data) - pos >= 4:
                size = _SIZE.unpack_from(data, pos)[0]
                if not 0 <= size <= MAX_MESSAGE:
                    raise OSError("not Kafka")
                if len(data) - pos - 4 < size:
                    break
                body = data[pos + 4 : pos + 4 + size]
                if len(body) >= 8:
                    if side == 0:
                        key, version, corr = _HEAD.unpack_from(body)
                        pending[corr] = (key, version)
                    else:
                        pending.pop(_SIZE.unpack_from(body)[0], None)
                channel.put(conn, side, at + pos, body)
                body.release()  # (``held`` is resized below: no view of it may remain)
                pos += 4 + size
            at += pos
            if held:
                data.release()
                if pos:  # (a message not whole yet stays where it is: no copy per chunk)
                    del held[:pos]
            else:
                held = bytearray(data[pos:])

    return move


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
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--splice", action="store_true", help="splice(2) through a pipe, no copy")
    how.add_argument(
        "--framed", action="store_true", help="also frame, pair and feed a display pipe"
    )
    ap.add_argument("listen", type=int)
    ap.add_argument("upstream", type=int)
    args = ap.parse_args()
    move = _splice if args.splice else _copy
    channel = _Channel() if args.framed else None
    server = socket.create_server(("127.0.0.1", args.listen), backlog=1024)
    conn = 0
    while True:
        client, _ = server.accept()
        conn += 1
        try:
            broker = socket.create_connection(("127.0.0.1", args.upstream))
        except OSError:
            client.close()
            continue
        for s in (client, broker):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up = down = move
        if channel is not None:
            pending: dict = {}
            up, down = (_framed(channel, conn, side, pending) for side in (0, 1))
        threading.Thread(target=_pump, args=(up, client, broker), daemon=True).start()
        threading.Thread(target=_pump, args=(down, broker, client), daemon=True).start()


if __name__ == "__main__":
    main()
