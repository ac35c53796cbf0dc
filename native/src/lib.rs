//! kdissect's compiled packet path: pcap and pcapng records -> link/IPv4/IPv6/VLAN/TCP
//! headers -> TCP segments, handed to Python in batches.
//!
//! The pure-Python modules (kdissect/capture/pcapfile.py, packet.py) are the reference:
//! this code reads the same records, says the same warnings and finds the same segments,
//! byte for byte (tests/test_native.py and the fuzzer compare the two). It does no I/O:
//! Python feeds it the file's bytes (a map of the file, or read and decompressed) a block
//! at a time, and it parses them where they lie (mapped.rs guards a map).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use std::collections::{HashMap, VecDeque};

mod avro;
mod body_json;
mod crc32c;
mod facts;
mod fasthash;
mod head;
mod jsonrec;
mod line;
mod logjson;
mod mapped;
mod parquet_plain;
mod produce;
mod quick;
mod reasm;
mod record_walk;
mod records_table;
mod relay;
mod scan;
mod sched;
mod tls;
mod values;
mod varint;

const MAX_PACKET: usize = 256 * 1024 * 1024;
/// pcapfile.py LARGEST_SANE: tcpdump's default snaplen; larger only if the file says so.
const LARGEST_SANE: usize = 262_144;
/// protocol/times.py LAST_SECOND: the last instant written as a date (9999-12-31T23:59:59Z).
pub(crate) const LAST_SECOND: f64 = 253402300799.0;
const TLS_KEY_LOG: u32 = 0x544C_534B;
const ETH_IPV4: i64 = 0x0800;
const ETH_IPV6: i64 = 0x86DD;
const ADDR_CACHE: usize = 65536;
const BLOCK: usize = 1 << 20; // pcapfile.py's _BLOCK: what the Python reader reads at a time
const WINDOW: u32 = 16; // pcapfile.py's WINDOW: how far a packet may move into time order

/// A packet read, waiting in the window that puts packets in time order.
struct Waiting {
    ts: f64,
    index: u64,
    linktype: u32,
    data: Vec<u8>,
    passed: u32, // later packets put before it
}

fn clamp_ts(ts: f64) -> f64 {
    if (0.0..=LAST_SECOND).contains(&ts) {
        ts
    } else {
        -1.0
    }
}

fn supported(linktype: u32) -> bool {
    matches!(linktype, 0 | 1 | 12 | 101 | 108 | 113 | 228 | 229 | 276)
}

#[derive(Clone, Copy)]
struct Endian(bool); // true: little-endian

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> u32 {
        let v = [b[at], b[at + 1]];
        (if self.0 {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        }) as u32
    }
    fn u32(self, b: &[u8], at: usize) -> u32 {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if self.0 {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    }
}

fn be16(b: &[u8], at: usize) -> i64 {
    ((b[at] as i64) << 8) | b[at + 1] as i64
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A TCP segment's fields (payload as a range of the packet's bytes).
struct Seg {
    src: (usize, usize),
    sport: u32,
    dst: (usize, usize),
    dport: u32,
    seq: u32,
    ack: u32,
    flags: u32,
    payload: (usize, usize),
    missing: i64,
}

/// (ethertype-like IP version marker, offset of the IP header): packet.py's ``_ip_of``.
fn ip_of(linktype: u32, d: &[u8]) -> Option<(i64, usize)> {
    match linktype {
        1 => {
            if d.len() < 14 {
                return None;
            }
            let (mut etype, mut off) = (be16(d, 12), 14usize);
            while matches!(etype, 0x8100 | 0x88A8 | 0x9100) && d.len() >= off + 4 {
                etype = be16(d, off + 2);
                off += 4;
            }
            Some((etype, off))
        }
        113 => (d.len() >= 16).then(|| (be16(d, 14), 16)),
        276 => (d.len() >= 20).then(|| (be16(d, 0), 20)),
        0 | 108 => {
            if d.len() < 4 {
                return None;
            }
            let mut family = Endian(true).u32(d, 0);
            if family > 0xFFFF {
                family = be32(d, 0);
            }
            let etype = match family {
                2 => ETH_IPV4,
                10 | 24 | 28 | 30 => ETH_IPV6,
                _ => -1,
            };
            Some((etype, 4))
        }
        12 | 101 | 228 | 229 => {
            if d.is_empty() {
                return None;
            }
            Some((if d[0] >> 4 == 4 { ETH_IPV4 } else { ETH_IPV6 }, 0))
        }
        _ => None,
    }
}

/// packet.py's ``tcp_segment``: the TCP segment in a captured frame, or None.
fn tcp_segment(linktype: u32, d: &[u8]) -> Option<Seg> {
    let (etype, off) = if linktype == 1 && d.len() >= 34 && d[12] == 8 && d[13] == 0 {
        (ETH_IPV4, 14)
    } else {
        ip_of(linktype, d)?
    };
    let (src, dst, tcp, ip_end);
    if etype == ETH_IPV4 {
        if d.len() < off + 20 {
            return None;
        }
        let ihl = ((d[off] & 0x0F) as usize) * 4;
        let total = be16(d, off + 2) as usize;
        let frag = be16(d, off + 6);
        if d[off + 9] != 6 || frag & 0x1FFF != 0 || ihl < 20 {
            return None;
        }
        src = (off + 12, off + 16);
        dst = (off + 16, off + 20);
        ip_end = if total != 0 { off + total } else { d.len() };
        tcp = off + ihl;
    } else if etype == ETH_IPV6 {
        if d.len() < off + 40 {
            return None;
        }
        let plen = be16(d, off + 4) as usize;
        let mut nxt = d[off + 6];
        src = (off + 8, off + 24);
        dst = (off + 24, off + 40);
        let mut at = off + 40;
        while matches!(nxt, 0 | 43 | 60) && d.len() >= at + 8 {
            let hlen = (d[at + 1] as usize + 1) * 8;
            nxt = d[at];
            at += hlen;
        }
        if nxt != 6 {
            return None;
        }
        tcp = at;
        ip_end = off + 40 + plen;
    } else {
        return None;
    }
    if d.len() < tcp + 20 {
        return None;
    }
    let doff_flags = be16(d, tcp + 12) as usize;
    let start = tcp + (doff_flags >> 12) * 4;
    let have_end = ip_end.min(d.len());
    let payload = if start < have_end {
        (start, have_end)
    } else {
        (0, 0)
    };
    let missing = (ip_end as i64 - have_end.max(start) as i64).max(0);
    Some(Seg {
        src,
        sport: be16(d, tcp) as u32,
        dst,
        dport: be16(d, tcp + 2) as u32,
        seq: be32(d, tcp + 4),
        ack: be32(d, tcp + 8),
        flags: (doff_flags & 0x3F) as u32,
        payload,
        missing,
    })
}

/// pcapfile.py's ``_ts_resolution``: the if_tsresol option's byte; default 6 (microseconds).
fn ts_resolution(opts: &[u8], e: Endian) -> u8 {
    let mut pos = 0usize;
    while pos + 4 <= opts.len() {
        let code = e.u16(opts, pos);
        let length = e.u16(opts, pos + 2) as usize;
        if code == 0 {
            break;
        }
        if code == 9 && length >= 1 && pos + 4 < opts.len() {
            return opts[pos + 4];
        }
        pos += 4 + length + ((4 - length % 4) % 4);
    }
    6
}

/// pcapfile.py's ``ticks_to_seconds``: whole seconds plus the fraction, as pcap's are
/// computed, so one instant is one float from either file format.
fn ticks_to_seconds(ticks: u64, resolution: u8) -> f64 {
    let exponent = (resolution & 0x7F) as u32;
    let (base, unit) = if resolution & 0x80 != 0 {
        (2u128, 2.0f64.powf(-(exponent as f64)))
    } else {
        (10u128, 10.0f64.powf(-(exponent as f64)))
    };
    let ticks = ticks as u128;
    match base.checked_pow(exponent) {
        Some(per_second) => (ticks / per_second) as f64 + (ticks % per_second) as f64 * unit,
        None => 0.0 + ticks as f64 * unit, // a tick count always below one second
    }
}

#[derive(PartialEq)]
enum State {
    Magic,
    PcapHeader,
    PcapRecords,
    BlockHead,
    Done,
}

/// An address as Python text, cached (IPv6 written by Python's ``ipaddress``).
fn addr_text(
    py: Python<'_>,
    addrs: &mut HashMap<Vec<u8>, Py<PyString>>,
    ip_address_slot: &mut Option<PyObject>,
    raw: &[u8],
) -> PyResult<Py<PyString>> {
    if let Some(s) = addrs.get(raw) {
        return Ok(s.clone_ref(py));
    }
    let s: Py<PyString> = if raw.len() == 4 {
        PyString::new(py, &format!("{}.{}.{}.{}", raw[0], raw[1], raw[2], raw[3])).unbind()
    } else {
        // IPv6 text as this Python writes it (versions differ on IPv4-mapped forms)
        let ip_address = match &*ip_address_slot {
            Some(f) => f.clone_ref(py),
            None => {
                let f: PyObject = py.import("ipaddress")?.getattr("ip_address")?.unbind();
                *ip_address_slot = Some(f.clone_ref(py));
                f
            }
        };
        ip_address
            .call1(py, (PyBytes::new(py, raw),))?
            .bind(py)
            .str()?
            .unbind()
    };
    if addrs.len() < ADDR_CACHE {
        addrs.insert(raw.to_vec(), s.clone_ref(py));
    }
    Ok(s)
}

/// One capture file's bytes in, its TCP segments out (see the module's comment).
///
/// ``feed(data, eof)`` takes the next bytes (``eof``: no more follow) and returns what
/// they complete, in file order: ``(frame, ts, src, sport, dst, dport, seq, ack, flags,
/// payload, missing)`` for a TCP segment, ``(key_log,)`` for a pcapng Decryption
/// Secrets Block. ``packets``, ``unsupported`` (linktype -> packets), ``warnings`` and
/// ``format`` say the rest. A file that is not a capture raises ValueError.
#[pyclass(module = "kdissect._native")]
struct Scanner {
    buf: Vec<u8>, // a record begun in an earlier feed (else empty: parsed in place)
    pos: usize,   // where parsing stands in the bytes being parsed
    need: usize,  // bytes the record begun still needs
    eof: bool,
    state: State,
    pcap_endian: Endian,
    unit: f64,
    linktype: u32,
    snaplen: u32,
    ng_endian: Endian,
    interfaces: Vec<(u32, u8)>,
    first_block: bool,
    index: u64,
    offset: u64,
    #[pyo3(get)]
    packets: u64,
    #[pyo3(get)]
    warnings: Vec<String>,
    #[pyo3(get)]
    format: String,
    #[pyo3(get)]
    unsupported: HashMap<u32, u64>,
    addrs: HashMap<Vec<u8>, Py<PyString>>,
    ip_address: Option<PyObject>,
    /// bytes the Python reader would read next (a compressed file is fed exactly so: a
    /// stream that breaks off is then said where the Python path says it)
    #[pyo3(get)]
    want: usize,
    /// TCP reassembly in Rust (``attach``): segments go there, not to Python
    reasm: Option<Py<reasm::Reasm>>,
    /// the slot of mapped.rs's guard over the map fed (-1: the bytes fed are not a map):
    /// a page of it that vanished (the file shrank) stops the scan after that record
    #[pyo3(get, set)]
    guard: i64,
    /// packets read, in time order, until WINDOW more were read (``in_time_order``)
    window: VecDeque<Waiting>,
    spare: Vec<Vec<u8>>, // buffers of packets released, for the next ones
}

impl Scanner {
    fn avail(&self, src: &[u8]) -> usize {
        src.len() - self.pos
    }

    /// ``n`` bytes of ``src`` if there are (or, at the end, what is left); None: wait.
    fn take(&mut self, src: &[u8], n: usize) -> Option<(usize, usize)> {
        let avail = self.avail(src);
        if avail < n && !self.eof {
            self.want = n - avail;
            self.need = self.want;
            return None;
        }
        let start = self.pos;
        let got = n.min(avail);
        self.pos += got;
        Some((start, start + got))
    }

    fn addr(&mut self, py: Python<'_>, raw: &[u8]) -> PyResult<Py<PyString>> {
        addr_text(py, &mut self.addrs, &mut self.ip_address, raw)
    }

    /// One packet read: counted, and into the window that puts packets in time order
    /// (pcapfile.py's ``in_time_order``, the same rule); the one it pushes out goes on.
    fn packet(
        &mut self,
        py: Python<'_>,
        out: &Bound<'_, PyList>,
        ts: f64,
        linktype: u32,
        d: &[u8],
    ) -> PyResult<()> {
        self.index += 1;
        self.packets += 1;
        let mut data = self.spare.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(d);
        let mut at = self.window.len();
        while at > 0 && self.window[at - 1].ts > ts && self.window[at - 1].passed < WINDOW {
            at -= 1;
        }
        for w in self.window.range_mut(at..) {
            w.passed += 1;
        }
        let waiting = Waiting {
            ts,
            index: self.index,
            linktype,
            data,
            passed: 0,
        };
        self.window.insert(at, waiting);
        if self.window.len() > WINDOW as usize {
            self.release(py, out, 1)?;
        }
        Ok(())
    }

    /// The first ``n`` packets of the window on (all of them: ``usize::MAX``).
    fn release(&mut self, py: Python<'_>, out: &Bound<'_, PyList>, n: usize) -> PyResult<()> {
        for _ in 0..n {
            let Some(w) = self.window.pop_front() else {
                break;
            };
            let done = self.segment(py, out, w.index, w.ts, w.linktype, &w.data);
            self.spare.push(w.data);
            done?;
        }
        Ok(())
    }

    /// A packet in time order: its TCP segment (if any) to the reassembler or ``out``.
    fn segment(
        &mut self,
        py: Python<'_>,
        out: &Bound<'_, PyList>,
        index: u64,
        ts: f64,
        linktype: u32,
        d: &[u8],
    ) -> PyResult<()> {
        if !supported(linktype) {
            *self.unsupported.entry(linktype).or_insert(0) += 1;
            return Ok(());
        }
        let Some(s) = tcp_segment(linktype, d) else {
            return Ok(());
        };
        if let Some(r) = self.reasm.as_ref() {
            let mut r = r.bind(py).borrow_mut();
            let seg = reasm::SegIn {
                frame: index as i64,
                ts,
                src: reasm::Addr::new(&d[s.src.0..s.src.1], s.sport),
                dst: reasm::Addr::new(&d[s.dst.0..s.dst.1], s.dport),
                seq: s.seq,
                ack: s.ack,
                flags: s.flags,
                payload: &d[s.payload.0..s.payload.1],
                missing: s.missing,
            };
            if r.fits(py, &seg)? {
                let (addrs, ip) = (&mut self.addrs, &mut self.ip_address);
                return r.take(py, &seg, &mut |raw| addr_text(py, addrs, ip, raw));
            }
            r.drain_into(out)?; // rows keep their place after the events
        }
        let payload = PyBytes::new(py, &d[s.payload.0..s.payload.1]);
        let (src_raw, dst_raw) = (d[s.src.0..s.src.1].to_vec(), d[s.dst.0..s.dst.1].to_vec());
        let src = self.addr(py, &src_raw)?;
        let dst = self.addr(py, &dst_raw)?;
        let row = PyTuple::new(
            py,
            [
                index.into_pyobject(py)?.into_any(),
                ts.into_pyobject(py)?.into_any(),
                src.into_bound(py).into_any(),
                s.sport.into_pyobject(py)?.into_any(),
                dst.into_bound(py).into_any(),
                s.dport.into_pyobject(py)?.into_any(),
                s.seq.into_pyobject(py)?.into_any(),
                s.ack.into_pyobject(py)?.into_any(),
                s.flags.into_pyobject(py)?.into_any(),
                payload.into_any(),
                s.missing.into_pyobject(py)?.into_any(),
            ],
        )?;
        out.append(row)
    }

    /// The mapped file shrank under the scan (mapped.rs): said, and the scan ends.
    fn shrank(&mut self) -> bool {
        if self.guard < 0 || !mapped::faulted(self.guard as usize) {
            return false;
        }
        let text = format!(
            "the file shrank while it was read: stopped after packet {}, whose bytes \
             past the file's new end were taken as zeros",
            self.index
        );
        self.warn(text);
        true
    }

    fn warn(&mut self, text: String) {
        self.warnings.push(text);
        self.state = State::Done;
    }

    /// pcapfile.py's ``pcap_records``: as many records as the bytes hold.
    fn pcap_records(
        &mut self,
        py: Python<'_>,
        src: &[u8],
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let e = self.pcap_endian;
        loop {
            let avail = self.avail(src);
            if avail < 16 {
                if !self.eof {
                    self.want = BLOCK;
                    self.need = 16 - avail;
                    return Ok(());
                }
                if avail > 0 {
                    let text = format!(
                        "file ends inside the header of packet {} (byte {})",
                        self.index + 1,
                        self.offset
                    );
                    self.warn(text);
                } else {
                    self.state = State::Done;
                }
                return Ok(());
            }
            let b = &src[self.pos..self.pos + 16];
            let (sec, frac, incl) = (e.u32(b, 0), e.u32(b, 4), e.u32(b, 8) as usize);
            if incl > MAX_PACKET {
                let text = format!(
                    "packet {} claims {} bytes: the file is damaged from byte {} on",
                    self.index + 1,
                    incl,
                    self.offset
                );
                self.warn(text);
                return Ok(());
            }
            if avail < 16 + incl {
                if !self.eof {
                    self.want = BLOCK.max(16 + incl - avail);
                    self.need = 16 + incl - avail;
                    return Ok(());
                }
                // (a record that big is read if it is there)
                let text = if incl > LARGEST_SANE.max(self.snaplen as usize) {
                    format!(
                        "packet {} claims {} bytes, more than its capture's records hold \
                         (snapshot length {}), and the file ends {} bytes later: the file is \
                         damaged from byte {} on",
                        self.index + 1,
                        incl,
                        self.snaplen,
                        avail - 16,
                        self.offset
                    )
                } else {
                    format!(
                        "file ends inside packet {} at byte {} ({} of {} bytes)",
                        self.index + 1,
                        self.offset,
                        avail - 16,
                        incl
                    )
                };
                self.warn(text);
                return Ok(());
            }
            let start = self.pos + 16;
            self.pos = start + incl;
            self.offset += 16 + incl as u64;
            let ts = clamp_ts(sec as f64 + frac as f64 * self.unit);
            self.packet(py, out, ts, self.linktype, &src[start..start + incl])?;
            if self.shrank() {
                return Ok(());
            }
        }
    }

    /// pcapfile.py's ``_pcapng``: as many blocks as the bytes hold.
    fn pcapng_blocks(
        &mut self,
        py: Python<'_>,
        src: &[u8],
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        loop {
            if self.shrank() {
                return Ok(());
            }
            let mark = self.pos;
            // the first block's type was read as the file's magic
            let Some((h0, h1)) = self.take(src, if self.first_block { 4 } else { 8 }) else {
                return Ok(());
            };
            let head: Vec<u8> = if self.first_block {
                let mut v = b"\x0a\x0d\x0d\x0a".to_vec();
                v.extend_from_slice(&src[h0..h1]);
                v
            } else {
                src[h0..h1].to_vec()
            };
            if head.is_empty() {
                self.state = State::Done;
                return Ok(());
            }
            if head.len() < 8 {
                self.warn("file ends inside a block header".into());
                return Ok(());
            }
            if head[..4] == *b"\x0a\x0d\x0d\x0a" {
                let Some((b0, b1)) = self.take(src, 4) else {
                    self.pos = mark;
                    return Ok(());
                };
                let e = Endian(src[b0..b1] == *b"\x4d\x3c\x2b\x1a");
                let length = e.u32(&head, 4) as usize;
                let want = if (12..=MAX_PACKET).contains(&length) {
                    length - 12
                } else {
                    0
                };
                let Some((r0, r1)) = self.take(src, want) else {
                    self.pos = mark;
                    return Ok(());
                };
                self.first_block = false;
                self.ng_endian = e;
                self.interfaces.clear();
                if !(12..=MAX_PACKET).contains(&length) || r1 - r0 < want {
                    self.warn("section header block is damaged".into());
                    return Ok(());
                }
                continue;
            }
            let e = self.ng_endian;
            let (btype, length) = (e.u32(&head, 0), e.u32(&head, 4) as usize);
            if !(12..=MAX_PACKET).contains(&length) || length % 4 != 0 {
                self.warn(format!(
                    "block of type {:#x} has an impossible length {}: the file is damaged \
                     from here on",
                    btype, length
                ));
                return Ok(());
            }
            let Some((b0, b1)) = self.take(src, length - 8) else {
                self.pos = mark;
                return Ok(());
            };
            if b1 - b0 < length - 8 {
                self.warn(format!("file ends inside a block (type {:#x})", btype));
                return Ok(());
            }
            let body = (b0, b1 - 4); // without the trailing copy of the length
            let blen = body.1 - body.0;
            let fixed = match btype {
                1 => 8,
                2 | 6 => 20,
                3 => 4,
                10 => 8,
                _ => 0,
            };
            if blen < fixed {
                self.warnings.push(format!(
                    "block of type {:#x} is {} bytes, too short for its {}-byte fixed part; \
                     skipped",
                    btype,
                    length,
                    fixed + 12
                ));
                continue;
            }
            match btype {
                1 => {
                    let b = &src[body.0..body.1];
                    let linktype = e.u16(b, 0);
                    let resolution = ts_resolution(&b[8..], e);
                    self.interfaces.push((linktype, resolution));
                }
                2 | 6 => {
                    let b = &src[body.0..body.1];
                    let (iface, hi, lo, incl) = if btype == 6 {
                        (e.u32(b, 0), e.u32(b, 4), e.u32(b, 8), e.u32(b, 12))
                    } else {
                        (e.u16(b, 0), e.u32(b, 4), e.u32(b, 8), e.u32(b, 12))
                    };
                    let Some(&(linktype, resolution)) = self.interfaces.get(iface as usize) else {
                        self.warnings
                            .push(format!("packet refers to undeclared interface {}", iface));
                        continue;
                    };
                    let room = blen - 20;
                    if incl as usize > room {
                        self.warnings.push(format!(
                            "packet {} claims {} bytes in a block holding {}; kept what is there",
                            self.index + 1,
                            incl,
                            room
                        ));
                    }
                    let ticks = ((hi as u64) << 32) | lo as u64;
                    let ts = clamp_ts(ticks_to_seconds(ticks, resolution));
                    let end = body.0 + 20 + (incl as usize).min(room);
                    self.packet(py, out, ts, linktype, &src[body.0 + 20..end])?;
                }
                10 => {
                    let b = &src[body.0..body.1];
                    let (kind, size) = (e.u32(b, 0), e.u32(b, 4) as usize);
                    if kind == TLS_KEY_LOG {
                        let end = (8 + size).min(blen);
                        let secret = PyBytes::new(py, &b[8..end]);
                        if let Some(r) = self.reasm.as_ref() {
                            r.bind(py).borrow_mut().drain_into(out)?;
                        }
                        out.append(PyTuple::new(py, [secret])?)?;
                    }
                }
                3 => {
                    let Some(&(linktype, _)) = self.interfaces.first() else {
                        continue;
                    };
                    let b = &src[body.0..body.1];
                    let orig = e.u32(b, 0) as usize;
                    let end = body.0 + 4 + orig.min(blen - 4);
                    self.packet(py, out, 0.0, linktype, &src[body.0 + 4..end])?;
                }
                _ => {}
            }
        }
    }
}

#[pymethods]
impl Scanner {
    #[new]
    fn new() -> Self {
        Scanner {
            buf: Vec::new(),
            pos: 0,
            need: 0,
            eof: false,
            state: State::Magic,
            pcap_endian: Endian(true),
            unit: 1e-6,
            linktype: 0,
            snaplen: 0,
            ng_endian: Endian(true),
            interfaces: Vec::new(),
            first_block: true,
            index: 0,
            offset: 24,
            packets: 0,
            warnings: Vec::new(),
            format: "?".into(),
            unsupported: HashMap::new(),
            addrs: HashMap::new(),
            ip_address: None,
            want: 4,
            reasm: None,
            guard: -1,
            window: VecDeque::new(),
            spare: Vec::new(),
        }
    }

    /// Hand the TCP segments to ``reasm`` (a ``Reasm``): ``feed`` then returns its
    /// events instead of segment rows (rows again once it is tight).
    fn attach(&mut self, reasm: Py<reasm::Reasm>) {
        self.reasm = Some(reasm);
    }

    /// Nothing more to read: the file ended, or is damaged from here on.
    #[getter]
    fn done(&self) -> bool {
        self.state == State::Done
    }

    /// The next bytes of the file (``eof``: the last; any buffer: the reader reuses
    /// one); what they complete, in order. They are parsed where they lie: only a
    /// record they leave unfinished is copied (and completed with the bytes it needs).
    #[pyo3(signature = (data, eof=false))]
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        data: PyBuffer<u8>,
        eof: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut rest = tls::bytes_of(&data)?;
        let out = PyList::empty(py);
        // a record begun in an earlier feed: completed in ``buf`` with only what it needs
        while self.pos < self.buf.len() && self.state != State::Done {
            let n = self.need.max(1).min(rest.len());
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            self.eof = eof && rest.is_empty();
            let buf = std::mem::take(&mut self.buf);
            let done = self.run(py, &buf, &out);
            self.buf = buf;
            done?;
            if rest.is_empty() {
                break;
            }
        }
        if self.state != State::Done && self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            self.eof = eof;
            self.run(py, rest, &out)?;
            if self.state != State::Done {
                self.buf.extend_from_slice(&rest[self.pos..]); // the record begun
                self.pos = 0;
            }
        }
        if self.state == State::Done {
            self.release(py, &out, usize::MAX)?; // the file ends: the window too
        }
        if let Some(r) = self.reasm.as_ref() {
            r.bind(py).borrow_mut().drain_into(&out)?;
        }
        if self.state == State::Done {
            self.buf = Vec::new();
            self.pos = 0;
        }
        Ok(out)
    }
}

impl Scanner {
    /// Parse ``src`` from ``pos`` on, as far as it goes.
    fn run(&mut self, py: Python<'_>, src: &[u8], out: &Bound<'_, PyList>) -> PyResult<()> {
        loop {
            match self.state {
                State::Magic => {
                    let avail = self.avail(src);
                    if avail < 4 {
                        if !self.eof {
                            self.want = 4 - avail;
                            self.need = self.want;
                            return Ok(());
                        }
                        self.state = State::Done;
                        return Err(PyValueError::new_err(
                            "empty or too short to be a capture file",
                        ));
                    }
                    let m = [
                        src[self.pos],
                        src[self.pos + 1],
                        src[self.pos + 2],
                        src[self.pos + 3],
                    ];
                    let (little, unit) = match m {
                        [0xd4, 0xc3, 0xb2, 0xa1] => (true, 1e-6),
                        [0xa1, 0xb2, 0xc3, 0xd4] => (false, 1e-6),
                        [0x4d, 0x3c, 0xb2, 0xa1] => (true, 1e-9),
                        [0xa1, 0xb2, 0x3c, 0x4d] => (false, 1e-9),
                        [0x0a, 0x0d, 0x0d, 0x0a] => {
                            self.pos += 4;
                            self.format = "pcapng".into();
                            self.state = State::BlockHead;
                            continue;
                        }
                        _ => {
                            self.state = State::Done;
                            let hex: Vec<String> = m.iter().map(|b| format!("{:02x}", b)).collect();
                            return Err(PyValueError::new_err(format!(
                                "not a pcap or pcapng file (starts with {}); kdissect reads \
                                 pcap, pcapng and their gzip-compressed forms",
                                hex.join(" ")
                            )));
                        }
                    };
                    self.pos += 4;
                    self.format = "pcap".into();
                    self.pcap_endian = Endian(little);
                    self.unit = unit;
                    self.state = State::PcapHeader;
                }
                State::PcapHeader => {
                    let avail = self.avail(src);
                    if avail < 20 {
                        if !self.eof {
                            self.want = 20 - avail;
                            self.need = self.want;
                            return Ok(());
                        }
                        self.state = State::Done;
                        return Err(PyValueError::new_err("pcap header is truncated"));
                    }
                    self.snaplen = self.pcap_endian.u32(src, self.pos + 12);
                    self.linktype = self.pcap_endian.u32(src, self.pos + 16) & 0x0FFF_FFFF;
                    self.pos += 20;
                    self.state = State::PcapRecords;
                }
                State::PcapRecords => return self.pcap_records(py, src, out),
                State::BlockHead => return self.pcapng_blocks(py, src, out),
                State::Done => return Ok(()),
            }
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Scanner>()?;
    m.add_function(wrap_pyfunction!(logjson::log_record_lines, m)?)?;
    m.add_function(wrap_pyfunction!(logjson::log_prefix_lines, m)?)?;
    m.add_class::<avro::AvroJson>()?;
    m.add_class::<reasm::Reasm>()?;
    m.add_function(wrap_pyfunction!(jsonrec::records_json, m)?)?;
    m.add_function(wrap_pyfunction!(records_table::record_table_rows, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_plain::parquet_plain, m)?)?;
    m.add_class::<tls::RecordCipher>()?;
    m.add_class::<relay::Relay>()?;
    m.add_function(wrap_pyfunction!(quick::answer_names_brokers, m)?)?;
    m.add_function(wrap_pyfunction!(mapped::map_guard, m)?)?;
    m.add_function(wrap_pyfunction!(mapped::map_unguard, m)?)?;
    m.add_function(wrap_pyfunction!(mapped::map_faulted, m)?)?;
    m.add_class::<scan::Needles>()?;
    m.add_class::<values::Program>()?;
    m.add_class::<facts::FactsPlan>()?;
    m.add_function(wrap_pyfunction!(line::summary_line, m)?)?;
    m.add_function(wrap_pyfunction!(produce::produce_quiet, m)?)?;
    m.add_function(wrap_pyfunction!(line::json_line, m)?)?;
    m.add_function(wrap_pyfunction!(head::request_head, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame (no options) carrying ``payload``.
    fn frame(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; 12];
        d.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 20 + payload.len()) as u16;
        d.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            6,
            0,
            0,
        ]);
        d.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 2]);
        d.extend_from_slice(&[0xC3, 0x50, 0x23, 0x84]); // ports 50000 -> 9092
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(&7u32.to_be_bytes());
        d.extend_from_slice(&[0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]);
        d.extend_from_slice(payload);
        d
    }

    #[test]
    fn tcp_segment_reads_ports_sequence_and_payload() {
        let d = frame(1000, 0x18, b"kafka");
        let s = tcp_segment(1, &d).expect("a TCP segment");
        assert_eq!(
            (s.sport, s.dport, s.seq, s.ack, s.flags),
            (50000, 9092, 1000, 7, 0x18)
        );
        assert_eq!(&d[s.payload.0..s.payload.1], b"kafka");
        assert_eq!(&d[s.src.0..s.src.1], &[127, 0, 0, 1]);
        assert_eq!(s.missing, 0);
    }

    #[test]
    fn tcp_segment_counts_bytes_the_snap_length_cut() {
        let mut d = frame(1, 0x18, &[0xAB; 100]);
        d.truncate(d.len() - 30);
        let s = tcp_segment(1, &d).expect("a TCP segment");
        assert_eq!(s.payload.1 - s.payload.0, 70);
        assert_eq!(s.missing, 30);
    }

    #[test]
    fn tcp_segment_refuses_what_is_not_tcp_or_too_short() {
        let mut udp = frame(1, 0x18, b"x");
        udp[14 + 9] = 17;
        assert!(tcp_segment(1, &udp).is_none());
        let d = frame(1, 0x18, b"x");
        for cut in 0..54 {
            assert!(tcp_segment(1, &d[..cut]).is_none(), "cut at {cut}");
        }
        let mut fragment = frame(1, 0x18, b"x");
        fragment[14 + 7] = 8; // a fragment offset: not the segment's start
        assert!(tcp_segment(1, &fragment).is_none());
    }

    #[test]
    fn vlan_tags_are_skipped() {
        let d = frame(5, 0x10, b"ab");
        let mut tagged = d[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&d[12..]);
        assert_eq!(ip_of(1, &tagged), Some((ETH_IPV4, 18)));
        assert_eq!(tcp_segment(1, &tagged).map(|s| s.seq), Some(5));
    }

    #[test]
    fn timestamp_resolution_and_ticks() {
        assert_eq!(ts_resolution(&[], Endian(true)), 6);
        // if_tsresol = 9 (nanoseconds), little-endian option list
        let opts = [9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(ts_resolution(&opts, Endian(true)), 9);
        assert_eq!(ticks_to_seconds(1_500_000, 6), 1.5);
        assert_eq!(ticks_to_seconds(3_000_000_000, 9), 3.0);
        assert_eq!(ticks_to_seconds(3, 0x81), 1.5); // 2^-1 s ticks
        assert_eq!(
            ticks_to_seconds(u64::MAX, 127),
            0.0 + u64::MAX as f64 * 1e-127
        );
    }
}
