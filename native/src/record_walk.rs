//! The one Rust walk of a v2 batch's records (Kafka's DefaultRecord: length, attributes,
//! timestamp and offset deltas, key, value, headers), shared by the writers that turn a
//! clean batch's records into output in one call: `kdissect log`'s JSON lines and the
//! values decoder's record lists (logjson.rs, jsonrec.rs) and the records table's columns
//! (records_table.rs). The Python reference is the values decoder's record loop; a walk
//! that meets anything it cannot read exactly gives up, and the caller's Python decides.

use pyo3::buffer::PyBuffer;
use pyo3::PyResult;

use crate::varint::varint;

pub(crate) const HEX: &[u8; 16] = b"0123456789abcdef";

/// Nullable bytes (zigzag varint length, -1 for null) at `*p`, ending by `rec_end`.
#[inline]
pub(crate) fn nullable<'a>(d: &'a [u8], p: &mut usize, rec_end: usize) -> Option<Option<&'a [u8]>> {
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

/// A header as the record holds it: key and value, either may be null.
pub(crate) type Header<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// One record, read whole: where it starts, its absolute offset and timestamp (i128: a
/// 10-byte delta plus an int64 goes past i64), key, value and headers in order.
pub(crate) struct Record<'a, 'h> {
    pub start: usize,
    pub offset: i128,
    pub timestamp: i128,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'h [Header<'a>],
}

/// Where a batch's records lie and what their deltas are relative to.
pub(crate) struct Records {
    pub pos: usize,
    pub end: usize,
    pub count: i64,
    pub base_offset: i64,
    pub base_timestamp: i64,
    /// LogAppendTime: every record's timestamp is the batch's (deltas ignored)
    pub fixed_timestamp: bool,
}

/// Each of the `count` records of `d[pos..end]` handed to `each` in order. Ok(false) as
/// soon as `each` says false, at the first byte that is not exactly a record, or when the
/// records do not end at `end`: the Python reference must decide. Each record is read
/// whole before `each` sees it.
pub(crate) fn walk<'a>(
    d: &'a [u8],
    at: &Records,
    mut each: impl FnMut(&Record<'a, '_>) -> PyResult<bool>,
) -> PyResult<bool> {
    let end = at.end;
    let mut pos = at.pos;
    let mut headers: Vec<Header<'a>> = Vec::new();
    for _ in 0..at.count {
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
        let timestamp = if at.fixed_timestamp {
            at.base_timestamp as i128
        } else {
            at.base_timestamp as i128 + ts_delta
        };
        let Some(off_delta) = varint(d, &mut p, rec_end, 5) else {
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
        headers.clear();
        for _ in 0..nh {
            let Some(hkey) = nullable(d, &mut p, rec_end) else {
                return Ok(false);
            };
            let Some(hvalue) = nullable(d, &mut p, rec_end) else {
                return Ok(false);
            };
            headers.push((hkey, hvalue));
        }
        if p != rec_end {
            return Ok(false);
        }
        let record = Record {
            start: pos,
            offset: at.base_offset as i128 + off_delta,
            timestamp,
            key,
            value,
            headers: &headers,
        };
        if !each(&record)? {
            return Ok(false);
        }
        pos = rec_end;
    }
    Ok(pos == end)
}

/// A Python buffer's bytes, when they are contiguous and hold `pos..end`.
///
/// Safety: the caller holds `data` (read only) while it uses the slice.
pub(crate) unsafe fn bytes_of(data: &PyBuffer<u8>, pos: usize, end: usize) -> Option<&[u8]> {
    if !data.is_c_contiguous() || end > data.len_bytes() || pos > end {
        return None;
    }
    Some(std::slice::from_raw_parts(
        data.buf_ptr() as *const u8,
        data.len_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// One record: length, attributes, deltas, key "k", null value, one header.
    fn record() -> Vec<u8> {
        let body = [
            0x00, // attributes
            0x04, // timestamp delta 2
            0x02, // offset delta 1
            0x02, b'k', // key
            0x01, // null value
            0x02, // one header
            0x02, b'h', 0x01, // "h": null
        ];
        let mut out = vec![(body.len() as u8) << 1];
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn walk_reads_records_and_refuses_leftovers() {
        let d = record();
        let at = Records {
            pos: 0,
            end: d.len(),
            count: 1,
            base_offset: 10,
            base_timestamp: 100,
            fixed_timestamp: false,
        };
        let mut seen = Vec::new();
        let whole = walk(&d, &at, |r| {
            seen.push((
                r.start,
                r.offset,
                r.timestamp,
                r.key,
                r.value,
                r.headers.to_vec(),
            ));
            Ok(true)
        })
        .unwrap();
        assert!(whole);
        assert_eq!(
            seen,
            vec![(
                0,
                11,
                102,
                Some(&b"k"[..]),
                None,
                vec![(Some(&b"h"[..]), None)]
            )]
        );
        let mut longer = d.clone();
        longer.push(0);
        let at = Records {
            end: longer.len(),
            ..at
        };
        assert!(!walk(&longer, &at, |_| Ok(true)).unwrap()); // a byte after the records
        let at = Records {
            end: d.len() - 1,
            ..at
        };
        assert!(!walk(&d, &at, |_| Ok(true)).unwrap()); // a record cut short
    }
}
