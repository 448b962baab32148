//! Emulated latency without blocking: a min-heap of deadlines per event loop, with one timerfd
//! armed at the earliest. Cancelled timers are not removed; they are skipped when they come due
//! because their id no longer matches the connection's.

use crate::sys::TimerFd;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The timers of one event loop.
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    next_id: u64,
    fd: TimerFd,
    armed: u64,
}

impl Timers {
    /// An empty heap with its timerfd.
    pub(crate) fn new() -> std::io::Result<Timers> {
        Ok(Timers {
            heap: BinaryHeap::with_capacity(1024),
            next_id: 1,
            fd: TimerFd::new()?,
            armed: 0,
        })
    }

    /// Schedules `slot` at `deadline` (CLOCK_MONOTONIC ns); returns the timer's unique id.
    #[inline]
    pub(crate) fn add(&mut self, deadline: u64, slot: usize) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.heap.push(Reverse((deadline, id, slot as u32)));
        id
    }

    /// The next timer due at `now`, as (slot, id).
    #[inline]
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(usize, u64)> {
        match self.heap.peek() {
            Some(Reverse((d, _, _))) if *d <= now => {
                let Reverse((_, id, slot)) = self.heap.pop()?;
                Some((slot as usize, id))
            }
            _ => None,
        }
    }

    /// Arms the timerfd for the earliest deadline unless it already is.
    pub(crate) fn rearm(&mut self, now: u64) {
        if let Some(Reverse((d, _, _))) = self.heap.peek() {
            let d = *d;
            if self.armed == 0 || d < self.armed || self.armed <= now {
                self.fd.arm(d);
                self.armed = d;
            }
        }
    }

    /// The timerfd fired: clear it so the next expiry raises a new edge.
    pub(crate) fn fired(&mut self) {
        self.fd.clear();
        self.armed = 0;
    }

    /// The timerfd, to register with the poller.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.raw()
    }
}
