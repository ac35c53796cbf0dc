//! `kdissect log --format jsonl`'s record lines in one call per batch: the records of a
//! clean v2 batch (already CRC-checked and decompressed by Python) straight to JSON text.
//!
//! The reference is Python: `kdissect/render/log_lines.py`'s `record_lines_py` (the values
//! decoder's record loop, `render.records.json_bytes`, the `json` module). This code
//! returns either exactly the text that function returns, or None when it cannot be
//! sure (any oddity in the bytes, a header key that is not UTF-8): the caller then runs
//! the Python reference, which decides. tests/test_log_lines.py and the fuzz target
//! `logjson` compare the two.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::io::Write;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// An unsigned LEB128 varint of at most `max` bytes at `*p`, all before `end` (Python's
/// `reader.uvarint`: longer is an error, as is running past the end).
#[inline]
fn uvarint(d: &[u8], p: &mut usize, end: usize, max: usize) -> Option<u128> {
    let mut value: u128 = 0;
    for i in 0..max {
        if *p >= end {
            return None;
        }
        let b = d[*p];
        *p += 1;
        value |= ((b & 0x7f) as u128) << (7 * i);
        if b < 0x80 {
            return Some(value);
        }
    }
    None
}

#[inline]
fn zigzag(n: u128) -> i128 {
    ((n >> 1) as i128) ^ -((n & 1) as i128)
}

#[inline]
fn varint(d: &[u8], p: &mut usize, end: usize, max: usize) -> Option<i128> {
    uvarint(d, p, end, max).map(zigzag)
}

/// `s` as a JSON string the way Python's `json` writes it with `ensure_ascii`: `\"`,
/// `\\`, `\b \f \n \r \t`, other controls and everything past `~` as `\uXXXX` (lowercase
/// hex, surrogate pairs above the BMP).
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\' {
            i += 1;
            continue;
        }
        out.extend_from_slice(&b[run..i]);
        if c < 0x80 {
            match c {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                _ => push_u(out, c as u32),
            }
            i += 1;
        } else {
            // s is a str: a whole char starts here
            let ch = s[i..].chars().next().unwrap_or('\u{fffd}');
            let cp = ch as u32;
            if cp >= 0x10000 {
                let v = cp - 0x10000;
                push_u(out, 0xd800 | (v >> 10));
                push_u(out, 0xdc00 | (v & 0x3ff));
            } else {
                push_u(out, cp);
            }
            i += ch.len_utf8();
        }
        run = i;
    }
    out.extend_from_slice(&b[run..]);
    out.push(b'"');
}

#[inline]
fn push_u(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((v >> shift) & 0xf) as usize]);
    }
}

fn push_hex(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b"{\"hex\": \"");
    out.reserve(2 * b.len());
    for &c in b {
        out.push(HEX[(c >> 4) as usize]);
        out.push(HEX[(c & 0xf) as usize]);
    }
    out.extend_from_slice(b"\"}");
}

/// `render.records.json_bytes`: text when the bytes are UTF-8 whose every character is
/// printable (Python's `str.isprintable`) or a tab or line break, else `{"hex": ...}`.
/// ASCII is judged here; the non-ASCII characters, if any, by Python itself.
fn push_bytes(py: Python<'_>, out: &mut Vec<u8>, b: &[u8]) -> PyResult<()> {
    let mut wide = false;
    for &c in b {
        if c >= 0x80 {
            wide = true;
        } else if !(0x20..0x7f).contains(&c) && c != b'\t' && c != b'\n' && c != b'\r' {
            push_hex(out, b); // a control character: not printable, whatever follows
            return Ok(());
        }
    }
    if !wide {
        push_json_str(out, unsafe { std::str::from_utf8_unchecked(b) });
        return Ok(());
    }
    let s = match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(_) => {
            push_hex(out, b);
            return Ok(());
        }
    };
    let others: String = s.chars().filter(|c| !c.is_ascii()).collect();
    let printable: bool = PyString::new(py, &others)
        .call_method0("isprintable")?
        .extract()?;
    if printable {
        push_json_str(out, s);
    } else {
        push_hex(out, b);
    }
    Ok(())
}

/// Nullable bytes (zigzag varint length, -1 for null) at `*p`, ending by `rec_end`.
#[inline]
fn nullable<'a>(d: &'a [u8], p: &mut usize, rec_end: usize) -> Option<Option<&'a [u8]>> {
    let size = varint(d, p, rec_end, 5)?;
    if size < 0 {
        return if size == -1 { Some(None) } else { None };
    }
    let q = p.checked_add(usize::try_from(size).ok()?)?;
    if q > rec_end {
        return None;
    }
    let got = &d[*p..q];
    *p = q;
    Some(Some(got))
}

fn push_nullable(py: Python<'_>, out: &mut Vec<u8>, b: Option<&[u8]>) -> PyResult<()> {
    match b {
        None => out.extend_from_slice(b"null"),
        Some(b) => push_bytes(py, out, b)?,
    }
    Ok(())
}

/// The lines, or Ok(None) at the first thing the Python reference must judge.
fn lines(
    py: Python<'_>,
    d: &[u8],
    mut pos: usize,
    end: usize,
    count: i64,
    base: i64,
    ts0: i64,
    fixed_ts: bool,
) -> PyResult<Option<Vec<u8>>> {
    let mut out: Vec<u8> = Vec::with_capacity((end - pos) + (end - pos) / 4 + 64);
    for _ in 0..count {
        let start = pos;
        let mut p = pos;
        let Some(length) = varint(d, &mut p, end, 5) else { return Ok(None) };
        if length < 1 || length > (end - p) as i128 {
            return Ok(None);
        }
        let rec_end = p + length as usize;
        p += 1; // attributes
        let Some(ts_delta) = varint(d, &mut p, rec_end, 10) else { return Ok(None) };
        let ts = if fixed_ts { ts0 as i128 } else { ts0 as i128 + ts_delta };
        let Some(off_delta) = varint(d, &mut p, rec_end, 5) else { return Ok(None) };
        let offset = base as i128 + off_delta;
        let Some(key) = nullable(d, &mut p, rec_end) else { return Ok(None) };
        let Some(value) = nullable(d, &mut p, rec_end) else { return Ok(None) };
        let Some(nh) = varint(d, &mut p, rec_end, 5) else { return Ok(None) };
        if nh < 0 || nh > (rec_end - p) as i128 {
            return Ok(None);
        }
        let _ = write!(out, "{start}, \"offset\": {offset}, \"timestamp\": {ts}, \"key\": ");
        push_nullable(py, &mut out, key)?;
        out.extend_from_slice(b", \"value\": ");
        push_nullable(py, &mut out, value)?;
        out.extend_from_slice(b", \"headers\": [");
        for j in 0..nh {
            if j > 0 {
                out.extend_from_slice(b", ");
            }
            let Some(hkey) = nullable(d, &mut p, rec_end) else { return Ok(None) };
            out.extend_from_slice(b"{\"key\": ");
            match hkey {
                None => out.extend_from_slice(b"null"),
                Some(k) => match std::str::from_utf8(k) {
                    Ok(s) => push_json_str(&mut out, s),
                    Err(_) => return Ok(None), // decoded with U+FFFD by Python
                },
            }
            let Some(hvalue) = nullable(d, &mut p, rec_end) else { return Ok(None) };
            out.extend_from_slice(b", \"value\": ");
            push_nullable(py, &mut out, hvalue)?;
            out.push(b'}');
        }
        if p != rec_end {
            return Ok(None);
        }
        out.extend_from_slice(b"]}\n");
        pos = rec_end;
    }
    Ok(if pos == end { Some(out) } else { None })
}

/// `render.log_lines.record_lines_py` for the `count` records of a v2 batch in
/// `data[pos:end]` (a bytes object or the segment's map): one line per record,
/// `POSITION, "offset": ...}` (the record's JSON object after the shared prefix); None
/// when the Python reference must decide.
#[pyfunction]
#[pyo3(signature = (data, pos, end, count, base, ts0, fixed_ts))]
#[allow(clippy::too_many_arguments)]
pub fn log_record_lines(
    py: Python<'_>,
    data: PyBuffer<u8>,
    pos: usize,
    end: usize,
    count: i64,
    base: i64,
    ts0: i64,
    fixed_ts: bool,
) -> PyResult<Option<Py<PyString>>> {
    if !data.is_c_contiguous() || end > data.len_bytes() || pos > end {
        return Ok(None);
    }
    // Safety: a contiguous buffer of len_bytes bytes, held (and read only) for this call
    let d = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
    Ok(lines(py, d, pos, end, count, base, ts0, fixed_ts)?.map(|out| {
        // only ASCII was written
        PyString::new(py, unsafe { std::str::from_utf8_unchecked(&out) }).unbind()
    }))
}
