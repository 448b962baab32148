//! What one load (a generator run against one URL) recorded: counts, the error taxonomy, latency
//! histograms and the per-second timeline.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a request failed below HTTP. Every failed attempt lands in exactly one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The server refused the TCP connection (RST to the SYN).
    ConnectRefused,
    /// The TCP connection was not established within the timeout.
    ConnectTimeout,
    /// Any other connect failure (address unavailable, unreachable, too many open files...).
    ConnectOther,
    /// The TLS handshake failed (bad certificate, protocol error, peer closed during handshake).
    Tls,
    /// Writing the request failed (EPIPE, reset while sending).
    Write,
    /// A reused keep-alive connection was closed or reset by the server before any byte of the
    /// response arrived: the classic race with a server closing idle connections (or a reload).
    ReadIdleClosed,
    /// The connection was reset or closed after the request was sent and the response had not
    /// completed (mid-response, or a fresh connection closed before answering).
    ReadReset,
    /// No complete response within the request timeout.
    Timeout,
    /// The bytes received were not a valid HTTP/1.x response.
    Malformed,
}

impl ErrorKind {
    /// Every kind, in the order reports print them.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::ConnectOther,
        ErrorKind::Tls,
        ErrorKind::Write,
        ErrorKind::ReadIdleClosed,
        ErrorKind::ReadReset,
        ErrorKind::Timeout,
        ErrorKind::Malformed,
    ];

    /// The snake_case name used in JSON, CSV headers and reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::ConnectOther => "connect_other",
            ErrorKind::Tls => "tls",
            ErrorKind::Write => "write",
            ErrorKind::ReadIdleClosed => "read_idle_closed",
            ErrorKind::ReadReset => "read_reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Malformed => "malformed",
        }
    }

    /// The column of wrk's `Socket errors: connect a, read b, write c, timeout d` line this kind
    /// is counted in, so that scripts reading wrk output see the same totals wrk would print.
    pub fn wrk_bucket(self) -> WrkBucket {
        match self {
            ErrorKind::ConnectRefused
            | ErrorKind::ConnectTimeout
            | ErrorKind::ConnectOther
            | ErrorKind::Tls => WrkBucket::Connect,
            ErrorKind::Write => WrkBucket::Write,
            ErrorKind::ReadIdleClosed | ErrorKind::ReadReset | ErrorKind::Malformed => {
                WrkBucket::Read
            }
            ErrorKind::Timeout => WrkBucket::Timeout,
        }
    }
}

/// The four columns of wrk's socket error line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrkBucket {
    /// `connect`
    Connect,
    /// `read`
    Read,
    /// `write`
    Write,
    /// `timeout`
    Timeout,
}

/// How requests were scheduled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadMode {
    /// Closed loop (wrk's model): each connection sends its next request when the previous
    /// response completes.
    Closed,
    /// Open loop: requests have intended send times at `rate` per second across all connections.
    Open {
        /// Mean requests per second across all connections.
        rate: f64,
        /// How the gaps between intended send times are drawn.
        arrivals: Arrivals,
        /// Seed of the arrival process (for Poisson), so a run can be repeated exactly.
        seed: u64,
    },
}

/// The spacing of open-loop arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Evenly spaced: one request every 1/rate seconds.
    Even,
    /// A Poisson process: exponential gaps with mean 1/rate, drawn from a seeded generator.
    Poisson,
}

/// One percentile of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// The percentile, e.g. 99.9.
    pub p: f64,
    /// The value at that percentile in microseconds.
    pub us: u64,
}

/// A latency distribution, summarised and also kept whole so any reporter can ask it anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Latency {
    /// Number of recorded values.
    pub count: u64,
    /// Mean in microseconds.
    pub mean_us: f64,
    /// Standard deviation in microseconds.
    pub stdev_us: f64,
    /// Smallest value in microseconds.
    pub min_us: u64,
    /// Largest value in microseconds.
    pub max_us: u64,
    /// Share of values within one standard deviation of the mean, in percent (wrk's `+/- Stdev`).
    pub within_stdev_pct: f64,
    /// Percentiles 50, 75, 90, 99, 99.9, 99.99, 99.999 (and any others asked for).
    pub percentiles: Vec<Percentile>,
    /// The whole HDR histogram (1 µs to 1 h, 3 significant digits), V2-deflate serialized and
    /// base64 encoded, so reports and compare can recompute anything exactly.
    pub hdr: String,
}

impl Latency {
    /// The value recorded at percentile `p`, if that percentile was summarised.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        self.percentiles
            .iter()
            .find(|x| (x.p - p).abs() < 1e-9)
            .map(|x| x.us)
    }
}

/// wrk's `Req/Sec` row: the spread of per-thread, per-second request rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RateStats {
    /// Mean requests per second per thread.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Highest one-second rate seen on a thread.
    pub max: f64,
    /// Share within one standard deviation, in percent.
    pub within_stdev_pct: f64,
}

/// How well an open-loop run kept to its schedule. Late sends are reported, never hidden.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Schedule {
    /// Requests whose intended send time fell within the run.
    pub intended: u64,
    /// Requests actually sent.
    pub sent: u64,
    /// Sends that left more than `late_threshold_us` after their intended time.
    pub late: u64,
    /// The threshold that makes a send late, in microseconds.
    pub late_threshold_us: u64,
    /// Largest lateness in microseconds.
    pub late_max_us: u64,
    /// 99th percentile of lateness in microseconds.
    pub late_p99_us: u64,
    /// Mean lateness in microseconds over all sends.
    pub late_mean_us: f64,
    /// Achieved send rate per second over the run.
    pub achieved_rate: f64,
    /// The send window in microseconds: sends that fell due within it left together, none more
    /// than this after its intended time when the machine keeps up (0: each at its own time,
    /// or a result from before the window existed).
    #[serde(default)]
    pub send_window_us: u64,
}

/// One second of a load's timeline. Seconds are counted from the run's origin (shared by every
/// load and action in a scenario), so timelines line up with events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Second {
    /// Seconds since the origin: this row covers `[t, t+1)`.
    pub t: u32,
    /// Responses completed in this second (any status).
    pub requests: u64,
    /// Responses by status class: index 0 is 1xx ... index 4 is 5xx.
    pub status_class: [u64; 5],
    /// Failed attempts by kind in this second (only kinds that occurred).
    pub errors: BTreeMap<ErrorKind, u64>,
    /// Latency percentiles of responses completed in this second, in microseconds.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest latency.
    pub max_us: u64,
    /// Bytes read in this second.
    pub bytes: u64,
    /// Requests sent again in this second on a new connection, after the reused keep-alive
    /// connection they went out on was closed before any byte of an answer (opt-in:
    /// `--retry-idle-closed`). Not failures; the answer to the second attempt counts once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried: u64,
    /// Requests sent in this second (the achieved send rate; in open loop, what the schedule
    /// got out). Absent (0) in files written before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sent: u64,
    /// Requests in flight at the end of this second: sent, neither answered nor failed yet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight: u64,
    /// Exact sum of the latencies of this second's responses, in microseconds (the histogram's
    /// sum, so a mean can be taken over any span).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_sum_us: u64,
}

/// Serde's test for counters left out of a file while they are zero (files stay as they were
/// for runs that never use the feature that counts them).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Second {
    /// All failed attempts below HTTP in this second.
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Everything one load recorded. This is `proxybench load --format json` and one entry of a
/// scenario's `data.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSummary {
    /// Schema version ([`crate::SCHEMA_VERSION`]).
    pub schema: u32,
    /// The load's name in its scenario (`load` for a standalone run).
    pub name: String,
    /// Target URL.
    pub url: String,
    /// Method sent.
    pub method: String,
    /// Closed or open loop.
    pub mode: LoadMode,
    /// Generator threads.
    pub threads: u32,
    /// Connections across all threads.
    pub connections: u32,
    /// Seconds from the origin at which this load started.
    pub start_s: f64,
    /// Length the run was asked for, in seconds (absent for a request-count run).
    pub planned_s: Option<f64>,
    /// Length the run actually took, in seconds.
    pub elapsed_s: f64,
    /// Request timeout in milliseconds.
    pub timeout_ms: u64,
    /// Complete responses received, of any status.
    pub requests: u64,
    /// Bytes read from the sockets (headers and bodies).
    pub bytes_read: u64,
    /// Bytes written to the sockets.
    pub bytes_written: u64,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    /// Failed attempts by kind.
    pub errors: BTreeMap<ErrorKind, u64>,
    /// The first message seen for each kind in `errors` (earliest across threads), e.g.
    /// `tls` → `invalid peer certificate: UnknownIssuer`, so every count comes with a reason.
    /// Absent in files written before it existed.
    #[serde(default)]
    pub error_messages: BTreeMap<ErrorKind, String>,
    /// Connections opened (including reconnects).
    pub connects: u64,
    /// Requests sent a second time on a new connection because the server closed the reused
    /// keep-alive connection under them before answering: the race of an idle close, which Go's
    /// net/http retries silently. Counted only with `--retry-idle-closed` (otherwise each is a
    /// `read_idle_closed` error); each is also in `requests` or `errors` by its second attempt.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried: u64,
    /// Latency. In open loop this is measured from each request's intended send time
    /// (coordinated-omission corrected); in closed loop from the actual send.
    pub latency: Latency,
    /// Open loop only: latency measured from the actual send (uncorrected), for comparison.
    pub latency_uncorrected: Option<Latency>,
    /// Per-thread per-second request rates (wrk's Req/Sec row).
    pub req_per_sec: RateStats,
    /// Open loop only: how well the schedule was kept.
    pub schedule: Option<Schedule>,
    /// The per-second timeline.
    pub timeline: Vec<Second>,
    /// HTTP/2 loads only: sessions, streams, GOAWAY, RST_STREAM and connection errors.
    /// Absent for HTTP/1.1 (and in files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Stats>,
}

/// What an HTTP/2 load saw below the responses. Each failed request is also counted once in
/// [`LoadSummary::errors`]: a stream the server refused (above a GOAWAY's last-stream-id, or
/// RST_STREAM REFUSED_STREAM: never processed, safe to retry) as `read_idle_closed`, any other
/// RST_STREAM and a connection closed under open streams as `read_reset`, a connection error
/// we detected (the server broke the protocol) as `malformed`, a SETTINGS timeout as `timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Http2Stats {
    /// Concurrent streams asked for on each connection (`-m`).
    pub streams_per_connection: u32,
    /// HTTP/2 sessions started (the preface sent on a connected socket).
    pub connections: u64,
    /// Streams opened (requests sent).
    pub streams: u64,
    /// The most streams open at once on one connection.
    pub max_concurrent_streams: u32,
    /// GOAWAY frames received with NO_ERROR (graceful shutdown, e.g. a reload).
    pub goaways_graceful: u64,
    /// GOAWAY frames received with an error code.
    pub goaways_error: u64,
    /// GOAWAY frames received, by error code name.
    pub goaway_codes: BTreeMap<String, u64>,
    /// Streams above a GOAWAY's last-stream-id: refused, never processed.
    pub refused: u64,
    /// RST_STREAM frames received, by error code name.
    pub rst_stream: BTreeMap<String, u64>,
    /// Connection errors we ended a connection with (our GOAWAY), by error code name.
    pub connection_errors: BTreeMap<String, u64>,
    /// Connections whose SETTINGS the server did not acknowledge within the timeout.
    pub settings_timeouts: u64,
    /// Times a request body waited for flow-control window.
    pub flow_control_stalls: u64,
}

impl LoadSummary {
    /// Failed attempts below HTTP, all kinds.
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Responses whose status is not 2xx or 3xx (wrk's "Non-2xx or 3xx responses").
    pub fn non_2xx_3xx(&self) -> u64 {
        self.status
            .iter()
            .filter(|(s, _)| !(200..400).contains(*s))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every attempt that got an answer or an error: the denominator of the failure rate.
    pub fn attempts(&self) -> u64 {
        self.requests + self.error_total()
    }

    /// Attempts that failed: errors below HTTP plus non-2xx/3xx responses.
    pub fn failures(&self) -> u64 {
        self.error_total() + self.non_2xx_3xx()
    }

    /// True when the target was unusable: nothing was attempted, or every attempt failed.
    pub fn all_failed(&self) -> bool {
        self.failures() == self.attempts()
    }

    /// Responses per second over the elapsed time.
    pub fn req_per_sec_total(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.requests as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

/// The outcome of one request, for runs that keep a per-request record (disruption windows, the
/// analyses, `requests/<case>/<load>.bin` in a results directory). 24 bytes in memory and on disk
/// ([`crate::records`]), so a million requests cost 24 MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RequestRecord {
    /// Completion (or failure) time in microseconds since the origin.
    pub t_us: u64,
    /// Latency in microseconds (corrected in open loop), saturating at u32::MAX.
    pub latency_us: u32,
    /// The connection slot it went out on (0 to connections - 1, across the load's threads); a
    /// slot reconnects after a close, so one slot can be several TCP connections in turn.
    #[serde(default)]
    pub conn: u32,
    /// Response bytes read while the request was in flight (head and body), saturating at
    /// u32::MAX.
    #[serde(default)]
    pub bytes: u32,
    /// HTTP status, or 0 when the attempt failed below HTTP.
    pub status: u16,
    /// The error kind when `status` is 0.
    pub error: Option<ErrorKind>,
}

impl RequestRecord {
    /// When the request was meant to leave, in microseconds since the origin: completion minus
    /// latency. In open loop latency counts from the intended send time, so this is the schedule's
    /// time (to within the microsecond both are rounded to); in closed loop it is the actual send.
    pub fn intended_us(&self) -> u64 {
        self.t_us.saturating_sub(u64::from(self.latency_us))
    }

    /// True when the attempt failed: an error below HTTP, or a status outside 2xx/3xx.
    pub fn failed(&self) -> bool {
        self.error.is_some() || !(200..400).contains(&self.status)
    }
}

impl LoadSummary {
    /// The summary as pretty-printed JSON: what `proxybench load --format json` prints.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a LoadSummary holds only finite numbers")
    }
}

/// Version of the fields a result file adds around a [`LoadSummary`] ([`LoadResult`]).
pub const RESULT_VERSION: u32 = 1;

/// One timeline second's latency histograms, V2-deflate serialized and base64 encoded like
/// [`Latency::hdr`], so per-second percentiles of merged results are exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SecondHdr {
    /// The second ([`Second::t`]) it belongs to.
    pub t: u32,
    /// Latency (corrected in open loop) of the responses completed in that second.
    pub hdr: String,
    /// Open loop only: latency from the actual send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr_uncorrected: Option<String>,
}

/// Where a result came from when an agent measured it for a coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AgentInfo {
    /// The agent's address as the coordinator named it (`host:port`).
    pub host: String,
    /// The agent's clock minus the coordinator's, in µs, as an NTP-style exchange measured it.
    pub clock_offset_us: i64,
    /// Half the round trip of that exchange: the offset's uncertainty, in µs.
    pub clock_uncertainty_us: u64,
    /// When the agent began, minus the instant it was given, on the coordinator's clock, in µs.
    pub start_skew_us: i64,
    /// The agent went away before it sent its result: the counts are what it sent per second.
    pub lost: bool,
}

/// One row of a merged result's per-agent table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AgentRow {
    /// The agent (its host, or the file's load name when it has none).
    pub agent: String,
    /// Complete responses.
    pub requests: u64,
    /// Failed attempts below HTTP.
    pub errors: u64,
    /// Responses per second over its elapsed time.
    pub req_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest latency, µs.
    pub max_us: u64,
    /// Clock offset to the coordinator, µs (0 for a file without agent info).
    pub clock_offset_us: i64,
    /// Start skew, µs.
    pub start_skew_us: i64,
    /// Lost mid-run.
    pub lost: bool,
}

/// What a result file adds to the [`LoadSummary`] fields (at the same JSON level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ResultExt {
    /// [`RESULT_VERSION`]; absent (0) in files written before it existed.
    #[serde(default)]
    pub result_version: u32,
    /// Wall-clock time of the result's origin (its `t = 0`), ns since the Unix epoch.
    #[serde(default)]
    pub origin_unix_ns: u64,
    /// Every timeline second's histograms.
    #[serde(default)]
    pub seconds_hdr: Vec<SecondHdr>,
    /// Set when an agent measured this result for a coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
    /// Set on a merged result: one row per merged input, in input order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentRow>,
}

/// A result file: what `proxybench load --format json` writes and `proxybench merge` reads. The
/// summary's fields and the extension's sit side by side in one JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadResult {
    /// Everything one load recorded.
    pub summary: LoadSummary,
    /// Wall-clock origin, per-second histograms, agent facts.
    pub ext: ResultExt,
}

#[derive(Serialize)]
struct ResultOut<'a> {
    #[serde(flatten)]
    summary: &'a LoadSummary,
    #[serde(flatten)]
    ext: &'a ResultExt,
}

impl LoadResult {
    /// Pretty JSON with a final newline: the bytes `load --format json` and `merge -o` write.
    pub fn to_json_pretty(&self) -> String {
        let out = ResultOut {
            summary: &self.summary,
            ext: &self.ext,
        };
        serde_json::to_string_pretty(&out).expect("a result holds only finite numbers") + "\n"
    }

    /// Reads a result file's JSON (a plain summary without the extension fields reads too).
    pub fn from_json(text: &str) -> Result<LoadResult, serde_json::Error> {
        Ok(LoadResult {
            summary: serde_json::from_str(text)?,
            ext: serde_json::from_str(text)?,
        })
    }
}
