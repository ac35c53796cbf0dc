//! The proxy's forwarder with a thread per direction (`kdissect proxy --forwarder threads`,
//! kdissect/proxy/threaded.py). Each connection's bytes move between its two sockets in
//! blocking reads and writes of its own two threads, outside the interpreter: a small
//! request never queues behind another connection's bulk traffic in one event loop, and
//! no byte waits for Python, except an answer that may name brokers (its addresses are
//! rewritten by Python, which this thread then waits for).
//!
//! Each direction is framed here (the size prefix); every whole message goes to a queue
//! Python drains for pairing, metrics, the display and the recording. What is queued and
//! being collected is bounded (`budget`: the display's buffer, or --max-memory when a
//! recording is made): past it a message is queued with only its first `HEAD_KEPT` bytes
//! (enough to pair it and read its error code), so the display sheds it and counts it
//! (and a recording, as the event-loop forwarder's, says it gave it up). With a recording
//! a thread also waits while Python is behind by more than the budget, as the event-loop
//! forwarder waits for its recording.
//!
//! Without a recording, the budget also counts what Python holds for the display
//! (`display_holds`): when the display is behind, a request is queued cut, so the display
//! sheds its exchange, and its answer (which the display will not show) is queued as its
//! first bytes only, never collected whole for nothing (measured on a 3 MB Fetch loop:
//! each answer was copied twice more, into the queue and into Python, to be dropped).

use crate::head;
use crate::quick;
use crate::sched::Scheduling;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PyTuple};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A direction's read buffer starts at READ_SIZE and doubles, up to MAX_READ, each time a
/// read fills it: an idle connection holds little, and a stream of large answers moves in
/// large reads and writes (each write wakes the client: measured, 128 KiB writes spent a
/// fifth of the forwarder's time in the kernel's wake-ups on a 3 MB Fetch loop).
const READ_SIZE: usize = 64 * 1024;
const MAX_READ: usize = 1 << 20;
/// What all directions' buffers may hold beyond READ_SIZE together (64 directions at
/// MAX_READ): 10,000 connections that each once moved a burst must not keep 20 GB.
const GROWN_CAP: usize = 64 << 20;
const IDLE_SHRINK_MS: i32 = 1000;
/// Bytes of a message kept when the queue has no room for all of it: its header, and for
/// an answer its top-level error code, for pairing and metrics.
const HEAD_KEPT: usize = 1024;
/// Requests awaiting answers on one connection before the table is cleared (answers that
/// never came; the event-loop forwarder's `kinds` bound).
const MAX_PENDING: usize = 4096;
const STACK: usize = 256 * 1024;
/// Bytes of a message kept when Python is more than twice the budget behind.
const CUT_HEAD: usize = 64;
/// What an event costs beside its bytes, as the queue's bound counts it.
const EVENT_COST: usize = 128;
const PRODUCE: i16 = 0;
/// A message this large reaches Python as a view of the relay's own buffer (`Message`),
/// not copied into a bytes object: each such copy was about a tenth of the forwarder's
/// CPU on a Java consume (1 MB Fetch answers). Smaller ones are bytes (cheap to copy,
/// and what a dict key or a slice kept for long should be).
const LENT_AT: usize = 64 * 1024;
/// A message collected whole with at least this much still to come is read straight into
/// its own buffer (`Msg::read_in_place`): the copy from the read buffer into it was the
/// relay threads' largest user-space cost on a Java consume.
const IN_PLACE_AT: usize = 64 * 1024;

// How an answer passes (Python's `threaded.MODES`): as it comes; whole, so that its broker
// addresses can be rewritten (any size); or as it comes but its last `tail` bytes, which
// are rewritten keeping its size (a Fetch answer: its leader hints come last).
const STREAM: u8 = 0;
const HOLD: u8 = 1;
const TAIL: u8 = 2;

// Event kinds (Python's `threaded.py` reads them by these numbers)
const MESSAGE: u8 = 0;
const PARTIAL: u8 = 1; // an unfinished message's bytes when its direction ended
const REFUSED: u8 = 2; // the peer is not speaking Kafka: `size` says why (below)
const ENDED: u8 = 3; // both threads are done; the connection's sockets are closed
const REWRITE_FAILED: u8 = 4; // an answer could not be rewritten: the connection closes
const DIRECTION_ENDED: u8 = 5; // one thread is done (its bytes moved since its last event)

// a REFUSED event's `size` when no size prefix is to blame: outside the range of a size
// prefix (an int32), which a peer may make anything, -1 and -2 included
const NOT_KAFKA_TLS: i64 = -(1 << 40); // a TLS handshake on a plaintext listener
const NO_THREAD: i64 = -(1 << 40) - 1; // no second thread could be started for the connection

struct Event {
    conn: u64,
    kind: u8,
    side: u8, // 0: client to broker, 1: broker to client
    wall: f64,
    mono: f64,
    offset: u64, // stream offset of the message (after its size prefix)
    data: Vec<u8>,
    moved: u64, // bytes this direction forwarded since its previous event
    size: i64,  // the size prefix (a refused one, or a cut message's)
}

struct Queue {
    events: VecDeque<Event>,
    bytes: usize,
}

struct Conn {
    client: TcpStream,
    broker: TcpStream,
    threads: usize,
    pairs: Arc<Pairs>,
}

/// What a connection's two threads share: requests awaiting answers, by correlation id.
struct Pairs {
    // requests awaiting answers: correlation id -> (api key, version, sequence number,
    // queued cut: the display sheds the exchange)
    pending: Mutex<HashMap<i32, (i16, i16, u64, bool)>>,
    sent: AtomicU64,   // the sequence numbers' counter
    answered: Condvar, // a pending request was answered (the late-answer wait)
    client_gone: AtomicBool,
    broker_done: AtomicBool, // the answers' thread ended: no answer will come
    last_read: AtomicU64,    // when either socket last gave bytes (monotonic µs)
}

fn micros(mono: f64) -> u64 {
    (mono * 1e6) as u64
}

struct Shared {
    queue: Mutex<Queue>,
    room: Condvar,
    queued: AtomicUsize,
    reserved: AtomicUsize, // bytes of messages being collected whole (`reserve`)
    outside: AtomicUsize,  // bytes Python holds for the display (`Relay.display_holds`)
    grown: AtomicUsize,    // bytes the read buffers hold beyond READ_SIZE (`ReadBuf`)
    budget: usize,
    lossless: bool,
    stopping: AtomicBool,
    notify_fd: i32,
    modes: HashMap<(i16, i16), u8>,
    checks: HashMap<(i16, i16), quick::Check>, // answers seen to name no broker here
    rewrite: Py<PyAny>,
    tail: usize,
    late: Duration,
    max_message: i64,
    conns: Mutex<HashMap<u64, Conn>>,
    all_ended: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner()) // a panicked thread leaves data usable
}

/// (wall clock, monotonic clock) in seconds.
fn now() -> (f64, f64) {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    (wall, mono())
}

/// CLOCK_MONOTONIC: Python's time.perf_counter() on Linux, which latencies use.
fn mono() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

impl Shared {
    /// Bytes held for Python beside the queue and the messages being collected.
    fn held(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
            + if self.lossless {
                0 // (a recording needs every message whole, shown or not)
            } else {
                self.outside.load(Ordering::Relaxed)
            }
    }

    /// Whether a message of `size` bytes fits beside what is queued and being collected.
    fn fits(&self, size: usize) -> bool {
        self.held() + self.reserved.load(Ordering::Relaxed) + size <= self.budget
    }

    /// Room for a message of `size` bytes to be collected whole and queued: taken now
    /// (so that messages begun together cannot all take the same room), until `release`.
    /// `limit`: the budget times this (the display takes the answer to a request it
    /// shows up to twice its budget, as feed.py's `room` says).
    fn reserve(&self, size: usize, limit: usize) -> bool {
        let before = self.reserved.fetch_add(size, Ordering::Relaxed);
        if self.held() + before + size <= limit * self.budget {
            return true;
        }
        self.reserved.fetch_sub(size, Ordering::Relaxed);
        false
    }

    fn release(&self, size: usize) {
        self.reserved.fetch_sub(size, Ordering::Relaxed);
    }

    fn push(&self, ev: Event) {
        if self.queue_event(ev) {
            self.wake();
        }
    }

    /// Python's event loop wakes on this pipe (full: it has a wake-up waiting).
    fn wake(&self) {
        unsafe { libc::write(self.notify_fd, b"!".as_ptr() as *const libc::c_void, 1) };
    }

    /// Queues `ev`; true when the queue was empty (Python must be woken).
    fn queue_event(&self, mut ev: Event) -> bool {
        let mut q = lock(&self.queue);
        let message = ev.kind == MESSAGE || ev.kind == PARTIAL;
        // a recording loses nothing: the thread waits while Python is behind (bounded
        // waits, so that a stopping proxy is never stuck here); control events never wait
        // (one comes from Relay.start, on the event loop's own thread). Without one, past
        // twice the budget a message is queued as its first bytes only (still paired and
        // counted), and past four times (a flood of small messages Python cannot keep up
        // with) the thread waits too: memory stays bounded
        let limit = if self.lossless { 1 } else { 4 } * self.budget;
        while message && q.bytes > limit && !self.stopping.load(Ordering::Relaxed) {
            // (a wake-up this thread put off until its write may be what Python waits for)
            self.wake();
            q = self
                .room
                .wait_timeout(q, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if ev.kind == MESSAGE && !self.lossless && q.bytes > 2 * self.budget {
            ev.data.truncate(CUT_HEAD);
        }
        let n = ev.data.len() + EVENT_COST;
        let was_empty = q.events.is_empty();
        q.bytes += n;
        q.events.push_back(ev);
        self.queued.store(q.bytes, Ordering::Relaxed);
        was_empty
    }

    fn event(&self, conn: u64, kind: u8, side: u8) -> Event {
        let (wall, mono) = now();
        Event {
            conn,
            kind,
            side,
            wall,
            mono,
            offset: 0,
            data: Vec::new(),
            moved: 0,
            size: 0,
        }
    }

    /// Both sockets of connection `conn` shut: its threads' reads and writes end.
    fn shut(&self, conn: u64) {
        if let Some(c) = lock(&self.conns).get(&conn) {
            let _ = c.client.shutdown(Shutdown::Both);
            let _ = c.broker.shutdown(Shutdown::Both);
        }
    }

    /// One of the connection's threads ended; the last one says so (its sockets are
    /// closed when the last clone of them is dropped, with this entry).
    fn thread_ended(&self, conn: u64, moved: u64, side: u8) {
        let mut ev = self.event(conn, ENDED, side);
        ev.moved = moved;
        let mut conns = lock(&self.conns);
        let last = match conns.get_mut(&conn) {
            Some(c) => {
                c.threads -= 1;
                c.threads == 0
            }
            None => true,
        };
        if last {
            conns.remove(&conn);
        } else {
            ev.kind = DIRECTION_ENDED;
        }
        let empty = conns.is_empty();
        // queued under the lock: the first thread's DIRECTION_ENDED always comes before
        // the last one's ENDED (after it, Python has forgotten the connection, and the
        // bytes it counts were lost), and `Relay::wait` never returns before the ENDED
        // is queued (a fuzz run saw the two out of order once in 56,000 connections)
        let wake = self.queue_event(ev);
        drop(conns);
        if wake {
            self.wake();
        }
        if empty {
            self.all_ended.notify_all();
        }
    }
}

/// A message being read on one direction.
struct Msg {
    offset: u64, // stream offset of its body
    size: usize,
    got: usize,
    mode: u8,
    body: Vec<u8>,
    whole: bool,     // all of it is collected (else its first HEAD_KEPT bytes)
    forced: bool,    // collected whole to be rewritten, not because the queue had room
    reserved: usize, // room taken for it (`Shared::reserve`)
    written: usize,  // body bytes passed on already (STREAM, TAIL)
    kind: Option<(i16, i16)>,
    seq: u64,   // its request's sequence number (the pending entry it answers)
    shed: bool, // an answer whose request was queued cut: never queued whole
}

impl Msg {
    /// Of its next `k` bytes (from `got` on), the range of its body (offsets in it) that
    /// passes on now, if any: an answer streams but for what waits to be rewritten (all
    /// of a held one, the last `tail` bytes of a Fetch answer).
    fn passing(&mut self, k: usize, tail: usize) -> Option<(usize, usize)> {
        let limit = match self.mode {
            STREAM => self.size,
            TAIL => self.size - tail,
            _ => 0,
        };
        let upto = (self.got + k).min(limit);
        if upto <= self.written {
            return None;
        }
        let from = self.written;
        self.written = upto;
        Some((from, upto))
    }

    /// How many of its next bytes may be read straight into its body (no copy through
    /// the read buffer), if any: it is collected whole and much of it remains. Never its
    /// last byte: that comes through `Side::feed`, which queues the message whole before
    /// passing its end on (a request is paired before the broker can answer it).
    fn in_place(&mut self) -> Option<usize> {
        let rest = self.size - self.got;
        if !self.whole || rest <= IN_PLACE_AT {
            return None;
        }
        self.make_room(1);
        Some(rest - 1)
    }

    /// Room in its body (collected whole) for `k` more bytes. A body begun smaller than
    /// the message (collected to be rewritten without room in the budget: its size prefix
    /// alone must not make us take its size) grows as its bytes come, doubling, never past
    /// its size, and to all of it when at most IN_PLACE_AT would be left (those bytes come
    /// through `feed`, whose growth would copy the body once more). Before, such a body
    /// was read through the read buffer and grown by `extend_from_slice`, two copies of
    /// every byte (measured on 3 MB Fetch answers while the display was behind: a sixth
    /// of the relay thread's time).
    fn make_room(&mut self, k: usize) {
        let len = self.body.len();
        if self.body.capacity() - len >= k {
            return;
        }
        let rest = self.size - len;
        let step = k.max(len).max(IN_PLACE_AT).min(rest);
        self.body.reserve_exact(if rest - step <= IN_PLACE_AT {
            rest
        } else {
            step
        });
    }
}

/// Where a chunk's bytes go: ranges of the chunk as read, or bytes made here (a size
/// prefix, a rewritten answer, a message's first bytes read in an earlier chunk).
enum Part {
    Chunk(usize, usize),
    Owned(Vec<u8>),
}

fn push_range(out: &mut Vec<Part>, a: usize, b: usize) {
    if a == b {
        return;
    }
    if let Some(Part::Chunk(_, end)) = out.last_mut() {
        if *end == a {
            *end = b;
            return;
        }
    }
    out.push(Part::Chunk(a, b));
}

/// One direction's framing: the size prefix and first bytes of a message not begun yet
/// (`head`), then the message itself.
struct Framing {
    pos: u64, // stream offset of the next byte
    head: [u8; 8],
    hl: usize,
    head_at: Option<usize>, // where in this chunk `head` began (None: an earlier chunk)
    cur: Option<Msg>,
    moved: u64,
}

enum Step {
    Go,
    Bad(i64, u64, usize), // an implausible size, at this stream offset, this chunk's index
    Close,                // an answer could not be rewritten
}

impl Framing {
    fn new() -> Framing {
        Framing {
            pos: 0,
            head: [0; 8],
            hl: 0,
            head_at: None,
            cur: None,
            moved: 0,
        }
    }
}

struct Side<'a> {
    sh: &'a Shared,
    conn: u64,
    pairs: &'a Pairs,
    side: u8,
    // Python is woken after the chunk is written, not before: the wake-up (a write to
    // a pipe, and another thread made runnable) then never delays the bytes themselves
    wake: std::cell::Cell<bool>,
}

impl<'a> Side<'a> {
    fn new(sh: &'a Shared, conn: u64, pairs: &'a Pairs, side: u8) -> Side<'a> {
        Side {
            sh,
            conn,
            pairs,
            side,
            wake: Default::default(),
        }
    }

    /// A message is complete: queued (a request after noting what answers it).
    fn finish(&self, f: &mut Framing, m: Msg) {
        if self.side == 0 {
            self.note_request(&m.body, !m.whole && !self.sh.lossless);
        } else if m.kind.is_some() {
            let corr = i32::from_be_bytes(m.body[..4].try_into().expect("a correlation id"));
            let mut p = lock(&self.pairs.pending);
            // (not a later request that reused the id while this answer was coming)
            if p.get(&corr).is_some_and(|e| e.2 == m.seq) {
                p.remove(&corr);
            }
            if p.is_empty() {
                self.pairs.answered.notify_all();
            }
        }
        let mut ev = self.sh.event(self.conn, MESSAGE, self.side);
        ev.offset = m.offset;
        // (one collected to be rewritten is queued whole only if there is room now)
        self.sh.release(m.reserved);
        let whole = m.whole && !m.shed && (!m.forced || self.sh.fits(m.size));
        ev.size = m.size as i64;
        ev.data = m.body;
        if !whole {
            ev.data.truncate(HEAD_KEPT);
        }
        ev.moved = std::mem::take(&mut f.moved);
        if self.sh.queue_event(ev) {
            self.wake.set(true);
        }
    }

    /// The wake-up a message queued in the chunk just written asked for.
    fn wake_python(&self) {
        if self.wake.take() {
            self.sh.wake();
        }
    }

    fn note_request(&self, body: &[u8], shed: bool) {
        let Some((key, version)) = head::key_version(body) else {
            return;
        };
        if key == PRODUCE {
            // an acks=0 Produce is never answered: the late-answer wait must not await it
            let hv = if version >= 9 { 2 } else { 1 };
            if let head::Read::Head(h) = head::read(body, hv) {
                if h.acks == Some(0) {
                    return;
                }
            }
        }
        let corr = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
        let mut p = lock(&self.pairs.pending);
        if p.len() >= MAX_PENDING {
            p.clear();
        }
        p.insert(
            corr,
            (
                key,
                version,
                self.pairs.sent.fetch_add(1, Ordering::Relaxed),
                shed,
            ),
        );
    }

    /// The answer beginning with `head` (its size and correlation id): how it passes,
    /// what it answers, its request's sequence number, and whether that was queued cut.
    fn answer_kind(&self, corr: Option<[u8; 4]>) -> (u8, Option<(i16, i16)>, u64, bool) {
        let Some(c) = corr else {
            return (STREAM, None, 0, false);
        };
        // (unpaired when whole, in `finish`: the late-answer wait waits for all of it)
        let kind = lock(&self.pairs.pending)
            .get(&i32::from_be_bytes(c))
            .copied();
        match kind {
            Some((k, v, seq, shed)) => (
                *self.sh.modes.get(&(k, v)).unwrap_or(&STREAM),
                Some((k, v)),
                seq,
                shed,
            ),
            None => (STREAM, None, 0, false),
        }
    }

    /// Python's rewrite of an answer that may name brokers: the new body, or None when
    /// the connection must close. `sent`: body bytes passed on already (-1: none, any
    /// size may come back; else the same size must).
    fn rewritten(&self, m: &Msg, sent: i64) -> Option<Vec<u8>> {
        let (key, version) = m.kind?;
        Python::with_gil(|py| {
            let body = PyBytes::new(py, &m.body);
            let got = self
                .sh
                .rewrite
                .call1(py, (self.conn, key, version, body, sent))
                .ok()?;
            let new = got.bind(py).downcast::<PyBytes>().ok()?;
            let new = new.as_bytes();
            if sent >= 0
                && (new.len() != m.body.len() || new[..sent as usize] != m.body[..sent as usize])
            {
                return None;
            }
            Some(new.to_vec())
        })
    }

    /// The message being read is whole: an answer that may name brokers is checked, and
    /// rewritten if it does (`out` gets what then passes on); then it is queued. False
    /// when the connection must close (it could not be rewritten).
    fn complete(&self, f: &mut Framing, out: &mut Vec<Part>) -> bool {
        let m = f.cur.take().expect("a message is being read");
        if self.side == 1 && m.mode != STREAM {
            let unchanged = || {
                let check = self.sh.checks.get(&m.kind?)?;
                quick::names_brokers(check, &m.body).map(|named| !named)
            };
            if unchanged() == Some(true) {
                if m.mode == HOLD {
                    out.push(Part::Owned((m.size as i32).to_be_bytes().to_vec()));
                    out.push(Part::Owned(m.body.clone()));
                } else {
                    out.push(Part::Owned(m.body[m.written..].to_vec()));
                }
            } else {
                let sent = if m.mode == TAIL { m.written as i64 } else { -1 };
                let Some(new) = self.rewritten(&m, sent) else {
                    // shown and recorded as the broker sent it all the same (as the
                    // event-loop forwarder does): what made the proxy close is seen
                    self.finish(f, m);
                    return false;
                };
                if m.mode == HOLD {
                    out.push(Part::Owned((new.len() as i32).to_be_bytes().to_vec()));
                    out.push(Part::Owned(new));
                } else {
                    out.push(Part::Owned(new[m.written..].to_vec()));
                }
            }
        }
        self.finish(f, m);
        true
    }

    /// The next bytes of the message being read, read from `sock` straight into its body
    /// when `Msg::in_place` allows (else None: read through the read buffer and `feed`).
    /// `out` gets the range of its body that passes on now (an answer's; a request's
    /// pass as they came); Some(false) at the socket's end or an error.
    fn read_in_place(
        &self,
        f: &mut Framing,
        sock: &TcpStream,
        out: &mut Vec<Part>,
    ) -> Option<bool> {
        let m = f.cur.as_mut()?;
        let want = m.in_place()?;
        let Some(n) = read_appended(sock, &mut m.body, want, &self.pairs.last_read) else {
            return Some(false);
        };
        out.clear();
        if self.side == 1 {
            if let Some((a, b)) = m.passing(n, self.sh.tail) {
                out.push(Part::Chunk(a, b));
            }
        } else {
            out.push(Part::Chunk(m.got, m.got + n));
        }
        m.got += n;
        f.pos += n as u64;
        Some(true)
    }

    /// Frames `chunk`; `out` gets what is passed on (responses), in order.
    fn feed(&self, f: &mut Framing, chunk: &[u8], out: &mut Vec<Part>) -> Step {
        let answers = self.side == 1;
        let mut i = 0;
        let n = chunk.len();
        f.head_at = None;
        while i < n {
            if let Some(m) = f.cur.as_mut() {
                let k = (m.size - m.got).min(n - i);
                let piece = &chunk[i..i + k];
                if m.whole {
                    m.make_room(k);
                    m.body.extend_from_slice(piece);
                } else if m.body.len() < HEAD_KEPT {
                    let keep = (HEAD_KEPT - m.body.len()).min(k);
                    m.body.extend_from_slice(&piece[..keep]);
                }
                if answers {
                    if let Some((a, b)) = m.passing(k, self.sh.tail) {
                        push_range(out, i + (a - m.got), i + (b - m.got));
                    }
                }
                m.got += k;
                i += k;
                f.pos += k as u64;
                if m.got == m.size && !self.complete(f, out) {
                    return Step::Close;
                }
                continue;
            }
            // a message's size prefix (and its first four bytes: an answer's correlation id)
            if f.hl == 0 {
                f.head_at = Some(i);
            }
            let want = if f.hl >= 4 {
                let size = i32::from_be_bytes(f.head[..4].try_into().expect("4 bytes")) as i64;
                4 + size.clamp(0, 4) as usize
            } else {
                4
            };
            let k = (want - f.hl).min(n - i);
            f.head[f.hl..f.hl + k].copy_from_slice(&chunk[i..i + k]);
            f.hl += k;
            i += k;
            if f.hl < 4 {
                continue;
            }
            let size = i32::from_be_bytes(f.head[..4].try_into().expect("4 bytes")) as i64;
            if size < 0 || size > self.sh.max_message {
                return Step::Bad(size, f.pos, f.head_at.unwrap_or(0));
            }
            let first = 4 + (size as usize).min(4);
            if f.hl < first {
                continue;
            }
            let size = size as usize;
            let (mut mode, kind, seq, shed) = if answers {
                self.answer_kind((size >= 4).then(|| f.head[4..8].try_into().expect("4 bytes")))
            } else {
                (STREAM, None, 0, false)
            };
            if mode == TAIL && size <= self.sh.tail {
                mode = HOLD; // small: kept whole, and any size may come back
            }
            // (a recording's bound is --max-memory, answers included)
            let limit = if kind.is_some() && !self.sh.lossless {
                2
            } else {
                1
            };
            let room = !shed && self.sh.reserve(size, limit);
            let whole = mode != STREAM || room;
            if whole && !room {
                // collected to be rewritten all the same: it takes room from the others
                self.sh.reserved.fetch_add(size, Ordering::Relaxed);
            }
            // room taken in the budget: its whole size at once (a larger answer grown by
            // doubling was copied again at each step, up to its size again); else what
            // the peer's size prefix alone may not make us take
            let mut body = Vec::with_capacity(if room {
                size
            } else if whole {
                size.min(1 << 20)
            } else {
                HEAD_KEPT.min(size)
            });
            body.extend_from_slice(&f.head[4..f.hl]);
            let got = f.hl - 4;
            let mut m = Msg {
                offset: f.pos + 4,
                size,
                got,
                mode,
                body,
                whole,
                forced: !room,
                reserved: if whole { size } else { 0 },
                written: 0,
                kind,
                seq,
                shed,
            };
            f.pos += f.hl as u64;
            if answers && mode != HOLD {
                // the size prefix and first bytes pass now
                let limit = if mode == TAIL {
                    size - self.sh.tail
                } else {
                    size
                };
                let upto = got.min(limit);
                match f.head_at {
                    Some(at) if at + f.hl == i => push_range(out, at, at + 4 + upto),
                    _ => out.push(Part::Owned(f.head[..4 + upto].to_vec())),
                }
                m.written = upto;
            }
            f.hl = 0;
            f.head_at = None;
            let done = m.got == m.size; // (at most four bytes: its correlation id at most)
            f.cur = Some(m);
            // (an answer of its correlation id alone may be held: it passes as any other,
            // once checked; it once passed nothing, and the client waited for it)
            if done && !self.complete(f, out) {
                return Step::Close;
            }
        }
        Step::Go
    }

    /// The direction ended: the bytes of a message it did not finish, for the recording.
    fn partial(&self, f: &mut Framing) {
        let mut data = f.head[..f.hl].to_vec();
        let mut offset = f.pos;
        if let Some(m) = f.cur.take() {
            self.sh.release(m.reserved);
            if !m.whole {
                return;
            }
            offset = m.offset - 4;
            data = (m.size as i32).to_be_bytes().to_vec();
            data.extend_from_slice(&m.body);
        }
        if data.is_empty() || !self.sh.lossless {
            return;
        }
        let mut ev = self.sh.event(self.conn, PARTIAL, self.side);
        ev.offset = offset;
        ev.data = data;
        self.sh.push(ev);
    }

    /// The direction ended: the room its unfinished message took is given back.
    fn forget(&self, f: &mut Framing) {
        if let Some(m) = f.cur.take() {
            self.sh.release(m.reserved);
        }
    }

    fn refused(&self, size: i64, offset: u64) {
        let mut ev = self.sh.event(self.conn, REFUSED, self.side);
        ev.size = size;
        ev.offset = offset;
        self.sh.push(ev);
    }
}

fn looks_like_tls(b: &[u8]) -> bool {
    b.len() >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04
}

/// Client to broker: each chunk is written as it came, after its whole requests are
/// queued (a request's event comes before its answer's).
fn requests(
    sh: Arc<Shared>,
    conn: u64,
    pairs: Arc<Pairs>,
    mut client: TcpStream,
    mut broker: TcpStream,
) {
    let s = Side::new(&sh, conn, &pairs, 0);
    let mut f = Framing::new();
    let mut rb = ReadBuf::new(&sh.grown);
    let mut out = Vec::new();
    let mut first = true;
    let mut kafka = true; // (after bytes that are not Kafka nothing is recorded)
    loop {
        match s.read_in_place(&mut f, &client, &mut out) {
            Some(true) => {
                let body = &f.cur.as_ref().expect("a message is being read").body;
                match write_parts(&mut broker, body, &out) {
                    Ok(moved) => f.moved += moved,
                    Err(_) => break,
                }
                continue;
            }
            Some(false) => break,
            None => {}
        }
        let Some(n) = rb.read(&mut client, &pairs.last_read) else {
            break;
        };
        if first {
            first = false;
            if looks_like_tls(&rb.buf[..n]) {
                s.refused(NOT_KAFKA_TLS, 0);
                kafka = false;
                break;
            }
        }
        match s.feed(&mut f, &rb.buf[..n], &mut out) {
            Step::Go => {}
            Step::Bad(size, at, upto) => {
                // the whole requests before it pass (they were queued, so recorded)
                if broker.write_all(&rb.buf[..upto]).is_ok() {
                    f.moved += upto as u64;
                }
                s.wake_python();
                s.refused(size, at);
                kafka = false;
                break;
            }
            Step::Close => break,
        }
        let written = broker.write_all(&rb.buf[..n]);
        s.wake_python();
        if written.is_err() {
            break;
        }
        f.moved += n as u64;
        rb.grow(n);
    }
    s.wake_python();
    if kafka {
        s.partial(&mut f);
    }
    s.forget(&mut f);
    pairs.client_gone.store(true, Ordering::Relaxed);
    // answers to requests in flight are still read (and recorded) for a while
    let p = lock(&pairs.pending);
    let (p, _) = pairs
        .answered
        .wait_timeout_while(p, sh.late, |p| {
            !p.is_empty()
                && !pairs.broker_done.load(Ordering::Relaxed)
                && !sh.stopping.load(Ordering::Relaxed)
        })
        .unwrap_or_else(|e| e.into_inner());
    drop(p);
    let _ = broker.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
    sh.thread_ended(conn, f.moved, 0);
}

/// A direction's read buffer (see READ_SIZE): it grows while reads fill it, within what
/// all directions together may add (GROWN_CAP), and is given back after IDLE_SHRINK_MS
/// without bytes: an idle connection holds READ_SIZE, whatever it moved before.
struct ReadBuf<'a> {
    buf: Vec<u8>,
    grown: &'a AtomicUsize, // bytes all directions' buffers hold beyond READ_SIZE
}

impl<'a> ReadBuf<'a> {
    fn new(grown: &'a AtomicUsize) -> ReadBuf<'a> {
        ReadBuf {
            buf: vec![0u8; READ_SIZE],
            grown,
        }
    }

    /// A read of `n` bytes: if it filled the buffer, the next may take twice as much.
    fn grow(&mut self, n: usize) {
        let len = self.buf.len();
        if n < len || len >= MAX_READ {
            return;
        }
        if self.grown.fetch_add(len, Ordering::Relaxed) + len <= GROWN_CAP {
            self.buf.resize(len * 2, 0);
        } else {
            self.grown.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// The next bytes from `sock` into `buf` (their count; None at its end or an error),
    /// the connection stamped as last read now.
    fn read(&mut self, sock: &mut TcpStream, last_read: &AtomicU64) -> Option<usize> {
        loop {
            self.shrink_when_idle(sock);
            match sock.read(&mut self.buf) {
                Ok(0) => return None,
                Ok(n) => {
                    last_read.store(micros(mono()), Ordering::Relaxed);
                    return Some(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
    }

    /// Before a read: a grown buffer waits for bytes at most IDLE_SHRINK_MS, then goes
    /// back to READ_SIZE (one poll per read, only while grown: streaming, it returns at
    /// once).
    fn shrink_when_idle(&mut self, sock: &TcpStream) {
        if self.buf.len() <= READ_SIZE {
            return;
        }
        let mut p = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        if unsafe { libc::poll(&mut p, 1, IDLE_SHRINK_MS) } == 0 {
            self.shrink();
        }
    }

    fn shrink(&mut self) {
        let extra = self.buf.len().saturating_sub(READ_SIZE);
        if extra > 0 {
            self.buf.truncate(READ_SIZE);
            self.buf.shrink_to_fit();
            self.grown.fetch_sub(extra, Ordering::Relaxed);
        }
    }
}

impl Drop for ReadBuf<'_> {
    fn drop(&mut self) {
        self.shrink();
    }
}

/// Up to `want` bytes from `sock` appended to `body`, within its capacity: their count
/// (None at its end or an error), the connection stamped as last read now.
fn read_appended(
    sock: &TcpStream,
    body: &mut Vec<u8>,
    want: usize,
    last_read: &AtomicU64,
) -> Option<usize> {
    let spare = body.spare_capacity_mut();
    let want = want.min(spare.len());
    let at = spare.as_mut_ptr() as *mut libc::c_void;
    loop {
        let got = unsafe { libc::recv(sock.as_raw_fd(), at, want, 0) };
        if got > 0 {
            // (recv wrote those bytes: they are initialised)
            unsafe { body.set_len(body.len() + got as usize) };
            last_read.store(micros(mono()), Ordering::Relaxed);
            return Some(got as usize);
        }
        if got < 0 && std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

fn write_parts(to: &mut TcpStream, chunk: &[u8], out: &[Part]) -> std::io::Result<u64> {
    let mut moved = 0;
    for p in out {
        let bytes = match p {
            Part::Chunk(a, b) => &chunk[*a..*b],
            Part::Owned(v) => v.as_slice(),
        };
        to.write_all(bytes)?;
        moved += bytes.len() as u64;
    }
    Ok(moved)
}

/// Writes `out` (ranges of `chunk`, or bytes of their own) to the client, unless it is
/// gone: a write that fails says it is (its socket shut). The bytes written.
fn to_client(client: &mut TcpStream, gone: &mut bool, chunk: &[u8], out: &[Part]) -> u64 {
    if *gone {
        return 0;
    }
    write_parts(client, chunk, out).unwrap_or_else(|_| {
        *gone = true;
        let _ = client.shutdown(Shutdown::Both);
        0
    })
}

/// Broker to client, in order: answers stream as they come but those that may name
/// brokers (`HOLD`, `TAIL`).
fn responses(
    sh: Arc<Shared>,
    conn: u64,
    pairs: Arc<Pairs>,
    mut broker: TcpStream,
    mut client: TcpStream,
) {
    let s = Side::new(&sh, conn, &pairs, 1);
    let mut f = Framing::new();
    let mut rb = ReadBuf::new(&sh.grown);
    let mut out: Vec<Part> = Vec::new();
    let mut gone = false; // the client left: answers are read and queued only
    let mut kafka = true;
    loop {
        if (gone || pairs.client_gone.load(Ordering::Relaxed)) && lock(&pairs.pending).is_empty() {
            break;
        }
        match s.read_in_place(&mut f, &broker, &mut out) {
            Some(true) => {
                let body = &f.cur.as_ref().expect("a message is being read").body;
                f.moved += to_client(&mut client, &mut gone, body, &out);
                continue;
            }
            Some(false) => break,
            None => {}
        }
        let Some(n) = rb.read(&mut broker, &pairs.last_read) else {
            break;
        };
        out.clear();
        let step = s.feed(&mut f, &rb.buf[..n], &mut out);
        // (what came before a bad size or an answer that cannot be rewritten passes)
        f.moved += to_client(&mut client, &mut gone, &rb.buf[..n], &out);
        s.wake_python();
        rb.grow(n);
        match step {
            Step::Go => {}
            Step::Bad(size, at, _) => {
                s.refused(size, at);
                kafka = false;
                break;
            }
            Step::Close => {
                let ev = sh.event(conn, REWRITE_FAILED, 1);
                sh.push(ev);
                break;
            }
        }
    }
    if kafka {
        s.partial(&mut f);
    }
    s.forget(&mut f);
    let _ = client.shutdown(Shutdown::Both); // ends the other thread's read
    let _ = broker.shutdown(Shutdown::Both);
    pairs.client_gone.store(true, Ordering::Relaxed);
    {
        // (under the lock: the other thread cannot miss it between its test and its wait)
        let _p = lock(&pairs.pending);
        pairs.broker_done.store(true, Ordering::Relaxed);
    }
    pairs.answered.notify_all();
    sh.thread_ended(conn, f.moved, 1);
}

/// (api key, version, header tagged, tags, program): `skipscan.quick_check`'s.
type CheckSpec = (i16, i16, bool, Vec<u64>, Vec<i64>);

/// A message's bytes lent to Python: read-only, through the buffer protocol
/// (`memoryview`); freed when the last view of it goes.
#[pyclass(module = "kdissect._native", frozen)]
struct Message {
    data: Vec<u8>,
}

#[pymethods]
impl Message {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let data = &slf.get().data;
        // (fills a one-dimensional read-only view of bytes, refuses a writable one, and
        // holds a reference to `slf` for as long as the view lives)
        let done = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr() as *mut std::os::raw::c_void,
                data.len() as pyo3::ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if done < 0 {
            unsafe { (*view).obj = std::ptr::null_mut() }; // (no view: the protocol asks it)
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

/// `data` for Python: a view of it when large (no copy), else bytes.
fn to_python(py: Python<'_>, data: Vec<u8>) -> PyResult<Bound<'_, PyAny>> {
    if data.len() < LENT_AT {
        return Ok(PyBytes::new(py, &data).into_any());
    }
    let lent = Bound::new(py, Message { data })?.into_any();
    Ok(PyMemoryView::from(&lent)?.into_any())
}

/// The forwarder's threads and their queue (see the module's comment).
#[pyclass(module = "kdissect._native")]
pub struct Relay {
    shared: Arc<Shared>,
}

#[pymethods]
impl Relay {
    /// `notify_fd`: a non-blocking pipe written when the queue stops being empty;
    /// `modes`: (api key, version, mode) of the answers that do not simply stream;
    /// `checks`: (api key, version, header tagged, tags, program) of `skipscan.quick_check`;
    /// `rewrite(conn, key, version, body, sent)`: the new body, or None to close.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        notify_fd: i32,
        budget: usize,
        lossless: bool,
        modes: Vec<(i16, i16, u8)>,
        checks: Vec<CheckSpec>,
        rewrite: Py<PyAny>,
        tail: usize,
        late: f64,
        max_message: i64,
    ) -> Relay {
        Relay {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    events: VecDeque::new(),
                    bytes: 0,
                }),
                room: Condvar::new(),
                queued: AtomicUsize::new(0),
                reserved: AtomicUsize::new(0),
                outside: AtomicUsize::new(0),
                grown: AtomicUsize::new(0),
                budget,
                lossless,
                stopping: AtomicBool::new(false),
                notify_fd,
                modes: modes.into_iter().map(|(k, v, m)| ((k, v), m)).collect(),
                checks: checks
                    .into_iter()
                    .filter_map(|(k, v, h, tags, p)| Some(((k, v), quick::parse(h, tags, &p)?)))
                    .collect(),
                rewrite,
                tail,
                late: Duration::from_secs_f64(late.max(0.0)),
                max_message,
                conns: Mutex::new(HashMap::new()),
                all_ended: Condvar::new(),
            }),
        }
    }

    /// Forward between two connected sockets (their file descriptors, now the relay's:
    /// closed when both threads end, with an ENDED event).
    fn start(&self, conn: u64, client_fd: i32, broker_fd: i32) -> PyResult<()> {
        let client = unsafe { TcpStream::from_raw_fd(client_fd) };
        let broker = unsafe { TcpStream::from_raw_fd(broker_fd) };
        for s in [&client, &broker] {
            s.set_nonblocking(false)?;
            s.set_nodelay(true)?;
        }
        let pairs = Arc::new(Pairs {
            pending: Mutex::new(HashMap::new()),
            sent: AtomicU64::new(0),
            answered: Condvar::new(),
            client_gone: AtomicBool::new(false),
            broker_done: AtomicBool::new(false),
            last_read: AtomicU64::new(micros(mono())),
        });
        let clones = (
            client.try_clone()?,
            broker.try_clone()?,
            client.try_clone()?,
            broker.try_clone()?,
        );
        lock(&self.shared.conns).insert(
            conn,
            Conn {
                client: clones.2,
                broker: clones.3,
                threads: 2,
                pairs: pairs.clone(),
            },
        );
        let scheduling = Scheduling::of_this_thread();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_string())
                .stack_size(STACK)
                .spawn(move || {
                    if let Some(s) = scheduling {
                        s.take();
                    }
                    f()
                })
        };
        let (sh, p) = (self.shared.clone(), pairs.clone());
        let up = spawn(
            "kdissect-up",
            Box::new(move || {
                let ended = sh.clone();
                if catch_unwind(AssertUnwindSafe(|| requests(sh, conn, p, client, broker))).is_err()
                {
                    ended.shut(conn); // (a bug: the connection still ends)
                    ended.thread_ended(conn, 0, 0);
                }
            }),
        );
        if let Err(e) = up {
            lock(&self.shared.conns).remove(&conn);
            return Err(PyOSError::new_err(format!(
                "cannot start a forwarding thread: {e}"
            )));
        }
        let (sh, p, p2) = (self.shared.clone(), pairs.clone(), pairs);
        let down = spawn(
            "kdissect-down",
            Box::new(move || {
                let ended = sh.clone();
                let run = AssertUnwindSafe(|| responses(sh, conn, p, clones.1, clones.0));
                if catch_unwind(run).is_err() {
                    p2.broker_done.store(true, Ordering::Relaxed);
                    p2.answered.notify_all();
                    ended.shut(conn);
                    ended.thread_ended(conn, 0, 1);
                }
            }),
        );
        if down.is_err() {
            // said, and the connection closed: the first thread ends once its sockets
            // are shut, and this one's end is told as if it had run (one ENDED comes)
            let mut ev = self.shared.event(conn, REFUSED, 1);
            ev.size = NO_THREAD;
            self.shared.push(ev);
            self.shutdown(conn);
            self.shared.thread_ended(conn, 0, 1);
        }
        Ok(())
    }

    /// The queued events, oldest first: (conn, kind, side, wall time, monotonic time,
    /// offset, data, bytes moved, size); a message's data is its first bytes only when
    /// shorter than its size, and a read-only memoryview of the relay's buffer (no copy)
    /// when LENT_AT bytes or more.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let events: Vec<Event> = {
            let mut q = lock(&self.shared.queue);
            if !self.shared.lossless {
                // (taken, they are held for the display until Python says what it holds)
                self.shared.outside.fetch_add(q.bytes, Ordering::Relaxed);
            }
            q.bytes = 0;
            self.shared.queued.store(0, Ordering::Relaxed);
            q.events.drain(..).collect()
        };
        self.shared.room.notify_all();
        let events = events
            .into_iter()
            .map(|e| {
                PyTuple::new(
                    py,
                    [
                        e.conn.into_pyobject(py)?.into_any(),
                        e.kind.into_pyobject(py)?.into_any(),
                        e.side.into_pyobject(py)?.into_any(),
                        e.wall.into_pyobject(py)?.into_any(),
                        e.mono.into_pyobject(py)?.into_any(),
                        e.offset.into_pyobject(py)?.into_any(),
                        if e.kind == MESSAGE {
                            to_python(py, e.data)?
                        } else {
                            PyBytes::new(py, &e.data).into_any()
                        },
                        e.moved.into_pyobject(py)?.into_any(),
                        e.size.into_pyobject(py)?.into_any(),
                    ],
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(events)
    }

    /// Python holds `n` bytes for the display (its channel's buffer): counted in the
    /// budget, so that messages the display has no room for are not collected whole.
    fn display_holds(&self, n: usize) {
        self.shared.outside.store(n, Ordering::Relaxed);
    }

    /// Seconds since either socket of connection `conn` last gave bytes (None: ended): a
    /// message arriving for minutes is not idle, though Python hears of it at its end.
    fn idle(&self, conn: u64) -> Option<f64> {
        let conns = lock(&self.shared.conns);
        let last = conns.get(&conn)?.pairs.last_read.load(Ordering::Relaxed);
        Some(micros(mono()).saturating_sub(last) as f64 * 1e-6)
    }

    /// Close one connection (both sockets): its threads end, then its ENDED event comes.
    fn shutdown(&self, conn: u64) {
        self.shared.shut(conn);
    }

    /// Close every connection, and let no thread wait for room in the queue any more.
    fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.shared.room.notify_all();
        for c in lock(&self.shared.conns).values() {
            let _ = c.client.shutdown(Shutdown::Both);
            let _ = c.broker.shutdown(Shutdown::Both);
        }
    }

    /// Wait up to `timeout` seconds for every connection's threads to end: True when they
    /// have.
    fn wait(&self, py: Python<'_>, timeout: f64) -> bool {
        let sh = self.shared.clone();
        py.allow_threads(move || {
            let conns = lock(&sh.conns);
            let (conns, _) = sh
                .all_ended
                .wait_timeout_while(conns, Duration::from_secs_f64(timeout.max(0.0)), |c| {
                    !c.is_empty()
                })
                .unwrap_or_else(|e| e.into_inner());
            conns.is_empty()
        })
    }

    /// Connections whose threads have not ended.
    #[getter]
    fn connections(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// Budget room taken by messages being collected whole: none once every connection
    /// has ended (room never given back would shrink the display's budget for good).
    #[getter]
    fn reserved(&self) -> usize {
        self.shared.reserved.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(modes: Vec<((i16, i16), u8)>, budget: usize) -> Shared {
        pyo3::prepare_freethreaded_python();
        Shared {
            queue: Mutex::new(Queue {
                events: VecDeque::new(),
                bytes: 0,
            }),
            room: Condvar::new(),
            queued: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
            outside: AtomicUsize::new(0),
            grown: AtomicUsize::new(0),
            budget,
            lossless: false,
            stopping: AtomicBool::new(false),
            notify_fd: -1,
            modes: modes.into_iter().collect(),
            checks: HashMap::new(),
            rewrite: Python::with_gil(|py| py.None()),
            tail: 8,
            late: Duration::from_secs(0),
            max_message: 1 << 20,
            conns: Mutex::new(HashMap::new()),
            all_ended: Condvar::new(),
        }
    }

    #[test]
    fn large_messages_are_lent_to_python_read_only_small_ones_copied() {
        pyo3::prepare_freethreaded_python();
        Python::with_gil(|py| {
            let large: Vec<u8> = (0..LENT_AT + 3).map(|i| i as u8).collect();
            let view = to_python(py, large.clone()).unwrap();
            assert!(view.downcast::<PyMemoryView>().is_ok());
            let copied: Vec<u8> = view.call_method0("tobytes").unwrap().extract().unwrap();
            assert_eq!(copied, large);
            assert!(view.getattr("readonly").unwrap().extract::<bool>().unwrap());
            // a slice of it outlives the view it came from
            let tail = view
                .get_item(pyo3::types::PySlice::new(py, 4, 8, 1))
                .unwrap();
            drop(view);
            let tail: Vec<u8> = tail.call_method0("tobytes").unwrap().extract().unwrap();
            assert_eq!(tail, large[4..8]);
            let small = to_python(py, vec![1, 2, 3]).unwrap();
            assert_eq!(small.extract::<Vec<u8>>().unwrap(), vec![1, 2, 3]);
            assert!(small.downcast::<PyBytes>().is_ok());
        });
    }

    fn pairs() -> Pairs {
        Pairs {
            pending: Mutex::new(HashMap::new()),
            sent: AtomicU64::new(0),
            answered: Condvar::new(),
            client_gone: AtomicBool::new(false),
            broker_done: AtomicBool::new(false),
            last_read: AtomicU64::new(micros(mono())),
        }
    }

    fn framed(size: usize, fill: u8) -> Vec<u8> {
        let mut v = (size as i32).to_be_bytes().to_vec();
        v.extend(std::iter::repeat_n(fill, size));
        v
    }

    fn passed(chunk: &[u8], out: &[Part]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in out {
            match p {
                Part::Chunk(a, b) => v.extend_from_slice(&chunk[*a..*b]),
                Part::Owned(o) => v.extend_from_slice(o),
            }
        }
        v
    }

    #[test]
    fn answers_stream_unchanged_in_any_split() {
        let sh = shared(vec![], 1 << 20);
        let p = pairs();
        let mut stream = framed(10, 1);
        stream.extend(framed(0, 0));
        stream.extend(framed(3, 2));
        stream.extend(framed(300, 3));
        for cut in 1..stream.len() {
            let s = Side::new(&sh, 1, &p, 1);
            let mut f = Framing::new();
            let mut got = Vec::new();
            for piece in stream.chunks(cut) {
                let mut out = Vec::new();
                assert!(matches!(s.feed(&mut f, piece, &mut out), Step::Go));
                got.extend(passed(piece, &out));
            }
            assert_eq!(got, stream, "pieces of {cut}");
            let q = sh.queue.lock().unwrap();
            let sizes: Vec<usize> = q
                .events
                .iter()
                .rev()
                .take(4)
                .map(|e| e.data.len())
                .collect();
            assert_eq!(sizes, vec![300, 3, 0, 10]);
            drop(q);
            sh.queue.lock().unwrap().events.clear();
        }
    }

    #[test]
    fn any_bytes_in_any_pieces_pass_unchanged_or_stop_at_a_bad_size() {
        // hostile input: random streams (sizes small enough to finish, or not), cut at
        // random; answers paired as Metadata (held for Python, absent here) or not
        let sh = shared(vec![((3, 12), HOLD)], 1 << 16);
        let p = pairs();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..2000 {
            let mut stream = Vec::new();
            while stream.len() < 3000 {
                match rnd(4) {
                    0 => stream.extend((0..rnd(40)).map(|_| rnd(256) as u8)),
                    _ => stream.extend(framed(rnd(300) as usize, rnd(256) as u8)),
                }
            }
            p.pending.lock().unwrap().insert(0, (3, 12, 0, false));
            let s = Side::new(&sh, 1, &p, (round % 2) as u8);
            let mut f = Framing::new();
            let (mut got, mut at) = (Vec::new(), 0);
            let stopped = loop {
                if at == stream.len() {
                    break false;
                }
                let end = (at + 1 + rnd(700) as usize).min(stream.len());
                let mut out = Vec::new();
                let step = s.feed(&mut f, &stream[at..end], &mut out);
                got.extend(passed(&stream[at..end], &out));
                at = end;
                if !matches!(step, Step::Go) {
                    break true;
                }
            };
            if s.side == 1 {
                // what passed is the stream's start, byte for byte
                assert_eq!(got[..], stream[..got.len()], "round {round}");
                if !stopped {
                    assert!(stream.len() - got.len() <= 300 + 4);
                }
            }
            sh.queue.lock().unwrap().events.clear();
            sh.queue.lock().unwrap().bytes = 0;
            sh.reserved.store(0, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_message_past_the_budget_is_queued_cut() {
        let sh = shared(vec![], 100);
        let p = pairs();
        let s = Side::new(&sh, 1, &p, 0);
        let mut f = Framing::new();
        let stream = framed(5000, 7);
        let mut out = Vec::new();
        assert!(matches!(s.feed(&mut f, &stream, &mut out), Step::Go));
        let q = sh.queue.lock().unwrap();
        let e = q.events.back().unwrap();
        assert_eq!((e.data.len(), e.size), (HEAD_KEPT, 5000));
    }

    #[test]
    fn the_answer_to_a_request_queued_cut_is_never_collected_whole() {
        // the display holds most of the budget: a request of 3,000 bytes is queued cut;
        // its answer, streamed, is queued as its first bytes though there is room again
        let sh = shared(vec![], 4000);
        let p = pairs();
        let (up, down) = (Side::new(&sh, 1, &p, 0), Side::new(&sh, 1, &p, 1));
        let (mut fu, mut fd) = (Framing::new(), Framing::new());
        let mut req = framed(3000, 0);
        req[4..12].copy_from_slice(&[0, 1, 0, 12, 0, 0, 0, 9]); // Fetch v12, correlation 9
        sh.outside.store(2000, Ordering::Relaxed);
        up.feed(&mut fu, &req, &mut Vec::new());
        sh.outside.store(0, Ordering::Relaxed);
        assert_eq!(p.pending.lock().unwrap().get(&9), Some(&(1, 12, 0, true)));
        let mut answer = framed(3000, 5);
        answer[4..8].copy_from_slice(&9i32.to_be_bytes());
        let mut out = Vec::new();
        down.feed(&mut fd, &answer, &mut out);
        assert_eq!(passed(&answer, &out), answer); // forwarded whole all the same
        let q = sh.queue.lock().unwrap();
        let kept: Vec<(usize, i64)> = q.events.iter().map(|e| (e.data.len(), e.size)).collect();
        assert_eq!(kept, vec![(HEAD_KEPT, 3000), (HEAD_KEPT, 3000)]);
        assert_eq!(sh.reserved.load(Ordering::Relaxed), 0);
        // the answer to a request queued whole may take twice the budget
        drop(q);
        sh.queue.lock().unwrap().events.clear();
        sh.queue.lock().unwrap().bytes = 0;
        sh.queued.store(0, Ordering::Relaxed);
        let small = {
            let mut r = framed(12, 0);
            r[4..12].copy_from_slice(&[0, 1, 0, 12, 0, 0, 0, 10]);
            r
        };
        up.feed(&mut fu, &small, &mut Vec::new());
        sh.outside.store(3000, Ordering::Relaxed);
        answer[4..8].copy_from_slice(&10i32.to_be_bytes());
        down.feed(&mut fd, &answer, &mut Vec::new());
        let q = sh.queue.lock().unwrap();
        let last = q.events.back().unwrap();
        assert_eq!((last.data.len(), last.size), (3000, 3000));
    }

    #[test]
    fn read_buffers_grow_within_the_cap_and_give_it_back() {
        let grown = AtomicUsize::new(GROWN_CAP - 3 * READ_SIZE);
        let mut one = ReadBuf::new(&grown);
        one.grow(READ_SIZE - 1); // (not full: stays)
        assert_eq!(one.buf.len(), READ_SIZE);
        one.grow(READ_SIZE);
        one.grow(2 * READ_SIZE);
        assert_eq!(one.buf.len(), 4 * READ_SIZE);
        assert_eq!(grown.load(Ordering::Relaxed), GROWN_CAP);
        let mut two = ReadBuf::new(&grown);
        two.grow(READ_SIZE); // the cap is reached: no room
        assert_eq!(two.buf.len(), READ_SIZE);
        assert_eq!(grown.load(Ordering::Relaxed), GROWN_CAP);
        drop(one); // (an ended direction, or one idle for IDLE_SHRINK_MS, shrinks)
        assert_eq!(grown.load(Ordering::Relaxed), GROWN_CAP - 3 * READ_SIZE);
        two.grow(READ_SIZE);
        assert_eq!(two.buf.len(), 2 * READ_SIZE);
    }

    #[test]
    fn messages_begun_together_cannot_take_the_same_room() {
        let sh = shared(vec![], 4000);
        let p = pairs();
        let s = Side::new(&sh, 1, &p, 0);
        let (mut one, mut two) = (Framing::new(), Framing::new());
        let stream = framed(3000, 1);
        let mut out = Vec::new();
        s.feed(&mut one, &stream[..100], &mut out);
        s.feed(&mut two, &stream[..100], &mut out);
        assert_eq!(sh.reserved.load(Ordering::Relaxed), 3000);
        s.feed(&mut two, &stream[100..], &mut out);
        s.feed(&mut one, &stream[100..], &mut out);
        let q = sh.queue.lock().unwrap();
        let kept: Vec<usize> = q.events.iter().map(|e| e.data.len()).collect();
        assert_eq!(kept, vec![HEAD_KEPT, 3000]);
        assert_eq!(sh.reserved.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_implausible_size_is_refused_where_it_stands() {
        let sh = shared(vec![], 100);
        let p = pairs();
        let s = Side::new(&sh, 1, &p, 0);
        let mut f = Framing::new();
        let mut stream = framed(2, 0);
        stream.extend((-5i32).to_be_bytes());
        let mut out = Vec::new();
        assert!(matches!(
            s.feed(&mut f, &stream, &mut out),
            Step::Bad(-5, 6, 6)
        ));
    }

    #[test]
    fn a_request_is_paired_and_its_answer_held_for_rewriting() {
        // a Metadata (3) v12 request, then its answer: held whole (HOLD); Python (None
        // here: no callable) gives no rewrite, so the connection closes, the answer
        // queued as the broker sent it
        let sh = shared(vec![((3, 12), HOLD)], 1 << 20);
        let p = pairs();
        let up = Side::new(&sh, 1, &p, 0);
        let mut f = Framing::new();
        let mut req = 12i32.to_be_bytes().to_vec();
        req.extend([0, 3, 0, 12, 0, 0, 0, 42, 0xff, 0xff, 0, 0]);
        assert!(matches!(up.feed(&mut f, &req, &mut Vec::new()), Step::Go));
        assert_eq!(p.pending.lock().unwrap().get(&42), Some(&(3, 12, 0, false)));
        let down = Side::new(&sh, 1, &p, 1);
        let mut g = Framing::new();
        let mut answer = 6i32.to_be_bytes().to_vec();
        answer.extend([0, 0, 0, 42, 0, 0]);
        let mut out = Vec::new();
        assert!(matches!(
            down.feed(&mut g, &answer[..7], &mut out),
            Step::Go
        ));
        assert!(passed(&answer[..7], &out).is_empty(), "held until whole");
        assert!(matches!(
            down.feed(&mut g, &answer[7..], &mut out),
            Step::Close
        ));
        assert!(
            passed(&answer[7..], &out).is_empty(),
            "nothing of it passed"
        );
        assert_eq!(
            sh.reserved.load(Ordering::Relaxed),
            0,
            "its room given back"
        );
        // queued whole all the same: the display and a recording see what closed it
        let q = sh.queue.lock().unwrap();
        let ev = q.events.back().expect("the answer queued");
        assert_eq!((ev.kind, ev.side, ev.offset), (MESSAGE, 1, 4));
        assert_eq!(ev.data, answer[4..]);
    }

    #[test]
    fn an_answer_is_unpaired_when_whole_not_when_it_begins() {
        // (the late-answer wait, after the client left, waits for all of it)
        let sh = shared(vec![], 1 << 20);
        let p = pairs();
        p.pending.lock().unwrap().insert(42, (18, 3, 0, false));
        let down = Side::new(&sh, 1, &p, 1);
        let mut g = Framing::new();
        let mut answer = 6i32.to_be_bytes().to_vec();
        answer.extend([0, 0, 0, 42, 0, 0]);
        down.feed(&mut g, &answer[..9], &mut Vec::new());
        assert!(!p.pending.lock().unwrap().is_empty());
        down.feed(&mut g, &answer[9..], &mut Vec::new());
        assert!(p.pending.lock().unwrap().is_empty());
        // a request reusing the id while the answer comes stays paired after it
        p.pending.lock().unwrap().insert(42, (18, 3, 1, false));
        down.feed(&mut g, &answer[..9], &mut Vec::new());
        p.pending.lock().unwrap().insert(42, (18, 3, 2, false));
        down.feed(&mut g, &answer[9..], &mut Vec::new());
        assert_eq!(p.pending.lock().unwrap().get(&42), Some(&(18, 3, 2, false)));
    }
}
