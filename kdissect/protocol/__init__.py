"""Pure decoding of Kafka bytes into located field trees: no I/O, no global state.

Entry points: ``decode_request``, ``decode_response``, ``peek_request_header``, ``guess``.
"""

from .context import Options
from .guess import Candidate, guess
from .message import Message, RequestHeader, decode, decode_request, decode_response, peek_request_header
from .names import api_key_of, api_name, error_info, error_name
from .node import Node

__all__ = [
    "Options", "Candidate", "guess", "Message", "RequestHeader", "decode", "decode_request",
    "decode_response", "peek_request_header", "api_key_of", "api_name", "error_info",
    "error_name", "Node",
]
