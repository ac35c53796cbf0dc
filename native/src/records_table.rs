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
use pyo3::types::{PyDict, PyInt, PyList, PyString, PyTuple};

use crate::record_walk::{bytes_of, walk, Records, HEX};

/// cells.ms_micros's bound: timestamps (ms) past 9999-12-31 are null in the tables.
const MAX_TIMESTAMP_MS: i128 = crate::LAST_SECOND as i128 * 1000 + 999;
/// cells.text_or_hex: the bytes as text when they are UTF-8 and every character is
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

/// The columns of the records `at` names, appended to `out`, or Ok(false) at the first
/// thing the Python reference must judge.
fn rows<'py>(py: Python<'py>, out: &Bound<'py, PyList>, d: &[u8], at: &Records) -> PyResult<bool> {
    let (k_key, k_value) = (intern!(py, "key"), intern!(py, "value"));
    walk(d, at, |r| {
        let Ok(offset) = i64::try_from(r.offset) else {
            return Ok(false);
        };
        let headers = PyList::empty(py);
        for &(hkey, hvalue) in r.headers {
            let Some(hkey) = hkey else {
                return Ok(false); // a null key: the tree decides
            };
            let Ok(hkey) = std::str::from_utf8(hkey) else {
                return Ok(false); // not UTF-8: the tree says so on the key
            };
            let h = PyDict::new(py);
            h.set_item(k_key, PyString::new(py, hkey))?;
            match hvalue {
                None => h.set_item(k_value, py.None())?,
                Some(v) => h.set_item(k_value, text_or_hex(py, v)?)?,
            }
            headers.append(h)?;
        }
        let stamp = if (0..=MAX_TIMESTAMP_MS).contains(&r.timestamp) {
            Some((r.timestamp * 1000) as i64)
        } else {
            None
        };
        let key = match r.key {
            None => py.None().into_bound(py),
            Some(k) => text_or_hex(py, k)?,
        };
        let size = r.value.map(|v| v.len() as i64);
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
        Ok(true)
    })
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
    if count < 0 {
        return Ok(None);
    }
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
    batch_rows(py, d, &at)
}

/// `record_table_rows` of the records `at` names in `d` (a buffer read by Rust: the
/// values decoder's compiled table read, values.rs).
pub(crate) fn batch_rows<'py>(
    py: Python<'py>,
    d: &[u8],
    at: &Records,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let out = PyList::empty(py);
    if rows(py, &out, d, at)? {
        Ok(Some(out))
    } else {
        Ok(None)
    }
}

/// A route's names: what `record_table._Route.spec` says each is (0 a topic id, 1 a
/// topic, 2 a partition: any other number is taken for a partition, as `_follow` does).
const TOPIC_ID: u8 = 0;
const TOPIC: u8 = 1;

/// `record_table._follow` on a body read by `Program.table` (its records fields lists of
/// each batch's rows): `(topic, partition, rows)` of each batch appended to `out`, in
/// that walk's order. `route`: `_Route.spec`, `(((name, role), ...), ((field, route or
/// None), ...))`; `topic_of_id`: `facts.topic_of_id`, called as `_follow` calls it.
pub(crate) fn follow<'py>(
    node: &Bound<'py, PyDict>,
    route: &Bound<'py, PyTuple>,
    topic: &Bound<'py, PyAny>,
    partition: &Bound<'py, PyAny>,
    topic_of_id: &Bound<'py, PyAny>,
    out: &Bound<'py, PyList>,
) -> PyResult<()> {
    let py = node.py();
    let fields = route.get_item(1)?;
    for field in fields.downcast::<PyTuple>()?.iter() {
        let field = field.downcast_into::<PyTuple>()?;
        let Some(v) = node.get_item(field.get_item(0)?)? else {
            continue;
        };
        let sub = field.get_item(1)?;
        if sub.is_none() {
            // the records field: each batch's rows (Program.table reads no other)
            if let Ok(batches) = v.downcast::<PyList>() {
                for rows in batches.iter() {
                    out.append((topic, partition, rows))?;
                }
            }
            continue;
        }
        let sub = sub.downcast_into::<PyTuple>()?;
        if v.is_exact_instance_of::<PyList>() {
            let names = sub.get_item(0)?;
            let names = names.downcast::<PyTuple>()?;
            for e in v.downcast::<PyList>()?.iter() {
                let Ok(e) = e.downcast_exact::<PyDict>() else {
                    continue;
                };
                let (mut t, mut p) = (topic.clone(), partition.clone());
                for name in names.iter() {
                    let name = name.downcast_into::<PyTuple>()?;
                    let x = match e.get_item(name.get_item(0)?)? {
                        Some(x) => x,
                        None => py.None().into_bound(py),
                    };
                    let role: u8 = name.get_item(1)?.extract()?;
                    if role == TOPIC_ID {
                        if t.is_none() && x.is_exact_instance_of::<PyString>() {
                            t = topic_of_id.call1((x, PyDict::new(py)))?;
                        }
                    } else if role == TOPIC {
                        if x.is_exact_instance_of::<PyString>() {
                            t = x;
                        }
                    } else if x.is_exact_instance_of::<PyInt>() {
                        p = x;
                    }
                }
                follow(e, &sub, &t, &p, topic_of_id, out)?;
            }
        } else if let Ok(d) = v.downcast_exact::<PyDict>() {
            follow(d, &sub, topic, partition, topic_of_id, out)?;
        }
    }
    Ok(())
}
