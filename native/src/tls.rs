//! TLS record protection on the compiled path: one direction's AEAD keys (AES-GCM and
//! ChaCha20-Poly1305, TLS 1.3 and 1.2), and the application-data records of a buffer
//! decrypted in one call.
//!
//! The cryptography is `ring`'s (BoringSSL's AES-GCM and ChaCha20-Poly1305 code: about
//! twice as fast here as the pure-Rust AEAD crates, as fast as OpenSSL).
//!
//! The reference is Python: `kdissect/capture/tls/cipher.py`'s `Decryptor` (the
//! `cryptography` package) and `session.py`'s record loop. `RecordCipher.decrypt` has
//! `Decryptor.decrypt`'s signature and results; `open_records` decrypts the run of whole
//! application-data records that authenticate (in TLS 1.3: whose inner type is
//! application data too) and stops before anything else, which Python then reads.
//! `TlsDir` does the same for a direction the compiled reassembler (reasm.rs) reads
//! itself, segment by segment. Handshake parsing, the key schedule and every decision
//! stay in Python.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ring::aead::{
    Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};

const APPLICATION_DATA: u8 = 23;
const MAX_RECORD: usize = (1 << 14) + 2048; // handshake.py's MAX_RECORD
const TAG: usize = 16;

/// Decrypts `buf` (ciphertext, then its tag) in place: true when it authenticates.
fn open(key: &LessSafeKey, nonce: [u8; 12], aad: &[u8], buf: &mut [u8]) -> bool {
    key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), buf)
        .is_ok()
}

/// One direction's record keys (`cipher`: "gcm" or "chacha", as `schedule.Suite`).
#[pyclass(module = "kdissect._native", frozen)]
pub struct RecordCipher {
    key: LessSafeKey,
    iv: [u8; 12], // TLS 1.2 GCM: the 4 implicit bytes, then zeros
    gcm12: bool,  // TLS 1.2 AES-GCM: 8 explicit nonce bytes lead each record
    tls13: bool,
}

impl RecordCipher {
    fn nonce(&self, seq: u64, explicit: &[u8]) -> [u8; 12] {
        let mut n = self.iv;
        if self.gcm12 {
            n[4..].copy_from_slice(explicit);
        } else {
            for (b, s) in n[4..].iter_mut().zip(seq.to_be_bytes()) {
                *b ^= s;
            }
        }
        n
    }

    /// The plaintext of one record appended to `out` (`body` is the record's payload);
    /// its content type, or None when it does not authenticate (`out` then unchanged).
    fn open_into(
        &self,
        seq: u64,
        ctype: u8,
        version: u16,
        header: &[u8],
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Option<u8> {
        let explicit = if self.gcm12 { 8 } else { 0 };
        if body.len() < explicit + TAG {
            return None;
        }
        let nonce = self.nonce(seq, &body[..explicit]);
        let data_len = body.len() - explicit - TAG;
        let start = out.len();
        out.extend_from_slice(&body[explicit..]); // ciphertext and tag
        let ok = if self.tls13 {
            open(&self.key, nonce, header, &mut out[start..])
        } else {
            let mut aad = [0u8; 13];
            aad[..8].copy_from_slice(&seq.to_be_bytes());
            aad[8] = ctype;
            aad[9..11].copy_from_slice(&version.to_be_bytes());
            aad[11..].copy_from_slice(&(data_len as u16).to_be_bytes());
            open(&self.key, nonce, &aad, &mut out[start..])
        };
        if !ok {
            out.truncate(start);
            return None;
        }
        out.truncate(start + data_len); // the tag goes
        if !self.tls13 {
            return Some(ctype);
        }
        // TLS 1.3: zeros pad the inner plaintext after its real content type
        while out.len() > start && out[out.len() - 1] == 0 {
            out.pop();
        }
        if out.len() == start {
            return None; // all zeros: no content type
        }
        out.pop()
    }
}

pub(crate) fn bytes_of(b: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err("a contiguous buffer is needed"));
    }
    // Safety: a contiguous buffer of len_bytes bytes, held (and only read) for this call
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) })
}

#[pymethods]
impl RecordCipher {
    #[new]
    fn new(cipher: &str, key: &[u8], iv: &[u8], tls13: bool) -> PyResult<Self> {
        let bad = || PyValueError::new_err("key or IV of the wrong size for the cipher");
        let algorithm = match (cipher, key.len()) {
            ("gcm", 16) => &AES_128_GCM,
            ("gcm", 32) => &AES_256_GCM,
            ("chacha", 32) => &CHACHA20_POLY1305,
            _ => return Err(bad()),
        };
        let key = LessSafeKey::new(UnboundKey::new(algorithm, key).map_err(|_| bad())?);
        let gcm12 = cipher == "gcm" && !tls13;
        let mut fixed = [0u8; 12];
        match (gcm12, iv.len()) {
            (true, 4) => fixed[..4].copy_from_slice(iv),
            (false, 12) => fixed.copy_from_slice(iv),
            _ => return Err(bad()),
        }
        Ok(RecordCipher {
            key,
            iv: fixed,
            gcm12,
            tls13,
        })
    }

    /// `Decryptor.decrypt`: (content type, plaintext) of one record, or None when it does
    /// not authenticate.
    fn decrypt<'py>(
        &self,
        py: Python<'py>,
        seq: u64,
        ctype: u8,
        version: u16,
        header: PyBuffer<u8>,
        payload: PyBuffer<u8>,
    ) -> PyResult<Option<(u8, Bound<'py, PyBytes>)>> {
        let (header, payload) = (bytes_of(&header)?, bytes_of(&payload)?);
        let mut out = Vec::with_capacity(payload.len());
        Ok(self
            .open_into(seq, ctype, version, header, payload, &mut out)
            .map(|t| (t, PyBytes::new(py, &out))))
    }

    /// The whole application-data records of `data[pos:end]` from `pos` on, decrypted
    /// with sequence numbers from `seq`, up to the first record that is not one (or is
    /// cut off, or does not authenticate, or holds something else in TLS 1.3):
    /// (their plaintext joined, how many, where reading stopped, the next sequence number).
    fn open_records<'py>(
        &self,
        py: Python<'py>,
        data: PyBuffer<u8>,
        pos: usize,
        end: usize,
        seq: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, u64, usize, u64)> {
        let d = bytes_of(&data)?;
        let end = end.min(d.len());
        let (mut at, mut n) = (pos, 0u64);
        let mut out = Vec::with_capacity(end.saturating_sub(pos));
        while end >= at + 5 {
            let Some(len) = app_header(&d[at..at + 5]) else {
                break;
            };
            if at + 5 + len > end || !self.open_app(seq + n, &d[at..at + 5 + len], &mut out) {
                break;
            }
            n += 1;
            at += 5 + len;
        }
        Ok((PyBytes::new(py, &out), n, at, seq + n))
    }
}

/// The length of the application-data record whose header `h` (5 bytes) is, or None.
fn app_header(h: &[u8]) -> Option<usize> {
    let len = ((h[3] as usize) << 8) | h[4] as usize;
    (h[0] == APPLICATION_DATA && h[1] == 3 && h[2] <= 4 && len <= MAX_RECORD).then_some(len)
}

impl RecordCipher {
    /// One whole application-data record's plaintext appended to `out`: false (and `out`
    /// unchanged) when it does not authenticate or (TLS 1.3) holds something else.
    fn open_app(&self, seq: u64, record: &[u8], out: &mut Vec<u8>) -> bool {
        let (h, mark) = (&record[..5], out.len());
        let version = ((h[1] as u16) << 8) | h[2] as u16;
        match self.open_into(seq, h[0], version, h, &record[5..], out) {
            Some(APPLICATION_DATA) => true,
            Some(_) => {
                out.truncate(mark); // a handshake message or alert: Python's to read
                false
            }
            None => false,
        }
    }
}

/// One direction of a TLS connection whose application data the compiled reassembler
/// decrypts itself (reasm.rs `tls_track`): Python's session hands it the keys, the next
/// sequence number and any record begun, and gets the direction back (with the bytes
/// from the first record that is not application data that authenticates) as soon as
/// there is anything else to read: `session.py` stays the one place for every decision.
pub struct TlsDir {
    cipher: Py<RecordCipher>,
    pub seq: u64,
    pub buf: Vec<u8>, // a record begun in an earlier segment
    pub records: u64, // records decrypted here (Python counts them when it is back)
    pub plain: i64,   // plaintext stream offset of the next byte
    pub ts: f64,      // time and frame of the last segment read
    pub frame: i64,
}

impl TlsDir {
    pub fn new(cipher: Py<RecordCipher>, seq: u64, buf: &[u8], plain: i64) -> TlsDir {
        TlsDir {
            cipher,
            seq,
            buf: buf.to_vec(),
            records: 0,
            plain,
            ts: 0.0,
            frame: 0,
        }
    }

    /// The plaintext of the records `payload` completes appended to `out`; Some(the
    /// bytes from the first record Python must read on) when one is not application data
    /// that authenticates (a header that is not one's counts).
    pub fn feed(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Option<Vec<u8>> {
        let cipher = self.cipher.get();
        let mut p = payload;
        if !self.buf.is_empty() {
            if self.buf.len() < 5 {
                let take = (5 - self.buf.len()).min(p.len());
                self.buf.extend_from_slice(&p[..take]);
                p = &p[take..];
                if self.buf.len() < 5 {
                    return None;
                }
            }
            let Some(len) = app_header(&self.buf[..5]) else {
                return Some(self.back(p));
            };
            let need = 5 + len - self.buf.len();
            if p.len() < need {
                self.buf.extend_from_slice(p);
                return None;
            }
            self.buf.extend_from_slice(&p[..need]);
            p = &p[need..];
            if !cipher.open_app(self.seq, &self.buf, out) {
                return Some(self.back(p));
            }
            self.buf.clear();
            self.seq += 1;
            self.records += 1;
        }
        let mut at = 0;
        while p.len() >= at + 5 {
            let Some(len) = app_header(&p[at..at + 5]) else {
                return Some(p[at..].to_vec());
            };
            if at + 5 + len > p.len() {
                break;
            }
            if !cipher.open_app(self.seq, &p[at..at + 5 + len], out) {
                return Some(p[at..].to_vec());
            }
            self.seq += 1;
            self.records += 1;
            at += 5 + len;
        }
        self.buf.extend_from_slice(&p[at..]);
        None
    }

    /// The record begun, then `rest`: what Python reads on.
    fn back(&mut self, rest: &[u8]) -> Vec<u8> {
        let mut b = std::mem::take(&mut self.buf);
        b.extend_from_slice(rest);
        b
    }
}
