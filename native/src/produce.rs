//! Whether a Produce exchange is one the diagnoses have nothing to say of
//! (kdissect/stream/diagnoses.py, `Diagnoses._produce`): no batch of an idempotent
//! producer (whose sequences it follows), no batch stamped far from the capture clock
//! (CreateTime), no partition the broker stamped (LogAppendTime). On a capture of one-record
//! Produce requests the Python walk of the two bodies cost about a seventh of a summary.
//!
//! Conservative: true only where `_produce` would add no finding and change no state; any
//! value it does not expect (a type other than the values decoder's) says false, and
//! `_produce` decides. `_produce` stays the reference (tests/test_produce_quiet.py holds
//! this to it).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList};

/// The list under `key` of the dict `d` (None: absent, None or empty, as `or ()` reads it);
/// Err(()) where the value is anything else (`_produce` decides).
fn items<'py>(
    d: &Bound<'py, PyDict>,
    key: &Bound<'py, PyAny>,
) -> Result<Option<Bound<'py, PyList>>, ()> {
    match d.get_item(key) {
        Ok(None) => Ok(None),
        Ok(Some(v)) if v.is_none() => Ok(None),
        Ok(Some(v)) if v.is_exact_instance_of::<PyList>() || iterates_as_list(&v) => {
            v.downcast_into::<PyList>().map(Some).map_err(|_| ())
        }
        Ok(Some(_)) | Err(_) => Err(()),
    }
}

/// A list subclass that iterates over its items as a list does (values.BatchHeads, a
/// records field read for a summary): its items are what `_produce` walks. One with an
/// `__iter__` of its own may yield others: `_produce` decides.
fn iterates_as_list(v: &Bound<'_, PyAny>) -> bool {
    let py = v.py();
    let name = pyo3::intern!(py, "__iter__");
    v.is_instance_of::<PyList>()
        && match (
            v.get_type().getattr(name),
            py.get_type::<PyList>().getattr(name),
        ) {
            (Ok(own), Ok(list)) => own.is(&list),
            _ => false,
        }
}

/// An exact int's value (Ok(None): not an exact int; Err: too big for i64, let Python say).
fn int(v: Option<Bound<'_, PyAny>>) -> Result<Option<i64>, ()> {
    match v {
        Some(v) if v.is_exact_instance_of::<PyInt>() => {
            v.extract::<i64>().map(Some).map_err(|_| ())
        }
        _ => Ok(None),
    }
}

fn request_quiet<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyDict>,
    capture_ms: f64,
    skew_s: f64,
) -> Result<bool, ()> {
    let Some(topics) = items(body, pyo3::intern!(py, "topic_data").as_any())? else {
        return Ok(true);
    };
    for t in topics.iter() {
        let t = t.downcast_exact::<PyDict>().map_err(|_| ())?;
        let Some(parts) = items(t, pyo3::intern!(py, "partition_data").as_any())? else {
            continue;
        };
        for p in parts.iter() {
            let p = p.downcast_exact::<PyDict>().map_err(|_| ())?;
            let Some(batches) = items(p, pyo3::intern!(py, "records").as_any())? else {
                continue;
            };
            for b in batches.iter() {
                let b = b.downcast_exact::<PyDict>().map_err(|_| ())?;
                let get = |k: &Bound<'py, pyo3::types::PyString>| b.get_item(k).map_err(|_| ());
                let magic = get(pyo3::intern!(py, "magic"))?;
                match &magic {
                    None => continue,
                    Some(m) if m.is_none() => continue,
                    Some(m) if m.is_exact_instance_of::<PyInt>() => {
                        if m.extract::<i64>().map_err(|_| ())? != 2 {
                            continue;
                        }
                    }
                    Some(_) => return Err(()),
                }
                let attrs = int(get(pyo3::intern!(py, "attributes"))?)?;
                let stamp = int(get(pyo3::intern!(py, "max_timestamp"))?)?;
                if let (Some(attrs), Some(stamp)) = (attrs, stamp) {
                    // (Python's float arithmetic: the int converted, rounded to nearest)
                    if attrs & 8 == 0
                        && stamp >= 0
                        && ((stamp as f64 - capture_ms) / 1000.0).abs() > skew_s
                    {
                        return Ok(false);
                    }
                }
                if let Some(pid) = int(get(pyo3::intern!(py, "producer_id"))?)? {
                    if pid >= 0 {
                        return Ok(false);
                    }
                }
            }
        }
    }
    Ok(true)
}

fn answer_quiet(py: Python<'_>, answer: &Bound<'_, PyDict>) -> Result<bool, ()> {
    let Some(topics) = items(answer, pyo3::intern!(py, "responses").as_any())? else {
        return Ok(true);
    };
    for t in topics.iter() {
        let t = t.downcast_exact::<PyDict>().map_err(|_| ())?;
        let Some(parts) = items(t, pyo3::intern!(py, "partition_responses").as_any())? else {
            continue;
        };
        for p in parts.iter() {
            let p = p.downcast_exact::<PyDict>().map_err(|_| ())?;
            let at = p
                .get_item(pyo3::intern!(py, "log_append_time_ms"))
                .map_err(|_| ())?;
            if let Some(at) = int(at)? {
                if at >= 0 {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// True where `Diagnoses._produce(ex, body, answer, ...)` would say and keep nothing:
/// ``body`` and ``answer`` the Produce's request and answer bodies as it gets them (dicts
/// or None), ``ts`` the request's time (s), ``skew_s`` its ``SKEW_S``. False: ask it.
#[pyfunction]
pub fn produce_quiet(
    py: Python<'_>,
    body: &Bound<'_, PyAny>,
    answer: &Bound<'_, PyAny>,
    ts: f64,
    skew_s: f64,
) -> bool {
    let capture_ms = ts * 1000.0;
    let request = if body.is_none() {
        Ok(true)
    } else {
        match body.downcast_exact::<PyDict>() {
            Ok(d) => request_quiet(py, d, capture_ms, skew_s),
            Err(_) => Err(()),
        }
    };
    if request != Ok(true) {
        return false;
    }
    if answer.is_none() {
        return true;
    }
    match answer.downcast_exact::<PyDict>() {
        Ok(d) => answer_quiet(py, d) == Ok(true),
        Err(_) => false,
    }
}
