"""Secrets: one table (kdissect/protocol/secrets.py) covers every credential-looking field
of every layout, and nothing in it prints without --show-secrets (text, -V, JSON lines)."""

from __future__ import annotations

import json

from kio.schema.alter_configs.v2.request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from kio.schema.create_delegation_token.v3.response import CreateDelegationTokenResponse
from kio.schema.errors import ErrorCode

from kdissect.protocol import Options, decode_request, decode_response, schemas, secrets
from kdissect.render.lines import message_json
from kdissect.render.text import render_node
from kdissect.stream.model import KafkaMessage
from tests.test_roundtrip_kio import encode, request_header, response_header

SALTED = bytes(range(100, 132))
HMAC = bytes(range(200, 232))
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required password="hunter2";'


def _walk(struct, out: set[str]) -> None:
    for f in struct.fields + struct.tagged:
        out.add(f.name)
        if f.struct is not None:
            _walk(f.struct, out)


def test_every_credential_looking_field_is_in_the_table():
    unlisted = []
    for key, versions in schemas.all_versions().items():
        for version in versions:
            for direction in ("request", "response"):
                layout = schemas.layout(key, version, direction)
                if layout is None:
                    continue
                names: set[str] = set()
                _walk(layout, names)
                for name in names:
                    if secrets.LOOKS_SECRET.search(name) and not (
                        name in secrets.FIELDS.get(key, ())
                        or name in secrets.EMBEDDED.get(key, ())
                        or name in secrets.NOT_SECRET
                    ):
                        unlisted.append((key, version, direction, name))
    assert not unlisted


def _outputs(data: bytes, direction: str, key: int, version: int, show: bool) -> str:
    options = Options(show_secrets=show)
    m = KafkaMessage(0, 1, direction, 0.0, 1, 0, data, key, version)
    decoded = m.decoded(options)
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(render_node(data, decoded.tree, show))
    return "\n".join(
        [
            console.export_text(),
            json.dumps(message_json(m, options)),
            json.dumps(message_json(m, options, decoded=decoded)),
            json.dumps(decoded.tree.to_json(show)),
        ]
    )


def _check(data, direction, key, version, secret_texts: list[str]) -> None:
    hidden = _outputs(data, direction, key, version, False)
    shown = _outputs(data, direction, key, version, True)
    for text in secret_texts:
        assert text not in hidden, text
        assert text in shown, text
    assert secrets.REDACTED in hidden


def _hexdump_forms(b: bytes) -> list[str]:
    # as JSON writes bytes, and as the hex dump's first bytes
    return [b.hex(), " ".join(f"{x:02x}" for x in b[:8])]


def test_salted_password_is_masked():
    req = AlterUserScramCredentialsRequest(
        deletions=(),
        upsertions=(
            ScramCredentialUpsertion(
                name="alice", mechanism=1, iterations=4096, salt=b"salt", salted_password=SALTED
            ),
        ),
    )
    data = encode(request_header(51, 0, 7), req)
    assert decode_request(data).body.child("upsertions") is not None
    _check(data, "request", 51, 0, _hexdump_forms(SALTED))


def test_delegation_token_hmac_is_masked():
    import datetime

    resp = CreateDelegationTokenResponse(
        error_code=ErrorCode.none,
        principal_type="User",
        principal_name="alice",
        token_requester_principal_type="User",
        token_requester_principal_name="alice",
        issue_timestamp=datetime.datetime.now(datetime.timezone.utc),
        expiry_timestamp=datetime.datetime.now(datetime.timezone.utc),
        max_timestamp=datetime.datetime.now(datetime.timezone.utc),
        token_id="tok",
        hmac=HMAC,
        throttle_time=datetime.timedelta(0),
    )
    data = encode(response_header(38, 3, 7), resp)
    assert decode_response(data, 38, 3).body.child("hmac") is not None
    _check(data, "response", 38, 3, _hexdump_forms(HMAC))


def test_password_like_config_values_are_masked():
    req = AlterConfigsRequest(
        validate_only=False,
        resources=(
            AlterConfigsResource(
                resource_type=4,
                resource_name="0",
                configs=(
                    AlterableConfig(
                        name="listener.name.sasl.scram-sha-256.sasl.jaas.config", value=JAAS
                    ),
                    AlterableConfig(name="ssl.keystore.password", value="s3cret-pw"),
                    AlterableConfig(name="retention.ms", value="86400000"),
                ),
            ),
        ),
    )
    data = encode(request_header(33, 2, 7), req)
    _check(data, "request", 33, 2, ["hunter2", "s3cret-pw"])
    assert "86400000" in _outputs(data, "request", 33, 2, False)  # the rest stays


def test_every_layout_pairing_names_with_values_is_checked_for_secret_configs():
    def pairs(struct) -> bool:
        names = {f.name for f in struct.fields + struct.tagged}
        return ("value" in names and bool(names & {"name", "config_name", "key"})) or any(
            pairs(f.struct) for f in struct.fields + struct.tagged if f.struct is not None
        )

    found = {
        key
        for key, versions in schemas.all_versions().items()
        for version in versions
        for direction in ("request", "response")
        if (layout := schemas.layout(key, version, direction)) is not None and pairs(layout)
    }
    assert found <= secrets.CONFIG_APIS


def test_plugin_credentials_are_secret_by_a_word_of_their_name():
    from kdissect.protocol.secrets import is_secret_config

    for name in (
        "ldap.bind.password",
        "connection.password",
        "aws.secret.access.key",
        "listener.name.x.sasl.jaas.config",
        "ssl.key.password",
    ):
        assert is_secret_config(name), name
    for name in (
        "delegation.token.expiry.time.ms",
        "passwordless.mode",
        "secretary",
        "sasl.kerberos.service.name",
    ):
        assert not is_secret_config(name), name


def test_a_newer_versions_unexplained_bytes_are_masked_on_credential_apis():
    """SaslAuthenticate newer than the tables: what the newest layout cannot place (here
    everything after a byte the newer version added) may be the password."""
    import struct

    from kdissect.protocol import decode_request, schemas

    newer = schemas.all_versions()[36][-1] + 1
    token = b"\x00user\x00hunter2-secret"
    header = struct.pack(">hhi", 36, newer, 7) + struct.pack(">h", 4) + b"java" + b"\x00"
    body = b"\x7f" + bytes([len(token) + 1]) + token + b"\x00"
    m = decode_request(header + body)
    left = [n for n in m.tree.walk() if n.name == "_unexplained"]
    assert left and all(n.secret for n in left)
    assert all(
        n.secret for n in m.tree.walk() if isinstance(n.value, bytes) and b"hunter2" in n.value
    )
