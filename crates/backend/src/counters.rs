//! Per-instance counters: one cache-line-aligned slot per event-loop thread, each written by its
//! thread alone (a plain load and store, no locked instruction), summed when read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const CODES: usize = 500; // 100..=599

/// What one thread counted for one instance.
#[repr(align(128))]
pub(crate) struct Slot {
    requests: AtomicU64,
    in_flight: AtomicU64,
    bytes: AtomicU64,
    connections: AtomicU64,
    status: [AtomicU64; CODES],
}

#[inline]
fn add(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

impl Slot {
    fn new() -> Slot {
        Slot {
            requests: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            status: [const { AtomicU64::new(0) }; CODES],
        }
    }

    /// A request was received in full and is being handled.
    #[inline]
    pub(crate) fn started(&self) {
        add(&self.in_flight, 1);
    }

    /// A request that was not answered (its connection was reset or lost) leaves the count.
    #[inline]
    pub(crate) fn abandoned(&self) {
        add(&self.in_flight, u64::MAX);
    }

    /// A response with `code` was produced for a request counted by [`Slot::started`].
    #[inline]
    pub(crate) fn answered(&self, code: u16) {
        add(&self.in_flight, u64::MAX);
        add(&self.requests, 1);
        if let Some(s) = self.status.get(code.wrapping_sub(100) as usize) {
            add(s, 1);
        }
    }

    /// Response bytes the kernel accepted.
    #[inline]
    pub(crate) fn wrote(&self, n: usize) {
        add(&self.bytes, n as u64);
    }

    /// A connection was accepted.
    #[inline]
    pub(crate) fn accepted(&self) {
        add(&self.connections, 1);
    }
}

/// The slots of one instance, one per event-loop thread.
pub(crate) struct InstCounters {
    slots: Box<[Slot]>,
}

impl InstCounters {
    /// Zeroed counters for `threads` event loops.
    pub(crate) fn new(threads: usize) -> InstCounters {
        InstCounters {
            slots: (0..threads).map(|_| Slot::new()).collect(),
        }
    }

    /// The slot of thread `i`.
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// The sums, as the shared model records them.
    pub(crate) fn snapshot(&self, name: &str, addr: &str, state: &str) -> model::BackendCounters {
        let sum = |f: &dyn Fn(&Slot) -> &AtomicU64| {
            self.slots
                .iter()
                .fold(0u64, |acc, s| acc.wrapping_add(f(s).load(Relaxed)))
        };
        let mut by_status = BTreeMap::new();
        for i in 0..CODES {
            let n = sum(&|s: &Slot| &s.status[i]);
            if n > 0 {
                by_status.insert(100 + i as u16, n);
            }
        }
        model::BackendCounters {
            name: name.to_string(),
            addr: addr.to_string(),
            requests: sum(&|s| &s.requests),
            in_flight: sum(&|s| &s.in_flight),
            by_status,
            bytes: sum(&|s| &s.bytes),
            connections: sum(&|s| &s.connections),
            state: state.to_string(),
        }
    }
}

/// What starts the line `proxybench backend` prints on stdout as it exits, after the drain:
/// every instance's final counters, so that a process whose stdout is kept (a pod's log) hands
/// them over after it is gone.
const LINE_PREFIX: &str = "counters ";

/// The exit line for `counters`: the prefix, then the counters as one line of JSON.
pub fn counters_line(counters: &[model::BackendCounters]) -> String {
    let json = serde_json::to_string(counters).expect("counters serialize");
    format!("{LINE_PREFIX}{json}")
}

/// The counters of an exit line written by [`counters_line`]; `None` for any other line.
pub fn parse_counters_line(line: &str) -> Option<Vec<model::BackendCounters>> {
    serde_json::from_str(line.trim_end().strip_prefix(LINE_PREFIX)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_line_reads_back_and_nothing_else_does() {
        let c = InstCounters::new(2);
        c.slot(0).accepted();
        c.slot(0).started();
        c.slot(0).answered(200);
        c.slot(1).started();
        c.slot(1).answered(503);
        c.slot(1).wrote(77);
        let snap = vec![c.snapshot("cafe-0", "198.18.0.12:8080", "stopped")];
        let line = counters_line(&snap);
        assert!(line.starts_with("counters [{"), "{line}");
        assert!(!line.contains('\n'));
        let back = parse_counters_line(&format!("{line}\n")).unwrap();
        assert_eq!(back, snap);
        assert_eq!(back[0].requests, 2);
        assert_eq!(back[0].by_status.get(&503), Some(&1));
        assert_eq!(parse_counters_line("cafe-0 198.18.0.12:8080"), None);
        assert_eq!(parse_counters_line("counters [not json"), None);
    }
}
