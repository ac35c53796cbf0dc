//! The records table's rows (`kdissect pcap --format parquet --records-output`, the Spark
//! job's `records`): the records of a clean v2 batch (CRC-checked and decompressed by
//! Python's values decoder) straight to the per-record columns, without a tree node per
//! field.
//!
//! The reference is Python: `kdissect/stream/rows.py`'s `record_rows` on the located tree
//! (`_record_row`). This returns exactly the columns that makes of each record, or None
//! when it cannot be sure (any oddity in the bytes, a header key that is not UTF-8 or
//! null, an offset past 64 bits): the caller then decodes the whole message located,
//! which decides. tests/test_records_table.py compares the two on every capture, damaged
//! copies and mutated batches.

use pyo3::buffer::PyBuffer;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// rows.ms_micros's bound: timestamps (ms) past 9999-12-31 are null in the tables.
const MAX_TIMESTAMP_MS: i128 = 253_402_300_799_999;
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
fn varint(d: &[u8], p: &mut usize, end: usize, max: usize) -> Option<i128> {
    uvarint(d, p, end, max).map(|n| ((n >> 1) as i128) ^ -((n & 1) as i128))
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

/// rows._text_or_hex: the bytes as text when they are UTF-8 and every character is
/// printable (Python's `str.isprintable`, asked of Python past ASCII), else `0x` + hex.
fn text_or_hex<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    if b.iter().all(|&c| (0x20..0x7f).contains(&c)) {
        // Safety: printable ASCII only
        return Ok(PyString::new(py, unsafe { std::str::from_utf8_unchecked(b) }).into_any());
    }
    if !b.is_ascii() {
        if let Ok(s) = std::str::from_utf8(b) {
            let text = PyString::new(py, s);
            if text.call_method0(intern!(py, "isprintable"))?.is_truthy()? {
                return Ok(text.into_any());
            }
        }
    }
    let mut out = Vec::with_capacity(2 + 2 * b.len());
    out.extend_from_slice(b"0x");
    for &c in b {
        out.push(HEX[(c >> 4) as usize]);
        out.push(HEX[(c & 15) as usize]);
    }
    // Safety: ASCII only
    Ok(PyString::new(py, unsafe { std::str::from_utf8_unchecked(&out) }).into_any())
}

/// The columns of the `count` records of a v2 batch in `d[pos..end]`, appended to `out`,
/// or Ok(false) at the first thing the Python reference must judge.
#[allow(clippy::too_many_arguments)]
fn rows<'py>(
    py: Python<'py>,
    out: &Bound<'py, PyList>,
    d: &[u8],
    mut pos: usize,
    end: usize,
    count: i64,
    base: i64,
    ts0: i64,
    fixed_ts: bool,
) -> PyResult<bool> {
    let (k_key, k_value) = (intern!(py, "key"), intern!(py, "value"));
    for _ in 0..count {
        let mut p = pos;
        let Some(length) = varint(d, &mut p, end, 5) else {
            return Ok(false);
        };
        if length < 1 || length > (end - p) as i128 {
            return Ok(false);
        }
        let rec_end = p + length as usize;
        p += 1; // attributes
        let Some(ts_delta) = varint(d, &mut p, rec_end, 10) else {
            return Ok(false);
        };
        let ts = if fixed_ts {
            ts0 as i128
        } else {
            ts0 as i128 + ts_delta
        };
        let Some(off_delta) = varint(d, &mut p, rec_end, 5) else {
            return Ok(false);
        };
        let Ok(offset) = i64::try_from(base as i128 + off_delta) else {
            return Ok(false);
        };
        let Some(key) = nullable(d, &mut p, rec_end) else {
            return Ok(false);
        };
        let Some(value) = nullable(d, &mut p, rec_end) else {
            return Ok(false);
        };
        let Some(nh) = varint(d, &mut p, rec_end, 5) else {
            return Ok(false);
        };
        if nh < 0 || nh > (rec_end - p) as i128 {
            return Ok(false);
        }
        let headers = PyList::empty(py);
        for _ in 0..nh {
            let Some(Some(hkey)) = nullable(d, &mut p, rec_end) else {
                return Ok(false); // damaged, or a null key: the tree decides
            };
            let Ok(hkey) = std::str::from_utf8(hkey) else {
                return Ok(false); // decoded with U+FFFD by Python
            };
            let Some(hvalue) = nullable(d, &mut p, rec_end) else {
                return Ok(false);
            };
            let h = PyDict::new(py);
            h.set_item(k_key, PyString::new(py, hkey))?;
            match hvalue {
                None => h.set_item(k_value, py.None())?,
                Some(v) => h.set_item(k_value, text_or_hex(py, v)?)?,
            }
            headers.append(h)?;
        }
        if p != rec_end {
            return Ok(false);
        }
        let stamp = if (0..=MAX_TIMESTAMP_MS).contains(&ts) {
            Some((ts * 1000) as i64)
        } else {
            None
        };
        let key = match key {
            None => py.None().into_bound(py),
            Some(k) => text_or_hex(py, k)?,
        };
        let size = value.map(|v| v.len() as i64);
        let row = PyTuple::new(
            py,
            [
                offset.into_pyobject(py)?.into_any(),
                stamp.into_pyobject(py)?.into_any(),
                key,
                size.into_pyobject(py)?.into_any(),
                headers.into_any(),
            ],
        )?;
        out.append(row)?;
        pos = rec_end;
    }
    Ok(pos == end)
}

/// The records table's columns of the `count` records of a v2 batch in `data[pos:end]`:
/// a list of `(offset, timestamp µs or None, key text or hex, value size, headers)`, one
/// per record, what `rows._record_row` makes of them; None when the Python reference
/// must decide.
#[pyfunction]
#[pyo3(signature = (data, pos, end, count, base, ts0, fixed_ts))]
#[allow(clippy::too_many_arguments)]
pub fn record_table_rows<'py>(
    py: Python<'py>,
    data: PyBuffer<u8>,
    pos: usize,
    end: usize,
    count: i64,
    base: i64,
    ts0: i64,
    fixed_ts: bool,
) -> PyResult<Option<Bound<'py, PyList>>> {
    if !data.is_c_contiguous() || end > data.len_bytes() || pos > end || count < 0 {
        return Ok(None);
    }
    // Safety: a contiguous buffer of len_bytes bytes, held (and read only) for this call
    let d = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
    let out = PyList::empty(py);
    if rows(py, &out, d, pos, end, count, base, ts0, fixed_ts)? {
        Ok(Some(out))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_stop_at_the_end_and_at_their_width() {
        let mut p = 0;
        assert_eq!(varint(&[0x02], &mut p, 1, 5), Some(1));
        let mut p = 0;
        assert_eq!(varint(&[0x01], &mut p, 1, 5), Some(-1));
        let mut p = 0;
        assert_eq!(varint(&[0x80], &mut p, 1, 5), None);
        let mut p = 0;
        assert_eq!(varint(&[0xff; 6], &mut p, 6, 5), None);
    }

    #[test]
    fn nullable_reads_null_and_refuses_past_the_record() {
        let mut p = 0;
        assert_eq!(nullable(&[0x01], &mut p, 1), Some(None));
        let mut p = 0;
        assert_eq!(
            nullable(&[0x04, b'a', b'b'], &mut p, 3),
            Some(Some(&b"ab"[..]))
        );
        let mut p = 0;
        assert_eq!(nullable(&[0x06, b'a', b'b'], &mut p, 3), None);
        let mut p = 0;
        assert_eq!(nullable(&[0x03], &mut p, 1), None); // -2
    }
}
