//! The one shape every proxy's log lines are parsed into: each driver turns its access lines into
//! [`AccessRecord`]s and its error lines into [`ErrorRecord`]s, and [`crate::logs`] summarises
//! them whatever the proxy. Its own file, so that the driver seam and the summary both name it
//! and neither names the other's.

use std::borrow::Cow;

/// One access-log line in the shape every format is parsed into.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccessRecord<'a> {
    /// When the proxy logged it (the request's end), ms since the Unix epoch, if logged.
    pub time_ms: Option<f64>,
    /// The status sent to the client.
    pub status: u16,
    /// Upstream address per attempt (`a, b` after a retry); empty when none was tried.
    pub upstream_addr: Cow<'a, str>,
    /// Upstream status per attempt, in the same shape; empty when none answered.
    pub upstream_status: Cow<'a, str>,
    /// Time from reading the request to logging it, seconds, if logged.
    pub request_time_s: Option<f64>,
    /// Bytes sent to the client, if logged.
    pub bytes: Option<u64>,
    /// What the rate limit did (`PASSED`, `DELAYED`, `REJECTED`); empty when no limit applied.
    pub limit: Cow<'a, str>,
}

/// One error-log line in the shape every format is parsed into.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorRecord<'a> {
    /// Level, lower case, in nginx's words (`warn`, `error`, `notice`...).
    pub level: Cow<'a, str>,
    /// The message without time, pid and connection id.
    pub message: Cow<'a, str>,
    /// The proxy's own start, reload or stop message (HAProxy logs `Proxy X stopped` as a
    /// warning at every reload, Caddy `automatic HTTPS is completely disabled` at every load),
    /// whatever level it is logged at: counted under the level `lifecycle`, so it is never taken
    /// for a warning about the traffic.
    pub lifecycle: bool,
}
