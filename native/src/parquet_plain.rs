//! One scalar column of a Parquet row group (`kdissect pcap --format parquet`): its
//! definition levels and its present values PLAIN-encoded, in one pass over the values.
//!
//! The reference is Python: kdissect/pipeline/parquet_file.py's `_Leaf.levels` and
//! `_Leaf.plain` for a column that is not a list. This gives exactly their bytes, or None
//! for anything it does not take as they do (a value of another type, a string that is
//! not UTF-8, a time too big to round): the Python path then writes the column (and
//! raises where it raises). tests/test_parquet_file.py compares the two.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

// the kinds (parquet_file.py's _NATIVE_KIND; INT64 is 3)
const STRING: u8 = 0;
const INT16: u8 = 1;
const INT32: u8 = 2;
const FLOAT64: u8 = 4;
const TIMESTAMP: u8 = 5;

/// 2^63 as a float: the first µs count past what an INT64 holds.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

enum Cell {
    Null,
    Int(i64),
    Float(f64),
}

/// A value of an integer or time column as the Python path makes it (`_micros`, then
/// `_in_range`: null when out of the kind's bounds), or None: not one it takes.
fn number(v: &Bound<'_, PyAny>, kind: u8) -> Option<Cell> {
    if v.is_none() {
        return Some(Cell::Null);
    }
    if v.is_instance_of::<PyInt>() {
        // (a bool too, as struct.pack takes it)
        if kind == FLOAT64 {
            return None; // Python converts it
        }
        let Ok(i) = v.extract::<i64>() else {
            return Some(Cell::Null); // past 64 bits: past every bound
        };
        let (lo, hi) = match kind {
            INT16 => (i16::MIN as i64, i16::MAX as i64),
            INT32 => (i32::MIN as i64, i32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        };
        return Some(if (lo..=hi).contains(&i) {
            Cell::Int(i)
        } else {
            Cell::Null
        });
    }
    if v.is_exact_instance_of::<PyFloat>() {
        let f = v.extract::<f64>().ok()?;
        if kind == FLOAT64 {
            return Some(Cell::Float(f));
        }
        if kind == TIMESTAMP {
            if !f.is_finite() {
                return Some(Cell::Null);
            }
            let us = f * 1_000_000.0;
            if !us.is_finite() {
                return None; // round() raises in Python
            }
            let r = us.round_ties_even();
            return Some(if (-TWO_63..TWO_63).contains(&r) {
                Cell::Int(r as i64)
            } else {
                Cell::Null
            });
        }
    }
    None
}

/// `(definition levels, PLAIN values)` of a column that is not a list: `values` (a tuple
/// or list) of `kind`; None when the Python path must write it.
#[pyfunction]
pub fn parquet_plain<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    kind: u8,
) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(t) = values.downcast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = values.downcast::<PyList>() {
        l.iter().collect()
    } else {
        return Ok(None);
    };
    let mut defs = Vec::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len() * 8);
    for v in &items {
        if kind == STRING {
            if v.is_none() {
                defs.push(0);
                continue;
            }
            let Ok(s) = v.downcast::<PyString>() else {
                return Ok(None);
            };
            let Ok(text) = s.to_str() else {
                return Ok(None); // a lone surrogate: Python replaces it
            };
            let Ok(n) = u32::try_from(text.len()) else {
                return Ok(None);
            };
            defs.push(1);
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(text.as_bytes());
            continue;
        }
        if kind > TIMESTAMP {
            return Ok(None);
        }
        match number(v, kind) {
            None => return Ok(None),
            Some(Cell::Null) => defs.push(0),
            Some(Cell::Int(i)) => {
                defs.push(1);
                match kind {
                    INT16 | INT32 => out.extend_from_slice(&(i as i32).to_le_bytes()),
                    _ => out.extend_from_slice(&i.to_le_bytes()), // INT64, TIMESTAMP
                }
            }
            Some(Cell::Float(f)) => {
                defs.push(1);
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
    }
    Ok(Some((PyBytes::new(py, &defs), PyBytes::new(py, &out))))
}
