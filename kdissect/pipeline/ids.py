"""The ids that join the tables: ``connection_id`` and ``exchange_id``.

A connection is named by its capture, its two endpoints and how many connections with the
same endpoints came before it in the capture (a reused port), hashed to 16 hex digits;
an exchange by its connection and its index on it (``seq``, in request order). Both come
out the same whether a capture is read whole, split into shards (each connection is then
decoded alone) or by ``kdissect pcap --format parquet``: nothing in them depends on what
else the capture holds or on the order connections are decoded in.
"""

from __future__ import annotations

try:  # (not through hashlib: its OpenSSL import is 2 % of a small run)
    from _blake2 import blake2b
except ImportError:  # another Python than CPython
    from hashlib import blake2b

from ..stream.model import Exchange


class ConnectionIds:
    """Names the connections one dissector of one capture reports."""

    def __init__(self, capture: str):
        self.capture = capture
        self.by_stream: dict[int, str] = {}
        self.uses: dict[tuple, int] = {}  # (client, broker) -> connections seen

    def connection_id(self, ex: Exchange) -> str:
        cid = self.by_stream.get(ex.stream)
        if cid is None:
            ends = (ex.client, ex.broker)
            reuse = self.uses.get(ends, 0)
            self.uses[ends] = reuse + 1
            key = (
                f"{self.capture}\0{ex.client[0]}\0{ex.client[1]}\0{ex.broker[0]}\0"
                f"{ex.broker[1]}\0{reuse}"
            )
            cid = blake2b(key.encode(), digest_size=8).hexdigest()
            self.by_stream[ex.stream] = cid
        return cid

    def exchange_columns(self, ex: Exchange) -> dict:
        cid = self.connection_id(ex)
        return {"connection_id": cid, "seq": ex.seq, "exchange_id": f"{cid}:{ex.seq}"}

    def record_columns(self, ex: Exchange) -> dict:
        """What a record row needs to join its exchange and name its connection."""
        ids = self.exchange_columns(ex)
        return {
            "exchange_id": ids["exchange_id"],
            "connection_id": ids["connection_id"],
            "client_ip": ex.client[0],
            "client_port": ex.client[1],
            "broker_ip": ex.broker[0],
            "broker_port": ex.broker[1],
            "api_name": ex.first.api_name,
        }
