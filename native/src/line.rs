//! An exchange's summary line as plain text (kdissect/render/lines.py, `exchange_plain`):
//! the time of day, the endpoints, API and version, correlation id, client id, latency,
//! the facts' text, status, how an orphan was read and the problems, with control
//! characters escaped. On traffic of many small exchanges the Python line cost a fifth
//! of a summary. `line_parts` stays the reference (and the styled line for terminals):
//! tests/test_line_native.py compares the two on every exchange of every capture.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyString};
use std::fmt::Write;

const SHOWN_TOPICS: usize = 3;
const SHOWN_PARTITIONS: usize = 6;

/// `lines.iso`'s instant of `ts`: (whole seconds, microseconds rounded as Python's
/// `round` rounds them, half to even, carried into the second); None outside 1970..9999.
fn instant(ts: f64) -> Option<(i64, i64)> {
    if !(0.0..=crate::LAST_SECOND).contains(&ts) {
        return None;
    }
    let mut second = ts.trunc();
    let mut us = ((ts - second) * 1e6).round_ties_even() as i64;
    if us >= 1_000_000 {
        us -= 1_000_000;
        second += 1.0;
    }
    Some((second as i64, us))
}

/// `lines.iso(ts)[11:26]`: HH:MM:SS.ffffff (UTC), the microseconds rounded as Python's
/// `round` rounds them (half to even, carried into the second).
fn time_of_day(out: &mut String, ts: f64) {
    let Some((second, us)) = instant(ts) else {
        out.push_str("??:??:??.??????");
        return;
    };
    let day = second % 86_400;
    push_padded(out, day / 3600, 2);
    out.push(':');
    push_padded(out, day / 60 % 60, 2);
    out.push(':');
    push_padded(out, day % 60, 2);
    out.push('.');
    push_padded(out, us, 6);
}

/// `v` in decimal, at least `width` digits (zeros first; a negative `v` only unpadded):
/// what `write!` with `{v}` or `{v:0width$}` writes, without the formatting machinery
/// (through it, the line's numbers were half of its cost).
fn push_padded(out: &mut String, v: i64, width: usize) {
    if v < 0 {
        out.push('-');
    }
    let mut buf = [b'0'; 20];
    let at =
        crate::logjson::decimal(v.unsigned_abs(), &mut buf).min(buf.len().saturating_sub(width));
    // (pushed as one str without str::from_utf8's check, a tenth of the line's
    // instructions once, nor char by char, a twentieth)
    // SAFETY: buf holds ASCII digits only ('0' filled, decimal writes digits)
    out.push_str(unsafe { std::str::from_utf8_unchecked(&buf[at..]) });
}

/// Two spaces and `v` with one decimal, as `{:.1}` (Python's `:.1f`) writes it: the
/// nearest tenth of `v`'s exact value, told without the formatting machinery (a ninth of
/// the line's instructions) where it is sure: `v * 10 - n` (one rounding, monotonic, so
/// below one half only if the exact difference is) is within a half of the tenths `n`.
/// A tie, a huge or odd value: `write!`.
fn push_tenths(out: &mut String, v: f64) {
    out.push_str("  ");
    let n = (v * 10.0).round();
    // (sign-positive: -0.0 is written "-0.0"; NaN and infinities fail n < 1e15)
    if v.is_sign_positive() && n < 1e15 && v.mul_add(10.0, -n).abs() < 0.5 {
        let n = n as i64;
        push_dec(out, n / 10);
        out.push('.');
        out.push((b'0' + (n % 10) as u8) as char);
    } else {
        let _ = write!(out, "{v:.1}");
    }
}

fn push_dec(out: &mut String, v: i64) {
    push_padded(out, v, 1);
}

/// `Facts.text`'s topics: the first three topics, each with its partitions (sorted, the
/// first six), a topic known only by its id cut to the id's first 8 digits. None when a
/// partition is not an int (the Python line says what it is).
fn topics_text(out: &mut String, topics: &Bound<'_, PyDict>, unresolved: &str) -> PyResult<bool> {
    for (shown, (t, ps)) in topics.iter().enumerate() {
        if shown == SHOWN_TOPICS {
            break;
        }
        if shown > 0 {
            out.push(' ');
        }
        let Ok(t) = t.downcast::<PyString>() else {
            return Ok(false);
        };
        let name = t.to_str()?;
        match name.strip_prefix(unresolved) {
            Some(id) => {
                out.push_str(unresolved);
                out.extend(id.chars().take(8));
            }
            None => out.push_str(name),
        }
        let n = ps.len()?;
        if n == 0 {
            continue;
        }
        let mut parts: Vec<i64> = Vec::with_capacity(n);
        for p in ps.try_iter()? {
            let p = p?;
            if !p.is_exact_instance_of::<PyInt>() {
                return Ok(false); // (a bool or an int subclass says its own text)
            }
            match p.extract::<i64>() {
                Ok(v) => parts.push(v),
                Err(_) => return Ok(false),
            }
        }
        parts.sort_unstable();
        out.push('[');
        for (i, p) in parts.iter().take(SHOWN_PARTITIONS).enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_dec(out, *p);
        }
        if n > SHOWN_PARTITIONS {
            out.push_str(",…");
        }
        out.push(']');
    }
    let n = topics.len();
    if n > SHOWN_TOPICS {
        out.push_str(" +");
        push_dec(out, (n - SHOWN_TOPICS) as i64);
    }
    Ok(true)
}

/// `printable`: C0 controls, DEL and C1 controls written as `\xNN` escapes.
fn printable(text: String) -> String {
    let control = |c: char| (c as u32) < 0x20 || (0x7F..0xA0).contains(&(c as u32));
    // (told by its bytes: C1 controls are 0xC2 0x80..0x9F in UTF-8, and those bytes are
    // no other character's start; decoding every char cost more than the line's numbers)
    let b = text.as_bytes();
    let found = b.iter().enumerate().any(|(i, &c)| {
        c < 0x20
            || c == 0x7F
            || (c == 0xC2 && b.get(i + 1).is_some_and(|n| (0x80..0xA0).contains(n)))
    });
    if !found {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if control(c) {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// The line (see the module's comment); None where the Python line must say it (a
/// partition or topic of an unexpected type). `api` is the API's name, `version` None
/// when not known,
/// `latency` in seconds, `errors` the facts' error names as `Facts.text` joins them.
/// ``utf8``: the line and a newline as UTF-8 bytes, for a writer that hands them to stdout's binary
/// layer (as a str, with its `→`, the line was made from this UTF-8 and encoded back to
/// it by the text layer: a tenth of the line's cost each way).
#[pyfunction]
#[pyo3(signature = (ts, between, api, version, correlation_id, client_id, latency, topics, records, errors, status, how, problems, unresolved, utf8=false))]
#[allow(clippy::too_many_arguments)]
pub fn summary_line<'py>(
    py: Python<'py>,
    ts: f64,
    between: &str,
    api: &str,
    version: Option<i64>,
    correlation_id: Option<i64>,
    client_id: Option<&str>,
    latency: Option<f64>,
    topics: &Bound<'py, PyDict>,
    records: i64,
    errors: Option<&str>,
    status: &str,
    how: Option<&str>,
    problems: i64,
    unresolved: &str,
    utf8: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let line = write_line(
        ts,
        between,
        api,
        version,
        correlation_id,
        client_id,
        latency,
        topics,
        records,
        errors,
        status,
        how,
        problems,
        unresolved,
    )?;
    Ok(line.map(|mut l| {
        if utf8 {
            l.push('\n');
            PyBytes::new(py, l.as_bytes()).into_any()
        } else {
            PyString::new(py, &l).into_any()
        }
    }))
}

#[allow(clippy::too_many_arguments)]
fn write_line(
    ts: f64,
    between: &str,
    api: &str,
    version: Option<i64>,
    correlation_id: Option<i64>,
    client_id: Option<&str>,
    latency: Option<f64>,
    topics: &Bound<'_, PyDict>,
    records: i64,
    errors: Option<&str>,
    status: &str,
    how: Option<&str>,
    problems: i64,
    unresolved: &str,
) -> PyResult<Option<String>> {
    let mut out = String::with_capacity(128);
    time_of_day(&mut out, ts);
    out.push_str(between);
    out.push_str(api);
    match version {
        Some(v) => {
            out.push_str(" v");
            push_dec(&mut out, v);
        }
        None => out.push_str(" v?"),
    }
    match correlation_id {
        Some(c) => {
            out.push_str("  #");
            push_dec(&mut out, c);
        }
        None => out.push_str("  #?"),
    }
    if let Some(c) = client_id.filter(|c| !c.is_empty()) {
        out.push_str("  ");
        out.push_str(c);
    }
    if let Some(l) = latency {
        push_tenths(&mut out, l * 1000.0);
        out.push_str("ms");
    }
    // Facts.text: its parts joined by two spaces, after two spaces (room made once: grown
    // from empty it was three reallocations a line)
    let mut facts = String::with_capacity(64);
    if !topics.is_empty() && !topics_text(&mut facts, topics, unresolved)? {
        return Ok(None);
    }
    if records != 0 {
        if !facts.is_empty() {
            facts.push_str("  ");
        }
        push_dec(&mut facts, records);
        facts.push_str(if records != 1 { " records" } else { " record" });
    }
    if let Some(e) = errors {
        if !facts.is_empty() {
            facts.push_str("  ");
        }
        facts.push_str(e);
    }
    if !facts.is_empty() {
        out.push_str("  ");
        out.push_str(&facts);
    }
    if status != "ok" {
        out.push_str("  [");
        out.push_str(status);
        out.push(']');
    }
    if let Some(h) = how.filter(|h| !h.is_empty()) {
        out.push_str("  (");
        out.push_str(h);
        out.push(')');
    }
    if problems != 0 {
        out.push_str("  ✗ ");
        push_dec(&mut out, problems);
        out.push_str(if problems != 1 {
            " problems"
        } else {
            " problem"
        });
    }
    Ok(Some(printable(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tod(ts: f64) -> String {
        let mut s = String::new();
        time_of_day(&mut s, ts);
        s
    }

    #[test]
    fn time_of_day_rounds_and_carries() {
        assert_eq!(tod(0.0), "00:00:00.000000");
        assert_eq!(tod(86_399.9999996), "00:00:00.000000");
        assert_eq!(tod(3_723.25), "01:02:03.250000");
        assert_eq!(tod(-1.0), "??:??:??.??????");
        assert_eq!(tod(f64::NAN), "??:??:??.??????");
    }

    #[test]
    fn tenths_as_write_formats_them() {
        let mut values = vec![
            0.0,
            -0.0,
            -0.04,
            f64::NAN,
            0.05,
            0.15,
            0.25,
            0.95,
            9.95,
            1e14,
            1e15,
            1e300,
            f64::INFINITY,
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> 11) as f64 / (1u64 << 53) as f64;
            values.push(v * 10f64.powi((x % 9) as i32 - 3));
            values.push(((x % 100_000) as f64 + 0.05) / 1000.0 * 1000.0);
        }
        for v in values {
            let mut s = String::new();
            push_tenths(&mut s, v);
            assert_eq!(s, format!("  {v:.1}"), "{v:e}");
        }
    }

    #[test]
    fn numbers_as_write_formats_them() {
        for v in [0, 7, -7, 10, 99, 123_456, -1_000_000, i64::MAX, i64::MIN] {
            for width in if v < 0 { vec![1] } else { vec![1, 2, 6] } {
                let mut s = String::new();
                push_padded(&mut s, v, width);
                assert_eq!(s, format!("{v:0width$}"));
            }
        }
    }

    #[test]
    fn printable_tells_controls_by_bytes_as_by_chars() {
        let control = |c: char| (c as u32) < 0x20 || (0x7F..0xA0).contains(&(c as u32));
        let pool: Vec<char> = (0u32..0x800)
            .chain([0x2192, 0xFFFD, 0x1D11E, 0xC280, 0x9F])
            .filter_map(char::from_u32)
            .collect();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..50_000 {
            let mut s = String::from("ab");
            for _ in 0..(x % 5) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let c = pool[(x % pool.len() as u64) as usize];
                // (mostly printable: a control now and then)
                s.push(if control(c) && x % 7 != 0 { 'z' } else { c });
            }
            let want = s.chars().any(control);
            assert_eq!(printable(s.clone()) != s, want, "{s:?}");
        }
    }

    #[test]
    fn printable_escapes_controls_only() {
        assert_eq!(printable("a\nb\u{9b}é".to_string()), "a\\x0ab\\x9bé");
        assert_eq!(printable("plain".to_string()), "plain");
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar (the
/// civil-from-days algorithm: eras of 400 years, March-based years).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

fn push_opt(out: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => out.extend_from_slice(b"null"),
        Some(n) => crate::logjson::push_int(out, n as i128),
    }
}

/// `lines._values_line`: the JSON line of a message whose body is already JSON text
/// (`body`, and `findings` the findings' JSON list), keys in `message_json`'s order;
/// `extra_key` names the request's `client_id` or a response's `how`, `extra_value` its
/// value (None: null).
/// The time as `lines.iso` writes it (UTC, microseconds rounded half to even and
/// carried), null outside 1970..9999. tests/test_lines.py holds it to the Python line.
#[pyfunction]
#[pyo3(signature = (index, frame, stream, direction, ts, api_key, api_name, api_version, correlation_id, pair, seq, status, findings, size, body, extra_key, extra_value))]
#[allow(clippy::too_many_arguments)]
pub fn json_line(
    index: Option<i64>,
    frame: Option<i64>,
    stream: Option<i64>,
    direction: &str,
    ts: f64,
    api_key: Option<i64>,
    api_name: &str,
    api_version: Option<i64>,
    correlation_id: Option<i64>,
    pair: Option<i64>,
    seq: Option<i64>,
    status: &str,
    findings: &str,
    size: i64,
    body: &str,
    extra_key: Option<&str>,
    extra_value: Option<&str>,
) -> String {
    use crate::logjson::push_json_str;
    let mut out: Vec<u8> = Vec::with_capacity(body.len() + findings.len() + 320);
    let ints = |out: &mut Vec<u8>, fields: &[(&[u8], Option<i64>)]| {
        for (key, value) in fields {
            out.extend_from_slice(key);
            push_opt(out, *value);
        }
    };
    ints(
        &mut out,
        &[
            (b"{\"index\": ", index),
            (b", \"frame\": ", frame),
            (b", \"stream\": ", stream),
        ],
    );
    out.extend_from_slice(b", \"direction\": ");
    push_json_str(&mut out, direction);
    out.extend_from_slice(b", \"ts\": ");
    match instant(ts) {
        Some((second, us)) => {
            let (y, m, d) = civil(second.div_euclid(86_400));
            let day = second.rem_euclid(86_400);
            let text = format!(
                "\"{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{us:06}Z\"",
                day / 3600,
                day / 60 % 60,
                day % 60
            );
            out.extend_from_slice(text.as_bytes());
        }
        None => out.extend_from_slice(b"null"),
    }
    ints(&mut out, &[(b", \"api_key\": ", api_key)]);
    out.extend_from_slice(b", \"api_name\": ");
    push_json_str(&mut out, api_name);
    ints(
        &mut out,
        &[
            (b", \"api_version\": ", api_version),
            (b", \"correlation_id\": ", correlation_id),
            (b", \"pair\": ", pair),
            (b", \"seq\": ", seq),
        ],
    );
    out.extend_from_slice(b", \"status\": ");
    push_json_str(&mut out, status);
    out.extend_from_slice(b", \"problems\": [], \"findings\": ");
    out.extend_from_slice(findings.as_bytes());
    ints(&mut out, &[(b", \"size\": ", Some(size))]);
    out.extend_from_slice(b", \"body\": ");
    out.extend_from_slice(body.as_bytes());
    if let Some(key) = extra_key {
        out.extend_from_slice(b", ");
        push_json_str(&mut out, key);
        out.extend_from_slice(b": ");
        match extra_value {
            None => out.extend_from_slice(b"null"),
            Some(v) => push_json_str(&mut out, v),
        }
    }
    out.extend_from_slice(b"}\n");
    // every part is UTF-8 (the escapes ASCII, `findings` and `body` str)
    String::from_utf8(out).unwrap_or_default()
}
