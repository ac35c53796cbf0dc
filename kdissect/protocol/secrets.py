"""The one table of credential-bearing fields, and the pass that marks them ``secret``.

Every view masks a node marked ``secret`` unless secrets are asked for (``--show-secrets``):
text, -V trees, JSON lines, Parquet, the TUI and the proxy's display all read the same
mark. Three kinds of secret:

- fields that are credentials by their API and name (``FIELDS``);
- configuration values of Kafka's PASSWORD-type configs (``PASSWORD_CONFIGS``, by exact
  name, prefixes allowed) or that the broker itself calls sensitive (``is_sensitive`` in
  DescribeConfigs), wherever a struct pairs a name with a value (CreateTopics,
  AlterConfigs, IncrementalAlterConfigs, DescribeConfigs and its synonyms, KRaft's
  ConfigRecord...);
- SCRAM credentials in KRaft's metadata records (``RECORD_FIELDS``);
- SASL tokens (``EMBEDDED``): the embedded decoder masks their secret parts (PLAIN
  password, SCRAM proofs and server signatures, OAUTHBEARER tokens) and keeps the rest
  readable; a token it cannot read is masked whole.

``NOT_SECRET`` names fields that look credential-bearing but are not, with why; the test
suite walks every layout and fails on any such-looking field in neither list.
"""

from __future__ import annotations

import re

from .apis import (
    ALTER_CLIENT_QUOTAS,
    ALTER_CONFIGS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_DELEGATION_TOKEN,
    CREATE_TOPICS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CONFIGS,
    DESCRIBE_DELEGATION_TOKEN,
    ENVELOPE,
    EXPIRE_DELEGATION_TOKEN,
    INCREMENTAL_ALTER_CONFIGS,
    RENEW_DELEGATION_TOKEN,
    SASL_AUTHENTICATE,
    STREAMS_GROUP_DESCRIBE,
    STREAMS_GROUP_HEARTBEAT,
)
from .node import Node

# api key -> names of fields that hold a credential (any depth, either direction)
FIELDS: dict[int, frozenset[str]] = {
    CREATE_DELEGATION_TOKEN: frozenset({"hmac"}),  # the token's secret
    RENEW_DELEGATION_TOKEN: frozenset({"hmac"}),
    EXPIRE_DELEGATION_TOKEN: frozenset({"hmac"}),
    DESCRIBE_DELEGATION_TOKEN: frozenset({"hmac"}),
    ALTER_USER_SCRAM_CREDENTIALS: frozenset({"salted_password"}),  # logs in as SCRAM
}
# KRaft metadata record (and other internal record) -> fields holding a credential
RECORD_FIELDS: dict[str, frozenset[str]] = {
    # SCRAM's stored and server keys log in as the user (RFC 5802: anyone holding them
    # can pose as the server, and brute-force the password offline)
    "UserScramCredentialRecord": frozenset({"stored_key", "server_key"}),
}
# api key -> fields holding SASL tokens: the embedded decoder masks their secret parts
# (and Envelope's forwarded request and its answer -- a delegation token's HMAC,
# DescribeConfigs values...: decoded and masked as any message, message.py; masked
# whole when they cannot be read, or the answer's request is not known)
EMBEDDED: dict[int, frozenset[str]] = {
    SASL_AUTHENTICATE: frozenset({"auth_bytes"}),
    ENVELOPE: frozenset({"request_data", "response_data"}),
}
# fields whose names look like credentials but are not (the secrets test reads this)
NOT_SECRET: dict[str, str] = {
    "salt": "public in SCRAM (sent to every client in server-first)",
    "token_id": "names a delegation token, like a user name",
    "tokens": "the array holding delegation tokens (their hmac is masked)",
    "token_requester_principal_name": "a principal name",
    "token_requester_principal_type": "a principal type",
    "credential_infos": "SCRAM mechanism and iteration count, no secret",
    "key": "a coordinator, quota or streams key",
    "key_type": "the kind of coordinator key",
    "coordinator_keys": "group or transaction ids",
    "configuration_keys": "config names asked for (values are masked by name)",
    "api_key": "an API number",
    "api_keys": "ApiVersions ranges",
    "is_future_key": "a flag",
}
LOOKS_SECRET = re.compile(
    r"password|secret|token|hmac|proof|credential|auth_bytes|salt|"
    r"jaas|bearer|key",
    re.I,
)
# Kafka's configs of type PASSWORD (ConfigDef.Type.PASSWORD in clients, broker, KRaft and
# Connect), and the Schema Registry client's: their values are credentials. A prefixed
# name (listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config, producer.override.
# ssl.key.password, value.converter.basic.auth.user.info) is the same config. Never a
# substring of a name: delegation.token.expiry.time.ms is no secret.
PASSWORD_CONFIGS = frozenset(
    {
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "delegation.token.secret.key",
        "delegation.token.master.key",
        "password.encoder.secret",
        "password.encoder.old.secret",
        "basic.auth.user.info",
        "bearer.auth.token",
        "bearer.auth.client.secret",
    }
)
_NAME_FIELDS = ("name", "config_name", "key")
# the APIs whose bodies carry configuration (name, value) pairs (the secrets test checks
# every layout with a config-like value field is here)
CONFIG_APIS = frozenset(
    {
        CREATE_TOPICS,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS,
        DESCRIBE_CLIENT_QUOTAS,
        ALTER_CLIENT_QUOTAS,
        STREAMS_GROUP_HEARTBEAT,
        STREAMS_GROUP_DESCRIBE,
    }
)
SENSITIVE_APIS = frozenset(FIELDS) | frozenset(EMBEDDED) | CONFIG_APIS


# Plugins' and connectors' credentials Kafka does not list (ldap.bind.password,
# connection.password, aws.secret.access.key): a whole word of the dotted name, never a
# substring (delegation.token.expiry.time.ms has none of them)
SECRET_WORDS = frozenset({"password", "passwd", "secret", "passphrase", "credentials"})


def is_secret_config(name: object) -> bool:
    """Whether the config ``name`` (perhaps prefixed) is one of PASSWORD_CONFIGS, or has a
    word of SECRET_WORDS between its dots."""
    if not isinstance(name, str):
        return False
    name = name.lower()
    if not SECRET_WORDS.isdisjoint(name.split(".")):
        return True
    while name not in PASSWORD_CONFIGS:
        dot = name.find(".")
        if dot < 0:
            return False
        name = name[dot + 1 :]
    return True


def mark(body: Node, api_key: int | None) -> None:
    """Mark the credential-bearing nodes under ``body`` (a decoded message body)."""
    if api_key not in SENSITIVE_APIS:
        return
    fields = FIELDS.get(api_key, frozenset()) if api_key is not None else frozenset()
    embedded = EMBEDDED.get(api_key, frozenset()) if api_key is not None else frozenset()
    stack = [body]
    while stack:
        node = stack.pop()
        children = node.children
        if not children:
            continue
        name_value = None
        for child in children:
            if child.name in fields or child.name == "_unexplained":
                # (_unexplained: a newer version's bytes the known layout could not
                # place, which may hold this API's credentials)
                _hide(child)
            elif child.name in embedded and not child.children and child.value:
                _hide(child)  # a token the embedded decoder could not read
            elif child.name in _NAME_FIELDS and name_value is None:
                name_value = child.value
            stack.append(child)
        sensitive = node.child("is_sensitive")  # the broker's own word (DescribeConfigs)
        if is_secret_config(name_value) or (sensitive is not None and sensitive.value is True):
            value = node.child("value")
            if value is not None:
                _hide(value)
            for synonym in (node.child("synonyms") or node).children or ():
                if synonym is not node and synonym.child("value") is not None:
                    _hide(synonym.child("value"))  # type: ignore[arg-type]


def _hide(node: Node) -> None:
    node.secret = True
    for child in node.walk():
        child.secret = True


REDACTED = "<redacted>"


def mask_values(values: object, api_key: int | None) -> object:
    """The same masking on a body read as plain values (dicts and lists, as JSON lines
    write them): credential fields and secret config values become ``REDACTED``."""
    if api_key not in SENSITIVE_APIS:
        return values
    fields = FIELDS.get(api_key, frozenset()) if api_key is not None else frozenset()
    stack = [values]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for k, v in item.items():
                if k in fields and v is not None:
                    item[k] = REDACTED
                elif isinstance(v, (dict, list)):
                    stack.append(v)
            name = next((item[k] for k in _NAME_FIELDS if k in item), None)
            if is_secret_config(name) or item.get("is_sensitive") is True:
                if item.get("value") is not None:
                    item["value"] = REDACTED
                for synonym in item.get("synonyms") or ():
                    if isinstance(synonym, dict) and synonym.get("value") is not None:
                        synonym["value"] = REDACTED
    return values


def mark_record(holder: Node) -> None:
    """Mark the credentials in one decoded internal record (``holder``: the record's
    key or value node, its decoded struct a child): SCRAM keys, and ConfigRecord values
    of PASSWORD-type configs. The holder's own bytes (the record's raw value, shown as
    hex) are masked too; its decoded fields stay readable."""
    hidden = False
    for struct in holder.children or ():
        name = (struct.note or "").split(" ", 1)[0]
        fields = RECORD_FIELDS.get(name, frozenset())
        for child in struct.children or ():
            if child.name in fields and child.value is not None:
                _hide(child)
                hidden = True
        if name == "ConfigRecord" and is_secret_config(_value_of(struct, "name")):
            value = struct.child("value")
            if value is not None and value.value is not None:
                _hide(value)
                hidden = True
    if hidden:
        holder.secret = True  # its own value only: the raw bytes hold the secret


def _value_of(node: Node, name: str) -> object:
    c = node.child(name)
    return c.value if c is not None else None


def secret_spans(tree: Node) -> list[tuple[int, int]]:
    """Where a message's secrets lie in its bytes (start, end), as its tree marks them."""
    out = []
    for node in tree.walk():  # leaves: a holder's secret is its own hex, not its bytes
        if node.secret and node.buffer is None and not node.children:
            out.append((node.offset, node.end))
    return out
