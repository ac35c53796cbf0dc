"""The values-only decoder: a message's body as plain values, without located nodes.

Bulk output (JSON lines; the Parquet and Spark record tables could follow) needs the
values of every field but never their offsets, and building a ``Node`` per field is most of the time a full decode
takes. So for each layout (``Struct``) this module generates, once, a specialised Python
reader function from the same layouts ``decode.py`` walks (the way kio generates its
parsers): consecutive fixed-size fields become one ``struct`` unpack, one-byte length
prefixes are read inline, and the result is the dict ``render.records.plain_json`` makes of
the located tree.

Only clean messages take this path. The readers check everything the located decoder
checks (lengths, counts, bools, UTF-8, CRCs, codecs, trailing bytes, the message's budget)
and raise ``Bail`` at the first oddity; the caller then decodes the message with the
located decoder, whose tree says what is wrong. Both paths therefore agree value for value
(tests/test_values.py asserts it on every repo capture and on random kio messages).

Pure: no I/O; the generated code is cached per layout object.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import crc32c

from . import schemas
from .codecs import CodecError, decompress
from .context import Options
from .layout import Field, Struct
from .node import Node
from .internal import mentions_internal_topic
from .records import _attributes_note, read_records

# APIs whose bytes fields may hold embedded structures (consumer protocol, SASL tokens):
# their JSON shows those structures, so they take the located path
_EMBEDDED_APIS = frozenset({11, 14, 15, 36})
_RECORD_CARRIERS = frozenset({(0, "request"), (1, "response")})
_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
          "uint32": "I", "float64": "d", "bool": "b", "uuid": "16s"}
_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")   # RecordBatch v2 header, 61 bytes
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class Bail(Exception):
    """This message needs the located decoder (something in it is not clean)."""


class _State:
    """Per-message: the bytes converter and what the budget still allows (the located
    decoder's accounting, charged never less than it charges, so a message this path
    finishes never breaches the located decoder's budget; records exactly as much)."""

    __slots__ = ("conv", "records", "nodes", "decompressed", "tag_end", "batch_records",
                 "values")

    def __init__(self, conv: Callable[[bytes], Any], options: Options):
        self.conv = conv
        # record keys/values by schema (values_schema.fast), when asked for
        self.values = options.values if getattr(options.values, "framed", False) else None
        self.records = options.records        # True: decode batches; False: leave raw
        self.nodes = options.max_nodes
        self.decompressed = options.max_decompressed
        self.tag_end = 0         # where the tagged fields just read end
        self.batch_records: Callable[[list], Any] | None = None

    def charge(self, n: int) -> None:
        self.nodes -= n
        if self.nodes < 0:
            raise Bail


def _uvarint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Unsigned LEB128 of at most ``max_bytes``, as ``Reader._leb`` reads it (records'
    ``_uvarint_at`` takes up to ten bytes anywhere, which the located header and body
    readers fault); IndexError past the end, Bail when too long."""
    value = shift = 0
    for _ in range(max_bytes):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise Bail


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# -- code generation ------------------------------------------------------------------

class _Gen:
    """Python source for one struct's reader: ``read(buf, pos, s) -> (dict, pos)``.
    Readers rely on ``len(buf)`` as their end (tagged fields get their own slice)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {}
        self.tmp = 0

    def name(self, obj: Any, prefix: str) -> str:
        self.tmp += 1
        n = f"{prefix}{self.tmp}"
        self.env[n] = obj
        return n

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def length(self, d: int, var: str, compact: bool, wide: bool) -> None:
        """``var`` = a length or count prefix (-1: null)."""
        if compact:
            self.emit(d, f"{var} = buf[pos]")
            self.emit(d, f"if {var} < 128: pos += 1")
            self.emit(d, f"else: {var}, pos = _uvarint(buf, pos, 5)")
            self.emit(d, f"{var} -= 1")
        else:
            unpack = "_I32" if wide else "_I16"
            self.emit(d, f"{var} = {unpack}.unpack_from(buf, pos)[0]; pos += {4 if wide else 2}")

    def value(self, d: int, f: Field, compact: bool, target: str) -> None:
        """Code reading one value of ``f`` (not an array, not a struct) into ``target``."""
        t = f.type
        if t in _FIXED:
            fmt = struct.Struct(">" + _FIXED[t])
            u = self.name(fmt.unpack_from, "_u")
            self.emit(d, f"v = {u}(buf, pos)[0]; pos += {fmt.size}")
            if t == "bool":
                self.emit(d, "if v != 0 and v != 1: raise Bail")
                self.emit(d, f"{target} = v == 1")
            elif t == "uuid":
                self.emit(d, f"{target} = _uuid(v)")
            else:
                self.emit(d, f"{target} = v")
        elif t in ("varint", "varlong", "uvarint"):
            self.emit(d, f"v, pos = _uvarint(buf, pos, {10 if t == 'varlong' else 5})")
            self.emit(d, f"{target} = v" if t == "uvarint" else f"{target} = (v >> 1) ^ -(v & 1)")
        elif t == "string":
            self.length(d, "n", compact, False)
            self.emit(d, "if n < 0:")
            self.emit(d + 1, "if n != -1: raise Bail" if f.nullable else "raise Bail")
            self.emit(d + 1, f"{target} = None")
            self.emit(d, "else:")
            self.emit(d + 1, "e = pos + n")
            self.emit(d + 1, "if e > len(buf): raise Bail")
            self.emit(d + 1, f"{target} = buf[pos:e].decode(); pos = e")
        elif t in ("bytes", "records"):
            self.length(d, "n", compact, True)
            null_ok = f.nullable or t == "records"
            self.emit(d, "if n < 0:")
            self.emit(d + 1, "if n != -1: raise Bail" if null_ok else "raise Bail")
            self.emit(d + 1, f"{target} = None")
            self.emit(d, "else:")
            self.emit(d + 1, "e = pos + n")
            self.emit(d + 1, "if e > len(buf): raise Bail")
            if t == "records":
                self.emit(d + 1, f"{target} = _records(buf, pos, e, s) if s.records "
                                 f"else s.conv(buf[pos:e]); pos = e")
            else:
                self.emit(d + 1, f"{target} = s.conv(buf[pos:e]); pos = e")
        else:
            raise ValueError(f"unknown type {t!r}")

    def field(self, d: int, f: Field, flexible: bool, target: str) -> None:
        compact = flexible if f.compact is None else f.compact
        if f.array:
            self.length(d, "n", flexible, True)
            self.emit(d, "if n < -1 or n > len(buf) - pos: raise Bail")
            self.emit(d, "if n == -1:")
            self.emit(d + 1, f"{target} = None")
            self.emit(d, "else:")
            cost = 1 + (len(f.struct.fields) if f.type == "struct" and f.struct else 0)
            self.emit(d + 1, f"s.charge(n * {cost})")
            self.emit(d + 1, "a = []")
            if f.type == "struct":
                assert f.struct is not None, "a struct field has its layout"
                r = self.name(reader(f.struct), "_r")
                self.emit(d + 1, "for _ in range(n):")
                self.emit(d + 2, f"v, pos = {r}(buf, pos, s); a.append(v)")
            else:
                elem = Field(f.name, f.type, nullable=f.nullable)
                self.emit(d + 1, "for _ in range(n):")
                self.value(d + 2, elem, compact, "w")
                self.emit(d + 2, "a.append(w)")
            self.emit(d + 1, f"{target} = a")
        elif f.type == "struct":
            assert f.struct is not None, "a struct field has its layout"
            r = self.name(reader(f.struct), "_r")
            if f.nullable:
                self.emit(d, "v = buf[pos]; pos += 1")
                self.emit(d, "if v > 127:")
                self.emit(d + 1, f"{target} = None")
                self.emit(d, "else:")
                self.emit(d + 1, f"{target}, pos = {r}(buf, pos, s)")
            else:
                self.emit(d, f"{target}, pos = {r}(buf, pos, s)")
        else:
            self.value(d, f, compact, target)

    def struct(self, st: Struct, tagged: bool = True) -> None:
        """``tagged``: read the struct's tagged-field section too (off for the one-field
        readers of the tagged fields themselves)."""
        self.emit(0, "def read(buf, pos, s):")
        self.emit(1, "out = {}")
        fields = list(st.fields)
        i = 0
        while i < len(fields):
            # a run of plain fixed-size fields: one unpack
            j = i
            while j < len(fields) and not fields[j].array and fields[j].type in _FIXED \
                    and fields[j].type not in ("bool", "uuid"):
                j += 1
            if j - i >= 2:
                run = fields[i:j]
                fmt = struct.Struct(">" + "".join(_FIXED[f.type] for f in run))
                u = self.name(fmt.unpack_from, "_u")
                names = [f"x{k}" for k in range(len(run))]
                self.emit(1, f"{', '.join(names)}, = {u}(buf, pos); pos += {fmt.size}")
                for f, n in zip(run, names):
                    if not f.name.startswith("_"):
                        self.emit(1, f"out[{f.name!r}] = {n}")
                i = j
                continue
            f = fields[i]
            self.field(1, f, st.flexible, f"out[{f.name!r}]" if not f.name.startswith("_")
                       else "_")
            i += 1
        if st.flexible and tagged:
            self.env["_tag_readers"] = {
                f.tag: _generate(Struct(f.name, (f,), flexible=True), tagged=False)
                for f in st.tagged}
            self.emit(1, "n, pos = _uvarint(buf, pos, 5)")
            self.emit(1, "if n:")
            self.emit(2, "_tagged(buf, pos, n, s, out, _tag_readers)")
            self.emit(2, "pos = s.tag_end")
        self.emit(1, "return out, pos")


_READERS: dict[int, tuple[Struct, Callable]] = {}


def reader(st: Struct) -> Callable:
    """The generated reader of ``st`` (made on first use, kept for the process)."""
    got = _READERS.get(id(st))
    if got is not None and got[0] is st:
        return got[1]
    fn = _generate(st)
    _READERS[id(st)] = (st, fn)
    return fn


def _generate(st: Struct, tagged: bool = True) -> Callable:
    gen = _Gen()
    gen.struct(st, tagged)
    env = {"_uvarint": _uvarint, "_uuid": _uuid, "_I32": _I32, "_I16": _I16, "Bail": Bail,
           "_records": _records, "_tagged": _tagged, **gen.env}
    exec(compile("\n".join(gen.lines), f"<values reader {st.name}>", "exec"), env)
    return env["read"]


def _tagged(buf: bytes, pos: int, n: int, s, out: dict, readers: dict) -> None:
    """A flexible struct's tagged fields (count ``n`` already read): known tags by their
    name, unknown ones as ``tag_N`` bytes; sets ``s.tag_end``."""
    if n > len(buf) - pos:
        raise Bail
    for _ in range(n):
        s.charge(4)
        tag, pos = _uvarint(buf, pos, 5)
        size, pos = _uvarint(buf, pos, 5)
        end = pos + size
        if end > len(buf):
            raise Bail
        read = readers.get(tag)
        if read is None:
            out[f"tag_{tag}"] = s.conv(buf[pos:end])
        else:
            value, used = read(buf[pos:end], 0, s)      # its own region: reads stop at end
            if used != size:
                raise Bail
            out.update(value)
        pos = end
    s.tag_end = pos


# -- records ------------------------------------------------------------------------

def _records(buf: bytes, pos: int, end: int, s) -> list:
    """Record batches (v2 only: message sets bail) in ``buf[pos:end]``, as
    ``render.records.batch_json`` shows them."""
    out = []
    while pos < end:
        left = end - pos
        if left < 17 or 12 + _I32.unpack_from(buf, pos + 8)[0] > left:
            tail = Node("records", "records", pos)
            read_records(buf, tail, pos, end, Options())      # the located partial batch
            (node,) = tail.children
            if node.problem:
                raise Bail
            out.append({"partial": node.note, "length": node.length})
            return out
        if buf[pos + 16] != 2:
            raise Bail
        s.charge(16)        # the located decoder's charge per batch, and it needs > 0
        if s.nodes <= 0:
            raise Bail
        total = 12 + _I32.unpack_from(buf, pos + 8)[0]
        out.append(_batch(buf, pos, pos + total, s))
        pos += total
    return out


def _batch(buf: bytes, start: int, end: int, s) -> dict:
    if end - start < 61:
        raise Bail
    (base, _length, _epoch, _magic, crc, attrs, last_delta, base_ts, max_ts, _pid, _pe,
     _seq, count) = _BATCH_HEAD.unpack_from(buf, start)
    pos = start + 61
    if crc32c.crc32c(buf[start + 21:end]) != crc:
        raise Bail
    codec = attrs & 7
    if count < 0 or count > end - pos + (s.decompressed if codec else 0):
        raise Bail
    if codec:
        try:
            data, _how = decompress(codec, buf[pos:end], s.decompressed)
        except CodecError:
            raise Bail from None
        s.decompressed -= len(data)
        pos, end = 0, len(data)
    else:
        data = buf
    stamp = max_ts if attrs & 0x08 else None
    # charged before the loop: a count of millions must not build millions of records
    # first (4 Mi records of 7 bytes zstd to 2.5 KB). Exactly what the located decoder
    # charges for them (a record's fields and itself; headers are inside the record's
    # headers array): charging more sent clean Fetch responses with a header per
    # record to the located decoder, whose tree of them took 250 MB
    s.charge(9 * count)
    records, pos = _record_loop(data, pos, end, count, base,
                                stamp if stamp is not None else base_ts,
                                stamp is not None, s.conv if s.values is None else bytes)
    if pos != end:
        raise Bail
    if s.values is not None:
        _schema_values(records, s)
    if s.batch_records is not None:
        records = s.batch_records(records)
    return {"base_offset": base, "attributes": _attributes_note(attrs, 2), "problems": [],
            "records": records}


def _schema_values(records: list[dict], s: _State) -> None:
    """Keys and values decoded by their schemas, as ``render.records.record_json`` shows
    them from the located tree; Bail where that tree would hold a finding."""
    from .values_schema.fast import Unfit, value_json
    conv, source = s.conv, s.values
    for r in records:
        for role in ("key", "value"):
            raw = r[role]
            if raw is None:
                continue
            tally = [0]
            try:
                r[role], r[f"{role}_schema"] = value_json(source, raw, role, tally)
                s.charge(tally[0] + 2)      # the located tree: each value, magic, id
            except Unfit:
                if raw and (role == "value" or (len(raw) >= 5 and raw[0] == 0)):
                    raise Bail from None
                r[role] = conv(raw)
        for h in r["headers"]:
            h["value"] = conv(h["value"]) if h["value"] is not None else None


# The record loop runs once per record of every batch: its varints (nearly all one or two
# bytes) are read inline. Written once as a template: VARINT(x, max) expands to the inline
# read of an unsigned varint into ``x`` at ``p`` (the general case in _uvarint), and
# SIZED(x, f) to a varint-sized field of the record (-1: None) passed through ``f``.
_RECORD_LOOP = """
def loop(data, pos, end, count, base, ts0, fixed_ts, conv):
    records = []
    for _ in range(count):
        p = pos
        VARINT(n, 5)
        length = (n >> 1) ^ -(n & 1)
        rec_end = p + length
        if length < 1 or rec_end > end:
            raise Bail
        p += 1                                  # attributes
        VARINT(n, 10)
        ts = ts0 if fixed_ts else ts0 + ((n >> 1) ^ -(n & 1))
        VARINT(n, 5)
        offset = base + ((n >> 1) ^ -(n & 1))
        SIZED(key, conv)
        SIZED(value, conv)
        VARINT(n, 5)
        count_h = (n >> 1) ^ -(n & 1)
        if count_h < 0 or count_h > rec_end - p:
            raise Bail
        headers = []
        for _h in range(count_h):
            SIZED(hkey, text)
            SIZED(hvalue, conv)
            headers.append({"key": hkey, "value": hvalue})
        if p != rec_end:
            raise Bail
        records.append({"offset": offset, "timestamp": ts, "key": key, "value": value,
                        "headers": headers})
        pos = rec_end
    return records, pos
"""


def _varint(var: str, max_bytes: str) -> list[str]:
    return [f"{var} = data[p]",
            f"if {var} < 128:",
            "    p += 1",
            "elif data[p + 1] < 128:",
            f"    {var} = ({var} & 127) | (data[p + 1] << 7)",
            "    p += 2",
            "else:",
            f"    {var}, p = _uvarint(data, p, {max_bytes})"]


def _sized(var: str, convert: str) -> list[str]:
    """``convert`` names a function, or is ``text`` (UTF-8, errors replaced, inline)."""
    value = 'data[p:q].decode("utf-8", "replace")' if convert == "text" \
        else f"{convert}(data[p:q])"
    return [*_varint("n", "5"),
            "size = (n >> 1) ^ -(n & 1)",
            "if size < 0:",
            "    if size != -1:",
            "        raise Bail",
            f"    {var} = None",
            "else:",
            "    q = p + size",
            "    if q > rec_end:",
            "        raise Bail",
            f"    {var} = {value}",
            "    p = q"]


def _expand(template: str) -> str:
    out = []
    for line in template.splitlines():
        for macro, expand in (("VARINT(", _varint), ("SIZED(", _sized)):
            head, sep, rest = line.partition(macro)
            if sep:
                out += [head + inline for inline in
                        expand(*(x.strip() for x in rest.rstrip(")").split(",")))]
                break
        else:
            out.append(line)
    return "\n".join(out)


_LOOP: list[Callable] = []       # compiled on first use: start-up stays lean


def _record_loop(*args):
    if not _LOOP:
        env: dict[str, Any] = {"Bail": Bail, "_uvarint": _uvarint}
        exec(compile(_expand(_RECORD_LOOP), "<values record loop>", "exec"), env)
        _LOOP.append(env["loop"])
    return _LOOP[0](*args)


# -- messages -------------------------------------------------------------------------

def body_values(data: bytes, direction: str, api_key: int, api_version: int,
                options: Options, conv: Callable[[bytes], Any],
                batch_records: Callable[[list], Any] | None = None) -> dict | None:
    """The body of a clean message as plain values (bytes through ``conv``); None when the
    message is not clean or not for this path (the caller decodes it located).
    ``batch_records``, if given, takes each record batch's list of records as soon as it
    is read and returns what stands for it (a caller writing JSON encodes it at once, so
    a big Fetch response never holds all its records as objects)."""
    if options.records not in (True, False) or (options.embedded and api_key in _EMBEDDED_APIS):
        return None
    if options.embedded and options.records is True and (api_key, direction) in _RECORD_CARRIERS \
            and mentions_internal_topic(data, options.topic_ids):
        return None         # internal topics' records are decoded by schema: located path
    if getattr(options.values, "overrides", None) and options.records and \
            schemas.has_records(api_key, api_version, direction):
        return None         # per-topic schemas: the located path knows the topics
    layout = schemas.layout(api_key, api_version, direction)
    if layout is None:
        return None
    if direction == "request":
        head = schemas.REQUEST_HEADERS[schemas.request_header_version(api_key, api_version)]
    else:
        head = schemas.RESPONSE_HEADERS[schemas.response_header_version(api_key, api_version)]
    s = _State(conv, options)
    s.batch_records = batch_records
    try:
        _, pos = reader(head)(data, 0, s)
        body, pos = reader(layout)(data, pos, s)
    except (Bail, struct.error, IndexError, UnicodeDecodeError):
        return None
    return body if pos == len(data) else None
