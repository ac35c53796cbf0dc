"""kdissect: Kafka wire-protocol dissector."""

__version__ = "0.1.0"
