//! Avro binary -> the JSON text JSON lines show (docs/guide/values.md): the compiled twin of
//! kdissect/protocol/values_schema/avro_fast.py, whose values ``json.dumps`` encodes.
//!
//! A schema is compiled once, in Python (values_schema/avro_text.py), into a program: a
//! list of ops that refer to each other by index (records, arrays, maps and unions name
//! their parts). ``read`` walks it over a value's bytes and writes JSON text with the
//! forms of ``values_schema.json_value`` (decimals as strings, times in ISO 8601, UUIDs
//! as text, bytes as base64) and ``json.dumps``'s spelling (", " and ": ", ASCII with
//! \uXXXX escapes, floats as Python's repr). Whatever it is not sure to write exactly as
//! the Python reader would (a decimal that rounds, an unusual UUID spelling, a map with a
//! key twice, nesting past 64) is an error, and the caller then takes the Python reader:
//! this code never answers differently, it only answers less often. Pure: no I/O.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::collections::HashSet;

const MAX_DEPTH: u32 = 64;
const DAY_US: i128 = 86_400_000_000;
/// days from 1970-01-01 back to 0001-01-01, and on to 10000-01-01 (datetime's range)
const DAYS_TO_YEAR1: i128 = 719_162;
const DAYS_YEAR1_TO_10000: i128 = 3_652_059;

#[derive(Clone, Copy)]
enum Conv {
    Plain,
    TsMillis,
    TsMicros,
    LocalMillis,
    LocalMicros,
    Date,
    TimeMillis,
    TimeMicros,
}

enum Op {
    Null,
    Boolean,
    Int(Conv),
    Long(Conv),
    Float,
    Double,
    Str,
    Uuid,
    Bytes,
    Fixed(usize),
    /// size (None: bytes), precision, scale
    Decimal(Option<usize>, u32, u32),
    /// symbols as JSON text
    Enum(Vec<String>),
    /// ("\"name\": " as JSON text, op) per field
    Record(Vec<(String, usize)>),
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
}

struct Fail;
type Res<T> = Result<T, Fail>;

struct Reader<'a> {
    ops: &'a [Op],
    b: &'a [u8],
    p: usize,
    out: String,
    count: u64,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Res<u8> {
        let v = *self.b.get(self.p).ok_or(Fail)?;
        self.p += 1;
        Ok(v)
    }

    /// A zigzag varint of at most 10 bytes (as avro_fast._long: up to 70 bits).
    fn long(&mut self) -> Res<i128> {
        let mut v: u128 = 0;
        let mut shift = 0;
        for _ in 0..10 {
            let byte = self.byte()?;
            v |= ((byte & 0x7F) as u128) << shift;
            if byte < 0x80 {
                return Ok(((v >> 1) as i128) ^ -((v & 1) as i128));
            }
            shift += 7;
        }
        Err(Fail)
    }

    fn take(&mut self, n: i128) -> Res<&'a [u8]> {
        if n < 0 || n > (self.b.len() - self.p) as i128 {
            return Err(Fail);
        }
        let s = &self.b[self.p..self.p + n as usize];
        self.p += n as usize;
        Ok(s)
    }

    fn sized(&mut self) -> Res<&'a [u8]> {
        let n = self.long()?;
        self.take(n)
    }

    fn value(&mut self, op: usize, depth: u32) -> Res<()> {
        if depth > MAX_DEPTH {
            return Err(Fail);
        }
        let ops = self.ops;
        if !matches!(ops[op], Op::Union(_)) {
            self.count += 1; // a union's branch counts, not the union
        }
        match &ops[op] {
            Op::Null => self.out.push_str("null"),
            Op::Boolean => match self.byte()? {
                0 => self.out.push_str("false"),
                1 => self.out.push_str("true"),
                _ => return Err(Fail),
            },
            Op::Int(conv) => {
                let v = self.long()?;
                if !(-2_147_483_648..2_147_483_648).contains(&v) {
                    return Err(Fail);
                }
                self.number(v, *conv)?;
            }
            Op::Long(conv) => {
                let v = self.long()?;
                self.number(v, *conv)?;
            }
            Op::Float => {
                let s = self.take(4)?;
                let v = f32::from_le_bytes([s[0], s[1], s[2], s[3]]) as f64;
                float_json(&mut self.out, v);
            }
            Op::Double => {
                let s = self.take(8)?;
                let v = f64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                float_json(&mut self.out, v);
            }
            Op::Str => {
                let s = self.sized()?;
                let text = std::str::from_utf8(s).map_err(|_| Fail)?;
                string_json(&mut self.out, text);
            }
            Op::Uuid => {
                let s = self.sized()?;
                uuid_json(&mut self.out, s)?;
            }
            Op::Bytes => {
                let s = self.sized()?;
                base64_json(&mut self.out, s);
            }
            Op::Fixed(size) => {
                let s = self.take(*size as i128)?;
                base64_json(&mut self.out, s);
            }
            Op::Decimal(size, prec, scale) => {
                let s = match size {
                    Some(n) => self.take(*n as i128)?,
                    None => self.sized()?,
                };
                decimal_json(&mut self.out, s, *prec, *scale)?;
            }
            Op::Enum(symbols) => {
                let v = self.long()?;
                if v < 0 || v >= symbols.len() as i128 {
                    return Err(Fail);
                }
                self.out.push_str(&symbols[v as usize]);
            }
            Op::Record(fields) => {
                self.out.push('{');
                for (i, (key, item)) in fields.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.out.push_str(key);
                    self.value(*item, depth + 1)?;
                }
                self.out.push('}');
            }
            Op::Array(item) => {
                self.out.push('[');
                let mut first = true;
                self.blocks(|r| {
                    if !first {
                        r.out.push_str(", ");
                    }
                    first = false;
                    r.value(*item, depth + 1)
                })?;
                self.out.push(']');
            }
            Op::Map(item) => {
                self.out.push('{');
                let mut keys: HashSet<&'a [u8]> = HashSet::new();
                self.blocks(|r| {
                    let k = r.sized()?;
                    let text = std::str::from_utf8(k).map_err(|_| Fail)?;
                    // a key twice: a Python dict keeps one entry, in the first one's place
                    if !keys.insert(k) {
                        return Err(Fail);
                    }
                    if keys.len() > 1 {
                        r.out.push_str(", ");
                    }
                    string_json(&mut r.out, text);
                    r.out.push_str(": ");
                    r.value(*item, depth + 1)
                })?;
                self.out.push('}');
            }
            Op::Union(branches) => {
                let i = self.long()?;
                if i < 0 || i >= branches.len() as i128 {
                    return Err(Fail);
                }
                self.value(branches[i as usize], depth)?;
            }
        }
        Ok(())
    }

    /// An array's or map's blocks: a count (negative: then a byte size), its items, until
    /// a count of 0.
    fn blocks(&mut self, mut item: impl FnMut(&mut Self) -> Res<()>) -> Res<()> {
        loop {
            let mut n = self.long()?;
            if n == 0 {
                return Ok(());
            }
            if n < 0 {
                n = -n;
                self.long()?;
            }
            // every item takes at least one byte (fast._qualifies): a count beyond the
            // bytes left fails at the end, after at most that many items
            let mut i: i128 = 0;
            while i < n {
                item(self)?;
                i += 1;
            }
        }
    }

    fn number(&mut self, v: i128, conv: Conv) -> Res<()> {
        let out = &mut self.out;
        match conv {
            Conv::Plain => {
                out.push_str(&v.to_string());
                return Ok(());
            }
            Conv::TsMillis | Conv::TsMicros | Conv::LocalMillis | Conv::LocalMicros => {
                let us = if matches!(conv, Conv::TsMillis | Conv::LocalMillis) {
                    v * 1000
                } else {
                    v
                };
                out.push('"');
                datetime_text(out, us)?;
                if matches!(conv, Conv::TsMillis | Conv::TsMicros) {
                    out.push_str("+00:00");
                }
                out.push('"');
            }
            Conv::Date => {
                let days = v;
                if !(-DAYS_TO_YEAR1..DAYS_YEAR1_TO_10000 - DAYS_TO_YEAR1).contains(&days) {
                    return Err(Fail);
                }
                out.push('"');
                date_text(out, days);
                out.push('"');
            }
            Conv::TimeMillis | Conv::TimeMicros => {
                // datetime.min + timedelta(...): within 0001-01-01 .. 9999-12-31
                let us = if matches!(conv, Conv::TimeMillis) {
                    v * 1000
                } else {
                    v
                };
                if !(0..DAYS_YEAR1_TO_10000 * DAY_US).contains(&us) {
                    return Err(Fail);
                }
                out.push('"');
                time_text(out, us % DAY_US);
                out.push('"');
            }
        }
        Ok(())
    }
}

/// ``YYYY-MM-DD`` of a day counted from 1970-01-01 (proleptic Gregorian).
fn date_text(out: &mut String, days: i128) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i128;
    out.push_str(&format!("{:04}-{:02}-{:02}", y, m, d));
}

/// ``HH:MM:SS[.ffffff]`` (``time.isoformat``) of microseconds into a day.
fn time_text(out: &mut String, us: i128) {
    let (s, frac) = (us / 1_000_000, us % 1_000_000);
    out.push_str(&format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60));
    if frac != 0 {
        out.push_str(&format!(".{:06}", frac));
    }
}

/// ``datetime.isoformat`` (without zone) of microseconds from 1970-01-01.
fn datetime_text(out: &mut String, us: i128) -> Res<()> {
    let days = us.div_euclid(DAY_US);
    if !(-DAYS_TO_YEAR1..DAYS_YEAR1_TO_10000 - DAYS_TO_YEAR1).contains(&days) {
        return Err(Fail);
    }
    date_text(out, days);
    out.push('T');
    time_text(out, us.rem_euclid(DAY_US));
    Ok(())
}

/// Python's ``str(UUID(text))`` for the canonical spellings (36 characters with hyphens,
/// or 32 hex digits); others (braces, "urn:uuid:", ...) are left to Python.
fn uuid_json(out: &mut String, s: &[u8]) -> Res<()> {
    let hex: Vec<u8> = match s.len() {
        36 => {
            if s[8] != b'-' || s[13] != b'-' || s[18] != b'-' || s[23] != b'-' {
                return Err(Fail);
            }
            s.iter().copied().filter(|&c| c != b'-').collect()
        }
        32 => s.to_vec(),
        _ => return Err(Fail),
    };
    if hex.len() != 32 || !hex.iter().all(|c| c.is_ascii_hexdigit()) {
        return Err(Fail);
    }
    out.push('"');
    for (i, c) in hex.iter().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase() as char);
    }
    out.push('"');
    Ok(())
}

/// ``str(Context(prec).create_decimal(unscaled).scaleb(-scale))`` as a JSON string, when
/// nothing rounds (at most ``prec`` digits) and the number fits 128 bits.
fn decimal_json(out: &mut String, s: &[u8], prec: u32, scale: u32) -> Res<()> {
    if scale > 1000 {
        return Err(Fail);
    }
    // int.from_bytes(s, "big", signed=True): leading sign bytes add nothing ("" is 0)
    let negative = s.first().is_some_and(|&b| b & 0x80 != 0);
    let pad = if negative { 0xFF } else { 0x00 };
    let mut s = s;
    while s.len() > 16 && s[0] == pad && (s[1] & 0x80 != 0) == negative {
        s = &s[1..];
    }
    if s.len() > 16 {
        return Err(Fail); // beyond 128 bits: left to Python
    }
    let mut v: i128 = if negative { -1 } else { 0 };
    for &byte in s {
        v = (v << 8) | byte as i128;
    }
    let digits = v.unsigned_abs().to_string();
    if digits.len() > prec as usize {
        return Err(Fail);
    }
    // Decimal.__str__: plain notation when exp <= 0 and the digits left of the point
    // (exp + len) are more than -6, else one digit, a point and an exponent
    let exp = -(scale as i64);
    let n = digits.len() as i64;
    let left = exp + n;
    out.push('"');
    if v < 0 {
        out.push('-');
    }
    if left > -6 {
        if exp == 0 {
            out.push_str(&digits);
        } else if left <= 0 {
            out.push_str("0.");
            for _ in 0..(-left) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..left as usize]);
            out.push('.');
            out.push_str(&digits[left as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!("E{:+}", left - 1));
    }
    out.push('"');
    Ok(())
}

/// ``json.dumps`` of a float: ``float.__repr__`` (shortest round-trip digits; an
/// exponent below 1e-4 and from 1e16 on), NaN and Infinity as Python spells them.
fn float_json(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // the fewest digits that read back as v ("-1.2345e-7"); of the strings with that many
    // digits, Python's repr takes the one nearest v: correctly rounded, when it reads back
    let mut sci = format!("{:e}", v);
    let n = sci
        .split_once('e')
        .map_or(0, |(m, _)| m.trim_start_matches('-').len());
    let nearest = format!("{:.*e}", n.saturating_sub(2), v); // n counts the point
    if nearest != sci && nearest.parse::<f64>() == Ok(v) {
        sci = nearest;
    }
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is a number");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|&c| c != '.').collect();
    if neg {
        out.push('-');
    }
    let n = digits.len() as i32;
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the point
        if point <= 0 {
            out.push_str("0.");
            for _ in 0..(-point) {
                out.push('0');
            }
            out.push_str(&digits);
        } else if point >= n {
            out.push_str(&digits);
            for _ in 0..(point - n) {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    }
}

/// ``json.dumps`` of a string (ensure_ascii: only printable ASCII stays as it is).
fn string_json(out: &mut String, s: &str) {
    out.push('"');
    if s.bytes()
        .all(|c| (b' '..=b'~').contains(&c) && c != b'"' && c != b'\\')
    {
        out.push_str(s);
    } else {
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                ' '..='~' => out.push(c),
                _ => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{:04x}", u));
                    }
                }
            }
        }
    }
    out.push('"');
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// ``base64.b64encode`` as a JSON string.
fn base64_json(out: &mut String, s: &[u8]) {
    out.push('"');
    for chunk in s.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.push('"');
}

fn conv_of(name: Option<&str>) -> PyResult<Conv> {
    Ok(match name {
        None => Conv::Plain,
        Some("timestamp-millis") => Conv::TsMillis,
        Some("timestamp-micros") => Conv::TsMicros,
        Some("local-timestamp-millis") => Conv::LocalMillis,
        Some("local-timestamp-micros") => Conv::LocalMicros,
        Some("date") => Conv::Date,
        Some("time-millis") => Conv::TimeMillis,
        Some("time-micros") => Conv::TimeMicros,
        Some(other) => return Err(PyValueError::new_err(format!("unknown conversion {other}"))),
    })
}

fn op_of(t: &Bound<'_, PyTuple>, count: usize) -> PyResult<Op> {
    let kind: String = t.get_item(0)?.extract()?;
    let index = |i: usize| -> PyResult<usize> {
        let v: usize = t.get_item(i)?.extract()?;
        if v >= count {
            return Err(PyValueError::new_err("op index out of range"));
        }
        Ok(v)
    };
    Ok(match kind.as_str() {
        "null" => Op::Null,
        "boolean" => Op::Boolean,
        "int" | "long" => {
            let conv: Option<String> = t.get_item(1)?.extract()?;
            let conv = conv_of(conv.as_deref())?;
            if kind == "int" {
                Op::Int(conv)
            } else {
                Op::Long(conv)
            }
        }
        "float" => Op::Float,
        "double" => Op::Double,
        "string" => Op::Str,
        "uuid" => Op::Uuid,
        "bytes" => Op::Bytes,
        "fixed" => Op::Fixed(t.get_item(1)?.extract()?),
        "decimal" => Op::Decimal(
            t.get_item(1)?.extract()?,
            t.get_item(2)?.extract()?,
            t.get_item(3)?.extract()?,
        ),
        "enum" => {
            let symbols: Vec<String> = t.get_item(1)?.extract()?;
            Op::Enum(
                symbols
                    .iter()
                    .map(|s| {
                        let mut o = String::new();
                        string_json(&mut o, s);
                        o
                    })
                    .collect(),
            )
        }
        "record" => {
            let fields: Vec<(String, usize)> = t.get_item(1)?.extract()?;
            let mut out = Vec::with_capacity(fields.len());
            for (name, item) in fields {
                if item >= count {
                    return Err(PyValueError::new_err("op index out of range"));
                }
                let mut key = String::new();
                string_json(&mut key, &name);
                key.push_str(": ");
                out.push((key, item));
            }
            Op::Record(out)
        }
        "array" => Op::Array(index(1)?),
        "map" => Op::Map(index(1)?),
        "union" => {
            let branches: Vec<usize> = t.get_item(1)?.extract()?;
            if branches.iter().any(|&b| b >= count) {
                return Err(PyValueError::new_err("op index out of range"));
            }
            Op::Union(branches)
        }
        other => return Err(PyValueError::new_err(format!("unknown op {other}"))),
    })
}

/// An Avro schema compiled to a program (see the module's comment).
///
/// ``AvroJson(ops, root)``: ``ops`` a list of tuples (values_schema/avro_text.py makes
/// them), ``root`` the op of the whole value. ``read(buf, pos)`` returns ``(json_text,
/// end, values)``: the value's JSON, where it ends and how many values it holds (as
/// avro_fast counts them); ValueError when the bytes do not read, or not surely as the
/// Python reader reads them.
#[pyclass(module = "kdissect._native", frozen)]
pub struct AvroJson {
    ops: Vec<Op>,
    root: usize,
}

#[pymethods]
impl AvroJson {
    #[new]
    fn new(ops: &Bound<'_, PyList>, root: usize) -> PyResult<Self> {
        let count = ops.len();
        if root >= count {
            return Err(PyValueError::new_err("root out of range"));
        }
        let mut program = Vec::with_capacity(count);
        for t in ops.iter() {
            program.push(op_of(t.downcast::<PyTuple>()?, count)?);
        }
        // a union of unions would read at one depth for ever
        for op in &program {
            if let Op::Union(branches) = op {
                if branches.iter().any(|&b| matches!(program[b], Op::Union(_))) {
                    return Err(PyValueError::new_err("a union directly in a union"));
                }
            }
        }
        Ok(AvroJson { ops: program, root })
    }

    fn read(&self, buf: &[u8], pos: usize) -> PyResult<(String, usize, u64)> {
        if pos > buf.len() {
            return Err(PyValueError::new_err("position past the end"));
        }
        let mut r = Reader {
            ops: &self.ops,
            b: buf,
            p: pos,
            out: String::with_capacity(256),
            count: 0,
        };
        match r.value(self.root, 0) {
            Ok(()) => Ok((r.out, r.p, r.count)),
            Err(Fail) => Err(PyValueError::new_err("not read")),
        }
    }
}
