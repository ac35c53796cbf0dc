//! The values decoder's message read, compiled: a message's header and body as the plain
//! dicts the generated readers (`kdissect/protocol/values_readers/`) return.
//!
//! The reference is Python: `kdissect.protocol.values.body_values` with the generated
//! readers. `kdissect/protocol/values_native.py` compiles each message kind's layouts into
//! the nested tuples `Program::new` takes (the same rules as `gen_readers`: lengths,
//! nulls, charges, tagged fields); bytes fields go through the caller's `conv` and
//! records fields through the Python `_records`, so this reads only the layout's own
//! fields. Any doubt (a bail of the Python readers, a byte past the end, invalid UTF-8,
//! a varint too long) returns None and the Python readers decide.

use crate::varint::{self, zigzag};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use std::collections::HashMap;

// kind codes: must match values_native.py's
pub(crate) const I8: u8 = 0;
pub(crate) const I16: u8 = 1;
pub(crate) const I32: u8 = 2;
pub(crate) const I64: u8 = 3;
pub(crate) const U16: u8 = 4;
pub(crate) const U32: u8 = 5;
pub(crate) const F64: u8 = 6;
pub(crate) const BOOL: u8 = 7;
pub(crate) const UUID: u8 = 8;
pub(crate) const VARINT: u8 = 9;
pub(crate) const VARLONG: u8 = 10;
pub(crate) const UVARINT: u8 = 11;
pub(crate) const STRING: u8 = 12;
pub(crate) const BYTES: u8 = 13;
pub(crate) const RECORDS: u8 = 14;
pub(crate) const STRUCT: u8 = 20;
pub(crate) const NULLABLE_STRUCT: u8 = 21;
pub(crate) const ARRAY_STRUCT: u8 = 22;
pub(crate) const ARRAY_VALUE: u8 = 23;

const HEAD_KEYS: [&str; 14] = [
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
    "records",
];
const RECORDS_KEY: usize = 13; // HEAD_KEYS' "records" (the last)

/// The last batch head a Program made (a private copy, never handed out) with its
/// values, in HEAD_KEYS' order: the next is made from a copy of it.
/// The last short string a Program made: its bytes (the first `len`) and its str.
struct LastStr {
    len: usize,
    bytes: [u8; 64],
    text: Option<Py<PyString>>,
}

type HeadLast = std::sync::Mutex<Option<(Py<PyDict>, [i64; RECORDS_KEY])>>;

pub(crate) enum Shape {
    Value(u8),
    Struct(Box<StructP>),
    NullableStruct(Box<StructP>),
    ArrayStruct(Box<StructP>, i64),
    ArrayValue(u8, i64),
}

pub(crate) struct FieldP {
    pub name: Option<Py<PyString>>, // None: read, not kept (a "_" field)
    pub shape: Shape,
    pub compact: bool,     // the value's length prefix
    pub len_compact: bool, // an array's count prefix (the enclosing struct's flexibility)
    pub nullable: bool,
}

pub(crate) struct StructP {
    pub fields: Vec<FieldP>,
    pub tagged: Option<HashMap<u64, StructP>>,
    // its kept fields' names, in order, each with None: a struct of more than
    // TEMPLATE_FROM of them starts as a copy of this (one allocation of the right size)
    // instead of an empty dict that grows (resized as the sixth and eleventh keys come)
    pub template: Option<Py<PyDict>>,
}

const TEMPLATE_FROM: usize = 5;

fn template<'py>(py: Python<'py>, names: &[&Py<PyString>]) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for n in names {
        d.set_item(n.bind(py), py.None())?;
    }
    Ok(d.unbind())
}

/// Why a read stops: the reference decides (Bail), or Python raised.
pub(crate) enum Stop {
    Bail,
    Err(PyErr),
}

impl From<std::convert::Infallible> for Stop {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl From<PyErr> for Stop {
    fn from(e: PyErr) -> Self {
        Stop::Err(e)
    }
}

pub(crate) type R<T> = Result<T, Stop>;

fn parse_struct(t: &Bound<'_, PyAny>) -> PyResult<StructP> {
    // (fields, tagged or None); field: (name or None, kind, compact, len_compact,
    // nullable, sub): sub is a struct program, a value kind, and for arrays (sub, cost)
    let t = t.downcast::<PyTuple>()?;
    let mut fields = Vec::new();
    for f in t.get_item(0)?.try_iter()? {
        let f = f?;
        let f = f.downcast::<PyTuple>()?;
        let name: Option<Py<PyString>> = f.get_item(0)?.extract()?;
        let kind: u8 = f.get_item(1)?.extract()?;
        let sub = f.get_item(5)?;
        let shape = match kind {
            STRUCT => Shape::Struct(Box::new(parse_struct(&sub)?)),
            NULLABLE_STRUCT => Shape::NullableStruct(Box::new(parse_struct(&sub)?)),
            ARRAY_STRUCT => {
                let (st, cost): (Bound<'_, PyAny>, i64) = sub.extract()?;
                Shape::ArrayStruct(Box::new(parse_struct(&st)?), cost)
            }
            ARRAY_VALUE => {
                let (k, cost): (u8, i64) = sub.extract()?;
                Shape::ArrayValue(k, cost)
            }
            k if k <= RECORDS => Shape::Value(k),
            _ => return Err(pyo3::exceptions::PyValueError::new_err("unknown kind")),
        };
        fields.push(FieldP {
            name: name.map(|n| {
                let b = n.bind(t.py()).clone();
                PyString::intern(t.py(), &b.to_string_lossy()).unbind()
            }),
            shape,
            compact: f.get_item(2)?.extract()?,
            len_compact: f.get_item(3)?.extract()?,
            nullable: f.get_item(4)?.extract()?,
        });
    }
    let tagged = t.get_item(1)?;
    let tagged = if tagged.is_none() {
        None
    } else {
        let mut m = HashMap::new();
        for item in tagged.downcast::<PyDict>()?.iter() {
            m.insert(item.0.extract::<u64>()?, parse_struct(&item.1)?);
        }
        Some(m)
    };
    let names: Vec<&Py<PyString>> = fields.iter().filter_map(|f| f.name.as_ref()).collect();
    let template = if names.len() > TEMPLATE_FROM {
        Some(template(t.py(), &names)?)
    } else {
        None
    };
    Ok(StructP {
        fields,
        tagged,
        template,
    })
}

/// One message kind's header and body layouts.
#[pyclass(module = "kdissect._native", frozen)]
pub struct Program {
    head: StructP,
    body: StructP,
    records: Py<PyAny>,     // values._records
    batch_heads: Py<PyAny>, // values.BatchHeads
    bails: Py<PyAny>,       // the exceptions a Python reader's bail is (a tuple)
    // a batch head's keys, in values._batch_heads' order, each with its place in
    // HEAD_KEYS (what the head's value is); of a lean program only those it keeps
    keys: Vec<(usize, Py<PyString>)>,
    head_template: Py<PyDict>, // those keys, each with None (StructP.template)
    head_last: HeadLast,
    last_str: std::sync::Mutex<LastStr>,
}

#[pymethods]
impl Program {
    /// ``keep``: a lean program's names kept (values_native.kept), or None: all.
    #[new]
    #[pyo3(signature = (head, body, records, batch_heads, bails, keep=None))]
    fn new(
        head: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        records: Py<PyAny>,
        batch_heads: Py<PyAny>,
        bails: Py<PyAny>,
        keep: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut keys: Vec<(usize, Py<PyString>)> = Vec::with_capacity(HEAD_KEYS.len());
        for (i, k) in HEAD_KEYS.iter().enumerate() {
            let name = PyString::intern(head.py(), k);
            // (values_native.kept: a batch head's fields are ints, "records" a records
            // field: kept whatever the names)
            if i == RECORDS_KEY || keep.map_or(Ok(true), |keep| keep.contains(&name))? {
                keys.push((i, name.unbind()));
            }
        }
        let head_template = template(head.py(), &keys.iter().map(|k| &k.1).collect::<Vec<_>>())?;
        // (made by PyType_GenericNew in batch_heads: a list subclass, or no Program)
        let list_type = batch_heads
            .bind(head.py())
            .downcast::<pyo3::types::PyType>()
            .map_err(PyErr::from)
            .and_then(|t| t.is_subclass_of::<pyo3::types::PyList>())?;
        if !list_type {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "batch_heads: a list subclass",
            ));
        }
        Ok(Program {
            head: parse_struct(head)?,
            body: parse_struct(body)?,
            records,
            batch_heads,
            bails,
            keys,
            head_template,
            head_last: std::sync::Mutex::new(None),
            last_str: std::sync::Mutex::new(LastStr {
                len: 0,
                bytes: [0; 64],
                text: None,
            }),
        })
    }

    /// The body of the message ``data`` as a dict, or None (the Python readers decide).
    /// ``s``: the values decoder's state (conv, records, nodes), whose ``nodes`` is kept
    /// current around each call into Python.
    fn read<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        s: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let records = s.getattr(pyo3::intern!(py, "records"))?;
        let compact = s.getattr(pyo3::intern!(py, "compact"))?.is_truthy()?;
        let nodes = s.getattr(pyo3::intern!(py, "nodes"))?.extract()?;
        self.run(
            py,
            data,
            s.getattr(pyo3::intern!(py, "conv"))?,
            &records,
            compact,
            nodes,
            Some(s.clone()),
            Table::Off,
        )
    }

    /// ``read`` without a state, for ``records`` "batches" or False (no call into
    /// Python needs one): ``nodes`` is the budget of nodes (``Options.max_nodes``).
    fn read_plain<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        conv: Bound<'py, PyAny>,
        records: &Bound<'py, PyAny>,
        compact: bool,
        nodes: i64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.run(py, data, conv, records, compact, nodes, None, Table::Off)
    }

    /// ``read_plain`` with ``records`` True where each records field is a list of its
    /// v2 batches' records-table rows (``records_table.rs``'s list per batch, what
    /// ``record_table._batch_rows`` makes of it), read here, then followed along
    /// ``route`` (``records_table::follow``): the records table's ``(topic, partition,
    /// rows)`` of each batch, in ``record_table._follow``'s order (``values.table_values``).
    /// None where the Python readers must decide (and also where any batch is partial,
    /// compressed, a control batch, or not clean: the values decoder then reads the
    /// message, which decides). Whether the message may carry an internal topic's
    /// records (then the values decoder's too) is asked after the read, and only when
    /// it gave a batch: here when ``internal`` (the needles of
    /// ``internal.mentions_internal_topic``) is given (None then when one is found),
    /// else by the caller (the Python calls around the search were most of its cost).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (data, conv, compact, nodes, route, topic_of_id, internal=None))]
    fn table<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        conv: Bound<'py, PyAny>,
        compact: bool,
        nodes: i64,
        route: &Bound<'py, PyTuple>,
        topic_of_id: &Bound<'py, PyAny>,
        internal: Option<PyRef<'py, crate::scan::Needles>>,
    ) -> PyResult<Option<Bound<'py, pyo3::types::PyList>>> {
        let on = pyo3::types::PyBool::new(py, true).to_owned().into_any();
        let Some(body) = self.run(py, data, conv, &on, compact, nodes, None, Table::Rows)? else {
            return Ok(None);
        };
        let out = pyo3::types::PyList::empty(py);
        let none = py.None().into_bound(py);
        crate::records_table::follow(&body, route, &none, &none, topic_of_id, &out)?;
        if !out.is_empty() && internal.is_some_and(|n| n.held_by(data.as_bytes())) {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// The body of ``data`` as the JSON text JSON lines write (``body_values`` with
    /// ``json_bytes`` and record batches read, encoded by ``json``), or None: the
    /// values decoder decides (body_json.rs). ``internal``: for a message that may carry
    /// an internal topic's records, what reads each records field (body_json.rs).
    fn json<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        nodes: i64,
        internal: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Py<PyString>>> {
        crate::body_json::body_json(py, &self.head, &self.body, data, nodes, internal)
    }
}

impl Program {
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        conv: Bound<'py, PyAny>,
        mode: &Bound<'py, PyAny>,
        compact: bool,
        nodes: i64,
        s: Option<Bound<'py, PyAny>>,
        table: Table,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut cx = Cx {
            table,
            py,
            conv,
            records_on: mode.is_truthy()?,
            batches: mode
                .downcast::<PyString>()
                .is_ok_and(|m| m.to_str().ok() == Some("batches")),
            compact,
            records: self.records.bind(py).clone(),
            batch_heads: self.batch_heads.bind(py).clone(),
            bails: self.bails.bind(py).clone(),
            s,
            nodes,
            keys: &self.keys,
            head_template: &self.head_template,
            head_last: &self.head_last,
            last_str: &self.last_str,
        };
        let buf = data.as_bytes();
        let mut pos = 0usize;
        // (the header's fields are read for their checks only: its dict was thrown away)
        let got = cx
            .read_fields(&self.head, buf, Some(data), &mut pos, None)
            .and_then(|_| cx.read_struct(&self.body, buf, Some(data), &mut pos));
        match got {
            Ok(d) if pos == buf.len() => Ok(Some(d)),
            Ok(_) | Err(Stop::Bail) => Ok(None),
            Err(Stop::Err(e)) => Err(e),
        }
    }
}

/// Program.table's records fields: not asked (Off), or each batch's rows (Rows; a
/// message that may carry an internal topic's records is not Program.table's: the
/// caller asks after the read).
#[derive(Clone, Copy, PartialEq)]
enum Table {
    Off,
    Rows,
}

struct Cx<'a, 'py> {
    py: Python<'py>,
    table: Table, // records as the records table's rows, read here (Program.table)
    conv: Bound<'py, PyAny>,
    records_on: bool,
    batches: bool, // records="batches": their headers, read here
    compact: bool, // s.compact: the message's flexibility (the records node spans its prefix)
    records: Bound<'py, PyAny>,
    batch_heads: Bound<'py, PyAny>,
    bails: Bound<'py, PyAny>,
    s: Option<Bound<'py, PyAny>>, // the state, kept current around calls into Python
    nodes: i64,
    keys: &'a [(usize, Py<PyString>)],
    head_template: &'a Py<PyDict>,
    head_last: &'a HeadLast,
    last_str: &'a std::sync::Mutex<LastStr>,
}

pub(crate) fn byte(buf: &[u8], pos: usize) -> R<u8> {
    buf.get(pos).copied().ok_or(Stop::Bail)
}

pub(crate) fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> R<&'a [u8]> {
    let end = pos.checked_add(n).ok_or(Stop::Bail)?;
    let got = buf.get(*pos..end).ok_or(Stop::Bail)?;
    *pos = end;
    Ok(got)
}

/// reader.uvarint: at most ``max`` bytes (value up to 7 × max bits)
pub(crate) fn uvarint(buf: &[u8], pos: &mut usize, max: u32) -> R<u128> {
    varint::uvarint(buf, pos, buf.len(), max as usize).ok_or(Stop::Bail)
}

/// A length prefix: compact (uvarint, less one) or int32 (`wide`) / int16.
pub(crate) fn length(buf: &[u8], pos: &mut usize, compact: bool, wide: bool) -> R<i64> {
    if compact {
        return Ok(uvarint(buf, pos, 5)? as i64 - 1);
    }
    let b = take(buf, pos, if wide { 4 } else { 2 })?;
    Ok(if wide {
        i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64
    } else {
        i16::from_be_bytes([b[0], b[1]]) as i64
    })
}

/// The node budget charged ``n`` (the located decoder's accounting): Bail once spent.
pub(crate) fn spend(nodes: &mut i64, n: i64) -> R<()> {
    *nodes -= n;
    if *nodes < 0 {
        return Err(Stop::Bail);
    }
    Ok(())
}

/// The size and attributes of the batch at the start of `b` when the table read takes
/// it: whole, magic 2, at least its 61-byte header, and (payload's checks, with no codec
/// here, and _follow's control batches) no codec, no control bit, no unknown attribute
/// bit. None: the values decoder reads the records field.
fn table_batch(b: &[u8]) -> Option<(usize, i64)> {
    if b.len() < 17 {
        return None; // a partial batch
    }
    let total = 12 + i32::from_be_bytes([b[8], b[9], b[10], b[11]]) as i64;
    if total > b.len() as i64 || b[16] != 2 || total < 61 {
        return None;
    }
    let attrs = i16::from_be_bytes([b[21], b[22]]) as i64 & 0xFFFF;
    if attrs & !0x7F != 0 || attrs & 0x07 != 0 || attrs & 0x20 != 0 {
        return None;
    }
    Some((total as usize, attrs))
}

/// A v2 record batch's header (its first 61 bytes), as `batch.HEAD` unpacks it.
pub(crate) struct BatchHead {
    pub base_offset: i64,
    pub length: i32,
    pub leader_epoch: i32,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub count: i32,
}

/// The header of the batch `b` (at least 61 bytes, the batch exactly) when its CRC-32C
/// (over the bytes after the CRC) is right; None otherwise.
pub(crate) fn checked_head(b: &[u8]) -> Option<BatchHead> {
    let i64_at = |o: usize| i64::from_be_bytes(b[o..o + 8].try_into().unwrap());
    let i32_at = |o: usize| i32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    let i16_at = |o: usize| i16::from_be_bytes([b[o], b[o + 1]]);
    let crc = u32::from_be_bytes(b[17..21].try_into().unwrap());
    (crate::crc32c::crc32c(&b[21..]) == crc).then(|| BatchHead {
        base_offset: i64_at(0),
        length: i32_at(8),
        leader_epoch: i32_at(12),
        crc,
        attributes: i16_at(21),
        last_offset_delta: i32_at(23),
        base_timestamp: i64_at(27),
        max_timestamp: i64_at(35),
        producer_id: i64_at(43),
        producer_epoch: i16_at(51),
        base_sequence: i32_at(53),
        count: i32_at(57),
    })
}

pub(crate) fn uuid_text(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if i == 4 || i == 6 || i == 8 || i == 10 {
            s.push('-');
        }
        s.push(HEX[(x >> 4) as usize] as char);
        s.push(HEX[(x & 15) as usize] as char);
    }
    s
}

impl<'py> Cx<'_, 'py> {
    fn charge(&mut self, n: i64) -> R<()> {
        spend(&mut self.nodes, n)
    }

    /// A call into Python with ``s.nodes`` current; its bail exceptions are a bail.
    fn call(&mut self, f: &Bound<'py, PyAny>, args: Bound<'py, PyTuple>) -> R<Bound<'py, PyAny>> {
        if let Some(s) = &self.s {
            s.setattr(pyo3::intern!(self.py, "nodes"), self.nodes)?;
        }
        match f.call1(args) {
            Ok(v) => {
                if let Some(s) = &self.s {
                    self.nodes = s.getattr(pyo3::intern!(self.py, "nodes"))?.extract()?;
                }
                Ok(v)
            }
            Err(e) if e.matches(self.py, &self.bails)? => Err(Stop::Bail),
            Err(e) => Err(Stop::Err(e)),
        }
    }

    /// A string field's str: the last one this program made when its bytes are the
    /// same (a str is immutable: shared, its hash kept; a body's topic names, made and
    /// hashed anew per message, were a twentieth of a small Produce's summary), else a
    /// new one, held as the last if short.
    fn string(&mut self, raw: &[u8]) -> R<Bound<'py, PyAny>> {
        let py = self.py;
        // (try_lock: a read started by a finalizer during this one makes its own)
        let mut last = self.last_str.try_lock().ok();
        if let Some(l) = last.as_deref() {
            if let Some(held) = &l.text {
                if l.len == raw.len() && l.bytes[..l.len] == *raw {
                    return Ok(held.bind(py).clone().into_any());
                }
            }
        }
        let made = PyString::new(py, std::str::from_utf8(raw).map_err(|_| Stop::Bail)?);
        if let Some(l) = last.as_deref_mut() {
            if raw.len() <= l.bytes.len() {
                l.bytes[..raw.len()].copy_from_slice(raw);
                l.len = raw.len();
                l.text = Some(made.clone().unbind());
            }
        }
        Ok(made.into_any())
    }

    fn value(
        &mut self,
        kind: u8,
        compact: bool,
        nullable: bool,
        buf: &[u8],
        whole: Option<&Bound<'py, PyBytes>>,
        pos: &mut usize,
    ) -> R<Bound<'py, PyAny>> {
        let py = self.py;
        macro_rules! fixed {
            ($t:ty, $n:expr) => {{
                let b = take(buf, pos, $n)?;
                <$t>::from_be_bytes(b.try_into().unwrap())
                    .into_pyobject(py)?
                    .into_any()
            }};
        }
        Ok(match kind {
            I8 => fixed!(i8, 1),
            I16 => fixed!(i16, 2),
            I32 => fixed!(i32, 4),
            I64 => fixed!(i64, 8),
            U16 => fixed!(u16, 2),
            U32 => fixed!(u32, 4),
            F64 => fixed!(f64, 8),
            BOOL => match take(buf, pos, 1)?[0] {
                0 => pyo3::types::PyBool::new(py, false).to_owned().into_any(),
                1 => pyo3::types::PyBool::new(py, true).to_owned().into_any(),
                _ => return Err(Stop::Bail),
            },
            UUID => PyString::new(py, &uuid_text(take(buf, pos, 16)?)).into_any(),
            VARINT => zigzag(uvarint(buf, pos, 5)?).into_pyobject(py)?.into_any(),
            VARLONG => zigzag(uvarint(buf, pos, 10)?).into_pyobject(py)?.into_any(),
            UVARINT => uvarint(buf, pos, 5)?.into_pyobject(py)?.into_any(),
            STRING | BYTES | RECORDS => {
                let n = length(buf, pos, compact, kind != STRING)?;
                if n < 0 {
                    if n != -1 || !(nullable || kind == RECORDS) {
                        return Err(Stop::Bail);
                    }
                    return Ok(py.None().into_bound(py));
                }
                let start = *pos;
                let raw = take(buf, pos, n as usize)?;
                match kind {
                    STRING => self.string(raw)?,
                    RECORDS if self.table != Table::Off => self.table_rows(buf, start, *pos)?,
                    RECORDS if self.batches => self.batch_heads(buf, start, *pos)?,
                    RECORDS if self.records_on => {
                        let f = self.records.clone();
                        let whole = match whole {
                            Some(w) => w.clone(),
                            None => PyBytes::new(py, buf),
                        };
                        {
                            let state = self.s.clone().ok_or(Stop::Bail)?;
                            let args = (whole, start, *pos, state).into_pyobject(py)?;
                            self.call(&f, args)?
                        }
                    }
                    _ => {
                        let f = self.conv.clone();
                        {
                            let args = PyTuple::new(py, [PyBytes::new(py, raw)])?;
                            self.call(&f, args)?
                        }
                    }
                }
            }
            _ => return Err(Stop::Bail),
        })
    }

    /// A value read for its checks only (a field not kept): what `value` checks, with
    /// nothing built. Bytes (which go through `conv`) and records go through `value`.
    fn skip_value(
        &mut self,
        kind: u8,
        compact: bool,
        nullable: bool,
        buf: &[u8],
        whole: Option<&Bound<'py, PyBytes>>,
        pos: &mut usize,
    ) -> R<()> {
        match kind {
            I8 => {
                take(buf, pos, 1)?;
            }
            I16 | U16 => {
                take(buf, pos, 2)?;
            }
            I32 | U32 => {
                take(buf, pos, 4)?;
            }
            I64 | F64 => {
                take(buf, pos, 8)?;
            }
            BOOL => {
                if take(buf, pos, 1)?[0] > 1 {
                    return Err(Stop::Bail);
                }
            }
            UUID => {
                take(buf, pos, 16)?;
            }
            VARINT | UVARINT => {
                uvarint(buf, pos, 5)?;
            }
            VARLONG => {
                uvarint(buf, pos, 10)?;
            }
            STRING => {
                let n = length(buf, pos, compact, false)?;
                if n < 0 {
                    if n != -1 || !nullable {
                        return Err(Stop::Bail);
                    }
                    return Ok(());
                }
                std::str::from_utf8(take(buf, pos, n as usize)?).map_err(|_| Stop::Bail)?;
            }
            _ => {
                self.value(kind, compact, nullable, buf, whole, pos)?;
            }
        }
        Ok(())
    }

    fn read_struct(
        &mut self,
        st: &StructP,
        buf: &[u8],
        whole: Option<&Bound<'py, PyBytes>>,
        pos: &mut usize,
    ) -> R<Bound<'py, PyDict>> {
        let out = match &st.template {
            Some(t) => t.bind(self.py).copy()?,
            None => PyDict::new(self.py),
        };
        self.read_fields(st, buf, whole, pos, Some(&out))?;
        Ok(out)
    }

    /// A struct's fields into `out`, those with a name; the others (and all of them
    /// when `out` is None: a struct not kept) read for their checks only, as
    /// `read_struct` reads them (the same bails, charges and calls into Python).
    fn read_fields(
        &mut self,
        st: &StructP,
        buf: &[u8],
        whole: Option<&Bound<'py, PyBytes>>,
        pos: &mut usize,
        out: Option<&Bound<'py, PyDict>>,
    ) -> R<()> {
        let py = self.py;
        for f in &st.fields {
            let (out, name) = match (out, &f.name) {
                (Some(out), Some(name)) => (out, name),
                _ => {
                    self.skip_field(f, buf, whole, pos)?;
                    continue;
                }
            };
            let v = match &f.shape {
                Shape::Value(k) => self.value(*k, f.compact, f.nullable, buf, whole, pos)?,
                Shape::Struct(sub) => self.read_struct(sub, buf, whole, pos)?.into_any(),
                Shape::NullableStruct(sub) => {
                    if byte(buf, *pos)? > 127 {
                        *pos += 1;
                        py.None().into_bound(py)
                    } else {
                        *pos += 1;
                        self.read_struct(sub, buf, whole, pos)?.into_any()
                    }
                }
                Shape::ArrayStruct(_, cost) | Shape::ArrayValue(_, cost) => {
                    let n = length(buf, pos, f.len_compact, true)?;
                    if n < -1 || n > buf.len() as i64 - *pos as i64 {
                        return Err(Stop::Bail);
                    }
                    if n == -1 {
                        py.None().into_bound(py)
                    } else {
                        self.charge(n * cost)?;
                        let a = pyo3::types::PyList::empty(py);
                        for _ in 0..n {
                            let v = match &f.shape {
                                Shape::ArrayStruct(sub, _) => {
                                    self.read_struct(sub, buf, whole, pos)?.into_any()
                                }
                                Shape::ArrayValue(k, _) => {
                                    self.value(*k, f.compact, f.nullable, buf, whole, pos)?
                                }
                                _ => unreachable!(),
                            };
                            a.append(v)?;
                        }
                        a.into_any()
                    }
                }
            };
            out.set_item(name.bind(py), v)?;
        }
        if let Some(table) = &st.tagged {
            let n = uvarint(buf, pos, 5)?;
            if n > 0 {
                self.tagged(n, table, buf, pos, out)?;
            }
        }
        Ok(())
    }

    /// A field not kept, read for its checks only (``read_fields``' reading of it, with
    /// nothing built).
    fn skip_field(
        &mut self,
        f: &FieldP,
        buf: &[u8],
        whole: Option<&Bound<'py, PyBytes>>,
        pos: &mut usize,
    ) -> R<()> {
        match &f.shape {
            Shape::Value(k) => self.skip_value(*k, f.compact, f.nullable, buf, whole, pos),
            Shape::Struct(sub) => self.read_fields(sub, buf, whole, pos, None),
            Shape::NullableStruct(sub) => {
                let null = byte(buf, *pos)? > 127;
                *pos += 1;
                if null {
                    Ok(())
                } else {
                    self.read_fields(sub, buf, whole, pos, None)
                }
            }
            Shape::ArrayStruct(_, cost) | Shape::ArrayValue(_, cost) => {
                let n = length(buf, pos, f.len_compact, true)?;
                if n < -1 || n > buf.len() as i64 - *pos as i64 {
                    return Err(Stop::Bail);
                }
                if n == -1 {
                    return Ok(());
                }
                self.charge(n * cost)?;
                for _ in 0..n {
                    match &f.shape {
                        Shape::ArrayStruct(sub, _) => {
                            self.read_fields(sub, buf, whole, pos, None)?
                        }
                        Shape::ArrayValue(k, _) => {
                            self.skip_value(*k, f.compact, f.nullable, buf, whole, pos)?
                        }
                        _ => unreachable!(),
                    }
                }
                Ok(())
            }
        }
    }

    /// values._batch_heads: the v2 batch headers of ``buf[pos..end]`` (CRC-checked).
    fn batch_heads(&mut self, buf: &[u8], mut pos: usize, end: usize) -> R<Bound<'py, PyAny>> {
        let py = self.py;
        let n = end - pos;
        let size = if self.compact {
            // the located node spans the uvarint (n + 1) too, written in as few bytes
            // as it takes (else the Python reader bails)
            let mut prefix = [0u8; 10];
            let mut k = 0;
            let mut v = n + 1;
            while v >= 0x80 {
                prefix[k] = (v & 0x7F) as u8 | 0x80;
                v >>= 7;
                k += 1;
            }
            prefix[k] = v as u8;
            k += 1;
            if pos < k || buf[pos - k..pos] != prefix[..k] {
                return Err(Stop::Bail);
            }
            n + k
        } else {
            n + 4
        };
        // an empty values.BatchHeads by list.__new__, filled here: calling the class ran
        // its Python __init__ (a frame and a copy of the list per records field, a
        // fiftieth of a summary of many small exchanges)
        // (list.__new__(cls) is PyType_GenericNew: called directly, without looking up
        // and calling __new__ through Python, a tenth of the batch heads' instructions)
        let cls = self.batch_heads.as_any();
        // SAFETY: cls is a live type object (values.BatchHeads, a list subclass) and the
        // args a live tuple; the result is a new reference or NULL with an exception
        let made = unsafe {
            let args = pyo3::types::PyTuple::empty(py);
            let p = pyo3::ffi::PyType_GenericNew(
                cls.as_ptr().cast::<pyo3::ffi::PyTypeObject>(),
                args.as_ptr(),
                std::ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, p)?
        };
        let heads = made
            .downcast::<pyo3::types::PyList>()
            .map_err(PyErr::from)?;
        while pos < end {
            let left = end - pos;
            if left < 17 {
                break;
            }
            let b = &buf[pos..end];
            let total = 12 + i32::from_be_bytes([b[8], b[9], b[10], b[11]]) as i64;
            if total < 12 {
                return Err(Stop::Bail);
            }
            if total > left as i64 {
                break;
            }
            let total = total as usize;
            if self.nodes <= 0 || b[16] != 2 || total < 61 {
                return Err(Stop::Bail);
            }
            self.nodes -= 16;
            let h = checked_head(&b[..total]).ok_or(Stop::Bail)?;
            // HEAD_KEYS' values, "records" (a new empty list each) aside
            let values: [i64; RECORDS_KEY] = [
                h.base_offset,
                h.length.into(),
                h.leader_epoch.into(),
                (b[16] as i8).into(),
                h.crc.into(),
                h.attributes.into(),
                h.last_offset_delta.into(),
                h.base_timestamp,
                h.max_timestamp,
                h.producer_id,
                h.producer_epoch.into(),
                h.base_sequence.into(),
                h.count.into(),
            ];
            // A copy of the last head made (held privately), its values that differ set:
            // a producer's batches differ in a field or two (its timestamp, a sequence),
            // and setting every field of a copy of the template was half the heads' cost.
            // (try_lock: a read started by a finalizer during this one builds its own)
            let mut last = self.head_last.try_lock().ok();
            let d = match last.as_deref().and_then(|l| l.as_ref()) {
                Some((held, was)) => {
                    let d = held.bind(py).copy()?;
                    let mut changed = 0;
                    for (i, key) in self.keys {
                        if *i == RECORDS_KEY {
                            d.set_item(key.bind(py), pyo3::types::PyList::empty(py))?;
                        } else if was[*i] != values[*i] {
                            d.set_item(key.bind(py), values[*i])?;
                            changed += 1;
                        }
                    }
                    if changed > 2 {
                        // (another producer's batches: held from here)
                        if let Some(l) = last.as_deref_mut() {
                            *l = Some((d.copy()?.unbind(), values));
                        }
                    }
                    d
                }
                None => {
                    let d = self.head_template.bind(py).copy()?;
                    for (i, key) in self.keys {
                        let key = key.bind(py);
                        if *i == RECORDS_KEY {
                            d.set_item(key, pyo3::types::PyList::empty(py))?;
                        } else {
                            d.set_item(key, values[*i])?;
                        }
                    }
                    if let Some(l) = last.as_deref_mut() {
                        *l = Some((d.copy()?.unbind(), values));
                    }
                    d
                }
            };
            drop(last);
            heads.append(d)?;
            pos += total;
        }
        made.setattr(pyo3::intern!(py, "size"), size)?;
        Ok(made)
    }

    /// values._records with values._batch and record_table._batch_rows, for clean,
    /// uncompressed, whole v2 batches that are not control batches: a list of each
    /// batch's rows. Anything else bails (the values decoder reads the message: it may
    /// read what this leaves, or decide that the tree must).
    fn table_rows(&mut self, buf: &[u8], mut pos: usize, end: usize) -> R<Bound<'py, PyAny>> {
        let py = self.py;
        let out = pyo3::types::PyList::empty(py);
        // every batch's framing first: a field the values decoder must read (a partial
        // batch at a fetch's end, a compressed one) is handed back before any CRC or row
        // is made here (the decoder then reads the whole message again)
        let mut at = pos;
        while at < end {
            at += table_batch(&buf[at..end]).ok_or(Stop::Bail)?.0;
        }
        while pos < end {
            let b = &buf[pos..end];
            let (total, attrs) = table_batch(b).ok_or(Stop::Bail)?;
            self.charge(16)?;
            if self.nodes <= 0 {
                return Err(Stop::Bail);
            }
            let h = checked_head(&b[..total]).ok_or(Stop::Bail)?;
            if h.count < 0 || h.count as usize > total - 61 {
                return Err(Stop::Bail);
            }
            self.charge(9 * h.count as i64)?;
            let fixed = attrs & 0x08 != 0;
            let at = crate::record_walk::Records {
                pos: pos + 61,
                end: pos + total,
                count: h.count as i64,
                base_offset: h.base_offset,
                base_timestamp: if fixed {
                    h.max_timestamp
                } else {
                    h.base_timestamp
                },
                fixed_timestamp: fixed,
            };
            let rows = crate::records_table::batch_rows(py, buf, &at)?.ok_or(Stop::Bail)?;
            out.append(rows)?;
            pos += total;
        }
        Ok(out.into_any())
    }

    /// values._tagged
    fn tagged(
        &mut self,
        n: u128,
        table: &HashMap<u64, StructP>,
        buf: &[u8],
        pos: &mut usize,
        out: Option<&Bound<'py, PyDict>>,
    ) -> R<()> {
        if n > (buf.len() - *pos) as u128 {
            return Err(Stop::Bail);
        }
        for _ in 0..n {
            self.charge(4)?;
            let tag = uvarint(buf, pos, 5)?;
            let size = uvarint(buf, pos, 5)? as usize;
            let region = take(buf, pos, size)?;
            match table.get(&(tag as u64)) {
                None => {
                    let f = self.conv.clone();
                    let args = PyTuple::new(self.py, [PyBytes::new(self.py, region)])?;
                    let v = self.call(&f, args)?;
                    if let Some(out) = out {
                        out.set_item(format!("tag_{tag}"), v)?;
                    }
                }
                Some(sub) => {
                    let mut p = 0usize;
                    let d = match out {
                        Some(_) => Some(self.read_struct(sub, region, None, &mut p)?),
                        None => {
                            self.read_fields(sub, region, None, &mut p, None)?;
                            None
                        }
                    };
                    if p != size {
                        return Err(Stop::Bail);
                    }
                    if let (Some(out), Some(d)) = (out, d) {
                        for (k, v) in d.iter() {
                            out.set_item(k, v)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
