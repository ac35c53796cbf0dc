//! The facts of a body the values decoder read (kdissect/stream/facts.py,
//! `_collect_planned`), walked through its plan compiled once per message kind: the same
//! topics (in the same order), partitions, errors and where, records and bytes, and topic
//! ids learned. The Python walk is the reference (tests/test_dense_paths.py compares them
//! on every message of every capture); the parts it does not plan (`GENERIC`, records read
//! otherwise than as batch heads) are handed back to its `_collect_values`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PySet, PyString, PyTuple};

/// `d.get(key)` by the C API's borrowed lookup, without pyo3's own (a reference
/// counted and a result matched per lookup: a fifth of a walk's instructions).
fn get<'py>(
    d: &Bound<'py, PyDict>,
    key: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = d.py();
    // SAFETY: both pointers are live objects held by the caller; the result is a
    // borrowed reference (or NULL with or without an exception), owned here at once
    unsafe {
        let v = pyo3::ffi::PyDict_GetItemWithError(d.as_ptr(), key.as_ptr());
        if v.is_null() {
            return match PyErr::take(py) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
        Ok(Some(Bound::from_borrowed_ptr(py, v)))
    }
}

const PARTITION: u8 = 1;
const ERROR: u8 = 2;
const LIST: u8 = 3;
const DICT: u8 = 4;

enum Sub {
    Nothing,
    Generic,
    Plan(Box<PlanP>),
}

struct Item {
    key: Py<PyString>,
    op: u8,
    sub: Sub,
    array: Py<PyString>,
}

struct PlanP {
    element: bool,
    names: Vec<Py<PyString>>,
    has_id: bool,
    items: Vec<Item>,
}

fn parse_plan(t: &Bound<'_, PyAny>, generic: &Bound<'_, PyAny>) -> PyResult<PlanP> {
    // (element, name keys, has topic_id, items of (key, op, sub, array)): facts._plan's
    let (element, names, has_id, items): (
        bool,
        Vec<Bound<'_, PyString>>,
        bool,
        Vec<Bound<'_, PyTuple>>,
    ) = t.extract()?;
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let (key, op, sub, array): (
            Bound<'_, PyString>,
            u8,
            Bound<'_, PyAny>,
            Bound<'_, PyString>,
        ) = it.extract()?;
        let sub = if sub.is_none() {
            Sub::Nothing
        } else if sub.is(generic) {
            Sub::Generic
        } else {
            Sub::Plan(Box::new(parse_plan(&sub, generic)?))
        };
        out.push(Item {
            key: key.unbind(),
            op,
            sub,
            array: array.unbind(),
        });
    }
    Ok(PlanP {
        element,
        names: names.into_iter().map(|n| n.unbind()).collect(),
        has_id,
        items: out,
    })
}

/// One message kind's facts plan (``facts.body_plan``), compiled.
#[pyclass(module = "kdissect._native", frozen)]
pub struct FactsPlan {
    plan: PlanP,
    whole: Py<PyAny>, // facts._collect_values(d, f, topic, array, ids, element)
    heads: Py<PyAny>, // values.BatchHeads
    zero_uuid: Py<PyString>,
    metadata_id: Py<PyString>, // __cluster_metadata's fixed topic id
    unresolved: Py<PyString>,  // the prefix of a topic known only by its id
}

/// The topic an element is of (its parent's, or named there), with its set of
/// partitions in f.topics.
type Topic<'py> = Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>;

/// What one walk adds to a Facts, held until its end (f.records, f.record_bytes).
struct Walk<'a, 'py> {
    py: Python<'py>,
    fp: &'a FactsPlan,
    f: &'a Bound<'py, PyAny>,
    ids: &'a Bound<'py, PyDict>,
    // f's topics, errors and error_sites, looked up when first needed (most bodies
    // teach nothing: an error code of 0)
    topics: Option<Bound<'py, PyDict>>,
    errors: Option<(Bound<'py, PyList>, Bound<'py, PyList>)>,
    records: i64,
    record_bytes: i64,
}

#[pymethods]
impl FactsPlan {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        plan: &Bound<'_, PyAny>,
        generic: &Bound<'_, PyAny>,
        whole: Py<PyAny>,
        heads: Py<PyAny>,
        zero_uuid: Py<PyString>,
        metadata_id: Py<PyString>,
        unresolved: Py<PyString>,
    ) -> PyResult<Self> {
        Ok(FactsPlan {
            plan: parse_plan(plan, generic)?,
            whole,
            heads,
            zero_uuid,
            metadata_id,
            unresolved,
        })
    }

    /// Add the facts of the body ``d`` to the Facts ``f``; ``ids``: topic id -> name.
    fn walk<'py>(
        &self,
        py: Python<'py>,
        d: &Bound<'py, PyDict>,
        f: &Bound<'py, PyAny>,
        ids: &Bound<'py, PyDict>,
    ) -> PyResult<()> {
        let mut w = Walk::new(py, self, f, ids);
        let got = w.planned(d, &self.plan, None);
        w.finish(got)
    }

    /// ``walk(d, f, ids)``, then ``other.walk(e, f, ids)``: an exchange's two bodies in
    /// one call (facts.pair_facts; a call and the Facts' counts' update saved).
    fn walk_pair<'py>(
        &self,
        py: Python<'py>,
        d: &Bound<'py, PyDict>,
        other: &Bound<'py, FactsPlan>,
        e: &Bound<'py, PyDict>,
        f: &Bound<'py, PyAny>,
        ids: &Bound<'py, PyDict>,
    ) -> PyResult<()> {
        let mut w = Walk::new(py, self, f, ids);
        let mut got = w.planned(d, &self.plan, None);
        if got.is_ok() {
            let other = other.get();
            // (the second walk's hand-backs call its own plan's whole: the same function)
            w.fp = other;
            got = w.planned(e, &other.plan, None);
        }
        w.finish(got)
    }
}

impl<'a, 'py> Walk<'a, 'py> {
    fn new(
        py: Python<'py>,
        fp: &'a FactsPlan,
        f: &'a Bound<'py, PyAny>,
        ids: &'a Bound<'py, PyDict>,
    ) -> Self {
        Walk {
            py,
            fp,
            f,
            ids,
            topics: None,
            errors: None,
            records: 0,
            record_bytes: 0,
        }
    }

    /// The walk's counts added to f (after the walk: a hand-back to Python adds its own
    /// to f meanwhile), then its outcome.
    fn finish(self, got: PyResult<()>) -> PyResult<()> {
        let (py, f) = (self.py, self.f);
        // (names interned: a &str made a Python string per call, a sixth of the walk)
        if self.records != 0 {
            let name = pyo3::intern!(py, "records");
            let n = f.getattr(name)?.add(self.records)?;
            f.setattr(name, n)?;
        }
        if self.record_bytes != 0 {
            let name = pyo3::intern!(py, "record_bytes");
            let n = f.getattr(name)?.add(self.record_bytes)?;
            f.setattr(name, n)?;
        }
        got
    }

    fn topics(&mut self) -> PyResult<&Bound<'py, PyDict>> {
        if self.topics.is_none() {
            let t = self.f.getattr(pyo3::intern!(self.py, "topics"))?;
            self.topics = Some(t.downcast_into::<PyDict>()?);
        }
        Ok(self.topics.as_ref().expect("set above"))
    }

    fn errors(&mut self) -> PyResult<&(Bound<'py, PyList>, Bound<'py, PyList>)> {
        if self.errors.is_none() {
            let e = self.f.getattr(pyo3::intern!(self.py, "errors"))?;
            let s = self.f.getattr(pyo3::intern!(self.py, "error_sites"))?;
            self.errors = Some((e.downcast_into::<PyList>()?, s.downcast_into::<PyList>()?));
        }
        Ok(self.errors.as_ref().expect("set above"))
    }

    fn whole(
        &self,
        d: &Bound<'py, PyAny>,
        topic: &Topic<'py>,
        array: &Bound<'py, PyAny>,
        element: bool,
    ) -> PyResult<()> {
        let topic = topic.as_ref().map(|t| &t.0);
        self.fp
            .whole
            .bind(self.py)
            .call1((d, self.f, topic, array, self.ids, element))?;
        Ok(())
    }

    /// facts._element_topic: the topic an element names, noted in f.topics, with its
    /// set there.
    fn element_topic(
        &mut self,
        name: Option<Bound<'py, PyAny>>,
        topic_id: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Topic<'py>> {
        let name = match (name, topic_id) {
            (Some(n), Some(id)) => {
                self.ids.set_item(id, &n)?;
                Some(n)
            }
            (None, Some(id)) => {
                let known = match get(self.ids, &id)? {
                    Some(v) if v.is_truthy()? => Some(v),
                    _ => None,
                };
                Some(match known {
                    Some(v) => v,
                    None if id.eq(self.fp.metadata_id.bind(self.py))? => {
                        PyString::new(self.py, "__cluster_metadata").into_any()
                    }
                    None => self.fp.unresolved.bind(self.py).add(&id)?,
                })
            }
            (n, None) => n,
        };
        let Some(n) = name else {
            return Ok(None);
        };
        let py = self.py;
        let topics = self.topics()?;
        // (setdefault: the set is carried with the topic to its partitions, not looked
        // up again for each; only Python's setdefault adds to f.topics meanwhile)
        let set = match get(topics, &n)? {
            Some(set) => set,
            None => {
                let set = PySet::empty(py)?.into_any();
                topics.set_item(&n, &set)?;
                set
            }
        };
        Ok(Some((n, set)))
    }

    fn planned(
        &mut self,
        d: &Bound<'py, PyDict>,
        plan: &PlanP,
        mut topic: Topic<'py>,
    ) -> PyResult<()> {
        let py = self.py;
        if plan.element {
            let mut name = None;
            for k in &plan.names {
                // several: the last, as _collect_values
                if let Some(v) = get(d, k.bind(py).as_any())? {
                    if v.is_instance_of::<PyString>() {
                        name = Some(v);
                    }
                }
            }
            let mut topic_id = None;
            if plan.has_id {
                if let Some(v) = get(d, pyo3::intern!(py, "topic_id").as_any())? {
                    if v.is_instance_of::<PyString>() && !v.eq(self.fp.zero_uuid.bind(py))? {
                        topic_id = Some(v);
                    }
                }
            }
            if name.is_some() || topic_id.is_some() {
                if let Some(named) = self.element_topic(name, topic_id)? {
                    topic = Some(named); // (an empty name is a name)
                }
            }
        }
        let mut partition: Option<Bound<'py, PyAny>> = None;
        for it in &plan.items {
            let key = it.key.bind(py);
            let v = match get(d, key.as_any())? {
                Some(v) if !v.is_none() => v,
                _ => continue,
            };
            match it.op {
                ERROR => {
                    if v.is_exact_instance_of::<PyInt>() && v.is_truthy()? {
                        let (errors, sites) = self.errors()?;
                        errors.append(&v)?;
                        sites.append((topic.as_ref().map(|t| &t.0), &partition, &v))?;
                    }
                }
                PARTITION => {
                    if let (true, Some(t)) = (v.is_exact_instance_of::<PyInt>(), &topic) {
                        t.1.downcast::<PySet>()?.add(&v)?;
                        partition = Some(v);
                    }
                }
                LIST => {
                    if let Ok(list) = v.downcast_exact::<PyList>() {
                        let mut i = 0;
                        // (indexed: a hand-back to Python cannot change the length under us)
                        while i < list.len() {
                            let item = list.get_item(i)?;
                            i += 1;
                            if let Ok(item) = item.downcast_exact::<PyDict>() {
                                self.sub(item, &it.sub, &topic, key.as_any(), true)?;
                            }
                        }
                    }
                }
                DICT => {
                    if let Ok(inner) = v.downcast_exact::<PyDict>() {
                        self.sub(inner, &it.sub, &topic, it.array.bind(py).as_any(), false)?;
                    }
                }
                _ => {
                    // a records field: batch heads (a summary's read), else the whole walk
                    if !(v.get_type().is(self.fp.heads.bind(py)) && self.heads(&v)?) {
                        let one = PyDict::new(py);
                        one.set_item(key, &v)?;
                        self.whole(one.as_any(), &topic, it.array.bind(py).as_any(), false)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn sub(
        &mut self,
        d: &Bound<'py, PyDict>,
        sub: &Sub,
        topic: &Topic<'py>,
        array: &Bound<'py, PyAny>,
        element: bool,
    ) -> PyResult<()> {
        match sub {
            Sub::Plan(p) => self.planned(d, p, topic.clone()),
            Sub::Generic => self.whole(d.as_any(), topic, array, element),
            Sub::Nothing => Ok(()),
        }
    }

    /// A BatchHeads' size and record counts added; false (nothing added) when one is not
    /// what the values decoder makes (an int, a dict with an int or None record_count).
    fn heads(&mut self, v: &Bound<'py, PyAny>) -> PyResult<bool> {
        let Ok(size) = v.getattr(pyo3::intern!(self.py, "size"))?.extract::<i64>() else {
            return Ok(false);
        };
        let Ok(list) = v.downcast::<PyList>() else {
            return Ok(false);
        };
        let mut records: i64 = 0;
        for batch in list.iter() {
            let Ok(batch) = batch.downcast_exact::<PyDict>() else {
                return Ok(false);
            };
            match get(batch, pyo3::intern!(self.py, "record_count").as_any())? {
                Some(c) if c.is_none() => {}
                Some(c) if c.is_exact_instance_of::<PyInt>() => match c.extract::<i64>() {
                    Ok(n) => match records.checked_add(n) {
                        Some(r) => records = r,
                        None => return Ok(false),
                    },
                    Err(_) => return Ok(false),
                },
                _ => return Ok(false),
            }
        }
        match (
            self.records.checked_add(records),
            self.record_bytes.checked_add(size),
        ) {
            (Some(r), Some(b)) => {
                self.records = r;
                self.record_bytes = b;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
