"""One line per exchange, and one JSON object per Kafka message."""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
import os
import re
from datetime import datetime, timezone
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from .marks import MARKS
from .printable import printable
from ..protocol import Options
from ..protocol.findings import SEVERITIES, Finding
from ..protocol import secrets
from ..protocol.times import LAST_SECOND
from ..protocol.values import body_json, body_values
from ..stream.model import STATUS_OF_FINDING, Exchange, KafkaMessage, kept_findings
from .records import json_bytes, plain_json
from ..protocol.json_view import internal_records_json as _internal
from . import jsonl_records
from ..stream.fields import PROBLEM_GROUPS, ExchangeFields
from ..stream.facts import UNRESOLVED, Facts
from ..protocol.names import API_NAMES as _API_NAMES, api_name
from ..protocol.native_ext import bind

if TYPE_CHECKING:
    from rich.text import Text


INVALID_TIME = "????-??-??T??:??:??.??????Z"  # same shape: views slice it


def iso(ts: float) -> str:
    """UTC ISO-8601; a time outside 1970..9999 (a damaged capture) shows as invalid.

    What ``datetime.fromtimestamp(ts, utc).isoformat(timespec="microseconds")`` writes,
    with the date and time of the last whole second kept: formatting a datetime per
    message was 7 % of JSON lines on many small exchanges. The microseconds are
    rounded as datetime rounds them (half to even, carried into the second)."""
    if not 0 <= ts <= LAST_SECOND:
        return INVALID_TIME
    second = int(ts)  # (ts >= 0: math.modf's whole part, and ts - second its fraction)
    us = round((ts - second) * 1e6)
    if us >= 1_000_000:
        us -= 1_000_000
        second += 1
    last = _last_second
    if second != last[0]:
        last[:] = [
            second,
            datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S."),
        ]
    return f"{last[1]}{us:06d}Z"


_last_second: list = [None, ""]  # [whole second, its text up to the microseconds]


def endpoint(addr: tuple[str, int]) -> str:
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def exchange_line(ex: Exchange, options: Options, view: ExchangeFields | None = None) -> Text:
    """The exchange's line, styled (for a terminal)."""
    from rich.text import Text  # a terminal's line: piped output never needs rich

    t = Text()
    for text, style in line_parts(ex, options, view):
        t.append(printable(text), style=style)
    return t


def exchange_plain(ex: Exchange, options: Options, view: ExchangeFields | None = None) -> str:
    """The exchange's line as ``exchange_line(...).plain`` is, without building a rich
    ``Text`` (appending to one was a tenth of a summary of many small exchanges); written
    by the compiled extension when it is at hand (``compiled_plain``)."""
    if _SUMMARY_LINE is not None:
        line = compiled_plain(ex, view)
        if line is not None:
            return line
    return python_plain(ex, options, view)


MARKED = 3  # finding codes named on a summary line; the rest are counted
# what a summary line shows otherwise: the error names, the problem count (and the status)
_SHOWN = frozenset({"error_code", "expected_error"})
_STATUS_CODES = tuple(code for code, _ in STATUS_OF_FINDING)


def finding_marks(ex: Exchange) -> list[tuple[str, str | None]]:
    """The findings a summary line names (each code once, the most severe first), beyond
    what its status, error names and problem count already say: `! authentication_failed`."""
    present = {f.code for f in ex.findings}
    # the status says one of these: the first present (enrichment's _status)
    said = next((code for code in _STATUS_CODES if code in present), None)
    codes: dict[str, str] = {}
    for f in ex.findings:
        if f.code not in _SHOWN and f.code != said and f.kind.group not in PROBLEM_GROUPS:
            codes.setdefault(f.code, f.severity)
    if not codes:
        return []
    ranked = sorted(codes.items(), key=lambda cs: -SEVERITIES.index(cs[1]))
    parts: list[tuple[str, str | None]] = []
    for code, severity in ranked[:MARKED]:
        mark, style = MARKS[severity]
        parts.append((f"  {mark} {code}", style))
    if len(ranked) > MARKED:
        parts.append((f"  +{len(ranked) - MARKED}", "dim"))
    return parts


def python_plain(ex: Exchange, options: Options, view: ExchangeFields | None = None) -> str:
    """``exchange_plain`` from ``line_parts``: the reference."""
    return printable("".join([text for text, _ in line_parts(ex, options, view)]))


# native/src/line.rs's summary_line (None: no extension, or KDISSECT_PURE; native_ext.refresh)
_SUMMARY_LINE = bind(__name__, "_SUMMARY_LINE", "summary_line")


@overload
def compiled_plain(
    ex: Exchange, view: ExchangeFields | None = None, utf8: Literal[False] = False
) -> str | None: ...


@overload
def compiled_plain(
    ex: Exchange, view: ExchangeFields | None, utf8: Literal[True]
) -> bytes | None: ...


def compiled_plain(
    ex: Exchange, view: ExchangeFields | None = None, utf8: bool = False
) -> str | bytes | None:
    """``line_parts``' plain line written by the extension (on many small exchanges the
    Python line was a fifth of a summary's CPU); None where it leaves the line to Python
    (SASL tokens, facts of unexpected types, strings that are not UTF-8). ``utf8``: the
    line and a newline as UTF-8 bytes, for stdout's binary layer (as a str, the line
    was decoded from the extension's UTF-8 and encoded back by the text layer: a fifth
    of its cost), and None also where findings mark the line (their marks are Python's:
    written as a str)."""
    if utf8 and ex.findings:
        return None
    req, resp = ex.request, ex.response
    msg = req or resp
    assert msg is not None, "an exchange has a request or a response"
    if msg.direction == "sasl" or _SUMMARY_LINE is None:
        return None
    got = _BETWEEN.get(ex.stream)  # (_between's usual case inline: a call per line)
    if got is not None and got[0] is ex.client and got[1] is ex.broker:
        between = got[2]
    else:
        between = _between(ex)
    f = ex.facts if ex.facts is not None else Facts()
    findings = ex.findings
    latency = None  # (Exchange.latency, inline: a call per line)
    if req is not None and resp is not None:
        latency = resp.ts - req.ts
        if not latency >= 0:
            latency = None
    try:  # (api_name's usual case inline: a call per line)
        line: Any = _SUMMARY_LINE(
            msg.ts,
            between,
            _API_NAMES.get(msg.api_key) or api_name(msg.api_key),  # type: ignore[arg-type]
            msg.api_version,
            msg.correlation_id,
            req.client_id if req is not None else None,
            latency,
            f.topics,
            f.records,
            f.error_text() if f.errors else None,
            ex.status,
            resp.how if resp is not None and req is None else None,
            (view or ExchangeFields(ex)).problems if findings else 0,
            UNRESOLVED,
            utf8,
        )
    except (UnicodeEncodeError, TypeError, OverflowError):
        return None  # (a lone surrogate, an odd type, a huge int: Python says it)
    if findings and line is not None:  # (the findings' codes: Python's, as on few lines)
        line += "".join([text for text, _ in finding_marks(ex)])
    return line


def between_text(client: tuple[str, int], broker: tuple[str, int]) -> str:
    """The line's text between its time and its API: the two ends."""
    return f"  {endpoint(client)} → {endpoint(broker)}  "


# stream -> (client, broker, between_text of them): a connection's lines share it. Asked
# by stream, the ends held by identity (the same tuples: the text of the same values);
# keyed by the ends, their hashes were a hundredth of a summary of small exchanges
_BETWEEN: dict[int, tuple[Any, Any, str]] = {}


def _between(ex: Exchange) -> str:
    """``between_text`` of ``ex``'s ends, kept for the next lines of its stream."""
    if len(_BETWEEN) >= 4096:
        _BETWEEN.clear()
    between = between_text(ex.client, ex.broker)
    _BETWEEN[ex.stream] = (ex.client, ex.broker, between)
    return between


def line_parts(
    ex: Exchange, options: Options, view: ExchangeFields | None = None
) -> list[tuple[str, str | None]]:
    """The pieces of an exchange's line and their styles."""
    req, resp = ex.request, ex.response
    first = req or resp
    assert first is not None, "an exchange has a request or a response"
    between = between_text(ex.client, ex.broker)  # (the reference: not kept)
    t: list[tuple[str, str | None]] = [(iso(first.ts)[11:26], "dim"), (between, "dim")]
    if first.direction == "sasl":
        t.append(("SASL token", "bold magenta"))
        tree = first.decoded(options).tree
        kind = tree.children[0].note if tree.children else None
        t.append(
            (
                f"  {'client' if req else 'broker'}  {len(first.data)} bytes"
                + (f"  {kind}" if kind else ""),
                None,
            )
        )
        return t
    msg = req or resp
    assert msg is not None, "an exchange has a request or a response"
    version = "?" if msg.api_version is None else msg.api_version
    t.append((f"{msg.api_name} v{version}", "bold cyan"))
    corr = "?" if msg.correlation_id is None else msg.correlation_id  # (as "v?")
    t.append((f"  #{corr}", None))
    if req is not None and req.client_id:
        t.append((f"  {req.client_id}", "green"))
    latency = ex.latency
    if latency is not None:
        t.append((f"  {latency * 1000:.1f}ms", "yellow" if latency > 0.1 else ""))
    view = view or ExchangeFields(ex, options)
    f = view.facts()
    summary = f.text()
    if summary:
        t.append(("  ", None))
        t.append((summary, "red" if f.errors else None))
    problems = view.problems
    status = ex.status
    if status != "ok":
        t.append((f"  [{status}]", "bold yellow"))
    if resp is not None and req is None and resp.how:
        t.append((f"  ({resp.how})", "italic dim"))
    if problems:
        t.append((f"  ✗ {problems} problem{'s' if problems != 1 else ''}", "bold red"))
    if ex.findings:
        t += finding_marks(ex)
    return t


def message_json(
    m: KafkaMessage,
    options: Options,
    ex: Exchange | None = None,
    decoded=None,
    enriched_full: bool = True,
    batch_records=None,
    topic_ids: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One message as JSON; ``ex`` (its enriched exchange) adds the exchange's status
    and the findings about this message; ``decoded`` is its tree, if already made.

    The body comes from the values-only decoder when the message is clean (no tree is
    built), else from the located tree. ``enriched_full``: ``ex`` was enriched from full
    trees; if only from summaries, a message that is not clean gets the findings its
    full tree adds (inside records), where full enrichment puts them.
    ``batch_records``: see ``protocol.values.body_values``; with it, record values may
    be pre-encoded JSON (``values_schema.fast.dumps`` encodes them). ``topic_ids``: the
    topic names the engine learned so far (``protocol.context.Decoding``)."""
    got = _body_of(m, options, ex, decoded, enriched_full, batch_records, topic_ids)
    return _message_dict(m, ex, *got)


def _body_of(
    m: KafkaMessage,
    options: Options,
    ex: Exchange | None,
    decoded: Any,
    enriched_full: bool,
    batch_records: Any,
    topic_ids: Mapping[str, str] | None,
    replayable: bool = False,
) -> tuple[Any, list[dict[str, Any]] | None, Any]:
    """(the body's values with secrets masked, the tree's problems, the tree findings
    to show); problems None: the values decoder read it (no tree, nothing found)."""
    # the body enrichment read with the values decoder for this sink, if it did
    values = m.values if decoded is None else None
    # SASL tokens go through the located tree, whose embedded decoder masks their secrets
    if (
        values is None
        and decoded is None
        and m.direction != "sasl"
        and m.api_key is not None
        and m.api_version is not None
        and m.api_key not in secrets.EMBEDDED
    ):
        values = body_values(
            m.data,
            m.direction,
            m.api_key,
            m.api_version,
            options,
            json_bytes,
            batch_records,
            batch_records is not None,
            jsonl_records.batch_text,
            topic_ids=topic_ids,
            replayable=replayable,
        )
    problems: list[dict[str, Any]] | None = None
    tree_findings = None
    if values is None:
        decoded = decoded or m.decoded(options, topic_ids)
        body = decoded.body if m.direction != "sasl" else decoded.tree.children[0]
        values = plain_json(body, options.show_secrets) if body is not None else None
        found = decoded.tree.findings()  # one walk for both (big trees)
        problems = [{"path": p, "problem": r} for p, _, r in found]
        # (a message cut by the capture or the proxy's display: its end is not blamed)
        tree_findings = None if enriched_full else kept_findings(m, found)
    if not options.show_secrets:
        secrets.mask_values(values, m.api_key)
    return values, problems, tree_findings


def _message_dict(
    m: KafkaMessage,
    ex: Exchange | None,
    values: Any,
    problems: list[dict[str, Any]] | None,
    tree_findings: Any,
) -> dict[str, Any]:
    out = {
        "index": m.index,
        "frame": m.frame,
        "stream": m.stream,
        "direction": m.direction,
        "ts": iso(m.ts) if 0 <= m.ts <= LAST_SECOND else None,
        "api_key": m.api_key,
        "api_name": m.api_name,
        "api_version": m.api_version,
        "correlation_id": m.correlation_id,
        "pair": m.pair,
        "seq": ex.seq if ex is not None else None,
        "status": ex.status if ex is not None else m.status,
        "problems": problems or [],
        "findings": [f.to_json() for f in _findings(m, ex, tree_findings)]
        if ex is not None and (ex.findings or tree_findings)
        else [],
        "size": len(m.data),
        "body": values,
    }
    if m.direction == "request":
        out["client_id"] = m.client_id
    if m.how and m.direction == "response":
        out["how"] = m.how
    return out


# what enrichment finds after a message's tree findings (stream/enrich.py's order)
_AFTER_TREE = frozenset(
    {"assumed_version", "version_not_advertised", "error_code", "expected_error", "throttled"}
)


def _findings(m: KafkaMessage, ex: Exchange, tree_findings) -> list[Finding]:
    """The exchange's findings about ``m``; ``tree_findings`` (path, code, reason) of
    its full tree replace those of the summary tree enrichment read."""
    mine = [f for f in ex.findings if f.where.startswith(m.direction)]
    if tree_findings is None:
        return mine
    prefix = f"{m.direction}: "
    kept = [f for f in mine if not f.where.startswith(prefix)]
    at = next((i for i, f in enumerate(kept) if f.code in _AFTER_TREE), len(kept))
    full = [Finding(code, reason, prefix + path) for path, code, reason in tree_findings]
    return kept[:at] + full + kept[at:]


# stands in a line's skeleton for a batch's records, already encoded (the nonce keeps
# message data from ever matching it)
_RAW = f"@@kdissect-records-{os.urandom(8).hex()}-"
_RAW_SLOT = re.compile('"' + re.escape(_RAW) + r'(\d+)@@"')
# json.dumps(x, default=str) without making an encoder per call
_encode = json.JSONEncoder(default=str).encode


def message_line(
    m: KafkaMessage,
    options: Options,
    ex: Exchange | None = None,
    enriched_full: bool = True,
    topic_ids: Mapping[str, str] | None = None,
) -> str:
    """One JSON line (see docs/guide/jsonl.md). Each record batch is encoded as soon as it is
    read, so a big Fetch response never holds all its records as objects at once."""
    if ex is not None and m.values is not None:
        values = m.values
        if not options.show_secrets:
            secrets.mask_values(values, m.api_key)
        return _values_line(m, ex, _body(values))
    key, version = m.api_key, m.api_version
    if (
        m.values is None
        and key is not None
        and version is not None
        and m.direction != "sasl"
        and key not in secrets.EMBEDDED
        and (options.show_secrets or key not in secrets.SENSITIVE_APIS)
    ):
        # the body's text written by the compiled reader (no dict per struct), when sure
        text = body_json(m.data, m.direction, key, version, options, topic_ids, _internal)
        if text is not None:
            return _values_line(m, ex, text)
    parts: list[str] = []
    dumps = _DUMPS or _load_dumps()

    def encode(records: list) -> str:
        parts.append(dumps(records))  # json.dumps, record values pre-encoded
        return f"{_RAW}{len(parts) - 1}@@"

    # (the compiled reader may call ``encode`` and then hand the message to the Python
    # readers: what it appended is never named by a slot of the line, so it may)
    got = _body_of(m, options, ex, None, enriched_full, encode, topic_ids, replayable=True)
    if got[1] is None:  # read by the values decoder: written directly
        line = _values_line(m, ex, _body(got[0]))
    else:
        line = _encode(_message_dict(m, ex, *got)) + "\n"
    if parts:
        line = _RAW_SLOT.sub(lambda match: parts[int(match[1])], line)
    return line


def _values_line(m: KafkaMessage, ex: Exchange | None, body: str) -> str:
    """``message_line`` of a message read by the values decoder, ``body`` its values'
    JSON text (secrets masked): the object ``_message_dict`` makes, keys in its order,
    written directly (building the dict and encoding it was half the line's cost on
    small messages), by the extension when it is built (``native/src/line.rs``
    ``json_line``: the line's fields were an eighth of a small Produce's JSON lines).
    tests/test_lines.py holds both to ``_message_dict``'s encoding."""
    findings = (
        _encode([f.to_json() for f in _findings(m, ex, None)])
        if ex is not None and ex.findings
        else "[]"
    )
    native = _json_line
    if native is None:
        return _values_line_py(m, ex, body, findings)
    direction = m.direction
    extra_key = extra = None
    if direction == "request":
        extra_key, extra = "client_id", m.client_id
    elif m.how and direction == "response":
        extra_key, extra = "how", m.how
    line: str = native(
        m.index,
        m.frame,
        m.stream,
        direction,
        m.ts,
        m.api_key,
        m.api_name,
        m.api_version,
        m.correlation_id,
        m.pair,
        ex.seq if ex is not None else None,
        ex.status if ex is not None else m.status,
        findings,
        len(m.data),
        body,
        extra_key,
        extra,
    )
    return line


# native/src/line.rs's JSON line (None without the extension: the Python writer below)
_json_line = bind(__name__, "_json_line", "json_line")


def _values_line_py(m: KafkaMessage, ex: Exchange | None, body: str, findings: str) -> str:
    """``_values_line``'s reference, in Python."""
    ts = m.ts
    # (ints and None written inline: a call per field was a fifth of this)
    index, frame, stream, key, version, corr, pair = (
        m.index,
        m.frame,
        m.stream,
        m.api_key,
        m.api_version,
        m.correlation_id,
        m.pair,
    )
    seq = ex.seq if ex is not None else None
    line = (
        f'{{"index": {"null" if index is None else index}, '
        f'"frame": {"null" if frame is None else frame}, '
        f'"stream": {"null" if stream is None else stream}, '
        f'"direction": {_str(m.direction)}, '
        f'"ts": {_str(iso(ts)) if 0 <= ts <= LAST_SECOND else "null"}, '
        f'"api_key": {"null" if key is None else key}, "api_name": {_str(m.api_name)}, '
        f'"api_version": {"null" if version is None else version}, '
        f'"correlation_id": {"null" if corr is None else corr}, '
        f'"pair": {"null" if pair is None else pair}, '
        f'"seq": {"null" if seq is None else seq}, '
        f'"status": {_str(ex.status if ex is not None else m.status)}, '
        f'"problems": [], "findings": {findings}, "size": {len(m.data)}, '
        f'"body": {body}'
    )
    if m.direction == "request":
        client_id = m.client_id
        return f'{line}, "client_id": {"null" if client_id is None else _str(client_id)}}}\n'
    if m.how and m.direction == "response":
        return f'{line}, "how": {_str(m.how)}}}\n'
    return line + "}\n"


_str = encode_basestring_ascii  # a str as json.dumps writes it


def capture_field(path: str) -> str:
    """The ``"capture"`` member that ends each JSON line of a run reading several capture
    files (``with_field``): the file's path as given."""
    return f', "capture": {_str(path)}'


def with_field(line: str, field: str) -> str:
    """A JSON line (an object, then a newline) with ``field`` as its last member."""
    return f"{line[:-2]}{field}}}\n"


# what _encode does with a dict or a list, without making the C encoder anew per call
# (that was most of encoding a small body): the arguments JSONEncoder(default=str) passes
_body_chunks = (
    c_make_encoder({}, str, encode_basestring_ascii, None, ": ", ", ", False, False, True)
    if c_make_encoder is not None
    else None
)


def _body(values: Any) -> str:
    if _body_chunks is None or type(values) is not dict:
        return _encode(values)
    return "".join(_body_chunks(values, 0))


_DUMPS: Callable[[Any], str] | None = None


def _load_dumps() -> Callable[[Any], str]:
    """``values_schema.fast.dumps``, imported when a JSON line is first written (the
    schema decoders it brings are no summary's business)."""
    global _DUMPS
    from ..protocol.values_schema.fast import dumps

    _DUMPS = dumps
    return dumps
