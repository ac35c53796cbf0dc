"""One message's budget (``context.Decoding``): below the context and the
value decoders (values_schema), which both charge it."""

from __future__ import annotations


class Budget:
    """What one message may still spend (see ``Options``): hostile bytes must not turn a
    small message into gigabytes. Mutable, one per message decode."""

    __slots__ = ("decompressed", "nodes", "max_decompressed", "max_nodes")

    def __init__(self, max_decompressed: int, max_nodes: int):
        self.decompressed = self.max_decompressed = max_decompressed
        self.nodes = self.max_nodes = max_nodes
