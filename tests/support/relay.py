"""A recording TCP relay: real clients talk to the real broker through it, and it keeps
every byte of each connection, per direction, in arrival order."""

from __future__ import annotations

import socket
import threading
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
        self._lock = threading.Lock()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.connections = []

    def snapshot(self) -> list[Connection]:
        with self._lock:
            return [Connection(c.client, bytearray(c.to_broker), bytearray(c.to_client))
                    for c in self.connections]

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
            for src, dst, sink in ((client, upstream, conn.to_broker),
                                   (upstream, client, conn.to_client)):
                threading.Thread(target=self._pump, args=(src, dst, sink), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, sink: bytearray) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    sink += data
                dst.sendall(data)
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
        k = KafkaConnection(i, ("client", i), ("broker", 9092), enricher.exchange,
                            sink.gaps.append, lambda: next(counter))
        k.data(0, 0, bytes(conn.to_broker), 0.0, 1)
        k.data(1, 0, bytes(conn.to_client), 0.0, 2)
        k.close()
    return sink.exchanges
