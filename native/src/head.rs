//! A request's header and, for a Produce, its acks, read in one call per request
//! (kdissect/protocol/message.py, `request_head`): what the connection core needs to pair
//! it. `python_request_head` (peek_request_header and produce_acks) stays the reference:
//! tests/test_head_native.py compares the two on every request of every capture and on
//! damaged copies.

use crate::varint::uvarint;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

const PRODUCE: i16 = 0;
const ASSUMED_FLEXIBLE: i64 = -2; // message._ASSUMED_FLEXIBLE

fn i16_at(b: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// produce_acks: the acks after a Produce request's header (`pos`), None if short.
fn produce_acks(data: &[u8], mut pos: usize, version: i16) -> Option<i16> {
    if version >= 3 {
        if version >= 9 {
            // compact nullable string: uvarint length + 1 (at most 5 bytes)
            let n = uvarint(data, &mut pos, data.len(), 5)?;
            pos = pos.checked_add(n.saturating_sub(1) as usize)?;
        } else {
            let n = i16_at(data, pos)?;
            pos += 2 + n.max(0) as usize;
        }
    }
    i16_at(data, pos)
}

/// A request's header as `request_head` reads it.
pub(crate) struct Head<'a> {
    pub key: i16,
    pub version: i16,
    pub corr: i32,
    pub client_id: Option<&'a str>,
    pub size: usize,
    pub acks: Option<i16>, // a Produce's, when its bytes hold them
}

/// What `read` makes of a request's bytes.
pub(crate) enum Read<'a> {
    NotAHeader, // None: the bytes cannot be a request header
    Python,     // False: Python reads this one
    Head(Head<'a>),
}

/// The api key and version of a request of at least 8 bytes (the header's version is
/// looked up by them: `header_version`).
pub(crate) fn key_version(data: &[u8]) -> Option<(i16, i16)> {
    (data.len() >= 8).then(|| {
        (
            i16::from_be_bytes([data[0], data[1]]),
            i16::from_be_bytes([data[2], data[3]]),
        )
    })
}

/// A request's header (at least 8 bytes) whose header version is `hv`.
pub(crate) fn read(data: &[u8], hv: i64) -> Read<'_> {
    let Some((key, version)) = key_version(data) else {
        return Read::NotAHeader;
    };
    let corr = i32::from_be_bytes([data[4], data[5], data[6], data[7]]);
    let acks = |size: usize| {
        (key == PRODUCE)
            .then(|| produce_acks(data, size, version))
            .flatten()
    };
    if hv == 0 {
        return Read::Head(Head {
            key,
            version,
            corr,
            client_id: None,
            size: 8,
            acks: acks(8),
        });
    }
    let Some(n) = i16_at(data, 8) else {
        return Read::NotAHeader;
    };
    let n_len = n.max(0) as usize;
    if n < -1 || 10 + n_len > data.len() {
        return Read::NotAHeader;
    }
    let client_id = if n == -1 {
        None
    } else {
        match std::str::from_utf8(&data[10..10 + n_len]) {
            Ok(s) => Some(s),
            Err(_) => return Read::Python,
        }
    };
    let mut size = 10 + n_len;
    if hv == 2 || hv == ASSUMED_FLEXIBLE {
        if size >= data.len() {
            // a version newer than the tables may not be flexible after all
            if hv == 2 {
                return Read::NotAHeader;
            }
        } else if data[size] == 0 {
            size += 1; // only the empty tag section is cheap to skip
        }
    }
    Read::Head(Head {
        key,
        version,
        corr,
        client_id,
        size,
        acks: acks(size),
    })
}

/// (api key, version, correlation id, client id, header size, a Produce's acks or None),
/// None when the bytes cannot be a request header, or False: Python reads this one (a
/// kind not yet in `header_versions`, message._HEADER_VERSIONS, or a client id that is
/// not UTF-8).
#[pyfunction]
pub fn request_head<'py>(
    py: Python<'py>,
    data: &[u8],
    header_versions: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(kv) = key_version(data) else {
        return Ok(py.None().into_bound(py));
    };
    let Some(hv) = header_versions.get_item(kv)? else {
        return Ok(false.into_pyobject(py)?.to_owned().into_any());
    };
    let h = match read(data, hv.extract()?) {
        Read::NotAHeader => return Ok(py.None().into_bound(py)),
        Read::Python => return Ok(false.into_pyobject(py)?.to_owned().into_any()),
        Read::Head(h) => h,
    };
    Ok(PyTuple::new(
        py,
        [
            h.key.into_pyobject(py)?.into_any(),
            h.version.into_pyobject(py)?.into_any(),
            h.corr.into_pyobject(py)?.into_any(),
            h.client_id.into_pyobject(py)?.into_any(),
            h.size.into_pyobject(py)?.into_any(),
            h.acks.into_pyobject(py)?.into_any(),
        ],
    )?
    .into_any())
}
