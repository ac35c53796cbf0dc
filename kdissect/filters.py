"""The display-filter language shared by the CLI, TUI and proxy.

    api == Produce and topic == "orders"
    error != 0
    latency > 50ms
    client_id ~ "rdkafka"
    not (api in {Metadata, ApiVersions}) and records >= 100
    anomaly                                  (anything wrong: see stream/anomaly.py)
    record.key == "order-42"                 (inside compressed batches too)
    kafka.api_key == 0                       (Wireshark's field names work as aliases)

A field with several values (an exchange touches several topics) matches when any value
does; ``!=`` and ``!~`` match when no value does. A bare field is true when it has a
truthy value. See docs/guide/filters.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .stream import filter_values
from .protocol.findings import REGISTRY, SEVERITIES
from .protocol.names import API_NAMES, api_key_of
from .stream.fields import FIELDS, READS_BYTES, choice_texts, values as _values


class FilterError(ValueError):
    def __init__(self, position: int, message: str, text: str):
        self.position = position
        # a window of the text around the position (a filter may be kilobytes long)
        start = max(0, position - 60)
        shown = (
            ("…" if start else "")
            + text[start : position + 60]
            + ("…" if len(text) > position + 60 else "")
        )
        pointer = f"\n  {shown}\n  {' ' * (position - start + (1 if start else 0))}^"
        super().__init__(f"at position {position}: {message}{pointer}")


_ALIASES = {
    "corr": "correlation_id",
    "api_version": "version",
    "client.id": "client_id",
    "latency_ms": "latency",
    "errors": "error",
    "findings": "finding",
    # Wireshark's names for the same things
    "kafka.api_key": "api",
    "kafka.api_version": "version",
    "kafka.correlation_id": "correlation_id",
    "kafka.client_id": "client_id",
    "kafka.error": "error",
    "kafka.topic_name": "topic",
    "kafka.partition_id": "partition",
    "kafka.request_frame": "frame",
    "kafka.response_frame": "response_frame",
    "kafka.throttle_time": "throttle",
    "kafka.message_key": "record.key",
    "kafka.message_value": "record.value",
    "kafka.header_key": "record.header",
}
# Wireshark fields of other layers that kdissect has as fields of its own: named in the
# error (a filter carried over from Wireshark)
_ADDRESSES = (
    'client or broker, addresses as ip:port (broker ~ ":9092$", client ~ "^10\\.0\\.0\\.5:")'
)
_OTHER_LAYERS = {
    **dict.fromkeys(
        (
            "tcp.port",
            "tcp.srcport",
            "tcp.dstport",
            "udp.port",
            "ip.addr",
            "ip.src",
            "ip.dst",
            "ipv6.addr",
            "ipv6.src",
            "ipv6.dst",
        ),
        _ADDRESSES,
    ),
    "tcp.stream": "stream, the connection number",
    "frame.number": "frame, the capture frame of the request",
    "frame.len": "bytes, request + response size",
    "kafka.len": "bytes, request + response size",
}
_OTHER_LAYER = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(n) for n in _OTHER_LAYERS) + r")(?![\w.])"
)


def _other_layer(name: str) -> str:
    return f" (a Wireshark field kdissect does not have; use {_OTHER_LAYERS[name]})"


_HEADER = "record.header."
_DURATION = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_TOKEN = re.compile(
    r"""\s*(?:
    (?P<num>-?0[xX][0-9a-fA-F]+(?![\w.])|-?\d+(?:\.\d+)?(?:us|µs|ms|s)?(?![\w.]))
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>==|!=|<=|>=|!~|&&|\|\||[<>~!(){},=])
  | (?P<word>[A-Za-z_][\w.\-]*)
)""",
    re.X,
)
_NUMBER_LIKE = re.compile(r"-?\d[\w.]*")
_COMPARE = {"==", "!=", "<", "<=", ">", ">=", "~", "!~", "contains", "in", "matches", "="}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    pos: int


def _tokens(text: str) -> list[Token]:
    out, pos = [], 0
    while pos < len(text):
        if _BLANK_TO_END.match(text, pos):
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            start = len(text) - len(text[pos:].lstrip())  # after the blanks
            run = _NUMBER_LIKE.match(text, start)
            if run:  # a number with letters after it: 5xs, 10mins, 1e3
                raise FilterError(
                    start,
                    f"unexpected {run[0]!r}: a number is like 42 or 1.5, a duration like "
                    f'50ms (units us, µs, ms, s); text goes in quotes ("{run[0]}")',
                    text,
                )
            raise FilterError(start, f"unexpected {text[start]!r}", text)
        kind = m.lastgroup
        assert kind is not None, "every alternative of _TOKEN is a named group"
        start = m.start(kind)
        out.append(Token(kind, m.group(kind), start))
        pos = m.end()
    out.append(Token("end", "", len(text)))
    return out


_BLANK = re.compile(r"\s*")
_BLANK_TO_END = re.compile(r"\s*\Z")
MAX_DEPTH = 64  # parentheses; deeper is refused (no real filter comes close)
MAX_DIGITS = 30  # in a number (int() refuses beyond 4,300; no field needs 30)
_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}
_HEX_ESCAPE = {"x": 2, "u": 4, "U": 8}


def _unquote(tok: Token, text: str) -> str:
    """The text of a quoted string: Python's escapes (\\n, \\xHH, \\uHHHH, \\UHHHHHHHH,
    \\N{NAME}) decoded strictly, any other backslash kept as written (so regular
    expressions like "\\d+" read as they look)."""
    body, out, i = tok.text[1:-1], [], 0
    while True:
        j = body.find("\\", i)
        if j < 0:
            out.append(body[i:])
            return "".join(out)
        out.append(body[i:j])
        c = body[j + 1]  # the tokenizer keeps a backslash from ending a string
        where = tok.pos + 1 + j
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
            i = j + 2
        elif c in _HEX_ESCAPE:
            n = _HEX_ESCAPE[c]
            digits = body[j + 2 : j + 2 + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise FilterError(where, f"\\{c} must be followed by {n} hex digits", text)
            if int(digits, 16) > 0x10FFFF:
                raise FilterError(where, f"\\{c}{digits} is beyond Unicode (U+10FFFF)", text)
            out.append(chr(int(digits, 16)))
            i = j + 2 + n
        elif c == "N":
            end = body.find("}", j)
            name = body[j + 3 : end] if body.startswith("{", j + 2) and end > 0 else None
            try:
                out.append(unicodedata.lookup(name or ""))
            except KeyError:
                raise FilterError(
                    where, "\\N needs a Unicode character name: \\N{LATIN SMALL LETTER E}", text
                ) from None
            i = end + 1
        else:
            out.append(body[j : j + 2])
            i = j + 2


Predicate = Callable[[Any], bool]


class _Parser:
    def __init__(self, text: str, names: list[str] | None = None):
        self.text = text
        # the fields this filter may name (kdissect log's: not the exchanges' latency...)
        # (an exchange's: not the fields of batches on disk, which it has no value for)
        self.names = (
            names if names is not None else [n for n, f in FIELDS.items() if f.get is not None]
        )
        self.known = set(self.names)
        try:
            self.toks = _tokens(text)
        except FilterError as e:  # ip.addr == 10.0.0.5: the field is what to say
            first = _OTHER_LAYER.search(text, 0, e.position)
            if first is None:
                raise
            raise FilterError(
                first.start(),
                f"unknown field {first[1]!r}{_other_layer(first[1])}",
                text,
            ) from None
        self.i = 0
        self.fields: set[str] = set()

    def peek(self) -> Token:
        return self.toks[self.i]

    def take(self) -> Token:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, tok: Token, expected: str) -> FilterError:
        found = "the end" if tok.kind == "end" else repr(tok.text)
        return FilterError(tok.pos, f"expected {expected}, found {found}", self.text)

    def parse(self) -> Predicate:
        if self.peek().kind == "end":
            raise self.error(self.peek(), "a filter such as 'api == Produce'")
        pred = self.or_(0)
        if self.peek().kind != "end":
            raise self.error(self.peek(), "'and', 'or' or the end of the filter")
        return pred

    # Terms joined by and/or are lists evaluated by a loop (any/all), `not`s are counted:
    # only parentheses nest, and they are bounded, so neither parsing nor evaluating
    # recurses per term.
    def or_(self, depth: int) -> Predicate:
        terms = [self.and_(depth)]
        while self.peek().text in ("or", "||"):
            self.take()
            terms.append(self.and_(depth))
        if len(terms) == 1:
            return terms[0]
        return lambda x: any(t(x) for t in terms)

    def and_(self, depth: int) -> Predicate:
        terms = [self.not_(depth)]
        while self.peek().text in ("and", "&&"):
            self.take()
            terms.append(self.not_(depth))
        if len(terms) == 1:
            return terms[0]
        return lambda x: all(t(x) for t in terms)

    def not_(self, depth: int) -> Predicate:
        negate = False
        while self.peek().text in ("not", "!"):
            self.take()
            negate = not negate
        inner = self.primary(depth)
        return (lambda x: not inner(x)) if negate else inner

    def primary(self, depth: int) -> Predicate:
        tok = self.peek()
        if tok.text == "(":
            if depth >= MAX_DEPTH:
                raise FilterError(
                    tok.pos, f"parentheses nested more than {MAX_DEPTH} deep", self.text
                )
            self.take()
            inner = self.or_(depth + 1)
            if self.peek().text != ")":
                raise self.error(self.peek(), "')'")
            self.take()
            return inner
        if tok.kind != "word":
            raise self.error(tok, f"a field name ({', '.join(self.names)}) or '('")
        if tok.text == "kafka" and "api" in self.known:  # Wireshark's protocol filter
            self.take()
            if self.peek().text in _COMPARE:
                raise FilterError(
                    self.peek().pos,
                    "'kafka' alone selects every Kafka exchange; compare a field "
                    "(kafka.api_key == 0, api == Produce)",
                    self.text,
                )
            return lambda x: True
        name = _ALIASES.get(tok.text, tok.text)
        if (
            name not in self.known
            and not (name.startswith(_HEADER) and len(name) > len(_HEADER))
            and not filter_values.is_value_path(name)
        ):
            hint = did_you_mean(tok.text, [*self.names, *_ALIASES])
            apis = sorted(set(API_NAMES.values()))
            if name in FIELDS:  # another command's field
                of_batches = FIELDS[name].get is None
                raise FilterError(
                    tok.pos,
                    f"{tok.text!r} is a field of "
                    + (
                        "batches on disk (`kdissect log`), not of exchanges"
                        if of_batches
                        else "exchanges (pcap, live, proxy), not of batches on disk"
                    )
                    + f"; fields here: {', '.join(self.names)}",
                    self.text,
                )
            if tok.text in _OTHER_LAYERS:
                hint = _other_layer(tok.text)
            elif api_key_of(tok.text) is not None:  # an API name as a field
                hint = f" (did you mean api == {api_name_of(tok.text)}?)"
            elif not hint and did_you_mean(tok.text, apis):
                close = did_you_mean(tok.text, apis)[len(" (did you mean ") : -2].split(", ")
                hint = f" (did you mean api == {close[0]}?)"
            raise FilterError(
                tok.pos,
                f"unknown field {tok.text!r}{hint}; fields: {', '.join(self.names)}",
                self.text,
            )
        self.take()
        self.fields.add(name)
        op_tok = self.peek()
        if op_tok.text not in _COMPARE:
            return lambda x: any(_values(x, name))
        self.take()
        op = {"=": "==", "matches": "~"}.get(op_tok.text, op_tok.text)
        if op == "in":
            values = self.value_set(name)
            return lambda x: any(v in values for v in _values(x, name))
        value = self.value(name, op)
        return _compare(name, op, value)

    def value_set(self, name: str) -> set:
        if self.peek().text != "{":
            raise self.error(self.peek(), "'{' starting a set like {Produce, Fetch}")
        self.take()
        values = set()
        while True:
            values.add(self.value(name, "=="))
            tok = self.peek()
            if tok.kind in ("num", "str", "word"):  # Wireshark's {0 1}: blank-separated
                continue
            self.take()
            if tok.text == "}":
                return values
            if tok.text != ",":
                raise self.error(tok, "',', a value or '}'")

    def value(self, name: str, op: str):
        tok = self.take()
        kind = FIELDS[name].kind if name in FIELDS else "text"
        if tok.kind == "end" or tok.kind == "op":
            raise self.error(tok, f"a value for {name}")
        text = tok.text
        if tok.kind == "str":
            text = _unquote(tok, self.text)
        elif tok.kind == "num" and sum(c.isdigit() for c in text) > MAX_DIGITS:
            raise FilterError(tok.pos, f"number longer than {MAX_DIGITS} digits", self.text)
        if tok.kind == "num" and text.lstrip("-")[:2] in ("0x", "0X"):  # Wireshark's 0x0
            if len(text) > MAX_DIGITS:
                raise FilterError(tok.pos, f"number longer than {MAX_DIGITS} digits", self.text)
            if op in ("~", "!~"):
                raise FilterError(
                    tok.pos, f"expected a pattern in quotes, found {text!r}", self.text
                )
            text = str(int(text, 16))
        if op in ("~", "!~"):
            try:
                return re.compile(text)
            except re.error as e:
                raise FilterError(tok.pos, f"bad regular expression: {e}", self.text) from None
        if kind == "api":
            key = api_key_of(text)
            if key is None:
                hint = did_you_mean(text, sorted(set(API_NAMES.values())))
                raise FilterError(tok.pos, f"unknown API {text!r}{hint}", self.text)
            return key
        if kind == "error":
            if tok.kind == "num":
                if not re.fullmatch(r"-?\d+", text):
                    raise FilterError(
                        tok.pos, f"expected an error code or name, found {text!r}", self.text
                    )
                return int(text)
            from .protocol.names import error_table

            by_name = {n: c for c, (n, _r) in error_table().items()}
            by_name["NONE"] = 0
            if text.upper() not in by_name:
                hint = did_you_mean(text.upper(), list(by_name))
                raise FilterError(tok.pos, f"unknown error name {text!r}{hint}", self.text)
            return by_name[text.upper()]
        if kind == "finding":
            if text not in REGISTRY:
                hint = did_you_mean(text, list(REGISTRY))
                raise FilterError(
                    tok.pos,
                    f"unknown finding {text!r}{hint} (docs/guide/findings.md lists them)",
                    self.text,
                )
            return text
        if kind == "severity":
            # (the legend of the line output says "warning")
            name = {"warning": "warn"}.get(text.lower(), text.lower())
            if name not in SEVERITIES:
                raise FilterError(
                    tok.pos,
                    f"expected a severity ({', '.join(SEVERITIES)}), found {text!r}",
                    self.text,
                )
            return SEVERITIES.index(name)
        if kind == "duration":
            m = re.fullmatch(r"(-?\d+(?:\.\d+)?)(us|µs|ms|s)?", text)
            if not m:
                raise FilterError(
                    tok.pos, f"expected a duration like 50ms, found {text!r}", self.text
                )
            return float(m[1]) * _DURATION[m[2] or "ms"]
        spec = FIELDS.get(name)
        if (
            spec is not None
            and op in ("==", "=", "!=", "contains")  # (in {...} asks its values as ==)
            and not spec.accepts(text, op == "contains")
        ):
            hint = did_you_mean(text, [c for c in spec.choices if not c.endswith(": ")])
            raise FilterError(
                tok.pos,
                f"{name} is never {text!r}{hint}; its values: "
                + ", ".join(choice_texts(spec.choices)),
                self.text,
            )
        if name in ("record.key", "record.value") and tok.kind == "word" and text == "null":
            return filter_values.NULL  # a null key, a tombstone's value
        if filter_values.is_value_path(name):
            if tok.kind == "num" and not re.fullmatch(r"-?\d+(\.\d+)?", text):
                raise FilterError(
                    tok.pos, f"expected a number or a quoted string, found {text!r}", self.text
                )
            value = filter_values.literal(tok.kind, text)
            if op in ("<", "<=", ">", ">=") and isinstance(value, str):
                raise FilterError(tok.pos, f"{op} compares numbers; found {text!r}", self.text)
            return value
        if kind == "number":
            if tok.kind != "num" or not re.fullmatch(r"-?\d+", text):
                raise FilterError(
                    tok.pos, f"expected a whole number for {name}, found {text!r}", self.text
                )
            return int(text)
        return text


def _compare(name: str, op: str, value) -> Predicate:
    if op == "~":
        return lambda x: any(isinstance(v, str) and value.search(v) for v in _values(x, name))
    if op == "!~":
        return lambda x: not any(isinstance(v, str) and value.search(v) for v in _values(x, name))
    if op == "contains":
        return lambda x: any(isinstance(v, str) and str(value) in v for v in _values(x, name))
    if op == "==" and name == "record.key" and isinstance(value, str):

        def has_key(x) -> bool:
            if hasattr(x, "values_of"):  # log items say their own values
                return value in x.values_of(name)
            # exchanges: batches without the key's bytes are not read record by record
            from .stream.content import has_key

            return has_key(x, value)

        return has_key
    if op == "==":
        return lambda x: any(v == value for v in _values(x, name))
    if op == "!=":
        return lambda x: not any(v == value for v in _values(x, name))
    cmp = {
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }[op]
    return lambda x: any(
        v is not None and not isinstance(v, str) and cmp(v, value) for v in _values(x, name)
    )


def api_name_of(text: str) -> str:
    key = api_key_of(text)
    return API_NAMES[key] if key is not None else text


def did_you_mean(word: str, choices: list[str]) -> str:
    lower = {c.lower(): c for c in choices}
    w = word.lower()
    close = [k for k in lower if k.startswith(w) and k != w]
    import difflib  # only to say what a mistyped name may mean

    close += [
        k for k in difflib.get_close_matches(w, list(lower), n=3, cutoff=0.6) if k not in close
    ]
    return f" (did you mean {', '.join(lower[k] for k in close[:3])}?)" if close else ""


@dataclass
class Filter:
    text: str
    predicate: Predicate
    fields: frozenset[str]

    def __call__(self, item) -> bool:
        return self.predicate(item)

    @property
    def needs_decoding(self) -> bool:
        """Whether the filter reads the messages' bytes (record contents); everything
        else comes from what enrichment put on the exchange."""
        return bool(self.fields & READS_BYTES) or any(
            f.startswith(_HEADER) or filter_values.needs_records(f) for f in self.fields
        )


def parse_filter(text: str, names: list[str] | None = None) -> Filter:
    """Compile a filter; FilterError says where it went wrong and what was expected
    (``names``: the fields a wrong one is told of, `kdissect log`'s for log items)."""
    p = _Parser(text, names)
    pred = p.parse()
    return Filter(text, pred, frozenset(p.fields))
