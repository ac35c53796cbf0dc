"""TLS in captures: the record layer, key logs and the key schedules, and the layer that
turns a TLS connection's encrypted byte streams into its plaintext streams (given the
session keys) or into an honest report of what it is (without them).

Sits between TCP reassembly and Kafka framing (``layer.TlsLayer``): everything after it
sees plaintext bytes as if the connection had none of TLS."""

from .keylog import KeyLog, KeyLogError
from .layer import TlsLayer
from .session import TlsFacts

__all__ = ["KeyLog", "KeyLogError", "TlsLayer", "TlsFacts"]
