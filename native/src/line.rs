//! An exchange's summary line as plain text (kdissect/render/lines.py, `exchange_plain`):
//! the time of day, the endpoints, API and version, correlation id, client id, latency,
//! the facts' text, status, how an orphan was read and the problems, with control
//! characters escaped. On traffic of many small exchanges the Python line cost a fifth
//! of a summary. `line_parts` stays the reference (and the styled line for terminals):
//! tests/test_line_native.py compares the two on every exchange of every capture.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};
use std::fmt::Write;

const TS_MAX: f64 = 253402300799.0; // 9999-12-31T23:59:59Z: lines.iso's bound
const SHOWN_TOPICS: usize = 3;
const SHOWN_PARTITIONS: usize = 6;

/// `lines.iso(ts)[11:26]`: HH:MM:SS.ffffff (UTC), the microseconds rounded as Python's
/// `round` rounds them (half to even, carried into the second).
fn time_of_day(out: &mut String, ts: f64) {
    if !(0.0..=TS_MAX).contains(&ts) {
        out.push_str("??:??:??.??????");
        return;
    }
    let mut second = ts.trunc();
    let mut us = ((ts - second) * 1e6).round_ties_even() as i64;
    if us >= 1_000_000 {
        us -= 1_000_000;
        second += 1.0;
    }
    let day = second as i64 % 86_400;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}.{:06}",
        day / 3600,
        day / 60 % 60,
        day % 60,
        us
    );
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
            let _ = write!(out, "{p}");
        }
        if n > SHOWN_PARTITIONS {
            out.push_str(",…");
        }
        out.push(']');
    }
    let n = topics.len();
    if n > SHOWN_TOPICS {
        let _ = write!(out, " +{}", n - SHOWN_TOPICS);
    }
    Ok(true)
}

/// `printable`: C0 controls, DEL and C1 controls written as `\xNN` escapes.
fn printable(text: String) -> String {
    let control = |c: char| (c as u32) < 0x20 || (0x7F..0xA0).contains(&(c as u32));
    if !text.chars().any(control) {
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
#[pyfunction]
#[pyo3(signature = (ts, between, api, version, correlation_id, client_id, latency, topics, records, errors, status, how, problems, unresolved))]
#[allow(clippy::too_many_arguments)]
pub fn summary_line(
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
            let _ = write!(out, " v{v}");
        }
        None => out.push_str(" v?"),
    }
    match correlation_id {
        Some(c) => {
            let _ = write!(out, "  #{c}");
        }
        None => out.push_str("  #None"),
    }
    if let Some(c) = client_id.filter(|c| !c.is_empty()) {
        out.push_str("  ");
        out.push_str(c);
    }
    if let Some(l) = latency {
        let _ = write!(out, "  {:.1}ms", l * 1000.0);
    }
    // Facts.text: its parts joined by two spaces, after two spaces
    let mut facts = String::new();
    if !topics.is_empty() && !topics_text(&mut facts, topics, unresolved)? {
        return Ok(None);
    }
    if records != 0 {
        if !facts.is_empty() {
            facts.push_str("  ");
        }
        let _ = write!(
            facts,
            "{records} record{}",
            if records != 1 { "s" } else { "" }
        );
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
        let _ = write!(out, "  [{status}]");
    }
    if let Some(h) = how.filter(|h| !h.is_empty()) {
        let _ = write!(out, "  ({h})");
    }
    if problems != 0 {
        let _ = write!(
            out,
            "  ✗ {problems} problem{}",
            if problems != 1 { "s" } else { "" }
        );
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
    fn printable_escapes_controls_only() {
        assert_eq!(printable("a\nb\u{9b}é".to_string()), "a\\x0ab\\x9bé");
        assert_eq!(printable("plain".to_string()), "plain");
    }
}
