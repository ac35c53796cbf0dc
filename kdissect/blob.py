"""Pasted text -> bytes. Recognises the shapes bytes take in debugging sessions:
hex (plain, spaced, colon-separated, 0x-prefixed), hex dumps (xxd, hexdump -C,
od -A x -t x1z, Wireshark "copy as hex dump", tcpdump -X), Erlang binaries, Python
bytes literals and bytes([...]), Java/C/JS byte arrays (signed or not) and base64."""

from __future__ import annotations

import ast
import base64
import binascii
import re
from dataclasses import dataclass


class BlobError(ValueError):
    pass


@dataclass(frozen=True)
class Blob:
    data: bytes
    format: str


_EXPECTED = ("expected hex ('00 00 00 03 ...', '0x0000...'), a hex dump (xxd, hexdump -C, "
             "od -A x -t x1z, Wireshark, tcpdump -X), an Erlang binary <<0,0,...>>, a Python "
             "b'\\x00...' literal or bytes([...]), a byte array {0, 0, -1, ...}, or base64")


_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def parse_blob(text: str | bytes) -> Blob:
    """Detect the format of ``text`` and return its bytes; BlobError says what was expected."""
    if isinstance(text, (bytes, bytearray)):
        text = _as_text(bytes(text))
        if isinstance(text, Blob):
            return text
    s = text.lstrip("\ufeff").strip()      # a byte-order mark an editor left in front
    if not s:
        raise BlobError("no input: " + _EXPECTED)
    for fmt, parser in _PARSERS:
        try:
            data = parser(s)
        except BlobError:
            raise
        except (RecursionError, MemoryError):
            raise BlobError(f"the input looks like {fmt} but is nested too deeply to read; "
                            f"paste the bytes as hex instead") from None
        except (ValueError, SyntaxError, binascii.Error, TypeError, OverflowError):
            data = None
        if data is not None:
            return Blob(data, fmt)
    raise BlobError("could not read the input as bytes: " + _EXPECTED)


def _as_text(raw: bytes) -> str | Blob:
    """Text (after a byte-order mark, UTF-8 or UTF-16 as it says), or raw binary."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return raw[len(bom):].decode(encoding)
            except UnicodeDecodeError:
                break
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Blob(raw, "raw binary")


def _erlang(s: str) -> bytes | None:
    if not (s.startswith("<<") and s.endswith(">>")):
        return None
    body = s[2:-2].strip()
    out = bytearray()
    # items: integers, "strings", and Int:Size segments of 8 bits
    for m in re.finditer(r'\s*("(?:[^"\\]|\\.)*"|-?\d+(?::8)?)\s*(?:,|$)', body):
        item = m.group(1)
        if item.startswith('"'):
            out += ast.literal_eval(item).encode("latin-1")
        else:
            out.append(int(item.split(":")[0]) & 0xFF)
    rebuilt = re.sub(r'\s*("(?:[^"\\]|\\.)*"|-?\d+(?::8)?)\s*(?:,|$)', "", body)
    if rebuilt.strip():
        raise BlobError(f"unexpected text in Erlang binary: {rebuilt.strip()[:40]!r}; "
                        f"expected integers 0-255 or \"strings\" separated by commas")
    return bytes(out)


def _python(s: str) -> bytes | None:
    m = re.fullmatch(r"(?:bytes|bytearray)\(\s*(\[.*\])\s*\)", s, re.S)
    if m:
        return _int_list(ast.literal_eval(m.group(1)))
    if not re.match(r"^\(?\s*[bB][rR]?['\"]", s):
        return None
    inner = s[1:-1] if s.startswith("(") and s.endswith(")") else s
    value = ast.literal_eval(inner)           # adjacent literals concatenate
    if not isinstance(value, bytes):
        return None
    return value


def _int_list(items) -> bytes:
    out = bytearray()
    for v in items:
        if not isinstance(v, int) or not -128 <= v <= 255:
            raise BlobError(f"{v!r} is not a byte value (expected -128..255)")
        out.append(v & 0xFF)
    return bytes(out)


def _array(s: str) -> bytes | None:
    m = re.fullmatch(r"(?:new\s+byte\s*\[\s*\]\s*|(?:unsigned\s+)?char\s+\w+\s*\[\s*\d*\s*\]\s*=\s*"
                     r"|(?:byte|uint8_t|int8_t)\s*\[\s*\]\s*\w*\s*=\s*)?"
                     r"[\[{]([-\d\sxXa-fA-F,()byte]*)[\]}]\s*;?", s, re.S)
    if not m:
        return None
    tokens = [t.strip() for t in m.group(1).split(",") if t.strip()]
    if not tokens:
        return None
    values = []
    for t in tokens:
        t = re.sub(r"^\(byte\)\s*", "", t)
        values.append(int(t, 16) if t.lower().startswith(("0x", "-0x")) else int(t))
    return _int_list(values)       # signed (-128..-1) or not: & 0xFF either way


_OFFSET = re.compile(r"^\s*(?:0x)?[0-9a-fA-F]{4,8}(?::\s*|\s+)")


def _hexdump(s: str) -> bytes | None:
    lines = [ln for ln in s.splitlines() if ln.strip()]
    # every line of a dump starts with an offset; od ends with a bare offset line
    if not all(_OFFSET.match(ln) or re.fullmatch(r"\s*[0-9a-fA-F]{4,8}\s*", ln) for ln in lines):
        return None
    if len(lines) == 1 and not re.search(r"\s{2,}|\|", lines[0]):
        return None         # a single line without columns: plain hex, not a dump
    out = bytearray()
    for ln in lines:
        m = _OFFSET.match(ln)
        if not m:
            continue                        # od's final offset line
        rest = ln[m.end():]
        rest = re.sub(r"\s*(\|.*\||>.*<)\s*$", "", rest)      # hexdump -C, od ascii columns
        groups = rest.split()
        width = len(groups[0]) if groups else 0
        # xxd / tcpdump -X use 4-digit groups and a 2-space gap before ascii;
        # Wireshark / hexdump use 2-digit bytes, 2 spaces mid-line, 3+ before ascii
        cut = re.split(r"\s{2,}" if width == 4 else r"\s{3,}", rest.strip(), maxsplit=1)[0]
        for g in cut.split():
            if not re.fullmatch(r"(?:[0-9a-fA-F]{2})+", g) or len(g) > 8:
                break
            out += bytes.fromhex(g)
    return bytes(out) if out else None


def _plain_hex(s: str) -> bytes | None:
    cleaned = re.sub(r"0[xX]", "", s)
    cleaned = re.sub(r"\\x", "", cleaned)
    cleaned = re.sub(r"[\s:,\-]", "", cleaned)
    if not cleaned or not re.fullmatch(r"[0-9a-fA-F]+", cleaned):
        return None
    if len(cleaned) % 2:
        raise BlobError(f"odd number of hex digits ({len(cleaned)}): a digit is missing or extra")
    return bytes.fromhex(cleaned)


def _base64(s: str) -> bytes | None:
    # base64 is wrapped at line ends, never split by spaces ('hello world' is prose);
    # and a Kafka message (8 bytes at least) takes 12 characters or more
    if any(len(line.split()) > 1 for line in s.splitlines()):
        return None
    compact = re.sub(r"\s", "", s)
    if not re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", compact) or len(compact) < 12 \
            or len(compact.rstrip("=")) % 4 == 1:
        return None
    compact = compact.replace("-", "+").replace("_", "/")
    compact += "=" * (-len(compact) % 4)
    return base64.b64decode(compact, validate=True)


_PARSERS = [
    ("erlang binary", _erlang),
    ("python bytes", _python),
    ("byte array", _array),
    ("hex dump", _hexdump),
    ("hex", _plain_hex),
    ("base64", _base64),
]
