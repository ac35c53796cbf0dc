"""Pasted text -> bytes: the byte literals people paste from debugging sessions, out of the
code, logs and dumps around them.

Three readers, tried in this order, each in one linear pass (hand-written scanners; the
only regular expressions match bounded tokens at a position, never search or backtrack):

- dumps, line by line: xxd, hexdump -C, od -A x, Wireshark / tshark -x, tcpdump -X (lines
  of an offset and hex columns; od's octal offsets and hexdump's and od -x's 16-bit
  little-endian words too; other lines such as tcpdump's summary are skipped; the
  link, IP and TCP headers of each packet are taken off when they check out);
- code, token by token: Python b'' literals (split over lines, in lists or tuples),
  strings of \\x escapes, Erlang / Elixir binaries <<...>> (Int:Size segments,
  "text"::binary), arrays of numbers in any brackets (C, Java, Go []byte{...} with 'c'
  character literals, Rust with 0b literals, Node's {"type":"Buffer","data":[...]},
  Go's fmt.Println [0 0 0 18]), quoted hex strings (assignments, "00" + "12"
  concatenation, echo -n "..." | xxd -r -p); comments (#, //, /* */, %) are skipped;
- plain text, line by line: hex (spaced, colons, 0x, \\x; a label such as
  "Hex Stream:" in front is skipped) and base64.

Every byte taken is recorded as a ``Piece`` (which line and characters, how many bytes),
and a refusal names the line and character that stopped the reader that got furthest.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import islice
from typing import Any


class BlobError(ValueError):
    def __init__(self, message: str, line: int | None = None, col: int | None = None):
        where = f"line {line}, character {col}: " if line is not None else ""
        super().__init__(where + message)
        self.line, self.col = line, col


@dataclass(frozen=True)
class Piece:
    """Bytes ``offset``..``offset+size`` of the result came from these characters."""

    line: int  # 1-based, first line
    col: int  # 1-based, first character
    end_line: int
    end_col: int  # last character (inclusive)
    offset: int
    size: int
    what: str


@dataclass(frozen=True)
class Blob:
    data: bytes
    format: str
    pieces: tuple[Piece, ...] = ()
    skipped: tuple[str, ...] = ()  # what was read but left out (packet headers, lines)


_EXPECTED = (
    "expected hex ('00 00 00 03 ...', '0x0000...', 'Hex Stream: 0000...'), a hex "
    "dump (xxd, hexdump -C, od -A x -t x1z, Wireshark, tcpdump -X), an Erlang or "
    "Elixir binary <<0,0,...>>, a Python b'\\x00...' literal, a byte array "
    '({0, 0, -1, ...}, []byte{...}, [0 0 0 18], {"type":"Buffer","data":[...]}), '
    "quoted hex in code, or base64"
)

_BINARY = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f]")
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def parse_blob(text: str | bytes) -> Blob:
    """Find the bytes in ``text``; BlobError says where reading stopped and what was expected."""
    if isinstance(text, (bytes, bytearray)):
        decoded = _as_text(bytes(text))
        if isinstance(decoded, Blob):
            return decoded
        text = decoded
    s = _one_line_end(text.lstrip("\ufeff"))  # (a byte-order mark an editor left in front)
    if not s.strip():
        raise BlobError("no input: " + _EXPECTED)
    src = _Source(s)
    failures: list[BlobError] = []
    readers = [_read_dump, _read_code, _read_plain]
    if _BARE_HEX.issuperset(s):
        del readers[1]  # nothing but hex and spaces: no code to look into
    for reader in readers:
        try:
            found = reader(src)
        except BlobError as e:
            failures.append(e)
            continue
        if found is not None and found.data:
            return found
    if failures:
        # the reader that recognised the most before stopping explains best
        best = max(failures, key=lambda e: (e.line or 0, e.col or 0))
        raise BlobError(f"{_plain_message(best)}; {_EXPECTED}", best.line, best.col)
    raise BlobError("could not read the input as bytes: " + _EXPECTED, 1, 1)


def _one_line_end(text: str) -> str:
    """Lines ended by CR alone read as lines: terminals paste them so (xterm, tmux and
    others turn each newline of a paste into CR), and a dump of many lines was read as
    its first. CR LF is one end."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _plain_message(e: BlobError) -> str:
    text = str(e)
    return text.split(": ", 1)[1] if e.line is not None else text


def _as_text(raw: bytes) -> str | Blob:
    """Text (after a byte-order mark, UTF-8 or UTF-16 as it says), or raw binary."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return raw[len(bom) :].decode(encoding)
            except UnicodeDecodeError:
                break
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Blob(raw, "raw binary")
    # control characters no paste holds (a terminal's colours, ESC, excepted): the bytes
    # themselves, whose every byte happened to be below 0x80 (most Kafka requests)
    return Blob(raw, "raw binary") if _BINARY.search(text) else text


class _Source:
    """The text and where its lines start (positions -> line and character)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        pos = text.find("\n")
        while pos != -1:
            self.starts.append(pos + 1)
            pos = text.find("\n", pos + 1)

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, pos) - 1
        return line + 1, pos - self.starts[line] + 1

    def error(self, pos: int, message: str) -> BlobError:
        line, col = self.where(pos)
        return BlobError(message, line, col)

    def lines(self):
        """(start position, line text without its end) for each line."""
        t, starts = self.text, self.starts
        for i, start in enumerate(starts):
            end = starts[i + 1] - 1 if i + 1 < len(starts) else len(t)
            yield start, t[start:end].rstrip("\r")


class _Out:
    """Bytes being collected, with the pieces they came from."""

    def __init__(self, src: _Source):
        self.src, self.data = src, bytearray()
        self.pieces: list[Piece] = []
        self.skipped: list[str] = []

    def add(self, start: int, end: int, data: bytes, what: str, merge: bool = False) -> None:
        """``data`` came from text positions ``start``..``end`` (exclusive); with ``merge``,
        a piece of the same kind on the line before grows instead (one piece per block
        of lines, not per line)."""
        if not data:
            return
        line, col = self.src.where(start)
        end_line, end_col = self.src.where(max(end - 1, start))
        last = self.pieces[-1] if self.pieces else None
        if (
            merge
            and last is not None
            and last.what == what
            and last.end_line + 1 >= line
            and last.offset + last.size == len(self.data)
        ):
            self.pieces[-1] = Piece(
                last.line, last.col, end_line, end_col, last.offset, last.size + len(data), what
            )
        else:
            self.pieces.append(Piece(line, col, end_line, end_col, len(self.data), len(data), what))
        self.data += data

    def blob(self, fmt: str) -> Blob:
        return Blob(bytes(self.data), fmt, tuple(self.pieces), tuple(self.skipped))


def _is_hex(s: str) -> bool:
    return bool(s) and _HEXCHARS.issuperset(s)


_HEXCHARS = frozenset("0123456789abcdefABCDEF")
_BARE_HEX = _HEXCHARS | frozenset(" \t\r\n:-")


# -- dumps --------------------------------------------------------------------------------


@dataclass
class _DumpLine:
    pos: int  # text position of the line
    offset: int
    data: bytes
    span: tuple[int, int]  # text positions of the hex columns
    star: bool = False  # a `*` line (hexdump/od: the previous line repeats)
    digits: int = 0  # of its offset
    colon: bool = False  # after its offset
    words: bool = False  # its columns are groups of 4 hex digits


def _dump_line(line: str) -> tuple[int, int, int] | None:
    """(offset, start of the columns, width of the offset) if ``line`` starts like a dump
    line: an offset of 4-8 hex digits (0x allowed), then ':' or spaces; or od's and
    hexdump's last line, 6-8 digits alone (where the data ends)."""
    i = len(line) - len(line.lstrip(" \t"))
    j = i + 2 if line.startswith(("0x", "0X"), i) else i
    k = j
    while k < len(line) and k - j <= 8 and line[k] in _HEXCHARS:
        k += 1
    if 6 <= k - j <= 8 and k == len(line):
        return int(line[j:k], 16), k, k - j
    if not 4 <= k - j <= 8 or k >= len(line) or line[k] not in ": \t":
        return None
    return int(line[j:k], 16), k + 1 if line[k] == ":" else k, k - j


def _columns(line: str, start: int) -> tuple[bytes, int, bool]:
    """The hex columns of a dump line from ``start``: groups of 2, 4 or 8 hex digits,
    up to the ascii column (after '|' or '>', or a wide gap). Returns the bytes, the end
    of the last group and whether anything (an ascii column) follows."""
    out = bytearray()
    pos, n, width, last = start, len(line), 0, start
    while pos < n:
        gap_start = pos
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n:
            break
        gap = pos - gap_start
        if out and (gap >= (2 if width >= 4 else 3) or "\t" in line[gap_start:pos]):
            break  # the wide gap before the ascii column
        if line[pos] in "|>":
            break
        end = pos
        while end < n and line[end] not in " \t":
            end += 1
        size = end - pos
        if size % 2 or size > 8 or not _is_hex(line[pos:end]):
            break
        if width and size != width:
            # only the last group of a line may be shorter (xxd, tcpdump: an odd byte)
            after = end
            while after < n and line[after] in " \t":
                after += 1
            if size > width or (after < n and after - end < 2):
                break
            out += bytes.fromhex(line[pos:end])
            last = end
            break
        width = size
        out += bytes.fromhex(line[pos:end])
        pos = last = end
    return bytes(out), last, line[last:].strip() != ""


def _read_dump(src: _Source) -> Blob | None:
    lines: list[_DumpLine] = []
    others: list[int] = []  # line numbers of other lines with something on them
    prev_star = False
    tails = 0
    for number, (pos, line) in enumerate(src.lines(), 1):
        if line.strip() == "*":
            prev_star = True
            continue
        head = _dump_line(line)
        data, end, tail = _columns(line, head[1]) if head else (b"", 0, False)
        if head is None or not data:
            if head is not None and line[head[1] :].strip() == "":
                # od's and hexdump's last line: the offset where the data ends
                lines.append(_DumpLine(pos, head[0], b"", (pos, pos), prev_star, head[2]))
                prev_star = False
            elif line.strip():
                others.append(number)
            continue
        tails += tail
        colon = line[head[1] - 1] == ":"
        words = all(len(g) == 4 for g in line[head[1] : end].split())
        lines.append(
            _DumpLine(
                pos, head[0], data, (pos + head[1], pos + end), prev_star, head[2], colon, words
            )
        )
        prev_star = False
    real = [d for d in lines if d.data]
    if not real or (len(real) == 1 and not tails and len(lines) == 1):
        return None  # a single line without columns or end is plain hex, not a dump
    fmt = "hex dump"
    as_hex, as_octal = _offsets_follow(lines), _offsets_follow(lines, octal=True)
    if as_octal and (
        not as_hex
        # only '*' lines between them: od -t x1's (7 digits, bytes), not hexdump's
        or all(d.digits == 7 and not d.words and not d.colon for d in real)
    ):
        fmt += "; offsets in octal, as od prints them"
        for d in lines:
            d.offset = int(f"{d.offset:x}", 8)
    elif as_octal and as_hex and any(d.star for d in lines):
        # (said: the '*' lines stand for more or fewer bytes)
        fmt += "; offsets read as hex, as hexdump prints them (od's are octal: od -A x)"
    if not tails and all(d.words and d.digits == 7 and not d.colon for d in real):
        # hexdump's default and od -x: 16-bit words in the order of the machine that
        # wrote them, little-endian on every common one (xxd's groups, 8-digit offsets
        # and a colon, are in byte order)
        fmt += "; 16-bit words read little-endian, as hexdump and od -x print them"
        for d in real:
            swapped = bytearray(d.data)
            swapped[0::2], swapped[1::2] = d.data[1::2], d.data[0::2]
            d.data = bytes(swapped)
        final, before = lines[-1], lines[-2] if len(lines) > 1 else None
        if not final.data and before is not None and before.data:
            # an odd length: its last byte was printed as a word of its own
            if final.offset == before.offset + len(before.data) - 1:
                before.data = before.data[:-1]
    out = _Out(src)
    packets: list[tuple[int, int]] = []  # (start, end) in out.data of each block
    expect = None
    previous = b""
    for d in lines:
        if expect is None or (d.offset == 0 and expect != 0):
            packets.append((len(out.data), len(out.data)))
        elif d.offset != expect:
            if not (d.star and d.offset > expect and previous):
                raise src.error(
                    d.pos,
                    f"this dump line's offset {d.offset:#x} does not "
                    f"follow the previous line (expected {expect:#x}): "
                    f"a line is missing or was edited",
                )
            repeat = previous  # the line before the '*' repeats
            fill = d.offset - expect
            if fill > 64 * 1024 * 1024:
                raise src.error(d.pos, "a '*' line stands for more than 64 MiB")
            out.add(
                d.pos, d.pos + 1, (repeat * (fill // len(repeat) + 1))[:fill], "repeated line ('*')"
            )
        out.add(d.span[0], d.span[1], d.data, "dump lines", merge=packets[-1][1] > packets[-1][0])
        expect = d.offset + len(d.data)
        previous = d.data or previous
        packets[-1] = (packets[-1][0], len(out.data))
    if others:
        out.skipped.append(f"{len(others)} line(s) that are not dump lines ({_line_list(others)})")
    _strip_packet_headers(out, packets)
    return out.blob(fmt)


def _offsets_follow(lines: list[_DumpLine], octal: bool = False) -> bool:
    """Whether each line's offset is where the line before it ended (``octal``: the
    offsets' digits read as octal); a '*' line may skip ahead."""
    expect = None
    words = False  # the line before was of 16-bit words: its last byte may be padding
    for d in lines:
        if octal and not set(f"{d.offset:x}") <= _OCTAL:
            return False
        offset = int(f"{d.offset:x}", 8) if octal else d.offset
        odd_end = not d.data and words and offset == expect - 1 if expect else False
        if expect is not None and offset not in (expect, 0) and not odd_end:
            if not (d.star and offset > expect):
                return False
        expect, words = offset + len(d.data), d.words
    return True


_OCTAL = frozenset("01234567")


def _line_list(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:8]))
    return "line " + shown + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")


def _strip_packet_headers(out: _Out, packets: list[tuple[int, int]]) -> None:
    """A dump of captured packets (tcpdump -X, Wireshark) starts each packet with its link,
    IP and TCP headers: keep only the TCP payloads, when every packet's headers check out."""
    cuts = []
    for start, end in packets:
        head = _packet_headers(bytes(out.data[start:end]))
        if head is None:
            return
        cuts.append(head)
    data, pieces, removed = bytearray(), [], 0
    k = 0  # pieces are in order and none spans two packets
    for (start, end), (link, ip, tcp) in zip(packets, cuts):
        skip = link + ip + tcp
        data += out.data[start + skip : end]
        while k < len(out.pieces) and out.pieces[k].offset < end:
            p = out.pieces[k]
            lo, hi = max(p.offset, start + skip), min(p.offset + p.size, end)
            if hi > lo:
                pieces.append(
                    Piece(
                        p.line, p.col, p.end_line, p.end_col, lo - removed - skip, hi - lo, p.what
                    )
                )
            k += 1
        removed += skip
    names = {14: "Ethernet, ", 16: "Linux cooked, ", 0: ""}
    link_names = sorted({names.get(c[0], "link, ") for c in cuts})
    out.skipped.append(
        f"the {''.join(link_names)}IP and TCP headers of {len(packets)} packet(s) ({removed} bytes)"
    )
    out.data, out.pieces = data, pieces


def _payload_of(blob: Blob) -> Blob | None:
    """A whole captured packet as one run of hex (Wireshark's "Copy as Hex Stream" of a
    frame): its TCP payload, the link, IP and TCP headers left out; None if it is not
    one (or carries nothing)."""
    head = _packet_headers(blob.data)
    if head is None or sum(head) >= len(blob.data):
        return None
    skip = sum(head)
    pieces = tuple(
        replace(p, offset=max(0, p.offset - skip), size=p.offset + p.size - max(p.offset, skip))
        for p in blob.pieces
        if p.offset + p.size > skip
    )
    names = {14: "Ethernet, ", 16: "Linux cooked, ", 0: ""}
    left_out = f"the {names[head[0]]}IP and TCP headers of the packet ({skip} bytes)"
    return Blob(blob.data[skip:], blob.format, pieces, (*blob.skipped, left_out))


def _packet_headers(p: bytes) -> tuple[int, int, int] | None:
    """(link, IP, TCP) header lengths of a captured TCP packet, or None if ``p`` is not one
    (the IP length must account for exactly the bytes shown)."""
    for link, ethertype_at in ((0, None), (14, 12), (16, 14)):
        if ethertype_at is not None and (
            len(p) < link or p[ethertype_at : ethertype_at + 2] not in (b"\x08\x00", b"\x86\xdd")
        ):
            continue
        ip = p[link:]
        if len(ip) >= 20 and ip[0] >> 4 == 4:
            ihl, total, proto = (ip[0] & 15) * 4, int.from_bytes(ip[2:4], "big"), ip[9]
            if ihl < 20 or total != len(ip) or proto != 6:
                continue
        elif len(ip) >= 40 and ip[0] >> 4 == 6:
            ihl, total, proto = 40, 40 + int.from_bytes(ip[4:6], "big"), ip[6]
            if total != len(ip) or proto != 6:
                continue
        else:
            continue
        if len(ip) < ihl + 20:
            continue
        tcp = (ip[ihl + 12] >> 4) * 4
        if tcp < 20 or ihl + tcp > len(ip):
            continue
        return link, ihl, tcp
    return None


# -- code ---------------------------------------------------------------------------------

# compiled when code is first read (_token): 3 ms of every start-up otherwise
_TOKEN = r"""
    # skipped: spaces, line comments, and punctuation no byte literal needs (= | & ! ...)
    (?:[ \t\r\n\f\v|&!=@^~`*\\]++|(?://|\#|%)[^\n]*+)*+
    (?:
      (?P<open>/\*)
    | (?P<str>(?:[bB][rR]?|[rR][bB])?+(?:"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"
                                   |'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'))
    | (?P<bad>["'][^\n]*+)                 # no closing quote on the line (prose)
    | (?P<num>0[xX][0-9a-fA-F_]++[A-Za-z0-9_]*+|0[bB][01_]++[A-Za-z0-9_]*+|[0-9][A-Za-z0-9_]*+)
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*+)
    | (?P<p>(?P<c>.)(?P=c)*+)                # punctuation, a run of one character
    | (?P<end>\Z)
    )"""


@lru_cache(maxsize=1)
def _token() -> re.Pattern[str]:
    return re.compile(_TOKEN, re.X | re.S)


_STRING_PREFIXES = {"b", "br", "rb"}
# a run of plain byte values with their separators, read as one token (an array of a
# million bytes is a million items): possessive throughout, so it never backtracks
_COMMA_RUN = re.compile(
    r"[ \t\r\n]*+(?P<r>(?:(?:0[xX][0-9a-fA-F]{1,2}+|-?+(?:0|[1-9][0-9]{0,2}+))"
    r"[ \t\r\n]*+,[ \t\r\n]*+){2,}+)"
)
_SPACE_RUN = re.compile(r"[ \t\r\n]*+(?P<r>(?:(?:0|[1-9][0-9]{0,2}+) ++){2,}+)")  # Go: [0 0 0 18]
_RUN_VALUE = re.compile(r"0[xX][0-9a-fA-F]+|-?[0-9]+")
_INT_SUFFIX = re.compile(r"(?:[uUiI](?:8|16|32|64|size)|[lLuU]{1,3})?")


@dataclass(slots=True)
class _Tok:
    kind: str  # num, char, str, bstr, id, p, run (several byte values)
    pos: int
    end: int
    text: str
    value: Any = None  # run: list[int]; bstr: bytes; char: int


def _tokens(src: _Source):
    """The tokens of the text, lazily (a bad nesting stops the reader early)."""
    s, pos, n = src.text, 0, len(src.text)
    last = None
    token = _token()
    while pos < n:
        if last is not None and last.kind == "p" and last.text[-1] in "[({,<":
            run = _COMMA_RUN.match(s, pos) or (
                _SPACE_RUN.match(s, pos) if last.text[-1] == "[" else None
            )
            if run is not None:
                text = run.group("r")
                last = _Tok(
                    "run",
                    run.start("r"),
                    run.end(),
                    text,
                    [int(v, 0) if v[1:2] in "xX" else int(v) for v in _RUN_VALUE.findall(text)],
                )
                yield last
                pos = run.end()
                continue
        m = token.match(s, pos)
        assert m is not None and m.lastgroup is not None, "_TOKEN matches anything"
        kind = m.lastgroup if m.lastgroup != "c" else "p"
        start, end = m.start(kind), m.end()
        pos = end
        if kind == "end":
            return
        if kind == "open":
            close = s.find("*/", end)
            pos = n if close == -1 else close + 2
            continue
        if kind == "str":
            last = _string(src, start, end)
        elif kind == "bad":
            last = _Tok("p", start, end, s[start:end])
        else:
            last = _Tok(kind, start, end, s[start:end])
        yield last


def _string(src: _Source, start: int, end: int) -> _Tok:
    s = src.text
    quote_at = start if s[start] in "\"'" else start + 1 if s[start + 1] in "\"'" else start + 2
    quote = s[quote_at]
    body = s[quote_at + 1 : end - 1]
    if quote_at > start:  # b'...', rb'...'
        prefix = s[start:quote_at].lower()
        return _Tok("bstr", start, end, body, _unescape(src, body, quote_at + 1, "r" in prefix))
    if quote == "'" and (len(body) == 1 or (len(body) == 2 and body[0] == "\\")):
        return _Tok("char", start, end, body, _unescape(src, body, quote_at + 1, False)[0])
    if "\\x" in body:
        return _Tok("bstr", start, end, body, _unescape(src, body, quote_at + 1, False))
    return _Tok("str", start, end, body)


_ESCAPES = {
    "n": 10,
    "t": 9,
    "r": 13,
    "0": 0,
    "\\": 92,
    "'": 39,
    '"': 34,
    "a": 7,
    "b": 8,
    "f": 12,
    "v": 11,
    "e": 27,
}


def _unescape(src: _Source, body: str, at: int, raw: bool) -> bytes:
    """The bytes of a b'' / "\\x.." literal's body (Python, C, Rust and JS escapes)."""
    if raw or "\\" not in body:
        try:
            return body.encode("latin-1")
        except UnicodeEncodeError:
            return body.encode("utf-8")
    out, i, n = bytearray(), 0, len(body)
    while i < n:
        j = body.find("\\", i)
        if j == -1:
            j = n
        out += (
            body[i:j].encode("latin-1", "replace")
            if body[i:j].isascii()
            else body[i:j].encode("utf-8")
        )
        if j >= n - 1:
            if j == n - 1:
                raise src.error(at + j, "a backslash ends the string")
            break
        c = body[j + 1]
        if c in "xX" and _is_hex(body[j + 2 : j + 4]) and len(body[j + 2 : j + 4]) == 2:
            out.append(int(body[j + 2 : j + 4], 16))
            i = j + 4
        elif "0" <= c <= "7":
            k = j + 1
            while k < n and k < j + 4 and "0" <= body[k] <= "7":
                k += 1
            out.append(int(body[j + 1 : k], 8) & 0xFF)
            i = k
        elif c in _ESCAPES:
            out.append(_ESCAPES[c])
            i = j + 2
        else:
            raise src.error(at + j, f"unknown escape '\\{c}' in a byte string")
    return bytes(out)


def _number(t: _Tok) -> int | None:
    """The integer a number token spells (0x, 0b, 0o, decimal; _ separators; u8/L
    suffixes), or None (a hex word such as 0a1b is not a number)."""
    s = t.text.replace("_", "")
    low = s.lower()
    if low.startswith("0x"):
        digits = low[2:]
        k = 0
        while k < len(digits) and digits[k] in "0123456789abcdef":
            k += 1
        # 0xffu8: 'f' could be a digit or not; u/i/l begin the suffix
        if not _INT_SUFFIX.fullmatch(s[2 + k :]) or k == 0 or k > 20:
            return None
        return int(digits[:k], 16)
    base, digits = (
        (2, low[2:])
        if low.startswith("0b")
        else (8, low[2:])
        if low.startswith("0o")
        else (10, low)
    )
    k = 0
    allowed = "01" if base == 2 else "01234567" if base == 8 else "0123456789"
    while k < len(digits) and digits[k] in allowed:
        k += 1
    if k == 0 or k > 40 or not _INT_SUFFIX.fullmatch(digits[k:]):
        return None
    return int(digits[:k], base)


@dataclass
class _Group:
    opener: str
    pos: int
    items: list = field(default_factory=list)  # each: list of tokens / groups
    commas: bool = False
    binary: bool = False  # Erlang / Elixir << >>
    end: int = 0


_CLOSE = {"(": ")", "[": "]", "{": "}", "<<": ">>"}
_MAX_DEPTH = 200


def _read_code(src: _Source) -> Blob | None:
    return _choose(src, _code_root(src))


def _code_root(src: _Source) -> _Group:
    """The text's brackets and tokens as a tree of groups."""
    root = _Group("", 0, [[]])
    stack = [root]
    for t in _tokens(src):
        top = stack[-1]
        if t.kind == "p":  # a run of one punctuation character
            c, count = t.text[0], len(t.text)
            if c in "([{" or (c == "<" and count >= 2):
                opener, width = ("<<", 2) if c == "<" else (c, 1)
                if len(stack) + count // width > _MAX_DEPTH:
                    raise src.error(t.pos, f"brackets nested more than {_MAX_DEPTH} deep")
                for k in range(count // width):
                    stack.append(_Group(opener, t.pos + k * width, [[]], binary=c == "<"))
                if count % width == 0:
                    continue
                t = _Tok("p", t.end - 1, t.end, c)  # the odd '<' left over
            elif c in ")]}>":
                width = 2 if c == ">" else 1
                k = 0
                while (
                    k + width <= count and len(stack) > 1 and _CLOSE[stack[-1].opener] == c * width
                ):
                    g = stack.pop()
                    g.end = t.pos + k + width
                    stack[-1].items[-1].append(_Closed(g, g.end))
                    k += width
                if k == count:
                    continue
                t = _Tok("p", t.pos + k, t.end, t.text[k:])  # stray: ordinary text
            elif c == "," or (c == ";" and not top.binary):
                top.commas = top.commas or c == ","
                top.items.append([])
                continue
            top = stack[-1]
        top.items[-1].append(t)
        if t.kind == "run" and t.text.rstrip()[-1:] == ",":
            top.commas = True  # a comma run ends its last item
            top.items.append([])
    while len(stack) > 1:  # unclosed brackets: take what they hold
        g = stack.pop()
        g.end = len(src.text)
        stack[-1].items[-1].append(_Closed(g, g.end))
    return root


@dataclass
class _Closed:
    group: _Group
    end: int
    kind: str = "group"


def _choose(src: _Source, root: _Group) -> Blob | None:
    """Which literals of the code are the bytes: Erlang/Elixir binaries, else byte
    strings, else number arrays or quoted hex, whichever holds more."""
    binaries, bstrings, arrays, hexes = _Out(src), _Out(src), _Out(src), _Out(src)
    problems: list[BlobError] = []
    _walk(src, root, binaries, bstrings, arrays, hexes, problems, top=True)
    if binaries.data:
        return binaries.blob("erlang binary")
    if bstrings.data:
        return bstrings.blob("byte string literal")
    if arrays.data or hexes.data:
        if len(hexes.data) > len(arrays.data):
            return hexes.blob("quoted hex")
        return arrays.blob("byte array")
    if problems:
        raise problems[0]
    return None


def _walk(
    src,
    g: _Group,
    binaries: _Out,
    bstrings: _Out,
    arrays: _Out,
    hexes: _Out,
    problems: list,
    top: bool = False,
    b64s: _Out | None = None,
) -> None:
    b64s = b64s if b64s is not None else _Out(src)
    if g.binary:
        start = len(binaries.data)
        try:
            binaries.add(g.pos, g.end, _binary(src, g), "binary <<...>>")
        except BlobError as e:
            problems.append(e)
            del binaries.data[start:]
        return
    # items: separated by commas, or (Go's fmt.Println [0 0 18]) by spaces
    if g.commas or not top:
        items = (
            [item for item in g.items if item]
            if g.commas
            else [[t] for item in g.items for t in item]
        )
        _array(src, items, arrays, problems, g.commas)
    for item in g.items:
        for t in item:
            if isinstance(t, _Closed):
                _walk(src, t.group, binaries, bstrings, arrays, hexes, problems, b64s=b64s)
            elif t.kind == "bstr":
                bstrings.add(t.pos, t.end, t.value, "byte string")
            elif t.kind == "str":
                data = _hex_string(t.text)
                if data:
                    hexes.add(t.pos, t.end, data, "quoted hex")
                elif len(t.text) >= 16 and _B64.issuperset(t.text.rstrip("=")):
                    data = _b64(t.text)
                    if data:
                        b64s.add(t.pos, t.end, data, "base64 string")


def _array(src: _Source, items: list, arrays: _Out, problems: list, commas: bool) -> None:
    """The bytes of a group whose every item is one byte value (two at least)."""
    if not items:
        return
    if (
        commas
        and all(_is_hex_word(item) for item in items)
        and (len(items) > 1 or items[0][0].kind == "run")
    ):  # 00, 0c, 12: hex
        arrays.add(
            items[0][0].pos,
            items[-1][0].end,
            bytes.fromhex(
                "".join(
                    "".join(_RUN_VALUE.findall(item[0].text))
                    if item[0].kind == "run"
                    else item[0].text
                    for item in items
                )
            ),
            "hex list",
        )
        return
    out = bytearray()
    first: _Tok | None = None
    last: _Tok | None = None
    for item in items:
        if len(item) == 1 and isinstance(item[0], _Tok) and item[0].kind == "run":
            t = item[0]
            bad = next((v for v in t.value if not -128 <= v <= 255), None)
            if bad is not None:
                problems.append(src.error(t.pos, f"{bad} is not a byte value (expected -128..255)"))
                return
            out += bytes(v & 0xFF for v in t.value)
            first, last = first or t, t
            continue
        found = _byte_item(item)
        if found is None:
            stray = _first_token(item)
            if out and len(out) >= 4 and stray is not None:
                problems.append(
                    src.error(stray.pos, f"'{stray.text[:30]}' is not a byte value in this array")
                )
            return
        value, t = found
        if not -128 <= value <= 255:
            problems.append(src.error(t.pos, f"{t.text} is not a byte value (expected -128..255)"))
            return
        out.append(value & 0xFF)
        first, last = first or t, t
    if len(out) >= 2 and first is not None and last is not None:  # one alone: an index
        arrays.add(first.pos, last.end, bytes(out), "byte array")


def _first_token(item) -> _Tok | None:
    for t in item:
        if isinstance(t, _Tok):
            return t
        found = _first_token([x for it in t.group.items for x in it])
        if found is not None:
            return found
    return None


def _is_hex_word(item) -> bool:
    """00, 0c, ff: two hex digits without 0x (in a run: every value is)."""
    if len(item) != 1 or not isinstance(item[0], _Tok):
        return False
    t = item[0]
    if t.kind == "run":
        words = _RUN_VALUE.findall(t.text)
        return all(len(w) == 2 and w[0] != "-" for w in words) and "x" not in t.text.lower()
    return t.kind in ("num", "id") and len(t.text) == 2 and _is_hex(t.text)


def _byte_item(item) -> tuple[int, _Tok] | None:
    """(value, token) when an array item holds exactly one byte value: a number or 'c',
    with casts ((byte)), a sign and suffixes (.toByte(), as u8) around it."""
    value = tok = None
    sign = 1
    for t in item:
        if isinstance(t, _Closed):
            inner = [x for it in t.group.items for x in it]
            if t.group.opener == "(" and all(isinstance(x, _Tok) and x.kind == "id" for x in inner):
                continue  # a cast such as (byte) or .toByte()
            return None
        if t.kind in ("num", "char"):
            if tok is not None:
                return None
            value = _number(t) if t.kind == "num" else t.value
            if value is None:
                return None
            tok = t
        elif t.kind == "p" and t.text == "-" and tok is None:
            sign = -sign
        elif t.kind == "p" and t.text in "+.":
            continue
        elif t.kind == "id" and (tok is not None or t.text in _TYPE_WORDS):
            continue  # as u8, toByte, (byte)
        else:
            return None
    return None if tok is None or value is None else (sign * value, tok)


_TYPE_WORDS = {"byte", "u8", "i8", "int8_t", "uint8_t", "char", "uint8", "int8", "sbyte"}


def _hex_string(body: str) -> bytes | None:
    """The bytes of a quoted string that holds only hex (spaces, colons, 0x allowed)."""
    cleaned = body.replace("0x", "").replace("0X", "")
    cleaned = "".join(cleaned.split()).replace(":", "")
    if len(cleaned) < 2 or len(cleaned) % 2 or not _is_hex(cleaned):
        return None
    return bytes.fromhex(cleaned)


def _binary(src: _Source, g: _Group) -> bytes:
    """The bytes of an Erlang / Elixir binary: integers with optional :Size / ::size(N) /
    ::N-little, "text" (::binary / ::utf8), $c characters, nested binaries."""
    out = bytearray()
    for item in g.items:
        if not item:
            continue
        head, spec = item[0], item[1:]
        if isinstance(head, _Tok) and head.kind == "run":
            out += bytes(v & 0xFF for v in head.value)
            continue
        while (
            spec
            and isinstance(spec[0], _Tok)
            and spec[0].kind == "p"
            and spec[0].text.strip(":") == ""
        ):
            spec = spec[1:]
        sign = 1
        if isinstance(head, _Tok) and head.kind == "p" and head.text == "-" and len(item) > 1:
            sign, head, spec = -1, item[1], item[2:]
            while spec and isinstance(spec[0], _Tok) and spec[0].text.strip(":") == "":
                spec = spec[1:]
        elif isinstance(head, _Tok) and head.kind == "p" and head.text in "$?" and len(item) > 1:
            out.append(ord(src.text[head.end]) & 0xFF)  # Erlang $a, Elixir ?a
            continue
        bits, little = 8, False
        for t in spec:  # 16, size(16), 64-signed, 32/big, 16-little
            if isinstance(t, _Closed):
                nums = [
                    x for it in t.group.items for x in it if isinstance(x, _Tok) and x.kind == "num"
                ]
                if nums:
                    bits = _number(nums[0]) or 0
            elif t.kind == "num":
                bits = _number(t) or 0
            elif t.kind == "id" and t.text == "little":
                little = True
        if isinstance(head, _Closed) and head.group.binary:
            out += _binary(src, head.group)
            continue
        if not isinstance(head, _Tok):
            raise src.error(head.group.pos, "a nested group in a binary is not a byte value")
        if head.kind == "str" or head.kind == "bstr":
            out += head.value if head.kind == "bstr" else _text_bytes(head.text)
            continue
        v = _number(head) if head.kind == "num" else head.value if head.kind == "char" else None
        if v is None:
            raise src.error(
                head.pos,
                f"'{head.text[:30]}' is not a value kdissect can read "
                f"(a variable? write the bytes out)",
            )
        if bits % 8 or not 0 < bits <= 64:
            raise src.error(head.pos, f"a segment of {bits} bits is not whole bytes")
        v = (sign * v) & ((1 << bits) - 1)
        out += v.to_bytes(bits // 8, "little" if little else "big")
    return bytes(out)


def _text_bytes(body: str) -> bytes:
    if "\\" in body:
        return _unescape(_Source(body), body, 0, False)
    return body.encode("utf-8")


# -- plain text: hex and base64 -----------------------------------------------------------


def _read_plain(src: _Source) -> Blob | None:
    out = _Out(src)
    for pos, line in src.lines():
        start = _after_label(line)
        body = line[start:]
        if not body.strip() or body.lstrip().startswith(("#", "//")):
            continue  # a heading such as 'Response:' or a comment
        digits, end = _hex_chars(body)
        if isinstance(end, str):  # not hex: perhaps base64
            found = _read_base64(src)
            if found is not None:
                return found
            raise src.error(pos + start + len(digits), end)
        out.add(pos + start, pos + end, digits.encode(), "hex", merge=True)
    if not out.pieces:
        return None
    if len(out.data) % 2:
        odd = next(p for p in out.pieces if p.size % 2)
        line, col = _odd_group(src, odd)
        raise BlobError(
            f"odd number of hex digits ({len(out.data)}): a digit is missing or extra",
            line,
            col,
        )
    data = bytes.fromhex(out.data.decode())
    pieces, done = [], 0
    for p in out.pieces:  # the pieces counted hex digits: turn them into bytes
        lo, hi = (done + 1) // 2, (done + p.size) // 2
        pieces.append(Piece(p.line, p.col, p.end_line, p.end_col, lo, hi - lo, p.what))
        done += p.size
    return Blob(data, "hex", tuple(pieces))


def _odd_group(src: _Source, piece: Piece) -> tuple[int, int]:
    """Where the digit missing or extra most likely is in ``piece`` (hex with an odd
    number of digits): the first of its groups, between separators, with an odd number
    of digits; else its start."""
    for number, (_, line) in enumerate(src.lines(), 1):
        if number < piece.line:
            continue
        if number > piece.end_line:
            break
        lo = piece.col - 1 if number == piece.line else 0
        hi = piece.end_col if number == piece.end_line else len(line)
        for m in _HEX_GROUP.finditer(line, lo, hi):
            if len(m[0]) % 2:
                return number, m.start() + 1
    return piece.line, piece.col


_HEX_GROUP = re.compile(r"(?:0[xX])?+([0-9a-fA-F]++)")


def _after_label(line: str) -> int:
    """Where the bytes start on a line such as 'Hex Stream: 0000...' or 'data = 00 01'."""
    if _BARE_HEX.issuperset(line):
        return 0
    if line.rstrip().endswith(":"):
        return len(line)  # a heading line
    for sep in (": ", ":\t", "= ", "=\t", "=> "):
        k = line.find(sep)
        if k > 0 and not _BARE_HEX.issuperset(line[:k]):
            return k + len(sep)
    return 0


_SEPARATORS = frozenset(" \t\r:,-")


def _hex_chars(body: str) -> tuple[str, int | str]:
    """The hex digits of a line (0x / \\x prefixes and separators dropped) and where they
    end; if the line is not hex: (the text before the culprit, what is wrong)."""
    out, i, n, end, word = [], 0, len(body), 0, 0
    while i < n:
        c = body[i]
        if c in _SEPARATORS:
            i += 1
            word = i
        elif c == "0" and i + 2 < n and body[i + 1] in "xX" and body[i + 2] in _HEXCHARS:
            i += 2
        elif c == "\\" and i + 1 < n and body[i + 1] in "xX":
            i += 2
        else:
            j = i
            while j < n and body[j] in _HEXCHARS:
                j += 1
            if j == i:  # name the whole word the culprit is in
                text = (
                    body[word : word + 20].split()[0] if body[word : word + 20].strip() else body[i]
                )
                return body[:word], f"'{text}' is not hex"
            out.append(body[i:j])
            i = end = j
    return "".join(out), end


def _read_base64(src: _Source) -> Blob | None:
    # base64 is wrapped at line ends, never split by spaces ('hello world' is prose);
    # and a Kafka message (8 bytes at least) takes 12 characters or more
    s = src.text.strip()
    if any(len(line.split()) > 1 for line in s.splitlines()):
        return None
    compact = "".join(s.split())
    bare = compact.rstrip("=")
    if (
        len(compact) < 12
        or len(bare) % 4 == 1
        or len(compact) - len(bare) > 2
        or not _B64.issuperset(bare)
    ):
        return None
    compact = bare.replace("-", "+").replace("_", "/")
    compact += "=" * (-len(compact) % 4)
    try:
        data = base64.b64decode(compact, validate=True)
    except binascii.Error:
        return None
    out = _Out(src)
    out.add(len(src.text) - len(src.text.lstrip()), len(src.text.rstrip()), data, "base64")
    return out.blob("base64")


_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")


def _b64(text: str) -> bytes | None:
    bare = text.strip().rstrip("=").replace("-", "+").replace("_", "/")
    if len(bare) % 4 == 1:
        return None
    try:
        return base64.b64decode(bare + "=" * (-len(bare) % 4), validate=True)
    except binascii.Error:
        return None


# -- search: every region that can be bytes -------------------------------------------------
#
# A paste is searched, not parsed: the whole-text readers above give the shapes they know
# (a dump, the code's literals joined, plain hex), and besides them every region of the
# text that can be bytes is a candidate of its own: each literal of the code alone, a
# literal with the ones that continue it (its size prefix says how far), runs of dump
# lines behind any line prefix (a log tag, a prompt, `remote: [tester::#NH4]`, `0000 | ..`
# tables), runs of hex lines with prose or comments between them, single long hex lines.
# Which candidate is the paste's bytes is decided by decoding them (sources/paste_choice).

MAX_CANDIDATES = 24  # the decodes a paste may cost, whatever its size
_MAX_PIECES = 256  # literals of one kind looked at one by one
_MIN_BYTES = 8  # a Kafka message is 8 bytes at least (size + a header)
# rows (dump or hex lines) the region search looks at: 256 KB of bytes in 16-byte rows;
# a longer dump is read whole by the whole-text readers
_MAX_ROWS = 16_384


def find_candidates(text: str | bytes) -> list[Blob]:
    """Every distinct byte string the text can hold, the whole-text readings first; at most
    MAX_CANDIDATES; regions hold 8 bytes at least (an empty list: nothing looks like
    bytes)."""
    if isinstance(text, (bytes, bytearray)):
        decoded = _as_text(bytes(text))
        if isinstance(decoded, Blob):
            return [decoded]
        text = decoded
    s = _one_line_end(text.lstrip("\ufeff"))
    if not s.strip():
        return []
    src = _Source(s)
    found: list[Blob] = []
    seen: set[bytes] = set()

    def keep(blob: Blob | None, least: int = _MIN_BYTES) -> None:
        if (
            blob is not None
            and len(blob.data) >= least
            and blob.data not in seen
            and len(found) < MAX_CANDIDATES
        ):
            seen.add(blob.data)
            found.append(blob)

    readers = [_read_dump, _read_plain]
    for reader in readers:  # the whole-text readings: any size
        try:
            blob = reader(src)
            keep(_payload_of(blob) if blob is not None else None, 1)
            keep(blob, 1)
        except BlobError:
            pass
    root = None
    if not _BARE_HEX.issuperset(s):
        try:
            root = _code_root(src)
            keep(_choose(src, root), 1)
        except BlobError:
            pass
    for blob in _line_regions(src):
        keep(blob)
    if root is not None:
        for blob in _code_literals(src, root):
            keep(blob)
    return found


def _code_literals(src: _Source, root: _Group):
    """Each literal of the code alone, and joined with the literals that continue it."""
    outs = {
        name: _Out(src)
        for name in ("erlang binary", "byte string literal", "byte array", "quoted hex", "base64")
    }
    try:
        _walk(
            src,
            root,
            outs["erlang binary"],
            outs["byte string literal"],
            outs["byte array"],
            outs["quoted hex"],
            [],
            top=True,
            b64s=outs["base64"],
        )
    except BlobError:
        return
    for fmt, out in outs.items():
        pieces = out.pieces[:_MAX_PIECES]
        if len(out.pieces) > 1:
            yield out.blob(fmt + "s, joined")
        for i, p in enumerate(pieces):
            data = bytes(out.data[p.offset : p.offset + p.size])
            yield Blob(data, fmt, (Piece(p.line, p.col, p.end_line, p.end_col, 0, p.size, p.what),))
            # a size prefix longer than this literal: the literals after it continue it
            if len(data) >= 4 and len(pieces) > i + 1:
                want = 4 + int.from_bytes(data[:4], "big")
                if len(data) < want <= len(out.data) - p.offset:
                    end = i + 1
                    while (
                        end < len(pieces)
                        and end - i < 64
                        and pieces[end].offset + pieces[end].size - p.offset < want
                    ):
                        end += 1
                    if end < len(pieces):
                        last = pieces[end]
                        joined = bytes(out.data[p.offset : last.offset + last.size])
                        yield Blob(
                            joined,
                            fmt + "s, continued",
                            tuple(
                                Piece(
                                    q.line,
                                    q.col,
                                    q.end_line,
                                    q.end_col,
                                    q.offset - p.offset,
                                    q.size,
                                    q.what,
                                )
                                for q in pieces[i : end + 1]
                            ),
                        )


@dataclass
class _Row:
    line: int
    start: int  # text positions of the bytes
    end: int
    data: bytes
    offset: int | None  # a dump row's offset; None: a plain hex line


def _line_regions(src: _Source):
    """Dump rows and hex lines, behind whatever prefix each line has, grouped into runs."""
    rows: list[_Row] = []
    blank_before: set[int] = set()  # rows with an empty line before them
    blank = False
    words: list[_Row] = []  # long hex words inside other lines
    for number, (pos, line) in enumerate(src.lines(), 1):
        if len(rows) >= _MAX_ROWS:
            break
        row = _row(pos, line, number)
        if row is None:
            blank = blank or not line.strip() or line.strip().endswith("]")
            if len(words) < _MAX_PIECES:
                words.extend(islice(_hex_words(pos, line, number), _MAX_PIECES - len(words)))
            continue
        if blank:
            blank_before.add(len(rows))
        blank = False
        rows.append(row)
    # dump rows whose offsets follow each other: a block; blocks in a row: joined
    blocks: list[list[_Row]] = []
    for r in rows:
        if r.offset is None:
            continue
        last = blocks[-1][-1] if blocks else None
        if (
            last is not None
            and r.offset != 0
            and last.offset is not None
            and r.offset == last.offset + len(last.data)
        ):
            blocks[-1].append(r)
        else:
            blocks.append([r])
    real = [b for b in blocks if len(b) > 1 or b[0].offset == 0]
    if len(real) > 1:
        yield _rows_blob(src, [r for b in real for r in b], "hex dumps, joined")
    for b in real[:_MAX_PIECES]:
        yield _rows_blob(src, b, "hex dump")
    # plain hex lines: runs (prose and comment lines between are left out), paragraphs,
    # and long single lines
    for r in words[:_MAX_PIECES]:
        yield _rows_blob(src, [r], "a hex word in a line")
    plain = [(i, r) for i, r in enumerate(rows) if r.offset is None]
    if not plain:
        return
    yield _rows_blob(src, [r for _, r in plain], "hex lines")
    cuts = [k for k, (i, _) in enumerate(plain) if k and i in blank_before][:_MAX_PIECES]
    if cuts:  # paragraphs, when there are several
        for lo, hi in zip([0] + cuts, cuts + [len(plain)]):
            yield _rows_blob(src, [r for _, r in plain[lo:hi]], "hex lines")
    for _, r in plain[:_MAX_PIECES]:
        if len(r.data) >= 12:
            yield _rows_blob(src, [r], "a hex line")


def _rows_blob(src: _Source, rows: list[_Row], fmt: str) -> Blob:
    """The rows' bytes, one piece per block of adjacent lines (the rows know their line:
    no search for it)."""
    data = b"".join(r.data for r in rows)
    pieces: list[Piece] = []
    done = 0
    for r in rows:
        col = r.start - src.starts[r.line - 1] + 1
        end_col = max(r.end - 1, r.start) - src.starts[r.line - 1] + 1
        last = pieces[-1] if pieces else None
        if last is not None and last.end_line + 1 >= r.line:
            pieces[-1] = Piece(
                last.line, last.col, r.line, end_col, last.offset, last.size + len(r.data), fmt
            )
        else:
            pieces.append(Piece(r.line, col, r.line, end_col, done, len(r.data), fmt))
        done += len(r.data)
    return Blob(data, fmt, tuple(pieces))


_PREFIX_ENDS = ("] ", "> ", "$ ", ": ", "| ", "\t", "// ", "# ", "-- ", "% ", "* ")


def _row(pos: int, line: str, number: int) -> _Row | None:
    """The bytes of a line that is a dump row or a line of hex, after any prefix (a log
    tag, a prompt, a label) and before any comment; None for other lines."""
    if len(line) > 100_000:
        return None
    starts = [0]
    head = line[:120]
    for mark in _PREFIX_ENDS:
        if mark in head:
            starts.append(head.rfind(mark) + len(mark))
    for start in sorted(set(starts)):
        rest = line[start:]
        first = rest.lstrip(" \t")[:1]
        if not first or (first not in _HEXCHARS and first != "\\"):
            continue  # fast: prose starts with other letters
        body = rest
        for comment in ("  #", "\t#", " //", "  --"):
            k = body.find(comment)
            if k > 0:
                body = body[:k]
        if "|" in body[:14]:  # `0000 | 00 01 ... | ascii` tables
            body = body.replace("|", " ")
        dump = _dump_line(body)
        if dump is not None:
            data, end, _ = _columns(body, dump[1])
            if data and dump[2] >= 4:
                return _Row(number, pos + start + dump[1], pos + start + end, data, dump[0])
        row = _hex_row(body)
        if row is not None:
            lead = len(body) - len(body.lstrip())
            return _Row(number, pos + start + lead, pos + start + len(body.rstrip()), row, None)
    return None


_HEX_WORD = re.compile(r"[0-9a-fA-F]{16,}+")


def _hex_words(pos: int, line: str, number: int):
    """Words of 16 hex digits or more in a line of other text (a shell command's
    argument, a log field): each may be a message."""
    n = len(line)
    for m in _HEX_WORD.finditer(line):  # a run of one class: each start scans < 16
        i, j = m.span()
        if (
            (j - i) % 2 == 0
            and (i == 0 or not line[i - 1].isalnum())
            and (j == n or not line[j].isalnum())
        ):
            yield _Row(number, pos + i, pos + j, bytes.fromhex(line[i:j]), None)


def _hex_row(body: str) -> bytes | None:
    """The bytes of a line of hex (spaced, colons, 0x, \\x; at least 1 byte), else None."""
    text = body.strip()
    if not text:
        return None
    if _BARE_HEX.issuperset(text):  # the common case, without a char loop
        words = text.replace(":", " ").replace("-", " ").split()
        if not words or any(len(w) % 2 for w in words):
            return None
        return bytes.fromhex("".join(words))
    if "0x" not in text and "0X" not in text and "\\x" not in text:
        return None
    digits, end = _hex_chars(text)
    if isinstance(end, str) or not digits or len(digits) % 2:
        return None
    words = text.replace(":", " ").replace("-", " ").split()
    if any(len(w) % 2 for w in words if _is_hex(w)):
        return None  # 'add', 'be a': words, not bytes
    return bytes.fromhex(digits)
