"""Kafka on byte streams: framing, pairing, and the models built on them."""
