"""The enrichment stage: what decoding teaches about each exchange, learned once and in
order, before any view sees it.

For each exchange from the correlation core it guesses an orphan response's API,
decodes both messages (a summary: record batch headers, not records; or the full
trees when the sink prints them, so nothing is decoded twice), names topics known only
by id from what earlier exchanges taught, checks request versions against what
ApiVersions advertised on the connection, and turns everything noticed into findings
and a short status. Views read the result; none of them guesses, learns or rewrites.
"""

from __future__ import annotations

from typing import Any

import dataclasses
import sys
import types
from collections.abc import Callable

from ..protocol import Message, Options, schemas
from ..protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SYNC_GROUP, WAIT_FIELDS
from ..protocol.findings import Finding
from ..protocol.names import error_name
from ..protocol.values import NO_BYTES, body_values, lean_reader, plain_reader
from .anomaly import EXPECTED_ERRORS
from .diagnoses import Diagnoses
from .facts import body_plan, pair_facts
from .model import ACKS0, STATUS_OF_FINDING, Exchange, Gap, tree_findings
from .orphans import Orphans
from .sink import Sink


class Enricher:
    """A sink that enriches exchanges and passes everything on to ``sink``.

    ``full``: decode whole trees (kept on the exchange in ``decoded`` for the sink to
    print, then dropped with it) instead of summaries. ``values_conv``: bodies read by the
    values decoder are read with bytes through it and kept on their messages
    (``KafkaMessage.values``), for a sink that prints them. ``topic_ids``: the run's
    topic names (topic id -> name), filled here as messages teach them, in order; the
    caller's dict if it gives one, so that its sinks' decoders (JSON lines, -V trees,
    --stats) name what enrichment's do."""

    def __init__(
        self,
        sink: Sink,
        options: Options | None = None,
        full: bool = False,
        values_conv: Callable[[bytes], object] | None = None,
        topic_ids: dict[str, str] | None = None,
    ):
        self.sink = sink
        self.values_conv = values_conv
        options = options or Options()
        self.full = full
        self.options = options if full else dataclasses.replace(options, records="batches")
        self.topic_ids: dict[str, str] = topic_ids if topic_ids is not None else {}
        self.advertised: dict[int, dict[int, tuple[int, int]]] = {}  # stream -> ranges
        self.diagnoses = Diagnoses()  # Kafka-level diagnoses (their state)
        self.orphans = Orphans()  # what orphan responses taught so far
        self.kinds: dict[tuple[Any, ...], _Kind | None] = {}  # enrich's, for self.options
        # no sink sees the bodies: they hold only the fields enrichment reads (_Kind)
        self.lean = not full and values_conv is None

    # -- Sink ---------------------------------------------------------------------------

    def exchange(self, ex: Exchange) -> None:
        enrich(
            ex,
            self.options,
            self.topic_ids,
            self.advertised,
            self.full,
            self.diagnoses,
            self.values_conv,
            self.orphans,
            self.kinds,
            self.lean,
        )
        self.sink.exchange(ex)

    def gap(self, g: Gap) -> None:
        self.diagnoses.gap(g)
        self.sink.gap(g)

    def item(self, item: Any) -> None:
        """A file-level item or record batch (sources/logdir.py): passed on as it is."""
        self.sink.item(item)

    def tls(self, facts: Any) -> None:
        """A TLS connection ended (capture.tls.TlsFacts); for the sinks that show them."""
        self.sink.tls(facts)

    def note(self, text: str, level: str = "warn") -> None:
        self.sink.note(text, level)

    def progress(self, done: int, total: int) -> None:
        self.sink.progress(done, total)

    def done(self) -> None:
        self.sink.done()


def enrich(
    ex: Exchange,
    options: Options,
    topic_ids: dict[str, str],
    advertised: dict[int, dict[int, tuple[int, int]]],
    keep: bool = False,
    diagnoses: Diagnoses | None = None,
    values_conv: Callable[[bytes], object] | None = None,
    orphans: Orphans | None = None,
    kinds: dict[tuple[Any, ...], _Kind | None] | None = None,
    lean: bool = False,
) -> None:
    """``kinds``: what ``_kind`` said of each message kind, for a run's exchanges with
    these ``options`` and ``lean`` (the caller's dict: filled here). ``lean``: no one
    but enrichment reads the bodies (``values_conv`` is None, ``keep`` False): they may
    hold only the fields it reads (``read_names``)."""
    if kinds is None:
        kinds = {}
    req, resp = ex.request, ex.response
    findings = ex.findings
    if orphans is not None and req is not None:
        key, version = req.api_key, req.api_version
        if key is not None and version is not None:
            orphans.spoke(req.stream, (key, version))
    if resp is not None and req is None and resp.direction == "response" and resp.api_key is None:
        _guess(resp, findings, orphans if orphans is not None else Orphans())
    # beside each message (request, response): its full tree when ``keep``, its body (a
    # values dict, a located node, or None), and what facts read of a values dict
    decoded: list[Message | None] = [None, None]
    bodies: list[Any] = [None, None]
    plans: list[Any] = [None, None]
    conv = values_conv or NO_BYTES
    for i, m in enumerate((req, resp)):
        if m is None:
            continue
        if not keep:
            kind = kinds.get((m.api_key, m.api_version, m.direction), _UNKNOWN)
            if kind is _UNKNOWN:
                if len(kinds) >= 4096:  # (hostile captures' keys and versions: unbounded)
                    kinds.clear()
                kind = kinds[m.api_key, m.api_version, m.direction] = _kind(m, options, lean)
            # (_values_body with its kind known, inline: a call per message)
            values = None
            if kind is not None and not m.holes:
                reader = kind.reader
                if reader is not None:
                    values = reader[0].read_plain(
                        m.data, conv, options.records, reader[1], options.max_nodes
                    )
                if values is None:
                    values = _generated_body(m, options, conv)
            if values is not None:
                assert kind is not None, "read by kind"
                # kept for the printing sink only without records: it prints records'
                # contents, which a summary read keeps as batch headers
                if values_conv is not None and not kind.records:
                    m.values = values
                bodies[i] = values
                plans[i] = kind.plan
                continue
        # decoders see what is learned (Fetch v13+ of internal topics names them by id)
        d = decoded[i] = m.decoded(options, topic_ids)
        where = m.direction
        for path, code, reason in tree_findings(m, d.tree):
            findings.append(Finding(code, reason, f"{where}: {path}"))
        if (
            (m.direction == "sasl" or m.api_key == SASL_AUTHENTICATE)
            and ex.tls is None
            and any(n.note == "SASL/PLAIN" for n in d.tree.walk())
        ):
            # readable here and not decrypted TLS: the password crossed the wire in clear
            findings.append(Finding("plaintext_credentials", "", where))
        if m.direction == "sasl" or m.api_key == SASL_AUTHENTICATE:
            failed = next((n for n in d.tree.walk() if n.note == "SASL/SCRAM server-error"), None)
            if failed is not None:
                said = failed.child("error")
                findings.append(
                    Finding(
                        "authentication_failed",
                        "SCRAM server-final: " + (str(said.value) if said is not None else "error"),
                        where,
                    )
                )
        if d.assumed_from is not None:
            findings.append(
                Finding("assumed_version", _assumed(m, d, advertised.get(ex.stream)), where)
            )
        bodies[i] = d.tree.children[0] if m.direction == "sasl" else d.body
    ranges = advertised.get(ex.stream) if advertised else None
    if (
        ranges is not None  # (what _check_version reads: asked here, cheaply)
        and req is not None
        and req.direction == "request"
        and req.api_key is not None
    ):
        lo_hi = ranges.get(req.api_key)  # (advertised, the usual: nothing to check)
        if lo_hi is None or not lo_hi[0] <= req.api_version <= lo_hi[1]:  # type: ignore[operator]
            _check_version(ex, advertised, findings)
    req_body, resp_body = bodies
    f = ex.facts = pair_facts(req_body, resp_body, plans, topic_ids)
    if req is not None and req_body is not None and req.api_key in WAIT_FIELDS:
        f.asked_wait_field, f.asked_wait_ms = _asked_wait(req.api_key, req_body)
    elif req is not None and req_body is not None and req.api_key == SYNC_GROUP:
        f.leads_sync = _has_items(req_body, "assignments")
    if resp is not None and resp.direction == "response":
        if type(resp_body) is dict:  # (_int_field's usual case, inline)
            top = resp_body.get("error_code")
            if type(top) is not int:
                top = None
            throttle = resp_body.get("throttle_time_ms")
            if type(throttle) is not int:
                throttle = None
        else:
            top = _int_field(resp_body, "error_code")
            throttle = _int_field(resp_body, "throttle_time_ms")
        if top is not None:
            f.top_error = top
        sites = f.error_sites
        if sites:
            seen: set[int] = set()
            normal = EXPECTED_ERRORS.get(ex.first.api_key, ())
            for topic, partition, err in sites:
                if err not in seen:
                    seen.add(err)
                    at = f" ({topic}[{partition}])" if topic is not None else ""
                    findings.append(
                        Finding(
                            "expected_error" if err in normal else "error_code",
                            f"{error_name(err)}{at}",
                            "response",
                        )
                    )
        if throttle is not None:
            f.throttle_ms = throttle
            if throttle > 0:
                findings.append(Finding("throttled", f"throttled {throttle} ms", "response"))
        # (ex.first inline: a call per exchange)
        if (req or resp).api_key == API_VERSIONS and resp_body is not None and resp.status == "ok":
            _learn_versions(ex.stream, resp_body, advertised)
    if diagnoses is not None:
        diagnoses.observe(ex, req_body, resp_body, topic_ids)
    ex.status = _status(ex) if findings or not ex.expected else "ok"  # (the usual: no call)
    if keep:
        ex.decoded = (decoded[0], decoded[1])


def _assumed(m: Any, d: Message, ranges: dict[int, tuple[int, int]] | None) -> str:
    """What an ``assumed_version`` finding says: the layout used, what it left
    unexplained, and whether the broker said on this connection that it speaks the
    version (its ApiVersions answer)."""
    text = d.assumed() or ""
    said = ranges.get(m.api_key) if ranges else None
    if said is not None:
        speaks = said[0] <= m.api_version <= said[1]
        text += f"; the broker advertised v{said[0]}-v{said[1]} on this connection" + (
            "" if speaks else ", not this version"
        )
    return text


def _asked_wait(api_key: int | None, body: Any) -> tuple[str | None, int | None]:
    """(the field that asks the broker to hold the answer, its value), or (None, None)."""
    for name in WAIT_FIELDS.get(api_key, ()) if api_key is not None else ():
        value = _int_field(body, name)
        if value is not None:
            return name, value
    return None, None


def _has_items(body: Any, name: str) -> bool:
    """Whether an array field of a body (a values dict or a located tree) holds items."""
    if type(body) is dict:
        return bool(body.get(name))
    node = body.child(name) if body is not None else None
    return node is not None and any(not c.name.startswith("_") for c in node.children)


def _int_field(body: Any, name: str) -> int | None:
    """An integer field of a body: a located tree's node, or a values decoder's dict."""
    if type(body) is dict:  # (the usual: first)
        value = body.get(name)
        return value if type(value) is int else None
    if body is None:
        return None
    if isinstance(body, dict):
        value = body.get(name)
        return value if type(value) is int else None
    field = body.child(name)
    return (
        field.value
        if field is not None and isinstance(field.value, int) and not isinstance(field.value, bool)
        else None
    )


# read located: SASL/PLAIN is spotted in the tree's notes. (ApiVersions answers were
# too, for their nodes: a tenth of the exchanges of a KRaft cluster's traffic and a
# third of its summary's cost; versions are learned from their values now.)
_LOCATED_APIS = frozenset({SASL_AUTHENTICATE})


class _Kind:
    """How enrichment reads the bodies of one message kind, asked once per kind (per
    message, the lookups were a twentieth of a summary of many small exchanges): its
    ``values.plain_reader`` (None: ``body_values``), its facts' ``body_plan``, and
    whether it carries records."""

    __slots__ = ("reader", "plan", "records")

    def __init__(
        self, api_key: int, api_version: int, direction: str, options: Options, lean: bool
    ):
        self.reader = (
            lean_reader(api_key, api_version, direction, options, read_names())
            if lean
            else plain_reader(api_key, api_version, direction, options)
        )
        self.plan = body_plan(api_key, api_version, direction)
        self.records = schemas.has_records(api_key, api_version, direction)


_UNKNOWN: Any = object()


def _kind(m: Any, options: Options, lean: bool = False) -> _Kind | None:
    """How a message of ``m``'s kind is read by value; None: located (SASL, an unknown
    API, ``_LOCATED_APIS``). ``lean``: as ``enrich`` says."""
    if (
        m.direction == "sasl"
        or m.api_key is None
        or m.api_key in _LOCATED_APIS
        or m.api_version is None
    ):
        return None
    return _Kind(m.api_key, m.api_version, m.direction, options, lean)


def _values_body(
    m: Any,
    options: Options,
    conv: Callable[[bytes], object] = NO_BYTES,
    kind: _Kind | None = _UNKNOWN,
) -> dict[Any, Any] | None:
    """The body of a clean message read by the values decoder, record batches as their
    headers (``options.records`` is "batches"): the same facts and findings as a located
    summary tree, which no summary needs (several times faster: a Metadata answer naming
    110 topics took 31 ms located, 18 ms so). ``conv`` reads bytes fields (for a sink that
    prints the body); ``kind``: ``_kind(m, options)``, if known. None: decode it located
    (a message cut by holes shows what was captured after them there)."""
    if kind is _UNKNOWN:
        kind = _kind(m, options)
    if kind is None or m.holes:
        return None
    reader = kind.reader
    if reader is not None:
        got: dict[Any, Any] | None = reader[0].read_plain(
            m.data, conv, options.records, reader[1], options.max_nodes
        )
        if got is not None:
            return got
    return _generated_body(m, options, conv)


def _generated_body(
    m: Any, options: Options, conv: Callable[[bytes], object]
) -> dict[Any, Any] | None:
    """The body by ``body_values`` (the generated readers, or None: located), where no
    compiled program reads its kind or the program declined the message."""
    return body_values(m.data, m.direction, m.api_key, m.api_version, options, conv)


def _guess(resp: Any, findings: list[Finding], orphans: Orphans) -> None:
    kind, resp.how = orphans.guess(resp.stream, resp.data)
    if kind is not None:
        resp.api_key, resp.api_version = kind
        findings.append(Finding("guessed_api", resp.how, "response"))


def _learn_versions(stream: int, body: Any, advertised: Any) -> None:
    """What an ApiVersions answer's body (a values dict or a located node) advertises."""
    if _int_field(body, "error_code") != 0:
        return
    ranges = {}
    if isinstance(body, dict):
        for item in body.get("api_keys") or ():
            k, lo, hi = item.get("api_key"), item.get("min_version"), item.get("max_version")
            if type(k) is int and type(lo) is int and type(hi) is int:
                ranges[k] = (lo, hi)
    else:
        keys = body.child("api_keys")
        for item in keys.children if keys is not None else ():
            k, lo, hi = (_int_field(item, n) for n in ("api_key", "min_version", "max_version"))
            if k is not None and lo is not None and hi is not None:
                ranges[k] = (lo, hi)
    if ranges:
        advertised[stream] = ranges


def _check_version(ex: Exchange, advertised: Any, findings: list[Finding]) -> None:
    req = ex.request
    assert req is not None, "checked for requests only"
    ranges = advertised.get(ex.stream)
    if ranges is not None and req.api_key != API_VERSIONS:
        lo_hi = ranges.get(req.api_key)
        if lo_hi is None or not lo_hi[0] <= req.api_version <= lo_hi[1]:
            said = (
                f"the broker advertised v{lo_hi[0]}-v{lo_hi[1]}"
                if lo_hi
                else "the broker did not advertise this API"
            )
            findings.append(
                Finding(
                    "version_not_advertised",
                    f"{req.api_name} v{req.api_version}; {said}",
                    "request",
                )
            )


def _status(ex: Exchange) -> str:
    codes = {f.code for f in ex.findings} if ex.findings else ()
    for code, text in STATUS_OF_FINDING if codes else ():
        if code in codes:
            if text is None:
                # a cut message whose header is unreadable too says "malformed header"
                return next(
                    (m.status for m in ex.messages if m.status.startswith("truncated")), "truncated"
                )
            return text
    if ex.request is not None and ex.response is None and not ex.expected:
        return ACKS0
    return "ok"


_READ_NAMES: frozenset[str] | None = None


def read_names() -> frozenset[str]:
    """The body fields enrichment may read (by name: this module's, ``facts``' and
    ``diagnoses``' code, and the ``WAIT_FIELDS``), for lean reads: every string these
    modules hold as a constant (a field read by name is named in them: ``.get("...")``,
    the names ``_partitions`` and ``_int_field`` are given, tuples of names). Error codes
    and records are kept whatever they are called (``values_native.kept``). A name built
    at run time would not be here: tests/test_lean_values.py holds lean bodies to whole
    ones on every capture."""
    global _READ_NAMES
    if _READ_NAMES is None:
        from . import diagnoses, facts as facts_module

        found: set[str] = set()
        for module in (diagnoses, facts_module, sys.modules[__name__]):
            for key, value in vars(module).items():
                if not key.startswith("__"):  # (its __builtins__ is no name it reads)
                    _constants(value, found, module.__name__, 0)
        for names in WAIT_FIELDS.values():
            found.update(names)
        _READ_NAMES = frozenset(n for n in found if n.isidentifier())
    return _READ_NAMES


def _constants(value: Any, found: set[str], module: str, depth: int) -> None:
    """The strings of ``value`` (a constant, a function or a class of ``module``). Not
    of dicts: the modules' dicts are caches filled as messages come (facts' roles of
    the names seen), which would make the names depend on what came first."""
    if depth > 6:
        return
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, (tuple, frozenset)):
        for v in value:
            _constants(v, found, module, depth + 1)
    elif isinstance(value, types.CodeType):
        for v in value.co_consts:
            _constants(v, found, module, depth + 1)
    elif isinstance(value, types.FunctionType):
        if value.__module__ == module:
            _constants(value.__code__, found, module, depth + 1)
    elif isinstance(value, (staticmethod, classmethod, property)):
        for f in (getattr(value, "__func__", None), getattr(value, "fget", None)):
            if f is not None:
                _constants(f, found, module, depth + 1)
    elif isinstance(value, type) and value.__module__ == module:
        for v in vars(value).values():
            _constants(v, found, module, depth + 1)
