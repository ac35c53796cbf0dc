//! The scheduling each forwarding thread runs at (relay.rs starts them).
//!
//! Real time, when the forwarding process was given it (`--forwarder-priority realtime`):
//! the process sets it with SCHED_RESET_ON_FORK, so that the programs it starts run at
//! normal priority, and Linux applies that flag to new threads too; without this, the
//! threads that move the bytes ran at normal priority and only the event loop in real time.
//!
//! Otherwise a short EEVDF slice (Linux 6.12+; no privilege, the same share of the CPU,
//! ignored by older kernels): a thread woken by a few bytes gets an earlier deadline, so
//! it may preempt a broker or a client instead of waiting out their slice. Measured on
//! three nodes against the same code without, in the same rounds (docs/guide/proxy.md,
//! 2026-12-04, five runs): throughput unchanged within the noise (consume 1.03 times,
//! 42 rounds, 90 % interval 0.98-1.08; produce 1.04, 0.97-1.11); a quiet small request's
//! added p99 lower in four runs of five.

use std::io::Error;

/// The slice asked for: the least Linux accepts.
const SLICE_NS: u64 = 100_000;

/// A thread's policy (SCHED_RESET_ON_FORK included when set) and real-time priority.
#[derive(Clone, Copy)]
pub struct Scheduling {
    policy: libc::c_int,
    priority: libc::c_int,
}

/// Linux's `struct sched_attr` (the first version, 48 bytes; no wrapper in glibc).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

impl Scheduling {
    pub fn of_this_thread() -> Option<Scheduling> {
        let policy = unsafe { libc::sched_getscheduler(0) };
        let mut param = libc::sched_param { sched_priority: 0 };
        if policy < 0 || unsafe { libc::sched_getparam(0, &mut param) } != 0 {
            return None;
        }
        Some(Scheduling {
            policy,
            priority: param.sched_priority,
        })
    }

    /// The calling thread (a new one) takes it. Failures are left silent: the thread then
    /// forwards at what it has, normal priority and the default slice.
    pub fn take(self) {
        let reset = self.policy & libc::SCHED_RESET_ON_FORK != 0;
        let base = self.policy & !libc::SCHED_RESET_ON_FORK;
        if base == libc::SCHED_RR || base == libc::SCHED_FIFO {
            let param = libc::sched_param {
                sched_priority: self.priority,
            };
            // (allowed: the same process was allowed it for the event loop's thread)
            unsafe { libc::sched_setscheduler(0, self.policy, &param) };
        } else if base == libc::SCHED_OTHER {
            short_slice(reset);
        }
    }
}

fn short_slice(reset_on_fork: bool) {
    // the thread's nice as it is (sched_setattr sets it too: a thread started under
    // `nice` must not ask for more than it has, which would be refused)
    unsafe { *libc::__errno_location() = 0 };
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if nice == -1 && Error::last_os_error().raw_os_error() != Some(0) {
        return;
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: if reset_on_fork {
            SCHED_FLAG_RESET_ON_FORK
        } else {
            0
        },
        nice,
        priority: 0,
        runtime: SLICE_NS,
        deadline: 0,
        period: 0,
    };
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice_of_this_thread() -> Option<u64> {
        let tid = unsafe { libc::gettid() };
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
        let line = text.lines().find(|l| l.starts_with("se.slice"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    #[test]
    fn a_normal_thread_takes_a_short_slice_and_keeps_its_nice() {
        std::thread::spawn(|| {
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 5) };
            let normal = Scheduling::of_this_thread().unwrap();
            normal.take();
            assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, 5);
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
            if let Some(slice) = slice_of_this_thread() {
                assert_eq!(slice, SLICE_NS); // (a kernel that shows it: 6.12+)
            }
        })
        .join()
        .unwrap();
    }
}
