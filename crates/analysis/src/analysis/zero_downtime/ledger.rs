//! The books of one case: what every load lost and when (relative to the action that caused
//! it), and the three-way count of requests as the clients, the proxy's access log and the backends
//! saw them.

use super::plan::{Plan, What};
use super::{OLD_WORKERS_QUIT_MS, QUIT_MARGIN_MS};
use model::{CaseResult, Collector, ErrorKind, LoadMode, LoadSummary, Measured, RequestRecord};
use std::collections::BTreeMap;

/// One load's losses, placed against the case's actions.
#[derive(Debug, Clone)]
pub struct LoadBooks {
    /// Load name.
    pub name: String,
    /// Open loop (else closed loop, wrk's model).
    pub open: bool,
    /// Connections the load keeps.
    pub connections: u64,
    /// Open loop: the latest a send left after its intended time, in ms.
    pub late_max_ms: Option<f64>,
    /// Connections opened in all (reconnects included).
    pub connects: u64,
    /// Attempts (responses plus errors).
    pub attempts: u64,
    /// Failed attempts (errors plus non-2xx/3xx).
    pub failures: u64,
    /// Failed attempts by kind (`read_idle_closed`...) or status (`502`...).
    pub causes: BTreeMap<String, u64>,
    /// Requests that timed out on the client.
    pub timeouts: u64,
    /// Each failure placed in time against the actions: only the load's per-request records
    /// can, so a load without them (run on agents) has none to place.
    pub timed: Measured<Timed>,
    /// HTTP/2 loads: what the load saw below the responses (GOAWAYs, refused streams).
    pub h2: Option<model::Http2Stats>,
}

/// One load's failures placed in time, from its per-request records.
#[derive(Debug, Clone, Default)]
pub struct Timed {
    /// Failures other than timeouts that happened outside every action's span.
    pub outside: u64,
    /// Per fired action (index into the plan): failures it owns, earliest and latest failure
    /// in milliseconds after the action started.
    pub by_action: BTreeMap<usize, Owned>,
    /// Failures (timeouts aside) that followed a SIGHUP: (index of the action that sent it,
    /// milliseconds from the SIGHUP to the request's send, or to the failure in open loop).
    pub after_sighup: Vec<(usize, f64)>,
}

/// Failures that followed reloads, timed from the SIGHUP.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gaps {
    /// Failures owned by reloading actions.
    pub n: u64,
    /// Of which sooner than the old workers can have been told to quit.
    pub early: u64,
    /// The earliest, in milliseconds after SIGHUP.
    pub earliest: Option<f64>,
}

/// The failures one action owns in one load.
#[derive(Debug, Clone, Copy, Default)]
pub struct Owned {
    /// How many.
    pub failed: u64,
    /// Earliest failure, ms after the action started.
    pub first_ms: f64,
    /// Latest failure, ms after the action started.
    pub last_ms: f64,
}

impl LoadBooks {
    /// Reads one load's summary and, when it has them, its records against the plan.
    pub fn new(s: &LoadSummary, recs: Measured<&[RequestRecord]>, plan: &Plan) -> LoadBooks {
        let mut causes = BTreeMap::new();
        for (k, n) in &s.errors {
            *causes.entry(k.name().to_string()).or_insert(0) += n;
        }
        for (code, n) in &s.status {
            if !(200..400).contains(code) {
                *causes.entry(code.to_string()).or_insert(0) += n;
            }
        }
        let open = matches!(s.mode, LoadMode::Open { .. });
        LoadBooks {
            name: s.name.clone(),
            open,
            connections: s.connections as u64,
            late_max_ms: s.schedule.as_ref().map(|x| x.late_max_us as f64 / 1e3),
            connects: s.connects,
            attempts: s.attempts(),
            failures: s.failures(),
            causes,
            timeouts: s.errors.get(&ErrorKind::Timeout).copied().unwrap_or(0),
            timed: recs.map(|r| Timed::place(r, plan, open)),
            h2: s.http2.clone(),
        }
    }

    /// Count of one cause (`read_idle_closed`, `502`...).
    pub fn cause(&self, k: &str) -> u64 {
        self.causes.get(k).copied().unwrap_or(0)
    }

    /// Failures below HTTP other than timeouts: a connection refused, reset or closed.
    pub fn broken(&self) -> u64 {
        ErrorKind::ALL
            .iter()
            .filter(|k| **k != ErrorKind::Timeout)
            .map(|k| self.cause(k.name()))
            .sum()
    }

    /// Responses with a 5xx status.
    pub fn five_xx(&self) -> u64 {
        self.causes
            .iter()
            .filter(|(k, _)| k.starts_with('5') && k.len() == 3)
            .map(|(_, n)| n)
            .sum()
    }

    /// Failures after SIGHUPs of actions of a kind: how many, how many came sooner than the old
    /// workers can have been told to quit, and the earliest (ms after SIGHUP).
    pub fn sighup_gaps(&self, plan: &Plan, pred: impl Fn(What) -> bool) -> Measured<Gaps> {
        self.timed.as_ref().map(|t| {
            let mut g = Gaps::default();
            for (i, ms) in &t.after_sighup {
                if plan.fired.get(*i).is_some_and(|f| pred(f.what)) {
                    g.n += 1;
                    if *ms < OLD_WORKERS_QUIT_MS - QUIT_MARGIN_MS {
                        g.early += 1;
                    }
                    g.earliest = Some(g.earliest.map_or(*ms, |e: f64| e.min(*ms)));
                }
            }
            g
        })
    }

    /// Failures owned by actions of a kind.
    pub fn owned_by(&self, plan: &Plan, pred: impl Fn(What) -> bool) -> Measured<u64> {
        self.timed.as_ref().map(|t| {
            t.by_action
                .iter()
                .filter(|(i, _)| plan.fired.get(**i).is_some_and(|f| pred(f.what)))
                .map(|(_, o)| o.failed)
                .sum()
        })
    }
}

impl Timed {
    /// Places every failed record against the plan's actions.
    fn place(recs: &[RequestRecord], plan: &Plan, open: bool) -> Timed {
        let mut b = Timed::default();
        // When each connection slot's previous attempt ended (records are in completion order).
        let mut last_on_slot: BTreeMap<u32, f64> = BTreeMap::new();
        for r in recs {
            let t = r.t_us as f64 / 1e6;
            let prev = last_on_slot.insert(r.conn, t);
            if !r.failed() {
                continue;
            }
            // When the request left: exact in closed loop; in open loop the intended time,
            // which may precede the actual send when the schedule ran late.
            let sent = t - r.latency_us as f64 / 1e6;
            let timeout = r.error == Some(ErrorKind::Timeout);
            // A client stalled after sending notices late; the send time still places it.
            let idle = prev.is_some_and(|p| plan.idle_through(p, t));
            if !timeout && !plan.inside(t) && !plan.inside(sent) && !idle {
                b.outside += 1;
            }
            if let Some(f) = plan.owner(t) {
                let ms = (t - f.t()) * 1e3;
                let o = b.by_action.entry(f.index).or_insert(Owned {
                    failed: 0,
                    first_ms: ms,
                    last_ms: ms,
                });
                o.failed += 1;
                o.first_ms = o.first_ms.min(ms);
                o.last_ms = o.last_ms.max(ms);
            }
            // A loss caused by a reload is sent around the moment the old workers close, so
            // it is timed from the last SIGHUP before it left (closed loop), or before it
            // failed (open loop, whose send time is only the intended one).
            let at = if open { t } else { sent };
            if let (false, Some((index, sig))) = (timeout, plan.last_sighup(at)) {
                b.after_sighup.push((index, (at - sig) * 1e3));
            }
        }
        b
    }
}

/// Requests counted three ways: by the clients, in the proxy's access log, at the backends.
#[derive(Debug, Clone)]
pub struct Ledger {
    /// Responses the clients received (any status).
    pub client_responses: u64,
    /// Client requests that timed out.
    pub client_timeouts: u64,
    /// Client attempts that failed below HTTP other than timeouts (never answered).
    pub client_broken: u64,
    /// What the proxy's logs counted.
    pub log: Measured<LogBooks>,
    /// Responses the backends completed (their final counters).
    pub backend_responses: Measured<u64>,
}

/// What the proxy's access and error logs counted in one case.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogBooks {
    /// Access-log lines.
    pub proxy_lines: u64,
    /// Access-log lines with status 499 (the client went away first).
    pub proxy_499: u64,
    /// Upstream attempts in the access log that a backend answered (a status other than the
    /// 502/504 the proxy writes for a failed attempt).
    pub upstream_answers: u64,
    /// Access-log lines that needed more than one upstream attempt.
    pub retried: u64,
    /// Error-log lines at warn or above.
    pub error_warn: u64,
}

impl LogBooks {
    /// Access-log lines that carry an answer the proxy sent (all but 499).
    pub fn proxy_answered(&self) -> u64 {
        self.proxy_lines - self.proxy_499
    }

    /// Counts the proxy's logs of one case.
    fn new(logs: &model::LogSummary) -> LogBooks {
        let mut b = LogBooks {
            proxy_lines: logs.access_lines,
            proxy_499: logs.access_status.get(&499).copied().unwrap_or(0),
            error_warn: logs
                .error_levels
                .iter()
                .filter(|(lvl, _)| {
                    !matches!(lvl.as_str(), "notice" | "info" | "debug")
                        && lvl.as_str() != setup::proxy::LIFECYCLE
                })
                .map(|(_, n)| n)
                .sum(),
            ..LogBooks::default()
        };
        for (statuses, n) in &logs.upstream_status {
            let answered = statuses
                .split([',', ':'])
                .filter_map(|p| p.trim().parse::<u16>().ok())
                .filter(|s| *s != 502 && *s != 504)
                .count() as u64;
            b.upstream_answers += answered * n;
            if statuses.contains(',') {
                b.retried += n;
            }
        }
        b
    }
}

impl Ledger {
    /// Counts one case's books; the proxy's and the backends' counts only where their
    /// collectors gathered them.
    pub fn new(r: &CaseResult) -> Ledger {
        let client_timeouts = r
            .loads
            .iter()
            .map(|s| s.errors.get(&ErrorKind::Timeout).copied().unwrap_or(0))
            .sum();
        Ledger {
            client_responses: r.loads.iter().map(|s| s.requests).sum(),
            client_timeouts,
            client_broken: r
                .loads
                .iter()
                .map(|s| s.error_total())
                .sum::<u64>()
                .saturating_sub(client_timeouts),
            log: r.measured(Collector::Logs, |r| LogBooks::new(&r.logs)),
            backend_responses: r.measured(Collector::BackendCounters, |r| {
                r.backends.iter().map(|b| b.requests).sum()
            }),
        }
    }

    /// Backend responses that never made it into the access log: requests that died inside
    /// the proxy after the backend answered (a killed worker). Needs both the backends'
    /// counters and the proxy's logs.
    pub fn lost_in_proxy(&self) -> Measured<i64> {
        self.backend_responses
            .clone()
            .zip(self.log.as_ref())
            .map(|(backends, log)| backends as i64 - log.upstream_answers as i64)
    }
}
