"""Command line: ``main`` is the click group; each command lives in its own module."""

from . import blob_cmd, live_cmd, log_cmd, pcap_cmd, proxy_cmd, spark_cmd  # noqa: F401  (registers them)
from .group import main

__all__ = ["main"]
