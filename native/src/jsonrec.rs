//! `kdissect pcap --format jsonl`'s record batches: the records of a clean v2 batch
//! (CRC-checked and decompressed by Python) straight to the JSON text of their list.
//!
//! The reference is Python: `kdissect/render/jsonl_records.py`'s `records_json_py` (the
//! values decoder's record loop, `render.records.json_bytes`, `json.dumps`). This returns
//! exactly that text, or None when it cannot be sure; the values decoder then reads the
//! batch in Python, which decides. The record loop is logjson.rs's, in its list mode.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::logjson::records_text;

/// `json.dumps` of the `count` records of a v2 batch in `data[pos:end]` as the values
/// decoder reads them (`[{"offset": O, "timestamp": T, "key": K, "value": V, "headers":
/// [...]}, ...]`); None when the Python reference must decide.
#[pyfunction]
#[pyo3(signature = (data, pos, end, count, base, ts0, fixed_ts))]
#[allow(clippy::too_many_arguments)]
pub fn records_json(
    py: Python<'_>,
    data: PyBuffer<u8>,
    pos: usize,
    end: usize,
    count: i64,
    base: i64,
    ts0: i64,
    fixed_ts: bool,
) -> PyResult<Option<Py<PyString>>> {
    records_text(py, data, pos, end, count, base, ts0, fixed_ts, true)
}
