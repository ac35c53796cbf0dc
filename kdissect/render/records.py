"""The plain-JSON views of decoded messages live in protocol/json_view.py (pure, read by
sources and filters too); the names stay importable from here for the renderers."""

from ..protocol.json_view import (
    batch_json,
    decoded_json,
    json_bytes,
    plain_json,
    record_json,
    records_of,
)

__all__ = ["batch_json", "decoded_json", "json_bytes", "plain_json", "record_json", "records_of"]
