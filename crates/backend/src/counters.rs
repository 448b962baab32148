//! Per-instance counters: one cache-line-aligned slot per event-loop thread, each written by its
//! thread alone (a plain load and store, no locked instruction), summed when read (peaks are
//! kept per thread: the most streams one connection had is their maximum, the most streams the
//! instance had open their sum).

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
    h2: H2Slot,
}

/// What one thread counted of HTTP/2 for one instance (see [`model::BackendH2`]).
#[derive(Default)]
struct H2Slot {
    connections: AtomicU64,
    requests: AtomicU64,
    refused: AtomicU64,
    client_resets: AtomicU64,
    stream_errors: AtomicU64,
    connection_errors: AtomicU64,
    goaways: AtomicU64,
    /// Streams open now on this thread's connections.
    open: AtomicU64,
    /// The most `open` has been.
    open_max: AtomicU64,
    /// The most streams one connection had open.
    conn_max: AtomicU64,
}

/// What happened on an HTTP/2 connection, for [`Slot::h2`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum H2Count {
    /// A connection opened with the preface.
    Connection,
    /// A counted request was answered on a stream.
    Request,
    /// A stream was refused above the concurrency limit.
    Refused,
    /// The client reset a stream.
    ClientReset,
    /// A stream was reset for a protocol error.
    StreamError,
    /// A connection ended with a protocol error.
    ConnectionError,
    /// A graceful GOAWAY was sent.
    GoAway,
}

#[inline]
fn raise(a: &AtomicU64, v: u64) {
    if v > a.load(Relaxed) {
        a.store(v, Relaxed);
    }
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
            h2: H2Slot::default(),
        }
    }

    /// Counts one HTTP/2 happening.
    #[inline]
    pub(crate) fn h2(&self, what: H2Count) {
        let h = &self.h2;
        add(
            match what {
                H2Count::Connection => &h.connections,
                H2Count::Request => &h.requests,
                H2Count::Refused => &h.refused,
                H2Count::ClientReset => &h.client_resets,
                H2Count::StreamError => &h.stream_errors,
                H2Count::ConnectionError => &h.connection_errors,
                H2Count::GoAway => &h.goaways,
            },
            1,
        );
    }

    /// A connection's open streams went from `was` to `now`.
    #[inline]
    pub(crate) fn h2_streams(&self, was: u64, now: u64) {
        let h = &self.h2;
        let open = h.open.load(Relaxed).wrapping_add(now).wrapping_sub(was);
        h.open.store(open, Relaxed);
        raise(&h.open_max, open);
        raise(&h.conn_max, now);
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
        let max = |f: &dyn Fn(&Slot) -> &AtomicU64| {
            self.slots
                .iter()
                .map(|s| f(s).load(Relaxed))
                .max()
                .unwrap_or(0)
        };
        let h2 = model::BackendH2 {
            connections: sum(&|s| &s.h2.connections),
            requests: sum(&|s| &s.h2.requests),
            max_streams_per_connection: max(&|s| &s.h2.conn_max),
            max_streams: sum(&|s| &s.h2.open_max),
            refused: sum(&|s| &s.h2.refused),
            client_resets: sum(&|s| &s.h2.client_resets),
            stream_errors: sum(&|s| &s.h2.stream_errors),
            connection_errors: sum(&|s| &s.h2.connection_errors),
            goaways: sum(&|s| &s.h2.goaways),
        };
        model::BackendCounters {
            name: name.to_string(),
            addr: addr.to_string(),
            requests: sum(&|s| &s.requests),
            in_flight: sum(&|s| &s.in_flight),
            by_status,
            bytes: sum(&|s| &s.bytes),
            connections: sum(&|s| &s.connections),
            state: state.to_string(),
            h2: (h2.connections > 0).then_some(h2),
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
