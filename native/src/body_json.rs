//! A message body straight to the JSON text `kdissect pcap --format jsonl` writes for it,
//! with no Python object per field: the layouts values.rs reads into dicts, written as
//! `json` encodes those dicts (`", "` and `": "` separators, `ensure_ascii`), record
//! batches as the values decoder's `_batch` makes them (head, attributes as words, the
//! records by logjson.rs's list writer).
//!
//! The reference is Python: `kdissect.protocol.values.body_values` with `json_bytes`, then
//! `render.lines` encoding the dict. This returns exactly that text, or None at anything
//! it leaves to the reference: a float, a compressed, partial or v0/v1 batch, a tag seen
//! twice, bytes the reference reads differently, the node budget spent. In a message that
//! may carry an internal topic (a name or id found in its bytes), each records field goes
//! to a Python callback with the topic its struct names: the located decoder's reading
//! of those batches alone (internal records decoded by schema), or None.
//! tests/test_body_json.py compares the two on every message of the repository's
//! captures and damaged copies (tests/test_lines.py: whole lines).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::collections::HashMap;

use crate::logjson::{lines, push_bytes, push_int, push_json_str};
use crate::record_walk::Records;
use crate::values::*;
use crate::varint::zigzag;

const HEAD_SIZE: usize = 61; // a v2 batch's header
const FRAME: usize = 17; // enough to frame a batch and tell its format
const CODEC_MASK: i16 = 0x07;
const KNOWN_ATTRIBUTES: i16 = 0x7F; // (batch.KNOWN_ATTRIBUTES: bits no Kafka defines are noted)
const LOG_APPEND_TIME: i16 = 0x08;
const TRANSACTIONAL: i16 = 0x10;
const CONTROL: i16 = 0x20;
const DELETE_HORIZON: i16 = 0x40;

/// The body of the message `buf` (its header read and left out) as JSON text.
pub(crate) fn body_json<'py>(
    py: Python<'py>,
    head: &StructP,
    body: &StructP,
    data: &Bound<'py, PyBytes>,
    nodes: i64,
    internal: Option<Bound<'py, PyAny>>,
) -> PyResult<Option<Py<PyString>>> {
    let buf = data.as_bytes();
    let mut w = Writer {
        py,
        internal,
        whole: data.clone(),
        topic: None,
        topic_id: None,
        decompressed: -1,
        used_callback: false,
        nodes,
        out: Vec::with_capacity(buf.len() + buf.len() / 2 + 64),
    };
    let mut pos = 0usize;
    let got = w.structure(head, buf, &mut pos).and_then(|_| {
        w.out.clear(); // the header is not part of the body
        w.structure(body, buf, &mut pos)
    });
    // (records read by the callback charge the located decoder's own way, in another
    // order than its whole-message decode, which decodes internal records last: the
    // totals match, where each is checked does not. Only a budget left over on every
    // count means no check of that decode could have failed.)
    let spent = w.used_callback && w.nodes <= 0;
    match got {
        Ok(()) if spent => Ok(None),
        Ok(()) if pos == buf.len() => match std::str::from_utf8(&w.out) {
            Ok(text) => Ok(Some(PyString::new(py, text).unbind())),
            Err(_) => Ok(None),
        },
        Ok(()) | Err(Stop::Bail) => Ok(None),
        Err(Stop::Err(e)) => Err(e),
    }
}

struct Writer<'py> {
    py: Python<'py>,
    // records of a message that may carry an internal topic: (bytes, start, end, topic,
    // topic id, nodes, decompressed) -> None or (their text, nodes and decompressed left)
    internal: Option<Bound<'py, PyAny>>,
    whole: Bound<'py, PyBytes>,
    topic: Option<String>, // the topic (or name) field of the struct being written
    topic_id: Option<String>, // its topic_id
    decompressed: i64,     // what decompression may still make (-1: the callback's own)
    used_callback: bool,   // a records field went to it
    nodes: i64,
    out: Vec<u8>,
}

/// An object's member name (after a separator unless it is the `first`).
fn push_key(out: &mut Vec<u8>, first: &mut bool, name: &str) {
    if !*first {
        out.extend_from_slice(b", ");
    }
    *first = false;
    push_json_str(out, name);
    out.extend_from_slice(b": ");
}

impl Writer<'_> {
    fn charge(&mut self, n: i64) -> R<()> {
        spend(&mut self.nodes, n)
    }

    /// A struct as a JSON object.
    fn structure(&mut self, st: &StructP, buf: &[u8], pos: &mut usize) -> R<()> {
        self.out.push(b'{');
        let mut first = true;
        // the topic a struct names is its records' (internal.decode_wire_records)
        let outer = self
            .internal
            .as_ref()
            .map(|_| (self.topic.clone(), self.topic_id.clone()));
        self.fields(st, buf, pos, &mut first)?;
        if let Some(table) = &st.tagged {
            let n = uvarint(buf, pos, 5)?;
            if n > 0 {
                self.tagged(n, table, buf, pos, &mut first)?;
            }
        }
        if let Some((topic, topic_id)) = outer {
            self.topic = topic;
            self.topic_id = topic_id;
        }
        self.out.push(b'}');
        Ok(())
    }

    /// A struct's fields as an object's members (after `first`'s separator state); an
    /// unnamed field is read and its text dropped.
    fn fields(&mut self, st: &StructP, buf: &[u8], pos: &mut usize, first: &mut bool) -> R<()> {
        for f in &st.fields {
            let mark = self.out.len();
            if let Some(name) = &f.name {
                push_key(&mut self.out, first, name.bind(self.py).to_str()?);
            }
            let at = *pos;
            self.field(f, buf, pos)?;
            if self.internal.is_some() {
                self.note_topic(f, &buf[at..*pos]);
            }
            if f.name.is_none() {
                self.out.truncate(mark);
            }
        }
        Ok(())
    }

    /// Remember a struct's `topic`/`name` (a string) or `topic_id` field, from the text
    /// just written for it (`raw` its bytes).
    fn note_topic(&mut self, f: &FieldP, raw: &[u8]) {
        let Some(name) = &f.name else { return };
        let Ok(name) = name.bind(self.py).to_str() else {
            return;
        };
        match (name, &f.shape) {
            ("topic" | "name", Shape::Value(STRING)) => {
                let mut p = 0;
                self.topic = match length(raw, &mut p, f.compact, false) {
                    Ok(n) if n >= 0 => std::str::from_utf8(&raw[p..]).ok().map(str::to_owned),
                    _ => None,
                };
            }
            ("topic_id", Shape::Value(UUID)) if raw.len() == 16 => {
                self.topic_id = Some(uuid_text(raw));
            }
            _ => {}
        }
    }

    fn field(&mut self, f: &FieldP, buf: &[u8], pos: &mut usize) -> R<()> {
        match &f.shape {
            Shape::Value(k) => self.value(*k, f.compact, f.nullable, buf, pos),
            Shape::Struct(sub) => self.structure(sub, buf, pos),
            Shape::NullableStruct(sub) => {
                let b = *buf.get(*pos).ok_or(Stop::Bail)?;
                *pos += 1;
                if b > 127 {
                    self.out.extend_from_slice(b"null");
                    Ok(())
                } else {
                    self.structure(sub, buf, pos)
                }
            }
            Shape::ArrayStruct(_, cost) | Shape::ArrayValue(_, cost) => {
                let n = length(buf, pos, f.len_compact, true)?;
                if n < -1 || n > buf.len() as i64 - *pos as i64 {
                    return Err(Stop::Bail);
                }
                if n == -1 {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
                self.charge(n * cost)?;
                self.out.push(b'[');
                for i in 0..n {
                    if i > 0 {
                        self.out.extend_from_slice(b", ");
                    }
                    match &f.shape {
                        Shape::ArrayStruct(sub, _) => self.structure(sub, buf, pos)?,
                        Shape::ArrayValue(k, _) => {
                            self.value(*k, f.compact, f.nullable, buf, pos)?
                        }
                        _ => unreachable!(),
                    }
                }
                self.out.push(b']');
                Ok(())
            }
        }
    }

    fn value(
        &mut self,
        kind: u8,
        compact: bool,
        nullable: bool,
        buf: &[u8],
        pos: &mut usize,
    ) -> R<()> {
        macro_rules! int {
            ($t:ty, $n:expr) => {{
                let b = take(buf, pos, $n)?;
                push_int(
                    &mut self.out,
                    <$t>::from_be_bytes(b.try_into().unwrap()) as i128,
                );
            }};
        }
        match kind {
            I8 => int!(i8, 1),
            I16 => int!(i16, 2),
            I32 => int!(i32, 4),
            I64 => int!(i64, 8),
            U16 => int!(u16, 2),
            U32 => int!(u32, 4),
            BOOL => match take(buf, pos, 1)?[0] {
                0 => self.out.extend_from_slice(b"false"),
                1 => self.out.extend_from_slice(b"true"),
                _ => return Err(Stop::Bail),
            },
            UUID => push_json_str(&mut self.out, &uuid_text(take(buf, pos, 16)?)),
            VARINT => push_int(&mut self.out, zigzag(uvarint(buf, pos, 5)?) as i128),
            VARLONG => push_int(&mut self.out, zigzag(uvarint(buf, pos, 10)?) as i128),
            UVARINT => push_int(&mut self.out, uvarint(buf, pos, 5)? as i128),
            STRING | BYTES | RECORDS => {
                let n = length(buf, pos, compact, kind != STRING)?;
                if n < 0 {
                    if n != -1 || !(nullable || kind == RECORDS) {
                        return Err(Stop::Bail);
                    }
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
                let start = *pos;
                let raw = take(buf, pos, n as usize)?;
                match kind {
                    STRING => {
                        let s = std::str::from_utf8(raw).map_err(|_| Stop::Bail)?;
                        push_json_str(&mut self.out, s);
                    }
                    BYTES => push_bytes(self.py, &mut self.out, raw)?,
                    _ => self.records(buf, start, *pos)?,
                }
            }
            _ => return Err(Stop::Bail), // F64: Python's float repr is left to Python
        }
        Ok(())
    }

    /// values._tagged: each tag's fields merged into the object (an unknown tag as
    /// `tag_N`, its bytes as `json_bytes` shows them).
    fn tagged(
        &mut self,
        n: u128,
        table: &HashMap<u64, StructP>,
        buf: &[u8],
        pos: &mut usize,
        first: &mut bool,
    ) -> R<()> {
        if n > (buf.len() - *pos) as u128 {
            return Err(Stop::Bail);
        }
        let mut seen: Vec<u128> = Vec::new();
        for _ in 0..n {
            self.charge(4)?;
            let tag = uvarint(buf, pos, 5)?;
            let size = uvarint(buf, pos, 5)? as usize;
            let region = take(buf, pos, size)?;
            if seen.contains(&tag) {
                return Err(Stop::Bail); // a dict keeps the first place, the last value
            }
            seen.push(tag);
            match table.get(&(tag as u64)) {
                None => {
                    push_key(&mut self.out, first, &format!("tag_{tag}"));
                    push_bytes(self.py, &mut self.out, region)?;
                }
                Some(sub) => {
                    let mut p = 0usize;
                    self.fields(sub, region, &mut p, first)?;
                    if p != size {
                        return Err(Stop::Bail);
                    }
                }
            }
        }
        Ok(())
    }

    /// values._records with records read: the field's v2 batches as a JSON list.
    fn records(&mut self, buf: &[u8], mut pos: usize, end: usize) -> R<()> {
        if let Some(f) = self.internal.clone() {
            let whole = self.whole.as_bytes();
            if !std::ptr::eq(buf.as_ptr(), whole.as_ptr()) || buf.len() != whole.len() {
                return Err(Stop::Bail); // inside a tagged field: offsets of another buffer
            }
            self.used_callback = true;
            let args = (
                self.whole.clone(),
                pos,
                end,
                self.topic.clone(),
                self.topic_id.clone(),
                self.nodes,
                self.decompressed,
            );
            let got = f.call1(args)?;
            if got.is_none() {
                return Err(Stop::Bail);
            }
            let (text, nodes, decompressed): (Bound<'_, PyString>, i64, i64) = got.extract()?;
            self.out.extend_from_slice(text.to_str()?.as_bytes());
            self.nodes = nodes;
            self.decompressed = decompressed;
            return Ok(());
        }
        self.out.push(b'[');
        let mut first = true;
        while pos < end {
            let left = end - pos;
            if left < FRAME {
                return Err(Stop::Bail); // a partial batch: the located reader names it
            }
            let b = &buf[pos..end];
            let total = 12 + i32::from_be_bytes([b[8], b[9], b[10], b[11]]) as i64;
            if total > left as i64 || b[16] != 2 {
                return Err(Stop::Bail);
            }
            self.charge(16)?;
            if self.nodes <= 0 {
                return Err(Stop::Bail);
            }
            if total < 0 {
                return Err(Stop::Bail);
            }
            if !first {
                self.out.extend_from_slice(b", ");
            }
            first = false;
            self.batch(&buf[pos..pos + total as usize])?;
            pos += total as usize;
        }
        self.out.push(b']');
        Ok(())
    }

    /// values._batch of an uncompressed v2 batch (`b` exactly its bytes).
    fn batch(&mut self, b: &[u8]) -> R<()> {
        if b.len() < HEAD_SIZE {
            return Err(Stop::Bail);
        }
        let h = checked_head(b).ok_or(Stop::Bail)?;
        let (attrs, count) = (h.attributes, h.count as i64);
        if attrs & CODEC_MASK != 0
            || attrs & !KNOWN_ATTRIBUTES != 0
            || count < 0
            || count > (b.len() - HEAD_SIZE) as i64
        {
            // compressed (Python decompresses), bits Python's tree notes, or a count
            // that cannot be
            return Err(Stop::Bail);
        }
        self.charge(9 * count)?;
        let stamped = attrs & LOG_APPEND_TIME != 0;
        let out = &mut self.out;
        let fields: [(&[u8], i64); 5] = [
            (b"{\"base_offset\": ", h.base_offset),
            (b", \"batch_length\": ", h.length as i64),
            (b", \"partition_leader_epoch\": ", h.leader_epoch as i64),
            (b", \"magic\": ", 2),
            (b", \"crc\": ", h.crc as i64),
        ];
        for (k, v) in fields {
            out.extend_from_slice(k);
            push_int(out, v as i128);
        }
        out.extend_from_slice(b", \"attributes\": \"none");
        for (bit, word) in [
            (LOG_APPEND_TIME, &b", log-append-time"[..]),
            (TRANSACTIONAL, b", transactional"),
            (CONTROL, b", control"),
            (DELETE_HORIZON, b", delete-horizon"),
        ] {
            if attrs & bit != 0 {
                out.extend_from_slice(word);
            }
        }
        out.push(b'"');
        let fields: [(&[u8], i64); 7] = [
            (b", \"last_offset_delta\": ", h.last_offset_delta as i64),
            (b", \"base_timestamp\": ", h.base_timestamp),
            (b", \"max_timestamp\": ", h.max_timestamp),
            (b", \"producer_id\": ", h.producer_id),
            (b", \"producer_epoch\": ", h.producer_epoch as i64),
            (b", \"base_sequence\": ", h.base_sequence as i64),
            (b", \"record_count\": ", count),
        ];
        for (k, v) in fields {
            out.extend_from_slice(k);
            push_int(out, v as i128);
        }
        out.extend_from_slice(b", \"problems\": [], \"records\": ");
        let at = Records {
            pos: HEAD_SIZE,
            end: b.len(),
            count,
            base_offset: h.base_offset,
            base_timestamp: if stamped {
                h.max_timestamp
            } else {
                h.base_timestamp
            },
            fixed_timestamp: stamped,
        };
        if !lines(self.py, out, b, &at, true)? {
            return Err(Stop::Bail);
        }
        out.push(b'}');
        Ok(())
    }
}
