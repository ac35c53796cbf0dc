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
use pyo3::types::{PyBytes, PyString};
use std::cell::RefCell;
use std::io::Write;

use crate::record_walk::{bytes_of, walk, Records, HEX};

thread_local! {
    /// The output buffer, kept between calls: a fresh one per batch costs a page fault
    /// per 4 KiB written (the allocator maps big blocks anew each time).
    static OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}
/// Capacity kept after a call (more is freed: memory stays bounded by one batch).
const KEEP: usize = 16 << 20;

/// `f` writing into the kept buffer (cleared), then the text made a Python str.
fn text_of(
    py: Python<'_>,
    f: impl FnOnce(&mut Vec<u8>) -> PyResult<bool>,
) -> PyResult<Option<Py<PyString>>> {
    OUT.with(|cell| {
        let mut fresh = Vec::new();
        let mut kept = cell.try_borrow_mut();
        let out = match kept.as_mut() {
            Ok(v) => &mut **v,
            Err(_) => &mut fresh,
        };
        out.clear();
        let got = if f(out)? {
            // only ASCII was written
            Some(PyString::new(py, unsafe { std::str::from_utf8_unchecked(out) }).unbind())
        } else {
            None
        };
        if out.capacity() > KEEP {
            *out = Vec::new();
        }
        Ok(got)
    })
}

/// `s` as a JSON string the way Python's `json` writes it with `ensure_ascii`: `\"`,
/// `\\`, `\b \f \n \r \t`, other controls and everything past `~` as `\uXXXX` (lowercase
/// hex, surrogate pairs above the BMP).
pub(crate) fn push_json_str(out: &mut Vec<u8>, s: &str) {
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
    out.reserve(2 * b.len() + 2);
    for &c in b {
        out.extend_from_slice(&[HEX[(c >> 4) as usize], HEX[(c & 0xf) as usize]]);
    }
    out.extend_from_slice(b"\"}");
}

/// A decimal integer (i128: a 10-byte varint delta plus an int64 goes past i64).
#[inline]
pub(crate) fn push_int(out: &mut Vec<u8>, v: i128) {
    if v < 0 {
        out.push(b'-');
    }
    let n = v.unsigned_abs();
    if n > u64::MAX as u128 {
        let _ = write!(out, "{n}");
        return;
    }
    let mut buf = [b'0'; 20];
    let at = decimal(n as u64, &mut buf);
    out.extend_from_slice(&buf[at..]);
}

/// `m`'s decimal digits at the end of `buf`; where they start (the bytes before are
/// left as they were: a caller that filled `buf` with '0' pads with them).
#[inline]
pub(crate) fn decimal(mut m: u64, buf: &mut [u8; 20]) -> usize {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            return at;
        }
    }
}

/// What a byte asks of the JSON text: 0 itself, 1 an escape (`"`, `\\`, tab, line
/// breaks), 2 a control character (not printable: the bytes become hex), 3 non-ASCII.
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i >= 0x80 {
            3
        } else if i == b'"' as usize || i == b'\\' as usize || i == 9 || i == 10 || i == 13 {
            1
        } else if i < 0x20 || i == 0x7f {
            2
        } else {
            0
        };
        i += 1;
    }
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether the 8 bytes of `w` are all printable ASCII other than `"` and `\\`.
#[inline]
fn plain8(w: u64) -> bool {
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let low = w.wrapping_sub(ONES * 0x20) & !w & HIGHS; // a byte below 0x20
    let high = (w.wrapping_add(ONES) | w) & HIGHS; // 0x7f and above
    (low | high | has_zero(w ^ (ONES * b'"' as u64)) | has_zero(w ^ (ONES * b'\\' as u64))) == 0
}

/// `render.records.json_bytes`: text when the bytes are UTF-8 whose every character is
/// printable (Python's `str.isprintable`) or a tab or line break, else `{"hex": ...}`.
/// ASCII is judged (and escaped) here in one pass; a value with non-ASCII characters is
/// judged again with Python's own `isprintable` on those characters.
pub(crate) fn push_bytes(py: Python<'_>, out: &mut Vec<u8>, b: &[u8]) -> PyResult<()> {
    let mark = out.len();
    out.push(b'"');
    let mut run = 0;
    let mut i = 0;
    while i < b.len() {
        if i + 8 <= b.len() {
            let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
            if plain8(w) {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        match CLASS[c as usize] {
            0 => {
                i += 1;
                continue;
            }
            1 => {
                out.extend_from_slice(&b[run..i]);
                out.extend_from_slice(match c {
                    b'"' => b"\\\"",
                    b'\\' => b"\\\\",
                    b'\n' => b"\\n",
                    b'\r' => b"\\r",
                    _ => b"\\t",
                });
                i += 1;
                run = i;
            }
            2 => {
                out.truncate(mark);
                push_hex(out, b);
                return Ok(());
            }
            _ => {
                out.truncate(mark);
                return push_wide(py, out, b);
            }
        }
    }
    out.extend_from_slice(&b[run..]);
    out.push(b'"');
    Ok(())
}

/// `push_bytes` for bytes with a non-ASCII byte.
fn push_wide(py: Python<'_>, out: &mut Vec<u8>, b: &[u8]) -> PyResult<()> {
    let s = match std::str::from_utf8(b) {
        Ok(s) if !s.bytes().any(|c| CLASS[c as usize] == 2) => s,
        _ => {
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

fn push_nullable(py: Python<'_>, out: &mut Vec<u8>, b: Option<&[u8]>) -> PyResult<()> {
    match b {
        None => out.extend_from_slice(b"null"),
        Some(b) => push_bytes(py, out, b)?,
    }
    Ok(())
}

/// The lines, or Ok(false) at the first thing the Python reference must judge. `list`:
/// the records as one JSON array instead (`[{"offset": ...}, ...]`, what `json.dumps`
/// makes of the values decoder's list: `kdissect pcap --format jsonl`'s batches).
pub(crate) fn lines(
    py: Python<'_>,
    out: &mut Vec<u8>,
    d: &[u8],
    at: &Records,
    list: bool,
) -> PyResult<bool> {
    out.reserve((at.end - at.pos) + (at.end - at.pos) / 4 + 64);
    if list {
        out.push(b'[');
    }
    let mut first = true;
    let whole = walk(d, at, |r| {
        if !list {
            push_int(out, r.start as i128);
            out.extend_from_slice(b", \"offset\": ");
        } else {
            out.extend_from_slice(if first {
                b"{\"offset\": "
            } else {
                b", {\"offset\": "
            });
        }
        first = false;
        push_int(out, r.offset);
        out.extend_from_slice(b", \"timestamp\": ");
        push_int(out, r.timestamp);
        out.extend_from_slice(b", \"key\": ");
        push_nullable(py, out, r.key)?;
        out.extend_from_slice(b", \"value\": ");
        push_nullable(py, out, r.value)?;
        out.extend_from_slice(b", \"headers\": [");
        for (j, &(hkey, hvalue)) in r.headers.iter().enumerate() {
            if j > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(b"{\"key\": ");
            match hkey {
                None => out.extend_from_slice(b"null"),
                Some(k) => match std::str::from_utf8(k) {
                    Ok(s) => push_json_str(out, s),
                    Err(_) => return Ok(false), // not UTF-8: the tree says so on the key
                },
            }
            out.extend_from_slice(b", \"value\": ");
            push_nullable(py, out, hvalue)?;
            out.push(b'}');
        }
        out.extend_from_slice(if list { b"]}" } else { b"]}\n" });
        Ok(true)
    })?;
    if list {
        out.push(b']');
    }
    Ok(whole)
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
    records_text(py, data, pos, end, count, base, ts0, fixed_ts, false)
}

/// The records of `data[pos:end]` as lines (`list` false) or as the JSON text of their
/// list (`list` true: jsonrec.rs); None when the Python reference must decide.
#[allow(clippy::too_many_arguments)]
pub(crate) fn records_text(
    py: Python<'_>,
    data: PyBuffer<u8>,
    pos: usize,
    end: usize,
    count: i64,
    base: i64,
    ts0: i64,
    fixed_ts: bool,
    list: bool,
) -> PyResult<Option<Py<PyString>>> {
    // Safety: `data` is held (and read only) for this call
    let Some(d) = (unsafe { bytes_of(&data, pos, end) }) else {
        return Ok(None);
    };
    let at = Records {
        pos,
        end,
        count,
        base_offset: base,
        base_timestamp: ts0,
        fixed_timestamp: fixed_ts,
    };
    text_of(py, |out| lines(py, out, d, &at, list))
}

/// The first newline at or after `from` (8 bytes at a time).
#[inline]
fn newline(b: &[u8], mut from: usize) -> Option<usize> {
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    while from + 8 <= b.len() {
        let w = u64::from_le_bytes(b[from..from + 8].try_into().unwrap());
        if has_zero(w ^ (ONES * b'\n' as u64)) != 0 {
            break;
        }
        from += 8;
    }
    b[from..].iter().position(|&c| c == b'\n').map(|i| from + i)
}

/// `render.log_lines.prefixed_py`: `prefix` in front of each line of `lines` (each
/// ending in a newline), as UTF-8 bytes written straight into the bytes object.
#[pyfunction]
pub fn log_prefix_lines<'py>(
    py: Python<'py>,
    prefix: &str,
    lines: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let b = lines.as_bytes();
    let p = prefix.as_bytes();
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = newline(b, at) {
        n += 1;
        at = i + 1;
    }
    let tail = at < b.len(); // a last line without its newline: prefixed too
    let size = b.len() + (n + tail as usize) * p.len();
    PyBytes::new_with(py, size, |buf: &mut [u8]| {
        let (mut from, mut to) = (0, 0);
        while from < b.len() {
            let stop = newline(b, from).map_or(b.len(), |i| i + 1);
            buf[to..to + p.len()].copy_from_slice(p);
            to += p.len();
            buf[to..to + stop - from].copy_from_slice(&b[from..stop]);
            to += stop - from;
            from = stop;
        }
        Ok(())
    })
}
