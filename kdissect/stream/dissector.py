"""Capture packets -> TCP reassembly -> Kafka connections -> exchanges, streaming."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..capture.packet import SUPPORTED, LINKTYPE_NAMES, tcp_segment
from ..capture.pcapfile import Packet
from ..capture.tcp import Reassembler, TcpConnection
from .model import Exchange, Gap
from .session import DEFAULT_PORTS, KafkaConnection, plausible_request

_SNIFF = 256


class CaptureDissector:
    """Feed packets; finished exchanges and gaps go to the callbacks as they happen."""

    def __init__(self, on_exchange: Callable[[Exchange], None],
                 on_gap: Callable[[Gap], None] | None = None,
                 ports: Iterable[int] = DEFAULT_PORTS, detect: bool = True):
        self.ports = frozenset(ports)
        self.detect = detect
        self.on_exchange = on_exchange
        self.on_gap = on_gap or (lambda g: None)
        self.tcp = Reassembler(self, client_hint=lambda src, dst: dst[1] in self.ports
                               or (src[1] not in self.ports and src[1] > dst[1]))
        self.kafka: dict[int, KafkaConnection] = {}
        self.sniffing: dict[int, list[bytearray]] = {}
        self.ignored: set[int] = set()
        self.messages = 0
        self.packets = 0
        self.unsupported: dict[int, int] = {}     # linktype -> packets skipped
        self.streams: list[KafkaConnection] = []

    def _next_index(self) -> int:
        self.messages += 1
        return self.messages - 1

    def packet(self, pkt: Packet) -> None:
        self.packets += 1
        if pkt.linktype not in SUPPORTED:
            self.unsupported[pkt.linktype] = self.unsupported.get(pkt.linktype, 0) + 1
            return
        seg = tcp_segment(pkt.linktype, pkt.data, pkt.orig_len)
        if seg is not None:
            self.tcp.segment(seg, pkt.ts, pkt.index)

    def finish(self) -> None:
        self.tcp.flush()

    # -- StreamSink -------------------------------------------------------------------

    def _decide(self, conn: TcpConnection, held) -> KafkaConnection | None:
        """Is this connection Kafka, and which side is the client? None: not yet known
        (or not Kafka: then it is ignored from now on)."""
        if conn.a[1] in self.ports or conn.b[1] in self.ports:
            client, broker = (conn.a, conn.b) if conn.b[1] in self.ports else (conn.b, conn.a)
        elif self.detect:
            starts = [b"".join(c[1] for c in chunks)[:_SNIFF] for chunks in held]
            plausible = [plausible_request(s) for s in starts]
            if not any(plausible):
                if all(len(s) >= 14 for s in starts) or sum(map(len, starts)) >= _SNIFF:
                    self.ignored.add(id(conn))
                    self.sniffing.pop(id(conn), None)
                return None
            client, broker = (conn.a, conn.b) if plausible[0] else (conn.b, conn.a)
        else:
            self.ignored.add(id(conn))
            return None
        k = KafkaConnection(len(self.streams) + 1, client, broker, self.on_exchange,
                            self.on_gap, self._next_index)
        self.kafka[id(conn)] = k
        self.streams.append(k)
        return k

    def _side(self, k: KafkaConnection, conn: TcpConnection, direction: int) -> int:
        sender = conn.a if direction == 0 else conn.b
        return 0 if sender == k.client else 1

    def data(self, conn, direction, offset, payload, ts, frame) -> None:
        k = self.kafka.get(id(conn))
        if k is not None:
            k.data(self._side(k, conn, direction), offset, payload, ts, frame)
            return
        if id(conn) in self.ignored:
            return
        # undecided: hold the chunks until the first bytes tell, then replay them in order
        held = self.sniffing.setdefault(id(conn), ([], []))
        held[direction].append((offset, payload, ts, frame))
        k = self._decide(conn, held)
        if k is None:
            return
        del self.sniffing[id(conn)]
        chunks = sorted(((f, d, o, p, t) for d in (0, 1) for o, p, t, f in held[d]),
                        key=lambda c: c[0])
        for f, d, o, p, t in chunks:
            k.data(self._side(k, conn, d), o, p, t, f)

    def gap(self, conn, direction, offset, length, ts, frame) -> None:
        k = self.kafka.get(id(conn))
        if k is not None:
            k.gap(self._side(k, conn, direction), offset, length, ts, frame)

    def closed(self, conn) -> None:
        k = self.kafka.pop(id(conn), None)
        self.sniffing.pop(id(conn), None)
        if k is not None:
            k.close()

    def unsupported_summary(self) -> str | None:
        if not self.unsupported:
            return None
        kinds = ", ".join(f"{LINKTYPE_NAMES.get(t, f'link type {t}')} ({n} packets)"
                          for t, n in self.unsupported.items())
        return f"skipped packets of unsupported link types: {kinds}"


def load_captures(paths, emit: Callable[[Exchange], None], warn: Callable[[str], None], *,
                  on_gap: Callable[[Gap], None] | None = None,
                  error: Callable[[str], None] | None = None,
                  ports: Iterable[int] = DEFAULT_PORTS, detect: bool = True,
                  packets=None) -> bool:
    """Every exchange in the capture files ``paths`` to ``emit``; what the user should
    know about the files to ``warn`` (and ``error`` for files that cannot be read).
    ``packets(reader, path)`` may wrap the packet iterator (e.g. with a progress bar).
    Returns whether any packet was read. A closed output (BrokenPipeError) propagates."""
    from ..capture.pcapfile import CaptureError, CaptureReader
    error = error or warn
    read_any = False
    for path in paths:
        dissector = CaptureDissector(emit, on_gap, ports, detect)
        try:
            with CaptureReader(path) as reader:
                for packet in (packets(reader, path) if packets else reader.packets()):
                    dissector.packet(packet)
                for w in reader.warnings:
                    warn(f"{path}: {w}; everything before it was decoded")
        except CaptureError as e:
            error(str(e))
            continue
        except OSError as e:
            if isinstance(e, BrokenPipeError):
                raise
            error(f"{path}: {e.strerror or e}")
            continue
        dissector.finish()
        read_any = read_any or dissector.packets > 0
        skipped = dissector.unsupported_summary()
        if skipped:
            warn(f"{path}: {skipped}")
        if not dissector.streams and dissector.packets:
            warn(f"{path}: no Kafka traffic found in {dissector.packets} packets (ports "
                 f"{', '.join(map(str, sorted(dissector.ports)[:5]))}; add others with -p)")
    return read_any
