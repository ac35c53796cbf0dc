//! TCP reassembly (a port of kdissect/capture/tcp.py, the reference: same semantics, same
//! bounds, same events in the same order) and Kafka size-prefix tracking, fed by the
//! Scanner's segments without building a Python tuple per segment.
//!
//! Events go to Python as tuples, in order: (0, cid, a_ip, a_port, b_ip, b_port, ts,
//! saw_syn) a new connection; (1, cid, dir, offset, bytes, ts, frame) data, or (9, ...)
//! data that is exactly one whole Kafka message of a size-tracked direction, Python's
//! framer holding nothing: its offset and bytes after its size; (2, cid, dir,
//! offset, length, ts, frame) a gap; (3, cid) closed; (4, cid, dir, held) the bytes a
//! direction holds out of order (the memory budget's charge); (5, cid, dir) its charge
//! dropped; (6, None) the budget is tight: Python takes the state over (``export``).
//!
//! Size-prefix tracking (``track``): for a direction Python frames as Kafka, data that
//! neither starts a partial message nor completes one is held here and handed over with
//! the data that completes the message; the data that starts one waits in a placeholder
//! event, handed over there when Python takes the events, or joined to the rest when the
//! message is whole before that. So Python sees one or two calls per message instead of
//! one per segment. The framer's output is the same: it frames only when a message is
//! complete, with the time and frame of the data that completed it, and its budget holds
//! a partial message from the same place in the events as before. The
//! bytes held here count against the budget's headroom (``room``): when a segment could
//! spend it, everything held is handed over and Python's reassembler takes over. What
//! a segment could spend includes the held segments it may hand on (``held_at_risk``):
//! the reference's budget counts those twice for a moment.
//!
//! The per-connection pass (``pair``): for a connection Python finds in the simple state
//! (both directions size-tracked, nothing held, nothing early, no raw SASL or doubt,
//! its pending requests plain), whole messages are read and paired here: a request
//! whose header reads and that expects an answer comes as (10, cid, offset, bytes, ts,
//! frame, api key, version, correlation id, client id) -- Python numbers it and queues
//! it -- and the answer to the oldest pending request as (11, cid, offset, bytes, ts,
//! frame, correlation id): Python makes the exchange with the request it queued first.
//! Before any other event of the connection (a message it does not pair, data that is
//! not one whole message, a gap, TLS given back, the budget's take-over, the close) it
//! hands over: (12, cid, end of direction 0's last message passed, direction 1's) (-1:
//! none), and Python's framers and correlator go on from there as if they had read them.

use crate::fasthash::Map;
use crate::head;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::BoundObject;
use std::collections::{BTreeMap, HashSet, VecDeque};

const FIN: u32 = 0x01;
const SYN: u32 = 0x02;
const RST: u32 = 0x04;
const ACK: u32 = 0x10;
const MAX_HELD: i64 = 16 * 1024 * 1024;
const MAX_HELD_SEGMENTS: usize = 16384;
const HOLE_PACKETS: i64 = 32;
const CLOSE_WAIT: i64 = 64;
const MAX_MESSAGE: i64 = 512 * 1024 * 1024; // stream/framing.py's MAX_MESSAGE

/// An endpoint: address bytes (4 or 16 used) and port.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Addr {
    ip: [u8; 16],
    len: u8,
    port: u32,
}

impl std::hash::Hash for Addr {
    /// Every field, as three words: the derived hash wrote the address as a slice (its
    /// length, then its bytes through the hasher's general path), and hashing the two
    /// lookups' keys of each segment was a fortieth of a summary's CPU.
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let (lo, hi) = self.ip.split_at(8);
        h.write_u64(u64::from_ne_bytes(lo.try_into().unwrap_or_default()));
        h.write_u64(u64::from_ne_bytes(hi.try_into().unwrap_or_default()));
        h.write_u64(u64::from(self.len) << 32 | u64::from(self.port));
    }
}

impl Addr {
    pub fn new(raw: &[u8], port: u32) -> Addr {
        let mut ip = [0u8; 16];
        let n = raw.len().min(16);
        ip[..n].copy_from_slice(&raw[..n]);
        Addr {
            ip,
            len: n as u8,
            port,
        }
    }
    fn raw(&self) -> &[u8] {
        &self.ip[..self.len as usize]
    }
}

struct Held {
    payload: Option<Vec<u8>>,
    size: i64,
    ts: f64,
    frame: i64,
}

/// Size-prefix tracking of one direction Python frames as Kafka.
struct Track {
    start: i64,       // stream offset of the message being filled (its size prefix)
    head: Vec<u8>,    // its first bytes, until the 4 of the size are known
    end: i64,         // where it ends (-1: size not known yet)
    py_pending: bool, // Python's framer holds bytes of it
    acc: Vec<u8>,     // data held here, not yet handed over
    acc_offset: i64,
    acc_ts: f64,
    acc_frame: i64,
    // the first bytes of a message, not handed over yet: where their event goes in the
    // events (a placeholder), their offset, time and frame. Handed over there when the
    // events are taken (``drain_into``) before the message is whole; joined to the rest
    // instead when it is whole first and ends where the data ends
    first: Vec<u8>,
    first_slot: Option<usize>,
    // the pass's ends when it came, its connection paired (``hand_first``)
    first_ends: Option<[i64; 2]>,
    first_at: (i64, f64, i64),
}

impl Track {
    /// Tracking from where Python's framer stands (the message at ``start``, of which it
    /// holds ``held``; the stream delivered up to ``next``), or None when that is not a
    /// plain size-framed state.
    fn at(start: i64, held: &[u8], next: i64) -> Option<Track> {
        let head = &held[..held.len().min(4)];
        let mut t = Track {
            start,
            head: head.to_vec(),
            end: -1,
            py_pending: !held.is_empty(),
            acc: Vec::new(),
            acc_offset: 0,
            acc_ts: 0.0,
            acc_frame: 0,
            first: Vec::new(),
            first_slot: None,
            first_ends: None,
            first_at: (0, 0.0, 0),
        };
        if t.head.len() == 4 {
            let size = i32::from_be_bytes([t.head[0], t.head[1], t.head[2], t.head[3]]) as i64;
            if !(0..=MAX_MESSAGE).contains(&size) {
                return None;
            }
            t.end = start + 4 + size;
            if t.end <= next {
                return None; // the framer would have framed it: not its state
            }
        }
        Some(t)
    }
}

struct Dir {
    base: Option<u32>,
    next: i64,
    held: BTreeMap<i64, Held>,
    held_bytes: i64,
    fin: bool,
    end: i64,
    acked: i64,
    overdue: Option<i64>,
    last_ts: f64,
    hole: Option<(i64, i64, f64, i64)>,
    retransmitted: i64,
    gaps: i64,
    gap_bytes: i64,
    track: Option<Track>,
    tls: Option<crate::tls::TlsDir>, // TLS records decrypted here (tls_track)
}

impl Dir {
    fn new() -> Dir {
        Dir {
            base: None,
            next: 0,
            held: BTreeMap::new(),
            held_bytes: 0,
            fin: false,
            end: -1,
            acked: 0,
            overdue: None,
            last_ts: f64::NEG_INFINITY,
            hole: None,
            retransmitted: 0,
            gaps: 0,
            gap_bytes: 0,
            track: None,
            tls: None,
        }
    }
    fn lowest(&self) -> i64 {
        *self
            .held
            .keys()
            .next()
            .expect("lowest() needs held segments")
    }
    fn unwrap(&self, seq: u32) -> i64 {
        let base = self
            .base
            .expect("the direction's first sequence number is known");
        let rel = seq.wrapping_sub(base) as i64;
        let mut delta = (rel - self.next).rem_euclid(1 << 32);
        if delta >= 0x8000_0000 {
            delta -= 0x1_0000_0000;
        }
        self.next + delta
    }
}

/// A connection paired here (``pair``); Python's queue holds its pending requests.
struct Pass {
    client: usize,          // the client's direction
    pending: VecDeque<i32>, // their correlation ids, oldest first (none twice)
    ends: [i64; 2],         // where each direction's last message read here ends (-1: none)
}

// pending requests kept here (Python's correlator keeps 4096): past it, Python's
const PASS_PENDING: usize = 64;
const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const ENVELOPE: i16 = 58;

struct Conn {
    cid: u64,
    a: Addr,
    key: (Addr, Addr),
    dirs: [Dir; 2],
    closed: bool,
    last_ts: f64,
    packets: i64,
    seen: u64, // ``Reasm::seen`` when its data was last listed in ``touched``
}

/// A segment as the Scanner found it.
pub struct SegIn<'a> {
    pub frame: i64,
    pub ts: f64,
    pub src: Addr,
    pub dst: Addr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u32,
    pub payload: &'a [u8],
    pub missing: i64,
}

#[pyclass(module = "kdissect._native")]
pub struct Reasm {
    ports: HashSet<u32>,
    slab: Vec<Option<Conn>>,
    free: Vec<usize>,
    by_key: Map<(Addr, Addr), usize>,
    by_cid: Map<u64, usize>,
    count: u64,
    packets: i64,
    closing: VecDeque<(i64, u64, (Addr, Addr))>,
    out: Vec<PyObject>,
    // directions whose first piece waits in a placeholder of ``out``: (cid, dir)
    firsts: Vec<(u64, usize)>,
    acc_total: i64,
    plain: Vec<u8>,         // a TLS segment's plaintext (kept: reused for the next)
    passes: Map<u64, Pass>, // connections paired here (``pair``)
    // message._HEADER_VERSIONS (set by Python) and what was found in it: the pairs are
    // added there, never changed
    heads: Option<Py<PyDict>>,
    head_versions: Map<(i16, i16), i64>,
    // connections that delivered data since Python last asked (``touched``), and the
    // round of asking (each connection listed once a round)
    touched: Vec<u64>,
    seen: u64,
    /// budget headroom left for this batch (set by Python before each feed)
    #[pyo3(get, set)]
    room: i64,
    /// the budget may be spent: Python's reassembler has taken over
    #[pyo3(get)]
    tight: bool,
}

/// A Python bytes object holding ``parts`` joined: one copy of each, and no zeroing of
/// its memory first (as ``PyBytes::new_with`` does).
pub(crate) fn joined<'py>(py: Python<'py>, parts: &[&[u8]]) -> PyResult<Bound<'py, PyBytes>> {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    // Safety: a new bytes object of n bytes, not yet shared, filled before it is returned
    unsafe {
        let obj =
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), n as pyo3::ffi::Py_ssize_t);
        let bytes = Bound::from_owned_ptr_or_err(py, obj)?.downcast_into_unchecked::<PyBytes>();
        let mut at = pyo3::ffi::PyBytes_AsString(obj) as *mut u8;
        for p in parts {
            std::ptr::copy_nonoverlapping(p.as_ptr(), at, p.len());
            at = at.add(p.len());
        }
        Ok(bytes)
    }
}

/// ``parts`` joined less their first 4 bytes when those are the size of exactly the
/// rest (one whole Kafka message: what Python's ``Framer.whole`` takes), else None.
fn one_message<'a>(parts: &[&'a [u8]]) -> Option<Vec<&'a [u8]>> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut head = [0u8; 4];
    let mut got = 0;
    let mut rest = Vec::with_capacity(parts.len());
    for p in parts {
        let take = (4 - got).min(p.len());
        head[got..got + take].copy_from_slice(&p[..take]);
        got += take;
        if take < p.len() {
            rest.push(&p[take..]);
        }
    }
    let size = i32::from_be_bytes(head) as i64;
    (got == 4 && size == total as i64 - 4 && size <= MAX_MESSAGE).then_some(rest)
}

fn key_of(src: Addr, dst: Addr) -> (Addr, Addr) {
    // any fixed order of the two endpoints does: the key only finds the connection
    if (src.raw(), src.port) <= (dst.raw(), dst.port) {
        (src, dst)
    } else {
        (dst, src)
    }
}

impl Reasm {
    fn push<'py, T: IntoPyObject<'py, Target = PyTuple>>(
        &mut self,
        py: Python<'py>,
        event: T,
    ) -> PyResult<()>
    where
        PyErr: From<T::Error>,
    {
        self.out.push(event.into_pyobject(py)?.into_any().unbind());
        Ok(())
    }

    /// Flush what a direction's tracking holds (before any other event of it).
    fn flush_acc(&mut self, py: Python<'_>, cid: u64, dir: usize, d: &mut Dir) -> PyResult<()> {
        if let Some(tls) = d.tls.take() {
            return self.tls_back(py, cid, dir, d, tls, &[]);
        }
        if let Some(t) = d.track.as_mut() {
            // (a first piece's place is earlier: a pass is handed back there, if at all)
            Self::hand_first(py, &mut self.out, &mut self.passes, cid, dir, t)?;
        }
        self.unpair(py, cid)?;
        if let Some(t) = d.track.as_mut() {
            if !t.acc.is_empty() {
                let bytes = PyBytes::new(py, &t.acc).into_any().unbind();
                let (off, ts, frame) = (t.acc_offset, t.acc_ts, t.acc_frame);
                self.acc_total -= t.acc.len() as i64;
                // Python's framer holds them now: its budget counts them once it has the
                // events, and ``room`` is set again only then
                self.room -= t.acc.len() as i64;
                t.acc.clear();
                t.py_pending = true;
                self.push(py, (1, cid, dir, off, bytes, ts, frame))?;
            }
        }
        Ok(())
    }

    fn emit_data(
        &mut self,
        py: Python<'_>,
        cid: u64,
        dir: usize,
        off: i64,
        payload: &[u8],
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        self.unpair(py, cid)?;
        let bytes = PyBytes::new(py, payload).into_any().unbind();
        self.push(py, (1, cid, dir, off, bytes, ts, frame))
    }

    /// Data in TCP order: to Python now, or held by the size-prefix tracking.
    fn data(
        &mut self,
        py: Python<'_>,
        cid: u64,
        dir: usize,
        d: &mut Dir,
        off: i64,
        payload: &[u8],
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        if d.tls.is_some() {
            return self.tls_data(py, cid, dir, d, payload, ts, frame);
        }
        let Some(t) = d.track.as_mut() else {
            return self.emit_data(py, cid, dir, off, payload, ts, frame);
        };
        // walk the size prefixes this data holds
        let stop = off + payload.len() as i64;
        let mut completes = false;
        let mut bad = false;
        loop {
            if t.end < 0 {
                let need = 4 - t.head.len() as i64;
                let from = t.start + t.head.len() as i64; // stream offset of the next head byte
                if from >= stop {
                    break;
                }
                let avail = (stop - from).min(need);
                let at = (from - off) as usize;
                t.head.extend_from_slice(&payload[at..at + avail as usize]);
                if t.head.len() < 4 {
                    break;
                }
                let size = i32::from_be_bytes([t.head[0], t.head[1], t.head[2], t.head[3]]) as i64;
                if !(0..=MAX_MESSAGE).contains(&size) {
                    bad = true; // Python's framer searches for a boundary now
                    break;
                }
                t.end = t.start + 4 + size;
            }
            if t.end > stop {
                break;
            }
            completes = true;
            t.start = t.end;
            t.end = -1;
            t.head.clear();
        }
        if bad {
            self.flush_acc(py, cid, dir, d)?;
            d.track = None;
            return self.emit_data(py, cid, dir, off, payload, ts, frame);
        }
        if completes && t.first_slot.is_some() && stop == t.start {
            // whole before the events were taken, and nothing after it: one event, at
            // the place of the last bytes (Python's framer holds nothing in between, so
            // the memory budget sees no holder come and go)
            let slot = t.first_slot.take().expect("checked");
            t.first_ends = None;
            let start = t.first_at.0;
            let event = match one_message(&[&t.first, &t.acc, payload]) {
                // exactly one message: its bytes after the size (event 9)
                Some(parts) => (9, start + 4, joined(py, &parts)?),
                None => (1, start, joined(py, &[&t.first, &t.acc, payload])?),
            };
            self.acc_total -= t.acc.len() as i64;
            t.first.clear();
            t.acc.clear();
            t.py_pending = false;
            let _ = slot; // (the placeholder stays None: drain_into leaves it out)
            return self.whole_event(py, cid, dir, event, ts, frame);
        }
        if completes {
            Self::hand_first(py, &mut self.out, &mut self.passes, cid, dir, t)?;
            let had = t.acc.len() as i64;
            // exactly one message, Python's framer holding nothing of it: event 9
            let one = if had == 0 && !t.py_pending && stop == t.start {
                one_message(&[payload])
            } else {
                None
            };
            let start = if had == 0 { off } else { t.acc_offset };
            let event = if let Some(parts) = one {
                (9, start + 4, joined(py, &parts)?)
            } else if had == 0 {
                (1, start, PyBytes::new(py, payload))
            } else {
                (1, start, joined(py, &[&t.acc, payload])?) // one copy of each part
            };
            self.acc_total -= had;
            t.acc.clear();
            t.py_pending = stop > t.start;
            return self.whole_event(py, cid, dir, event, ts, frame);
        }
        if !t.py_pending && t.first_slot.is_none() && t.acc.is_empty() {
            // the first bytes of a message: Python's framer would start holding here (the
            // budget learns of the holder in the order the Python path tells it), so
            // their event keeps this place: a placeholder, filled when the events are
            // taken, unless the message is whole by then (above). A paired connection
            // stays paired; if the placeholder is filled, it is handed back there, as it
            // stood then (``hand_first``)
            t.first_ends = self.passes.get(&cid).map(|p| p.ends);
            t.first_slot = Some(self.out.len());
            t.first.extend_from_slice(payload);
            t.first_at = (off, ts, frame);
            self.out.push(py.None());
            self.firsts.push((cid, dir));
            return Ok(());
        }
        if t.acc.is_empty() {
            t.acc_offset = off;
        }
        t.acc.extend_from_slice(payload);
        t.acc_ts = ts;
        t.acc_frame = frame;
        self.acc_total += payload.len() as i64;
        Ok(())
    }

    fn gap_event(
        &mut self,
        py: Python<'_>,
        c: &mut Conn,
        dir: usize,
        off: i64,
        len: i64,
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        let cid = c.cid;
        let d = &mut c.dirs[dir];
        self.flush_acc(py, cid, dir, d)?;
        d.track = None; // Python's framer cuts or resyncs from here
        self.push(py, (2, cid, dir, off, len, ts, frame))
    }

    fn charge(&mut self, py: Python<'_>, c: &Conn, dir: usize) -> PyResult<()> {
        let held = c.dirs[dir].held_bytes;
        self.push(py, (4, c.cid, dir, held))
    }

    fn client_hint(&self, src: Addr, dst: Addr) -> bool {
        self.ports.contains(&dst.port) || (!self.ports.contains(&src.port) && src.port > dst.port)
    }

    /// tcp.py's ``take``; ``addr`` writes an address as Python text (for a new connection).
    pub fn take(
        &mut self,
        py: Python<'_>,
        s: &SegIn<'_>,
        addr: &mut dyn FnMut(&[u8]) -> PyResult<Py<PyString>>,
    ) -> PyResult<()> {
        let key = key_of(s.src, s.dst);
        let syn_only = s.flags & SYN != 0 && s.flags & ACK == 0;
        let mut slot = self.by_key.get(&key).copied();
        if let (Some(i), true) = (slot, syn_only) {
            let c = self.slab[i].as_ref().expect("live");
            let d = &c.dirs[if s.src == c.a { 0 } else { 1 }];
            if c.closed || (d.base.is_some() && d.base != Some(s.seq.wrapping_add(1))) {
                self.finish(py, i)?;
                slot = None;
            }
        }
        let i = match slot {
            Some(i) => i,
            None => {
                if !(!s.payload.is_empty() || s.missing != 0 || s.flags & (SYN | FIN | RST) != 0) {
                    return Ok(());
                }
                let client = if syn_only || (s.flags & SYN != 0 && s.flags & ACK != 0) {
                    if syn_only {
                        s.src
                    } else {
                        s.dst
                    }
                } else if self.client_hint(s.src, s.dst) {
                    s.src
                } else {
                    s.dst
                };
                let server = if client == s.src { s.dst } else { s.src };
                self.count += 1;
                let cid = self.count;
                let a_ip = addr(client.raw())?;
                let b_ip = addr(server.raw())?;
                self.push(
                    py,
                    (
                        0,
                        cid,
                        a_ip,
                        client.port,
                        b_ip,
                        server.port,
                        s.ts,
                        s.flags & SYN != 0,
                    ),
                )?;
                let c = Conn {
                    cid,
                    a: client,
                    key,
                    dirs: [Dir::new(), Dir::new()],
                    closed: false,
                    last_ts: 0.0,
                    packets: 0,
                    seen: 0,
                };
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slab[i] = Some(c);
                        i
                    }
                    None => {
                        self.slab.push(Some(c));
                        self.slab.len() - 1
                    }
                };
                self.by_key.insert(key, i);
                self.by_cid.insert(cid, i);
                i
            }
        };
        let mut c = self.slab[i].take().expect("live");
        let r = self.take_in(py, &mut c, s);
        self.slab[i] = Some(c);
        r?;
        self.packets += 1;
        while let Some(&(at, cid, k)) = self.closing.front() {
            if self.packets - at <= CLOSE_WAIT {
                break;
            }
            self.closing.pop_front();
            if let Some(&j) = self.by_key.get(&k) {
                if self.slab[j].as_ref().map(|c| c.cid) == Some(cid) {
                    self.finish(py, j)?;
                }
            }
        }
        Ok(())
    }

    fn take_in(&mut self, py: Python<'_>, c: &mut Conn, s: &SegIn<'_>) -> PyResult<()> {
        let (ts, flags) = (s.ts, s.flags);
        c.last_ts = ts;
        c.packets += 1;
        let dir = if s.src == c.a { 0 } else { 1 };
        {
            let cid = c.cid;
            let d = &mut c.dirs[dir];
            if flags & SYN != 0 {
                let b = s.seq.wrapping_add(1);
                if d.base != Some(b) {
                    // offsets start again from 0: the size-prefix tracking's positions
                    // mean nothing now, so Python's framer sees everything from here
                    self.flush_acc(py, cid, dir, d)?;
                    d.track = None;
                    d.base = Some(b);
                    d.next = 0;
                }
            } else if d.base.is_none() {
                d.base = Some(s.seq);
            }
        }
        let plen = s.payload.len() as i64;
        if plen != 0 || s.missing != 0 {
            let offset = c.dirs[dir].unwrap(s.seq);
            if plen != 0 {
                self.accept(py, c, dir, offset, Some(s.payload), plen, ts, s.frame)?;
            }
            if s.missing != 0 {
                self.accept(py, c, dir, offset + plen, None, s.missing, ts, s.frame)?;
            }
        }
        if flags & FIN != 0 {
            let d = &mut c.dirs[dir];
            d.fin = true;
            d.end = d.unwrap(s.seq) + plen + s.missing;
            d.acked = d.acked.min(d.end);
        }
        {
            let o = &mut c.dirs[1 - dir];
            if flags & ACK != 0 && o.base.is_some() {
                let mut acked = o.unwrap(s.ack);
                if o.end >= 0 {
                    acked = acked.min(o.end);
                }
                if acked > o.acked {
                    o.acked = acked;
                }
            }
        }
        for side in 0..2 {
            if c.dirs[side].acked > c.dirs[side].next {
                self.overdue(py, c, side, ts)?;
            } else {
                c.dirs[side].overdue = None;
            }
        }
        if !c.closed && (flags & RST != 0 || (c.dirs[0].fin && c.dirs[1].fin)) {
            c.closed = true;
            self.closing.push_back((self.packets, c.cid, c.key));
        }
        Ok(())
    }

    fn overdue(&mut self, py: Python<'_>, c: &mut Conn, dir: usize, ts: f64) -> PyResult<()> {
        let packets = c.packets;
        let d = &mut c.dirs[dir];
        let Some(since) = d.overdue else {
            d.overdue = Some(packets);
            return Ok(());
        };
        if packets - since < HOLE_PACKETS {
            return Ok(());
        }
        d.overdue = None;
        let first = if d.held.is_empty() {
            d.acked
        } else {
            d.lowest()
        };
        let to = first.min(d.acked.max(d.next));
        self.skip_to(py, c, dir, to, ts, 0)?;
        self.charge(py, c, dir)
    }

    #[allow(clippy::too_many_arguments)]
    fn accept(
        &mut self,
        py: Python<'_>,
        c: &mut Conn,
        dir: usize,
        mut offset: i64,
        mut payload: Option<&[u8]>,
        mut size: i64,
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        let d = &mut c.dirs[dir];
        let end = offset + size;
        if end <= d.next {
            d.retransmitted += size;
            return Ok(());
        }
        if offset < d.next {
            let cut = d.next - offset;
            d.retransmitted += cut;
            payload = payload.map(|p| &p[cut as usize..]);
            size -= cut;
            offset = d.next;
        }
        if offset > d.next {
            let bigger = match d.held.get(&offset) {
                None => Some(0),
                Some(old) if old.size < size => Some(old.size),
                _ => None,
            };
            if let Some(old) = bigger {
                d.held_bytes += size - old;
                d.held.insert(
                    offset,
                    Held {
                        payload: payload.map(|p| p.to_vec()),
                        size,
                        ts,
                        frame,
                    },
                );
            }
            if d.held_bytes > MAX_HELD || d.held.len() > MAX_HELD_SEGMENTS {
                self.skip_hole(py, c, dir)?;
            }
            return self.charge(py, c, dir);
        }
        self.deliver(py, c, dir, payload, size, ts, frame)?;
        if !c.dirs[dir].held.is_empty() {
            self.drain(py, c, dir, ts)?;
            self.charge(py, c, dir)?;
        }
        Ok(())
    }

    fn deliver(
        &mut self,
        py: Python<'_>,
        c: &mut Conn,
        dir: usize,
        payload: Option<&[u8]>,
        size: i64,
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        match payload {
            None => {
                let at = c.dirs[dir].next;
                self.hole(py, c, dir, at, size, ts, frame)?;
            }
            Some(p) => {
                if c.dirs[dir].hole.is_some() {
                    self.report_hole(py, c, dir)?;
                }
                let cid = c.cid;
                if c.seen != self.seen && self.heads.is_some() {
                    c.seen = self.seen;
                    self.touched.push(cid);
                }
                let d = &mut c.dirs[dir];
                if ts > d.last_ts {
                    d.last_ts = ts;
                }
                let (at, when) = (d.next, d.last_ts);
                self.data(py, cid, dir, d, at, p, when, frame)?;
            }
        }
        c.dirs[dir].next += size;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn hole(
        &mut self,
        py: Python<'_>,
        c: &mut Conn,
        dir: usize,
        offset: i64,
        length: i64,
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        if let Some(h) = c.dirs[dir].hole.as_mut() {
            if h.0 + h.1 == offset {
                h.1 += length;
                h.2 = ts;
                h.3 = frame;
                return Ok(());
            }
            self.report_hole(py, c, dir)?;
        }
        c.dirs[dir].hole = Some((offset, length, ts, frame));
        Ok(())
    }

    fn report_hole(&mut self, py: Python<'_>, c: &mut Conn, dir: usize) -> PyResult<()> {
        let Some((offset, length, ts, frame)) = c.dirs[dir].hole.take() else {
            return Ok(());
        };
        let d = &mut c.dirs[dir];
        d.gaps += 1;
        d.gap_bytes += length;
        self.gap_event(py, c, dir, offset, length, ts, frame)
    }

    fn drain(&mut self, py: Python<'_>, c: &mut Conn, dir: usize, now: f64) -> PyResult<()> {
        while !c.dirs[dir].held.is_empty() {
            let d = &mut c.dirs[dir];
            let offset = d.lowest();
            if offset > d.next {
                return Ok(());
            }
            let h = d.held.remove(&offset).expect("held");
            d.held_bytes -= h.size;
            if offset + h.size <= d.next {
                d.retransmitted += h.size;
                continue;
            }
            let cut = d.next - offset;
            let when = if h.ts > now { h.ts } else { now };
            let p = h.payload.as_ref().map(|p| &p[cut as usize..]);
            self.deliver(py, c, dir, p, h.size - cut, when, h.frame)?;
        }
        Ok(())
    }

    fn skip_to(
        &mut self,
        py: Python<'_>,
        c: &mut Conn,
        dir: usize,
        offset: i64,
        mut ts: f64,
        mut frame: i64,
    ) -> PyResult<()> {
        let d = &c.dirs[dir];
        if offset > d.next {
            if !d.held.is_empty() && d.lowest() == offset {
                let h = &d.held[&offset];
                ts = h.ts;
                frame = h.frame;
            }
            let at = d.next;
            self.hole(py, c, dir, at, offset - at, ts, frame)?;
            c.dirs[dir].next = offset;
        }
        self.drain(py, c, dir, 0.0)
    }

    fn skip_hole(&mut self, py: Python<'_>, c: &mut Conn, dir: usize) -> PyResult<()> {
        let to = c.dirs[dir].lowest();
        let ts = c.last_ts;
        self.skip_to(py, c, dir, to, ts, 0)
    }

    fn finish(&mut self, py: Python<'_>, i: usize) -> PyResult<()> {
        let mut c = self.slab[i].take().expect("live");
        for dir in 0..2 {
            while !c.dirs[dir].held.is_empty() {
                self.skip_hole(py, &mut c, dir)?;
            }
            self.unpair(py, c.cid)?;
            self.push(py, (5, c.cid, dir))?;
            let d = &c.dirs[dir];
            let end = d.end.max(d.acked);
            if end > d.next {
                let (at, ts) = (d.next, c.last_ts);
                self.hole(py, &mut c, dir, at, end - at, ts, 0)?;
                c.dirs[dir].next = end;
            }
            if c.dirs[dir].hole.is_some() {
                self.report_hole(py, &mut c, dir)?;
            }
            let cid = c.cid;
            self.flush_acc(py, cid, dir, &mut c.dirs[dir])?;
        }
        self.push(py, (3, c.cid))?;
        if self.by_key.get(&c.key) == Some(&i) {
            self.by_key.remove(&c.key);
        }
        self.by_cid.remove(&c.cid);
        self.free.push(i);
        Ok(())
    }

    /// The budget may be spent by the next segment: hand everything held over.
    pub fn go_tight(&mut self, py: Python<'_>) -> PyResult<()> {
        let mut live: Vec<usize> = self.by_cid.values().copied().collect();
        live.sort_by_key(|&i| self.slab[i].as_ref().map(|c| c.cid));
        for i in live {
            let mut c = self.slab[i].take().expect("live");
            let cid = c.cid;
            for dir in 0..2 {
                self.flush_acc(py, cid, dir, &mut c.dirs[dir])?;
                c.dirs[dir].track = None;
            }
            self.slab[i] = Some(c);
        }
        self.tight = true;
        self.push(py, (6, py.None()))
    }

    /// A paired connection back to Python (event 12), before any event of it that the
    /// pass does not make; nothing when it is not paired.
    fn unpair(&mut self, py: Python<'_>, cid: u64) -> PyResult<()> {
        if self.passes.is_empty() {
            return Ok(());
        }
        if let Some(p) = self.passes.remove(&cid) {
            self.push(py, (12, cid, p.ends[0], p.ends[1]))?;
        }
        Ok(())
    }

    /// The header version of a request's (api key, version), as Python's table says;
    /// None: not there yet (Python's reading adds it).
    fn head_version(&mut self, py: Python<'_>, kv: (i16, i16)) -> PyResult<Option<i64>> {
        if let Some(&hv) = self.head_versions.get(&kv) {
            return Ok(Some(hv));
        }
        let Some(table) = self.heads.as_ref() else {
            return Ok(None);
        };
        let Some(hv) = table.bind(py).get_item(kv)? else {
            return Ok(None);
        };
        let hv: i64 = hv.extract()?;
        self.head_versions.insert(kv, hv);
        Ok(Some(hv))
    }

    /// The data event of the bytes that complete a message: (9, ...) one whole message
    /// (paired here when its connection is: ``pass_message``), else (1, ...).
    fn whole_event(
        &mut self,
        py: Python<'_>,
        cid: u64,
        dir: usize,
        event: (i32, i64, Bound<'_, PyBytes>),
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        let (tag, off, bytes) = event;
        if tag == 9 && !self.passes.is_empty() {
            if self.pass_message(py, cid, dir, off, &bytes, ts, frame)? {
                return Ok(());
            }
        } else if tag != 9 {
            self.unpair(py, cid)?;
        }
        let bytes = bytes.into_any().unbind();
        self.push(py, (tag, cid, dir, off, bytes, ts, frame))
    }

    /// One whole message (``bytes`` at stream offset ``off``, after its size) of a
    /// direction: paired here when its connection is (event 10 or 11, true); when it is
    /// paired but this message is not the simple case, handed over first (false: the
    /// caller sends it as event 9).
    #[allow(clippy::too_many_arguments)]
    fn pass_message(
        &mut self,
        py: Python<'_>,
        cid: u64,
        dir: usize,
        off: i64,
        bytes: &Bound<'_, PyBytes>,
        ts: f64,
        frame: i64,
    ) -> PyResult<bool> {
        let Some(p) = self.passes.get(&cid) else {
            return Ok(false);
        };
        let body = bytes.as_bytes();
        let end = off + body.len() as i64;
        if dir == p.client {
            let hv = match head::key_version(body) {
                Some(kv) => self.head_version(py, kv)?,
                None => None,
            };
            let p = self.passes.get_mut(&cid).expect("paired");
            let h = match hv.map(|hv| head::read(body, hv)) {
                Some(head::Read::Head(h)) => Some(h),
                _ => None,
            };
            let simple = h.as_ref().filter(|h| {
                // (these pair otherwise, change the connection's state, or expect no
                // answer: connection.py's reference says what they do)
                !matches!(h.key, API_VERSIONS | SASL_HANDSHAKE | ENVELOPE)
                    && h.acks != Some(0)
                    && p.pending.len() < PASS_PENDING
                    && !p.pending.contains(&h.corr)
            });
            if let Some(h) = simple {
                p.pending.push_back(h.corr);
                p.ends[dir] = end;
                let bytes = bytes.clone().into_any().unbind();
                let event = (
                    10,
                    cid,
                    off,
                    bytes,
                    ts,
                    frame,
                    h.key,
                    h.version,
                    h.corr,
                    h.client_id,
                );
                self.push(py, event)?;
                return Ok(true);
            }
        } else if body.len() >= 4 {
            let corr = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            let p = self.passes.get_mut(&cid).expect("paired");
            if p.pending.front() == Some(&corr) {
                p.pending.pop_front();
                p.ends[dir] = end;
                let bytes = bytes.clone().into_any().unbind();
                self.push(py, (11, cid, off, bytes, ts, frame, corr))?;
                return Ok(true);
            }
        }
        self.unpair(py, cid)?;
        Ok(false)
    }

    /// Whether the Scanner should hand this segment here (false: as a Python row).
    pub fn fits(&mut self, py: Python<'_>, s: &SegIn<'_>) -> PyResult<bool> {
        if self.tight {
            return Ok(false);
        }
        let cost = s.payload.len() as i64 + s.missing.max(0);
        if self.room - self.acc_total - cost - self.held_at_risk(s) < 0 {
            self.go_tight(py)?;
            return Ok(false);
        }
        self.room -= cost;
        Ok(true)
    }

    /// The held bytes a segment may count twice in the reference's budget: tcp.py hands
    /// a direction's held segments on (a hole filled, overdue or too much held, or the
    /// connection finished) before it tells the budget they are no longer held. One
    /// direction at a time: the most a direction holds of the segment's connection, or
    /// of a closed one this segment's count finishes.
    fn held_at_risk(&self, s: &SegIn<'_>) -> i64 {
        let most = |i: usize| {
            self.slab[i]
                .as_ref()
                .map_or(0, |c| c.dirs[0].held_bytes.max(c.dirs[1].held_bytes))
        };
        let mut at_risk = self
            .by_key
            .get(&key_of(s.src, s.dst))
            .map_or(0, |&i| most(i));
        for &(at, cid, k) in &self.closing {
            if self.packets + 1 - at <= CLOSE_WAIT {
                break; // (``take`` finishes them after counting the segment)
            }
            if let Some(&j) = self.by_key.get(&k) {
                if self.slab[j].as_ref().map(|c| c.cid) == Some(cid) {
                    at_risk = at_risk.max(most(j));
                }
            }
        }
        at_risk
    }

    /// A direction's first piece waiting in its placeholder: its event goes there now
    /// (Python's framer holds it from that place on). A connection paired when it came
    /// is handed back there (13: event 12's ends as they were then, and event 1's
    /// fields): Python reads the connection's events after it as event 9s, and its
    /// events 12 and 13 after it are stale.
    fn hand_first(
        py: Python<'_>,
        out: &mut [PyObject],
        passes: &mut Map<u64, Pass>,
        cid: u64,
        dir: usize,
        t: &mut Track,
    ) -> PyResult<()> {
        if let Some(slot) = t.first_slot.take() {
            let (off, ts, frame) = t.first_at;
            let bytes = PyBytes::new(py, &t.first).into_any().unbind();
            t.first.clear();
            t.py_pending = true;
            out[slot] = match t.first_ends.take() {
                None => (1, cid, dir, off, bytes, ts, frame).into_pyobject(py)?,
                Some(ends) => {
                    passes.remove(&cid);
                    (13, cid, dir, off, bytes, ts, frame, ends[0], ends[1]).into_pyobject(py)?
                }
            }
            .into_any()
            .unbind();
        }
        Ok(())
    }

    /// Events so far, appended to ``out`` (before a row the Scanner adds itself); first
    /// pieces still waiting are handed over in their places, and the places of those
    /// joined to the rest of their message are left out.
    pub fn drain_into(&mut self, out: &Bound<'_, PyList>) -> PyResult<()> {
        let py = out.py();
        for (cid, dir) in std::mem::take(&mut self.firsts) {
            let Some(&i) = self.by_cid.get(&cid) else {
                continue;
            };
            if let Some(t) = self.slab[i]
                .as_mut()
                .and_then(|c| c.dirs[dir].track.as_mut())
            {
                Self::hand_first(py, &mut self.out, &mut self.passes, cid, dir, t)?;
            }
        }
        for e in self.out.drain(..) {
            if !e.is_none(py) {
                out.append(e)?;
            }
        }
        Ok(())
    }
}

#[pymethods]
impl Reasm {
    /// ``ports``: the Kafka ports (they tell the client when no SYN does).
    #[new]
    fn py_new(ports: Vec<u32>) -> Self {
        Reasm {
            ports: ports.into_iter().collect(),
            slab: Vec::new(),
            free: Vec::new(),
            by_key: Map::default(),
            by_cid: Map::default(),
            count: 0,
            packets: 0,
            closing: VecDeque::new(),
            out: Vec::new(),
            firsts: Vec::new(),
            acc_total: 0,
            plain: Vec::new(),
            passes: Map::default(),
            heads: None,
            head_versions: Map::default(),
            touched: Vec::new(),
            seen: 1,
            room: 0,
            tight: false,
        }
    }

    /// Track the size prefixes of a direction Python frames as Kafka: its framer holds
    /// ``held`` (the bytes so far of the message starting at stream offset ``start``).
    fn track(&mut self, cid: u64, dir: usize, start: i64, held: &[u8]) {
        let Some(&i) = self.by_cid.get(&cid) else {
            return;
        };
        let Some(c) = self.slab[i].as_mut() else {
            return;
        };
        if self.tight || dir > 1 {
            return;
        }
        let d = &mut c.dirs[dir];
        if d.next != start + held.len() as i64 {
            return; // not where the framer stands: leave it to Python
        }
        if let Some(t) = Track::at(start, held, d.next) {
            d.track = Some(t);
        }
    }

    /// Python's table of request header versions (message._HEADER_VERSIONS): the pass
    /// reads a request's header only for the pairs it holds.
    fn head_table(&mut self, table: Py<PyDict>) {
        self.heads = Some(table);
    }

    /// The connections that delivered data since the last call (with the pass on):
    /// only their Kafka state can have become simple (``pair``), so Python asks those
    /// again, not every connection waiting (200,000 idle ones were 18 CPU-s).
    fn touched(&mut self) -> Vec<u64> {
        self.seen += 1;
        std::mem::take(&mut self.touched)
    }

    /// Pair a connection's messages here from now on (the module's doc): ``client`` is
    /// the client's direction, ``starts`` where each direction's framer stands (holding
    /// nothing), ``pending`` the correlation ids of the requests waiting, oldest first.
    /// 1: taken; 0: not now (this side must stand where Python does, holding nothing,
    /// after Python has taken every event); -1: not while a direction is not tracked.
    fn pair(&mut self, cid: u64, client: usize, starts: (i64, i64), pending: Vec<i32>) -> i32 {
        let Some(c) = self.by_cid.get(&cid).and_then(|&i| self.slab[i].as_ref()) else {
            return -1;
        };
        if self.tight || client > 1 || c.closed || self.heads.is_none() {
            return -1;
        }
        if c.dirs.iter().any(|d| d.track.is_none()) {
            return -1; // (a TLS direction tracked later asks again)
        }
        if !self.out.is_empty() || pending.len() > PASS_PENDING || self.passes.contains_key(&cid) {
            return 0;
        }
        let at_rest = |d: &Dir, start: i64| {
            d.track.as_ref().is_some_and(|t| {
                t.start == start
                    && t.end < 0
                    && t.head.is_empty()
                    && !t.py_pending
                    && t.acc.is_empty()
                    && t.first_slot.is_none()
            })
        };
        if !at_rest(&c.dirs[0], starts.0) || !at_rest(&c.dirs[1], starts.1) {
            return 0;
        }
        let mut seen = HashSet::new();
        if !pending.iter().all(|corr| seen.insert(*corr)) {
            return 0;
        }
        self.passes.insert(
            cid,
            Pass {
                client,
                pending: pending.into(),
                ends: [-1, -1],
            },
        );
        1
    }

    /// Decrypt a TLS direction here (tls.rs ``TlsDir``) from now on: ``cipher`` (a
    /// RecordCipher) and ``seq`` its keys, ``plain`` the plaintext offset reached,
    /// ``begun`` the record begun; ``start``/``held`` the framer's position as for
    /// ``track`` (``start`` < 0: its sizes are not tracked). False when not taken (Python
    /// then reads on). Given back as event 8 (``tls_back``).
    #[allow(clippy::too_many_arguments)]
    fn tls_track(
        &mut self,
        cid: u64,
        dir: usize,
        cipher: Py<crate::tls::RecordCipher>,
        seq: u64,
        plain: i64,
        begun: &[u8],
        start: i64,
        held: &[u8],
    ) -> bool {
        let Some(&i) = self.by_cid.get(&cid) else {
            return false;
        };
        let Some(c) = self.slab[i].as_mut() else {
            return false;
        };
        if self.tight || dir > 1 || !self.out.is_empty() || c.closed {
            return false; // Python has not seen all that was delivered
        }
        let d = &mut c.dirs[dir];
        if d.tls.is_some() || d.track.is_some() {
            return false;
        }
        if start >= 0 && plain == start + held.len() as i64 {
            d.track = Track::at(start, held, plain);
        }
        d.tls = Some(crate::tls::TlsDir::new(cipher, seq, begun, plain));
        true
    }

    /// End of the file: every connection finished, in the order they began; or, when
    /// that could spend the budget, none: the events end with the hand-over (6) and
    /// Python's reassembler finishes them.
    fn flush<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut live: Vec<(u64, usize)> = self.by_cid.iter().map(|(&c, &i)| (c, i)).collect();
        live.sort();
        // finishing a direction hands its held segments on before the budget drops their
        // charge (``held_at_risk``), and the bytes tracking holds here are framers' on
        // the Python path: ``fits``'s test, for the whole flush
        let most = live
            .iter()
            .filter_map(|&(_, i)| self.slab[i].as_ref())
            .flat_map(|c| c.dirs.iter().map(|d| d.held_bytes))
            .max()
            .unwrap_or(0);
        if !self.tight && self.room - self.acc_total - most < 0 {
            self.go_tight(py)?;
        }
        if self.tight {
            live.clear(); // Python's reassembler has them (``_take_over``)
        }
        for (_, i) in live {
            self.finish(py, i)?;
        }
        let out = PyList::empty(py);
        self.drain_into(&out)?;
        Ok(out)
    }

    /// Everything after tight: (count, packets, closing [(packets, cid)], connections
    /// [(cid, closed, last_ts, packets, (dir0, dir1))] in the order they began), each
    /// direction (base, next, held [(offset, payload, size, ts, frame)], held_bytes, fin,
    /// end, acked, overdue, last_ts, hole, retransmitted, gaps, gap_bytes).
    fn export<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let conns = PyList::empty(py);
        let mut live: Vec<(u64, usize)> = self.by_cid.iter().map(|(&c, &i)| (c, i)).collect();
        live.sort();
        for (_, i) in live {
            let c = self.slab[i].as_ref().expect("live");
            let mut dirs = Vec::new();
            for d in &c.dirs {
                let held = PyList::empty(py);
                for (off, h) in &d.held {
                    let p: PyObject = match &h.payload {
                        Some(p) => PyBytes::new(py, p).into_any().unbind(),
                        None => py.None(),
                    };
                    held.append((*off, p, h.size, h.ts, h.frame))?;
                }
                let hole: PyObject = match d.hole {
                    Some(h) => PyList::new(
                        py,
                        [
                            h.0.into_pyobject(py)?.into_any(),
                            h.1.into_pyobject(py)?.into_any(),
                            h.2.into_pyobject(py)?.into_any(),
                            h.3.into_pyobject(py)?.into_any(),
                        ],
                    )?
                    .into_any()
                    .unbind(),
                    None => py.None(),
                };
                let t = PyTuple::new(
                    py,
                    [
                        d.base.into_pyobject(py)?.into_any(),
                        d.next.into_pyobject(py)?.into_any(),
                        held.into_any(),
                        d.held_bytes.into_pyobject(py)?.into_any(),
                        pyo3::types::PyBool::new(py, d.fin).to_owned().into_any(),
                        d.end.into_pyobject(py)?.into_any(),
                        d.acked.into_pyobject(py)?.into_any(),
                        d.overdue.into_pyobject(py)?.into_any(),
                        d.last_ts.into_pyobject(py)?.into_any(),
                        hole.into_bound(py),
                        d.retransmitted.into_pyobject(py)?.into_any(),
                        d.gaps.into_pyobject(py)?.into_any(),
                        d.gap_bytes.into_pyobject(py)?.into_any(),
                    ],
                )?;
                dirs.push(t);
            }
            conns.append((
                c.cid,
                c.closed,
                c.last_ts,
                c.packets,
                (dirs[0].clone(), dirs[1].clone()),
            ))?;
        }
        let closing = PyList::empty(py);
        for (at, cid, _) in &self.closing {
            closing.append((*at, *cid))?;
        }
        PyTuple::new(
            py,
            [
                self.count.into_pyobject(py)?.into_any(),
                self.packets.into_pyobject(py)?.into_any(),
                closing.into_any(),
                conns.into_any(),
            ],
        )
    }
}

/// TLS directions decrypted here (``tls_track``): the plaintext goes through the same
/// size-prefix tracking and data events as a plain direction's; anything else is given
/// back to Python's session as (8, cid, dir, next sequence number, records decrypted
/// here, plaintext offset, the bytes from the record Python reads on, ts, frame).
impl Reasm {
    #[allow(clippy::too_many_arguments)]
    fn tls_data(
        &mut self,
        py: Python<'_>,
        cid: u64,
        dir: usize,
        d: &mut Dir,
        payload: &[u8],
        ts: f64,
        frame: i64,
    ) -> PyResult<()> {
        let mut tls = d.tls.take().expect("a TLS direction");
        tls.ts = ts;
        tls.frame = frame;
        let mut plain = std::mem::take(&mut self.plain); // reused: no fresh pages
        plain.clear();
        let back = tls.feed(payload, &mut plain);
        if !plain.is_empty() {
            let at = tls.plain;
            tls.plain += plain.len() as i64;
            let sent = self.data(py, cid, dir, d, at, &plain, ts, frame);
            self.plain = plain;
            sent?;
        } else {
            self.plain = plain;
        }
        match back {
            None => {
                d.tls = Some(tls);
                Ok(())
            }
            Some(rest) => self.tls_back(py, cid, dir, d, tls, &rest),
        }
    }

    /// The direction back to Python: what tracking holds first, then event 8.
    fn tls_back(
        &mut self,
        py: Python<'_>,
        cid: u64,
        dir: usize,
        d: &mut Dir,
        mut tls: crate::tls::TlsDir,
        rest: &[u8],
    ) -> PyResult<()> {
        self.flush_acc(py, cid, dir, d)?;
        d.track = None;
        let bytes = if rest.is_empty() {
            std::mem::take(&mut tls.buf)
        } else {
            rest.to_vec()
        };
        let bytes = PyBytes::new(py, &bytes).into_any().unbind();
        self.push(
            py,
            (
                8,
                cid,
                dir,
                tls.seq,
                tls.records,
                tls.plain,
                bytes,
                tls.ts,
                tls.frame,
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_at(base: u32, next: i64) -> Dir {
        let mut d = Dir::new();
        d.base = Some(base);
        d.next = next;
        d
    }

    #[test]
    fn sequence_numbers_unwrap_across_the_32_bit_wrap() {
        let d = dir_at(0xFFFF_FF00, 0);
        assert_eq!(d.unwrap(0xFFFF_FF00), 0);
        assert_eq!(d.unwrap(0x0000_0010), 0x110); // past the wrap: still ahead
        let ahead = dir_at(0xFFFF_FF00, 0x1_0000_0000);
        assert_eq!(ahead.unwrap(0xFFFF_FF00), 0x1_0000_0000);
    }

    #[test]
    fn an_old_retransmission_unwraps_behind() {
        let d = dir_at(100, 5000);
        assert_eq!(d.unwrap(100 + 4000), 4000);
        assert_eq!(d.unwrap(100 + 6000), 6000);
    }

    #[test]
    fn one_message_is_exactly_one_size_and_its_bytes() {
        let msg: &[u8] = &[0, 0, 0, 3, 7, 8, 9];
        for cut in 0..=msg.len() {
            for cut2 in cut..=msg.len() {
                let parts = [&msg[..cut], &msg[cut..cut2], &msg[cut2..]];
                let rest = one_message(&parts).expect("one message");
                assert_eq!(rest.concat(), vec![7, 8, 9]);
            }
        }
        assert!(one_message(&[&[0, 0, 0, 3, 7, 8]]).is_none()); // short
        assert!(one_message(&[&[0, 0, 0, 1, 7, 0, 0, 0, 0]]).is_none()); // two
        assert!(one_message(&[&[0, 0, 0]]).is_none());
        assert!(one_message(&[&[255, 255, 255, 251]]).is_none()); // -5: no size
        assert_eq!(
            one_message(&[&[0, 0, 0, 0]]).map(|r| r.concat()),
            Some(vec![])
        );
    }

    #[test]
    fn tracking_starts_only_from_a_size_framed_state() {
        // a message of 10 bytes at 0, 2 of its bytes held: tracked to end at 14
        let t = Track::at(0, &[0, 0, 0, 10, 1, 2], 6).expect("tracked");
        assert_eq!((t.end, t.py_pending), (14, true));
        // the size prefix not known yet
        assert_eq!(Track::at(0, &[0, 0], 2).map(|t| t.end), Some(-1));
        // a negative size is no framing state
        assert!(Track::at(0, &[0xFF, 0xFF, 0xFF, 0xFF], 4).is_none());
        // a message the framer would already have framed
        assert!(Track::at(0, &[0, 0, 0, 1, 9], 10).is_none());
    }
}
