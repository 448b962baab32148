//! The numbers a thread records (wrk's `stats.c`): latency into HDR histograms with exact
//! count, sum, min and max on the side; per-second blocks that go to the aggregator and come
//! back cleared, so memory stays flat however long the run; and the histograms' one serialized
//! form (`model::hdr`), which the aggregator's per-second rows and the summary both carry.

use hdrhistogram::Histogram;
pub use model::hdr::{encode, new_hist};
use model::{ErrorKind, RequestRecord};

/// Number of error kinds.
pub const KINDS: usize = ErrorKind::ALL.len();

/// The index of `kind` in [`ErrorKind::ALL`].
pub fn kind_index(kind: ErrorKind) -> usize {
    ErrorKind::ALL
        .iter()
        .position(|&k| k == kind)
        .expect("every kind is in ALL")
}

/// A latency distribution: the HDR histogram plus exact count, sum, sum of squares, min, max.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// The histogram (for percentiles).
    pub hist: Histogram<u64>,
    /// Values recorded.
    pub count: u64,
    /// Sum of values in µs.
    pub sum: u64,
    /// Sum of squares in µs².
    pub sumsq: u128,
    /// Smallest value (u64::MAX when empty).
    pub min: u64,
    /// Largest value.
    pub max: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            hist: new_hist(),
            count: 0,
            sum: 0,
            sumsq: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Recorder {
    /// Records one value in microseconds.
    #[inline]
    pub fn record(&mut self, us: u64) {
        self.hist.saturating_record(us);
        self.count += 1;
        self.sum += us;
        self.sumsq += (us as u128) * (us as u128);
        self.min = self.min.min(us);
        self.max = self.max.max(us);
    }

    /// Adds everything `other` recorded.
    pub fn merge(&mut self, other: &Recorder) {
        if other.count == 0 {
            return;
        }
        self.hist
            .add(&other.hist)
            .expect("histograms share their bounds");
        self.count += other.count;
        self.sum += other.sum;
        self.sumsq += other.sumsq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Clears for reuse, keeping the allocation.
    pub fn reset(&mut self) {
        if self.count > 0 || !self.hist.is_empty() {
            self.hist.reset();
        }
        self.count = 0;
        self.sum = 0;
        self.sumsq = 0;
        self.min = u64::MAX;
        self.max = 0;
    }

    /// Exact mean in µs.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Exact sample standard deviation in µs (wrk divides by n-1 too).
    pub fn stdev(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let mean = self.mean();
        let var = (self.sumsq as f64 - n * mean * mean) / (n - 1.0);
        var.max(0.0).sqrt()
    }

    /// The value at percentile `p` (0-100), never above the exact maximum.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        self.hist.value_at_quantile(p / 100.0).min(self.max)
    }
}

/// What one thread recorded in one second; sent to the aggregator and returned cleared.
#[derive(Debug)]
pub struct SecondBlock {
    /// The thread that recorded it.
    pub thread: usize,
    /// Seconds since the origin.
    pub t: u32,
    /// Responses completed.
    pub requests: u64,
    /// Responses by status class (1xx..5xx).
    pub status_class: [u64; 5],
    /// Failed attempts by kind (indexed like [`ErrorKind::ALL`]).
    pub errors: [u64; KINDS],
    /// Bytes read.
    pub bytes: u64,
    /// Requests resent after an idle close ([`crate::Config::retry_idle_closed`]).
    pub retried: u64,
    /// Requests sent (issued to a connection or stream) in this second.
    pub sent: u64,
    /// Requests in flight when the thread closed this second (a gauge, set once per second).
    pub in_flight: u64,
    /// Latency (corrected in open loop).
    pub latency: Recorder,
    /// Open loop: latency from the actual send.
    pub uncorrected: Option<Recorder>,
}

impl SecondBlock {
    /// An empty block.
    pub fn new(thread: usize, open_loop: bool) -> SecondBlock {
        SecondBlock {
            thread,
            t: 0,
            requests: 0,
            status_class: [0; 5],
            errors: [0; KINDS],
            bytes: 0,
            retried: 0,
            sent: 0,
            in_flight: 0,
            latency: Recorder::default(),
            uncorrected: open_loop.then(Recorder::default),
        }
    }

    /// Clears for reuse.
    pub fn reset(&mut self) {
        self.requests = 0;
        self.status_class = [0; 5];
        self.errors = [0; KINDS];
        self.bytes = 0;
        self.retried = 0;
        self.sent = 0;
        self.in_flight = 0;
        self.latency.reset();
        if let Some(u) = &mut self.uncorrected {
            u.reset();
        }
    }

    /// Adds `other` (same second) into this block.
    pub fn merge(&mut self, other: &SecondBlock) {
        self.requests += other.requests;
        for i in 0..5 {
            self.status_class[i] += other.status_class[i];
        }
        for i in 0..KINDS {
            self.errors[i] += other.errors[i];
        }
        self.bytes += other.bytes;
        self.retried += other.retried;
        self.sent += other.sent;
        self.in_flight += other.in_flight;
        self.latency.merge(&other.latency);
        if let (Some(a), Some(b)) = (&mut self.uncorrected, &other.uncorrected) {
            a.merge(b);
        }
    }
}

/// What one thread hands over when it finishes: the totals that are not per second.
#[derive(Debug)]
pub struct ThreadFinal {
    /// The thread.
    pub thread: usize,
    /// Responses by status code (index = code, 0..600).
    pub status: Vec<u64>,
    /// Connections opened.
    pub connects: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Open loop: intended send times that fell within the run.
    pub intended: u64,
    /// Requests sent (issued to a connection).
    pub sent: u64,
    /// Open loop: sends later than the threshold.
    pub late: u64,
    /// Open loop: lateness of every send, in µs.
    pub lateness: Option<Recorder>,
    /// Per-request records, when asked for (sorted by time within the thread).
    pub records: Vec<RequestRecord>,
    /// The thread's first failure of each kind (indexed like [`ErrorKind::ALL`]): when, in ns
    /// since the origin, and its message.
    pub first_errors: [Option<(u64, String)>; KINDS],
    /// When the thread finished, in ns since the origin.
    pub end_ns: u64,
    /// When the thread stopped issuing requests (end of the send window), ns since the origin.
    pub send_end_ns: u64,
    /// HTTP/2 loads: the thread's session, stream and GOAWAY counts.
    pub h2: Option<H2Counts>,
}

/// Error codes counted one by one; higher (unknown) codes share the last bucket.
pub const H2_CODES: usize = 15;

/// What one thread counted below the responses of an HTTP/2 load.
#[derive(Debug, Clone, Default)]
pub struct H2Counts {
    /// Sessions started (the preface sent).
    pub connections: u64,
    /// Streams opened.
    pub streams: u64,
    /// Most streams open at once on one connection.
    pub max_concurrent: u32,
    /// GOAWAY frames received, by code.
    pub goaways: [u64; H2_CODES],
    /// Streams above a GOAWAY's last-stream-id.
    pub refused: u64,
    /// RST_STREAM frames received, by code.
    pub rst: [u64; H2_CODES],
    /// Connection errors we sent, by code.
    pub conn_errors: [u64; H2_CODES],
    /// SETTINGS not acknowledged in time.
    pub settings_timeouts: u64,
    /// Request bodies that waited for window.
    pub stalls: u64,
}

impl H2Counts {
    /// The bucket of error code `c`.
    pub fn bucket(c: u32) -> usize {
        (c as usize).min(H2_CODES - 1)
    }

    /// Adds `o` into this.
    pub fn merge(&mut self, o: &H2Counts) {
        self.connections += o.connections;
        self.streams += o.streams;
        self.max_concurrent = self.max_concurrent.max(o.max_concurrent);
        for k in 0..H2_CODES {
            self.goaways[k] += o.goaways[k];
            self.rst[k] += o.rst[k];
            self.conn_errors[k] += o.conn_errors[k];
        }
        self.refused += o.refused;
        self.settings_timeouts += o.settings_timeouts;
        self.stalls += o.stalls;
    }
}

/// Messages from the workers to the aggregator.
#[derive(Debug)]
pub enum Msg {
    /// A thread finished a second.
    Second(Box<SecondBlock>),
    /// A thread finished the run (its last second was sent before).
    Done(Box<ThreadFinal>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_is_exact() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        for v in [10, 20, 30] {
            a.record(v);
        }
        b.record(40);
        a.merge(&b);
        assert_eq!((a.count, a.sum, a.min, a.max), (4, 100, 10, 40));
        assert_eq!(a.mean(), 25.0);
        let sd = ((225.0 + 25.0 + 25.0 + 225.0) / 3.0f64).sqrt();
        assert!((a.stdev() - sd).abs() < 1e-9);
        assert_eq!(a.percentile(50.0), 20);
        assert_eq!(a.percentile(100.0), 40);
        a.reset();
        assert_eq!((a.count, a.hist.len()), (0, 0));
        a.record(model::hdr::MAX_US * 10);
        assert_eq!(a.max, model::hdr::MAX_US * 10);
        assert_eq!(a.hist.len(), 1);
    }
}
