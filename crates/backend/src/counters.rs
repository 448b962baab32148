//! Per-instance counters: one cache-line-aligned slot per event-loop thread, each written by its
//! thread alone (a plain load and store, no locked instruction), summed when read (peaks are
//! kept per thread: the most streams one connection had is their maximum, the most streams the
//! instance had open their sum).

use model::stream::{BackendLife, BackendStreams, ClosedBy, StreamProtocol};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

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
    streams: StreamSlot,
}

/// What one thread counted of long-lived connections (see [`model::stream::BackendStreams`]):
/// the counts as plain atomics, and what is kept per code and per connection under a lock
/// taken once per connection's end.
#[derive(Default)]
struct StreamSlot {
    ws_opened: AtomicU64,
    sse_opened: AtomicU64,
    grpc_calls: AtomicU64,
    open: AtomicU64,
    closed_by_client: AtomicU64,
    closed_by_server: AtomicU64,
    dropped: AtomicU64,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    echoes: AtomicU64,
    pings: AtomicU64,
    pongs: AtomicU64,
    log: Mutex<StreamLog>,
}

/// The per-code and per-connection part of a [`StreamSlot`].
#[derive(Default)]
struct StreamLog {
    grpc_status: BTreeMap<u16, u64>,
    close_sent: BTreeMap<u16, u64>,
    close_received: BTreeMap<u16, u64>,
    lives: Vec<BackendLife>,
    lives_dropped: u64,
}

/// How a long-lived connection (or gRPC call) ended, for [`Slot::stream_closed`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamEnd {
    /// The close code of the frame we sent, if we sent one.
    pub close_sent: Option<u16>,
    /// The close code of the frame the client sent, if it sent one.
    pub close_received: Option<u16>,
    /// The `grpc-status` we ended a call with.
    pub grpc_status: Option<u16>,
}

/// A long-lived connection's own counts while it is open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Life {
    pub protocol: StreamProtocol,
    pub opened_ns: u64,
    pub messages_in: u64,
    pub messages_out: u64,
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
            streams: StreamSlot::default(),
        }
    }

    /// A long-lived connection (a WebSocket, an SSE response, a gRPC streaming call) opened;
    /// its counts start.
    pub(crate) fn stream_opened(&self, protocol: StreamProtocol, now: u64) -> Life {
        let st = &self.streams;
        add(
            match protocol {
                StreamProtocol::WebSocket => &st.ws_opened,
                StreamProtocol::Sse => &st.sse_opened,
                StreamProtocol::GrpcUnary | StreamProtocol::GrpcStream => &st.grpc_calls,
            },
            1,
        );
        add(&st.open, 1);
        Life {
            protocol,
            opened_ns: now,
            messages_in: 0,
            messages_out: 0,
        }
    }

    /// A data message came in on `life`.
    #[inline]
    pub(crate) fn stream_in(&self, life: &mut Life) {
        life.messages_in += 1;
        add(&self.streams.messages_in, 1);
    }

    /// A data message went out on `life` (`echo`: the echo of one that came in).
    #[inline]
    pub(crate) fn stream_out(&self, life: &mut Life, echo: bool) {
        life.messages_out += 1;
        add(&self.streams.messages_out, 1);
        if echo {
            add(&self.streams.echoes, 1);
        }
    }

    /// A WebSocket ping went out.
    pub(crate) fn ws_ping(&self) {
        add(&self.streams.pings, 1);
    }

    /// A WebSocket pong came in.
    pub(crate) fn ws_pong(&self) {
        add(&self.streams.pongs, 1);
    }

    /// A unary gRPC call was answered with `status`: a call, a message each way when it
    /// succeeded, the status counted.
    pub(crate) fn grpc_unary(&self, status: u16, answered: bool) {
        let st = &self.streams;
        add(&st.grpc_calls, 1);
        add(&st.messages_in, 1);
        if answered {
            add(&st.messages_out, 1);
        }
        let mut log = st.log.lock().unwrap_or_else(|e| e.into_inner());
        *log.grpc_status.entry(status).or_insert(0) += 1;
    }

    /// A long-lived connection ended, `by` whom; its counts are kept (up to the bound).
    pub(crate) fn stream_closed(&self, life: Life, now: u64, by: ClosedBy, end: StreamEnd) {
        let st = &self.streams;
        add(&st.open, u64::MAX);
        add(
            match by {
                ClosedBy::Client => &st.closed_by_client,
                ClosedBy::Server => &st.closed_by_server,
                ClosedBy::Dropped | ClosedBy::Open => &st.dropped,
            },
            1,
        );
        let mut log = st.log.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = end.close_sent {
            *log.close_sent.entry(c).or_insert(0) += 1;
        }
        if let Some(c) = end.close_received {
            *log.close_received.entry(c).or_insert(0) += 1;
        }
        if let Some(g) = end.grpc_status {
            *log.grpc_status.entry(g).or_insert(0) += 1;
        }
        if log.lives.len() < BackendStreams::LIVES_MAX {
            log.lives.push(BackendLife {
                protocol: life.protocol,
                opened_ns: life.opened_ns,
                closed_ns: Some(now),
                by,
                messages_in: life.messages_in,
                messages_out: life.messages_out,
            });
        } else {
            log.lives_dropped += 1;
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
        let streams = self.streams_snapshot();
        model::BackendCounters {
            streams: (!streams.is_empty()).then_some(streams),
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

impl InstCounters {
    /// The long-lived connections' counts, summed over the threads; each thread's lives in
    /// order of their end, the threads' one after the other, sorted by opening.
    fn streams_snapshot(&self) -> BackendStreams {
        let sum = |f: &dyn Fn(&StreamSlot) -> &AtomicU64| {
            self.slots
                .iter()
                .fold(0u64, |acc, s| acc.wrapping_add(f(&s.streams).load(Relaxed)))
        };
        let mut out = BackendStreams {
            ws_opened: sum(&|s| &s.ws_opened),
            sse_opened: sum(&|s| &s.sse_opened),
            grpc_calls: sum(&|s| &s.grpc_calls),
            open: sum(&|s| &s.open),
            closed_by_client: sum(&|s| &s.closed_by_client),
            closed_by_server: sum(&|s| &s.closed_by_server),
            dropped: sum(&|s| &s.dropped),
            messages_in: sum(&|s| &s.messages_in),
            messages_out: sum(&|s| &s.messages_out),
            echoes: sum(&|s| &s.echoes),
            pings: sum(&|s| &s.pings),
            pongs: sum(&|s| &s.pongs),
            ..BackendStreams::default()
        };
        for slot in self.slots.iter() {
            let log = slot.streams.log.lock().unwrap_or_else(|e| e.into_inner());
            for (maps, from) in [
                (&mut out.grpc_status, &log.grpc_status),
                (&mut out.close_codes_sent, &log.close_sent),
                (&mut out.close_codes_received, &log.close_received),
            ] {
                for (k, v) in from {
                    *maps.entry(*k).or_insert(0) += v;
                }
            }
            out.lives.extend(log.lives.iter().cloned());
            out.lives_dropped += log.lives_dropped;
        }
        out.lives.sort_by_key(|l| l.opened_ns);
        out
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
