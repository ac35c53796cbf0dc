//! A guard for files read through a memory map (capture files: kdissect/capture/pcapfile.py;
//! log segments: kdissect/sources/logdir.py).
//!
//! Mapping a plain capture file spares the kernel's copy of every byte into a read
//! buffer, but a file that shrinks while it is mapped turns the scanner's next touch of
//! a page past its new end into SIGBUS, which would kill the process. The reader checks
//! the file's size before each block; for a shrink during a block, this guard's SIGBUS
//! handler puts a page of zeros where the vanished page was (the access then reads
//! zeros) and notes it, and the reader says the file shrank and stops mapping. A SIGBUS
//! outside the guarded ranges goes to the handler that was there before (Python's
//! faulthandler, or the default).

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    const SLOTS: usize = 16;
    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: AtomicUsize = AtomicUsize::new(0);
    #[allow(clippy::declare_interior_mutable_const)]
    const CLEAR: AtomicBool = AtomicBool::new(false);
    static START: [AtomicUsize; SLOTS] = [FREE; SLOTS];
    static END: [AtomicUsize; SLOTS] = [FREE; SLOTS];
    static FAULTED: [AtomicBool; SLOTS] = [CLEAR; SLOTS];
    static mut PREVIOUS: Option<libc::sigaction> = None;
    static FOREIGN: AtomicBool = AtomicBool::new(false); // a fault not ours was passed on

    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
        // Safety: the kernel hands a valid siginfo; mmap and sigaction may be called here
        unsafe {
            let addr = (*info).si_addr() as usize;
            for i in 0..SLOTS {
                let (start, end) = (
                    START[i].load(Ordering::Acquire),
                    END[i].load(Ordering::Acquire),
                );
                if start != 0 && start <= addr && addr < end {
                    let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
                    let at = (addr & !(page - 1)) as *mut libc::c_void;
                    let zero = libc::mmap(
                        at,
                        page,
                        libc::PROT_READ,
                        libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if zero != libc::MAP_FAILED {
                        FAULTED[i].store(true, Ordering::Release);
                        return; // the access is retried and reads zeros
                    }
                }
            }
            // not a guarded page: the handler before ours takes it when the access faults
            // again (the default, should that one hand it back here: the process ends)
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            let previous = match *std::ptr::addr_of!(PREVIOUS) {
                Some(p) if !FOREIGN.swap(true, Ordering::AcqRel) => p,
                _ => dfl,
            };
            libc::sigaction(sig, &previous, std::ptr::null_mut());
        }
    }

    /// Ours the SIGBUS handler (again, if another took the signal since: Python's
    /// faulthandler is enabled and disabled at run time), the one before kept to pass
    /// foreign faults on to.
    fn install() -> bool {
        let handler = on_sigbus as *const () as usize;
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) != 0 {
                return false;
            }
            if current.sa_sigaction == handler {
                return true;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &action, &mut previous) != 0 {
                return false;
            }
            *std::ptr::addr_of_mut!(PREVIOUS) = Some(previous);
        }
        true
    }

    pub fn guard(start: usize, len: usize) -> Option<usize> {
        if !install() || len == 0 {
            return None;
        }
        for i in 0..SLOTS {
            if START[i]
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                FAULTED[i].store(false, Ordering::Release);
                END[i].store(start + len, Ordering::Release);
                START[i].store(start, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    pub fn faulted(slot: usize) -> bool {
        slot < SLOTS && FAULTED[slot].load(Ordering::Acquire)
    }

    pub fn unguard(slot: usize) -> bool {
        if slot >= SLOTS {
            return false;
        }
        let was = faulted(slot);
        END[slot].store(0, Ordering::Release);
        START[slot].store(0, Ordering::Release);
        was
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub fn guard(_start: usize, _len: usize) -> Option<usize> {
        None // no guard here: the reader does not map
    }
    pub fn faulted(_slot: usize) -> bool {
        false
    }
    pub fn unguard(_slot: usize) -> bool {
        false
    }
}

/// Guard the memory of ``view`` (a map of a file): a slot number, or None when it
/// cannot be guarded (then read the file instead of mapping it).
#[pyfunction]
pub fn map_guard(view: PyBuffer<u8>) -> Option<usize> {
    imp::guard(view.buf_ptr() as usize, view.len_bytes())
}

/// Whether a page of the guarded map vanished (the file shrank) since it was guarded.
pub fn faulted(slot: usize) -> bool {
    imp::faulted(slot)
}

/// Whether a page of the guarded map vanished since it was guarded (for a reader that
/// checks after each unit it decodes: what it decoded may hold those zeros).
#[pyfunction]
pub fn map_faulted(slot: usize) -> bool {
    imp::faulted(slot)
}

/// Stop guarding (before the map is closed); whether a page had vanished.
#[pyfunction]
pub fn map_unguard(slot: usize) -> bool {
    imp::unguard(slot)
}
