"""A recording TCP relay: real clients talk to the real broker through it, and it keeps
every byte of each connection, per direction, in arrival order."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Connection:
    client: tuple[str, int]
    to_broker: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)


class Relay:
    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.connections: list[Connection] = []
        # a fault to inject (tests/test_diagnoses_faults.py): called with the connection,
        # the direction (0: to the broker) and each whole Kafka message (size included);
        # returns the bytes to pass on (b"": drop it) or None: drop the connection
        self.tamper: Callable[[Connection, int, bytes], bytes | None] | None = None
        self._lock = threading.Lock()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.connections = []

    def snapshot(self) -> list[Connection]:
        with self._lock:
            return [
                Connection(c.client, bytearray(c.to_broker), bytearray(c.to_client))
                for c in self.connections
            ]

    def close(self) -> None:
        self._stop = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, addr = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            conn = Connection(addr)
            with self._lock:
                self.connections.append(conn)
            for side, (src, dst, sink) in enumerate(
                ((client, upstream, conn.to_broker), (upstream, client, conn.to_client))
            ):
                threading.Thread(
                    target=self._pump, args=(conn, side, src, dst, sink), daemon=True
                ).start()

    def _pump(
        self, conn: Connection, side: int, src: socket.socket, dst: socket.socket, sink: bytearray
    ) -> None:
        held = bytearray()  # a partial Kafka message, when tampering
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    sink += data
                tamper = self.tamper
                if tamper is None and not held:
                    dst.sendall(data)
                    continue
                held += data
                while len(held) >= 4 and len(held) >= 4 + struct.unpack_from(">i", held)[0]:
                    end = 4 + struct.unpack_from(">i", held)[0]
                    message, held[:end] = bytes(held[:end]), b""
                    out = tamper(conn, side, message) if tamper is not None else message
                    if out is None:
                        return  # the finally drops the connection
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def exchanges(conns: list[Connection]) -> list:
    """The exchanges of recorded connections, through one engine as for a capture (Fetch
    v13+ names topics by id, learned from the Metadata answers on another connection)."""
    import itertools

    from kdissect.stream.connection import KafkaConnection
    from kdissect.stream.enrich import Enricher
    from kdissect.stream.sink import Collect

    sink = Collect()
    enricher, counter = Enricher(sink, full=True), itertools.count()
    for i, conn in enumerate(conns):
        k = KafkaConnection(
            i,
            ("client", i),
            ("broker", 9092),
            enricher.exchange,
            sink.gaps.append,
            lambda: next(counter),
        )
        k.data(0, 0, bytes(conn.to_broker), 0.0, 1)
        k.data(1, 0, bytes(conn.to_client), 0.0, 2)
        k.close()
    return sink.exchanges
