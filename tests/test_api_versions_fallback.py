"""A client newer than its broker asks ApiVersions in a version the broker does not
support: the real broker answers in v0 with UNSUPPORTED_VERSION and its own range (as
Kafka's RequestContext does), and its clients read that answer as v0. kdissect read it
in the request's version: a false throttle time from the api_keys count, bytes left
over, or a malformed field for a flexible version."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.support.traffic import exchanges

pytestmark = pytest.mark.slow  # a broker

API_VERSIONS = 18


def _ask(sock: socket.socket, version: int, corr: int) -> bytes:
    client = b"fallback"
    header = struct.pack(">hhih", API_VERSIONS, version, corr, len(client)) + client
    if version >= 3:  # flexible: header tags, then the body's two compact strings
        header += b"\x00"
        body = b"\x09fallback\x061.0.0\x00"
    else:
        body = b""
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        assert chunk, "the broker closed the connection"
        got += chunk
    return got


def test_an_unsupported_api_versions_version_is_answered_and_read_in_v0(apache_recorded):
    host, port = apache_recorded.bootstrap.split(":")
    with socket.create_connection((host, int(port))) as sock:
        # (the broker's own newest: what a v3 answer says; then one past it)
        first = _ask(sock, 3, 1)
        assert struct.unpack_from(">h", first, 4)[0] == 0
        theirs = _broker_max(first)
        asked = theirs + 1
        answer = _ask(sock, asked, 2)
    assert struct.unpack_from(">h", answer, 4)[0] == 35  # UNSUPPORTED_VERSION, in v0
    time.sleep(0.3)  # the relay's pumps
    (conn,) = apache_recorded.snapshot()
    (ok, fallback), _ = exchanges(conn)
    resp = fallback.response
    assert fallback.request.api_version == asked and resp.api_version == 0
    assert resp.problems == [] and "answered_in_v0" in fallback.findings
    body = {c.name: c for c in resp.body.children}
    assert set(body) == {"error_code", "api_keys"}  # v0: no throttle time
    (entry,) = body["api_keys"].children[1:]
    assert [c.value for c in entry.children] == [API_VERSIONS, 0, theirs]
    # the same bytes pasted (the requests, then the answers): paired and read alike
    from kdissect.sources.paste_choice import read_paste

    items = read_paste(bytes(conn.to_broker) + bytes(conn.to_client)).items
    answer = items[3]
    assert "paired with request 2" in answer.how and answer.message.api_version == 0
    assert answer.message.problems == [] and [f.code for f in answer.findings] == ["answered_in_v0"]


def _broker_max(answer: bytes) -> int:
    """The broker's newest ApiVersions version, from a v3 answer."""
    from kdissect.protocol import decode_response

    msg = decode_response(answer, API_VERSIONS, 3)
    for n in msg.body.walk():
        fields = {c.name: c.value for c in n.children}
        if n.ktype == "struct" and fields.get("api_key") == API_VERSIONS:
            return int(fields["max_version"])
    raise AssertionError("no ApiVersions entry")
