"""Avro binary straight to JSON-ready values, for JSON lines: a reader generated once per
schema (as protocol/values.py does for Kafka's layouts), with the JSON forms of
values_schema.json_value (decimals as strings, times in ISO 8601, UUIDs as text, bytes as
base64). Any oddity raises, and the caller takes the located decoder."""

from __future__ import annotations

import base64
import re
import struct
from datetime import date, datetime, timedelta, timezone
from decimal import Context
from typing import Any, Callable

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LOCAL = datetime(1970, 1, 1)
_DAY0 = date(1970, 1, 1)
_F = struct.Struct("<f").unpack_from
_D = struct.Struct("<d").unpack_from


def _long(b: bytes, p: int) -> tuple[int, int]:
    n = b[p]
    if n < 128:
        return (n >> 1) ^ -(n & 1), p + 1
    value, shift = n & 127, 7
    for i in range(1, 10):
        n = b[p + i]
        value |= (n & 127) << shift
        if n < 128:
            return (value >> 1) ^ -(value & 1), p + i + 1
        shift += 7
    raise ValueError("varint too long")


def _bytes(b: bytes, p: int) -> tuple[bytes, int]:
    n, p = _long(b, p)
    if n < 0 or p + n > len(b):
        raise ValueError("length past the end")
    return b[p:p + n], p + n


_CALL = re.compile(r"^( *)(\w+), p = _long\(b, p\)$", re.M)


def _inline(source: str) -> str:
    """One-byte varints (nearly all of them) read inline, without a call."""
    return _CALL.sub(lambda m: (f"{m[1]}{m[2]} = b[p]\n{m[1]}if {m[2]} < 128:\n"
                                f"{m[1]}    {m[2]} = ({m[2]} >> 1) ^ -({m[2]} & 1); p += 1\n"
                                f"{m[1]}else:\n{m[1]}    {m[2]}, p = _long(b, p)"), source)


class Unsupported(Exception):
    pass


def compile_reader(schema: Any, named: dict[str, Any]) -> Callable[[bytes, int, list], tuple[Any, int]]:
    """``read(buf, pos, tally) -> (value, pos)``; raises Unsupported at compile time for
    what it does not generate."""
    lines: list[str] = []
    funcs: dict[str, str] = {}
    counter = [0]

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def emit(s: Any, target: str, ind: str, out: list[str]) -> None:
        if isinstance(s, str) and s in named:
            s = named[s]
        if isinstance(s, str):
            s = {"type": s}
        if isinstance(s, list):
            i = fresh("u")
            out.append(f"{ind}{i}, p = _long(b, p)")
            for k, branch in enumerate(s):
                out.append(f"{ind}{'if' if k == 0 else 'elif'} {i} == {k}:")
                emit(branch, target, ind + "    ", out)
            out.append(f"{ind}else:\n{ind}    raise ValueError('union index')")
            return
        kind, logical = s["type"], s.get("logicalType")
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in named):
            emit(kind, target, ind, out)
            return
        out.append(f"{ind}t[0] += 1")
        if kind in ("record", "error"):
            name = s["name"]
            fn = "rec_" + "".join(ch if ch.isalnum() else "_" for ch in name)
            if fn not in funcs:
                funcs[fn] = ""
                body = [f"def {fn}(b, p, t):", "    d = {}"]
                for f in s["fields"]:
                    v = fresh("v")
                    emit(f["type"], v, "    ", body)
                    body.append(f"    d[{f['name']!r}] = {v}")
                body.append("    return d, p")
                funcs[fn] = "\n".join(body)
            out.append(f"{ind}{target}, p = {fn}(b, p, t)")
        elif kind == "null":
            out.append(f"{ind}{target} = None")
        elif kind == "boolean":
            out.append(f"{ind}{target} = b[p]; p += 1")
            out.append(f"{ind}if {target} > 1: raise ValueError('bool')")
            out.append(f"{ind}{target} = {target} == 1")
        elif kind in ("int", "long"):
            out.append(f"{ind}{target}, p = _long(b, p)")
            if kind == "int":
                out.append(f"{ind}if not -2147483648 <= {target} < 2147483648: raise ValueError('int')")
            conv = {"timestamp-millis": "(_EPOCH + timedelta(milliseconds={x})).isoformat()",
                    "timestamp-micros": "(_EPOCH + timedelta(microseconds={x})).isoformat()",
                    "local-timestamp-millis": "(_LOCAL + timedelta(milliseconds={x})).isoformat()",
                    "local-timestamp-micros": "(_LOCAL + timedelta(microseconds={x})).isoformat()",
                    "date": "(_DAY0 + timedelta(days={x})).isoformat()",
                    "time-millis": "(datetime.min + timedelta(milliseconds={x})).time().isoformat()",
                    "time-micros": "(datetime.min + timedelta(microseconds={x})).time().isoformat()",
                    }.get(logical)
            if conv:
                out.append(f"{ind}{target} = " + conv.format(x=target))
        elif kind == "float":
            out.append(f"{ind}{target} = _F(b, p)[0]; p += 4")
        elif kind == "double":
            out.append(f"{ind}{target} = _D(b, p)[0]; p += 8")
        elif kind in ("bytes", "string", "fixed"):
            if kind == "fixed":
                out.append(f"{ind}{target} = b[p:p + {s['size']}]; p += {s['size']}")
                out.append(f"{ind}if p > len(b): raise ValueError('fixed')")
            else:
                out.append(f"{ind}{target}, p = _bytes(b, p)")
            if logical == "decimal":
                ctx = fresh("ctx")
                funcs[ctx] = f"{ctx} = Context(prec={s.get('precision', 28)})"
                out.append(f"{ind}{target} = str({ctx}.create_decimal(int.from_bytes("
                           f"{target}, 'big', signed=True)).scaleb({-s.get('scale', 0)}, {ctx}))")
            elif kind == "string":
                out.append(f"{ind}{target} = {target}.decode()")
                if logical == "uuid":
                    out.append(f"{ind}{target} = str(_UUID({target}))")
            else:
                out.append(f"{ind}{target} = base64.b64encode({target}).decode('ascii')")
        elif kind == "enum":
            syms = fresh("syms")
            funcs[syms] = f"{syms} = {tuple(s['symbols'])!r}"
            out.append(f"{ind}{target}, p = _long(b, p)")
            out.append(f"{ind}if {target} < 0: raise ValueError('enum')")
            out.append(f"{ind}{target} = {syms}[{target}]")
        elif kind in ("array", "map"):
            n, item = fresh("n"), fresh("i")
            out.append(f"{ind}{target} = {'[]' if kind == 'array' else '{}'}")
            out.append(f"{ind}while True:")
            out.append(f"{ind}    {n}, p = _long(b, p)")
            out.append(f"{ind}    if {n} == 0: break")
            out.append(f"{ind}    if {n} < 0:\n{ind}        {n} = -{n}\n{ind}        _, p = _long(b, p)")
            out.append(f"{ind}    for _ in range({n}):")
            if kind == "map":
                key = fresh("k")
                out.append(f"{ind}        {key}, p = _bytes(b, p)")
                emit(s["values"], item, ind + "        ", out)
                out.append(f"{ind}        {target}[{key}.decode()] = {item}")
            else:
                emit(s["items"], item, ind + "        ", out)
                out.append(f"{ind}        {target}.append({item})")
        else:
            raise Unsupported(kind)

    top: list[str] = ["def read(b, p, t):"]
    emit(schema, "v", "    ", top)
    top.append("    return v, p")
    source = _inline("\n\n".join([*funcs.values(), "\n".join(top)]))
    from uuid import UUID
    scope: dict[str, Any] = {"_long": _long, "_bytes": _bytes, "_F": _F, "_D": _D, "_EPOCH": _EPOCH,
             "_LOCAL": _LOCAL, "_DAY0": _DAY0, "timedelta": timedelta, "datetime": datetime,
             "Context": Context, "base64": base64, "_UUID": UUID}
    exec(compile(source, "<avro reader>", "exec"), scope)
    return scope["read"]
