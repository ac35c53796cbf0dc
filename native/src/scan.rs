//! Whether a message's bytes hold any of a few byte strings, in one pass: the internal
//! topics' names and ids, which decide whether a Produce/Fetch is read by the located
//! decoder (protocol/internal.py `mentions_internal_topic`, the Python reference).
//!
//! CPython's `in` is slow here for the reasons the data gives it: `b"__"` is a two-byte
//! needle, so nothing is skipped, and record values full of `_` (JSON keys) stop it
//! often; `__cluster_metadata`'s id is fifteen zero bytes and a one, which zero-padded
//! values match part-way again and again. Each needle is looked for by its rarest byte
//! instead (anchor), all anchors in one pass over 16-byte blocks.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::record_walk::bytes_of;

/// How common a byte is in record data, lower is rarer: zero and space padding, ASCII
/// letters by their English frequency, digits and JSON punctuation, `_`; everything else
/// (the bytes of compressed data, ids) is rare.
fn commonness(b: u8) -> u8 {
    match b {
        0x00 | 0xff | b' ' => 40,
        b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' | b'r' => 30,
        b'"' | b':' | b',' | b'_' | b'0'..=b'9' => 25,
        b'h' | b'l' | b'd' | b'c' | b'u' | b'm' => 20,
        b'a'..=b'z' | b'A'..=b'Z' => 10,
        _ => 1,
    }
}

/// Calls `each` with every position of `data` holding one of `anchors`, in order, until
/// it says true; whether it did. 16 bytes at a time with SSE2 (every x86-64 has it),
/// elsewhere byte by byte.
fn any_anchor(data: &[u8], anchors: &[u8], each: impl Fn(usize) -> bool) -> bool {
    let mut base = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8, _mm_setzero_si128,
        };
        // Safety: SSE2 is part of x86-64; each load reads 16 bytes the slice holds
        unsafe {
            let wanted: Vec<__m128i> = anchors.iter().map(|&a| _mm_set1_epi8(a as i8)).collect();
            while base + 16 <= data.len() {
                let v = _mm_loadu_si128(data.as_ptr().add(base) as *const __m128i);
                let mut hits = _mm_setzero_si128();
                for w in &wanted {
                    hits = _mm_or_si128(hits, _mm_cmpeq_epi8(v, *w));
                }
                let mut bits = _mm_movemask_epi8(hits) as u32;
                while bits != 0 {
                    if each(base + bits.trailing_zeros() as usize) {
                        return true;
                    }
                    bits &= bits - 1;
                }
                base += 16;
            }
        }
    }
    (base..data.len()).any(|i| anchors.contains(&data[i]) && each(i))
}

/// Whether `data` holds any of `needles` (an empty needle is held by anything).
#[cfg(test)]
fn holds_any(data: &[u8], needles: &[Vec<u8>]) -> bool {
    NeedleSet::new(needles.to_vec()).held_by(data)
}

/// Needles with their anchors chosen once (each by its rarest byte).
struct NeedleSet {
    anchored: Vec<(u8, usize, Vec<u8>)>, // (anchor byte, its index in the needle, the needle)
    anchors: Vec<u8>,                    // the distinct anchor bytes
    any_empty: bool,                     // an empty needle: held by anything
}

impl NeedleSet {
    fn new(needles: Vec<Vec<u8>>) -> Self {
        let any_empty = needles.iter().any(|n| n.is_empty());
        let anchored: Vec<(u8, usize, Vec<u8>)> = needles
            .into_iter()
            .filter(|n| !n.is_empty())
            .map(|n| {
                let at = (0..n.len()).min_by_key(|&i| commonness(n[i])).unwrap_or(0);
                (n[at], at, n)
            })
            .collect();
        let mut anchors: Vec<u8> = anchored.iter().map(|a| a.0).collect();
        anchors.sort_unstable();
        anchors.dedup();
        NeedleSet {
            anchored,
            anchors,
            any_empty,
        }
    }

    fn held_by(&self, data: &[u8]) -> bool {
        if self.any_empty {
            return true;
        }
        if !self.anchored.iter().any(|a| a.2.len() <= data.len()) {
            return false;
        }
        let found_at = |i: usize| {
            let b = data[i];
            self.anchored.iter().any(|(a, at, n)| {
                if *a != b || i < *at || i - at + n.len() > data.len() {
                    return false;
                }
                let got = &data[i - at..i - at + n.len()];
                // the first byte rules out almost every candidate before the whole compare
                got[0] == n[0] && got == &n[..]
            })
        };
        any_anchor(data, &self.anchors, found_at)
    }
}

/// `contains_any` with its needles prepared once: `Needles(needles).found_in(data)`
/// (a message's search was mostly making the needles anew: 2-3 µs per one-record
/// Produce in JSON lines).
#[pyclass(module = "kdissect._native", frozen)]
pub struct Needles {
    set: NeedleSet,
}

#[pymethods]
impl Needles {
    #[new]
    fn new(needles: Vec<Vec<u8>>) -> Self {
        Needles {
            set: NeedleSet::new(needles),
        }
    }

    /// Whether `data` holds any of the needles; None when its bytes are not contiguous.
    /// A `bytes` is read as it is (taking a buffer of it was most of a small message's
    /// search: the records table asks once per message).
    fn found_in(&self, data: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
        if let Ok(b) = data.downcast::<PyBytes>() {
            return Ok(Some(self.set.held_by(b.as_bytes())));
        }
        let data: PyBuffer<u8> = PyBuffer::get(data)?;
        // Safety: `data` is held (and read only) for this call
        let Some(d) = (unsafe { bytes_of(&data, 0, data.len_bytes()) }) else {
            return Ok(None);
        };
        Ok(Some(self.set.held_by(d)))
    }
}

impl Needles {
    /// Whether `data` holds any of the needles (`found_in` for Rust callers).
    pub fn held_by(&self, data: &[u8]) -> bool {
        self.set.held_by(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(data: &[u8], needles: &[Vec<u8>]) -> bool {
        needles
            .iter()
            .any(|n| n.is_empty() || data.windows(n.len()).any(|w| w == &n[..]))
    }

    #[test]
    fn finds_needles_anywhere_and_nothing_else() {
        let names: Vec<Vec<u8>> = vec![b"__consumer_offsets".to_vec(), {
            let mut id = vec![0u8; 15];
            id.push(1);
            id
        }];
        let filler = b"{\"order_id\": \"o_1\", \"pad\": \"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\"}";
        for len in 0..70 {
            let data: Vec<u8> = filler.iter().cycle().take(len).copied().collect();
            assert_eq!(holds_any(&data, &names), naive(&data, &names));
            for needle in &names {
                for at in 0..=len {
                    let mut planted = data[..at].to_vec();
                    planted.extend_from_slice(needle);
                    planted.extend_from_slice(&data[at..]);
                    assert!(holds_any(&planted, &names), "{len} {at}");
                    // a needle cut by one byte is not found
                    let cut = &needle[..needle.len() - 1];
                    let mut part = data[..at].to_vec();
                    part.extend_from_slice(cut);
                    assert_eq!(holds_any(&part, &names), naive(&part, &names));
                }
            }
        }
        assert!(holds_any(b"", &[Vec::new()]));
        assert!(!holds_any(b"", &[]));
    }
}
