//! The mechanism checks of one case. Each states what the mechanism makes certain (a count that
//! must be zero, a bound no run can exceed, an ordering in time), never a tuned number.

use super::ledger::{Ledger, LoadBooks};
use super::plan::{Plan, What};
use super::{OLD_WORKERS_QUIT_MS, QUIT_MARGIN_MS};
use crate::scenario::{RemoveMode, StopSpec};
use model::CheckResult;

/// Builds one check.
fn check(case: &str, name: String, expected: String, actual: String, pass: bool) -> CheckResult {
    CheckResult {
        name,
        case: Some(case.to_string()),
        expected,
        actual,
        pass,
    }
}

/// Every check that applies to the case's actions.
pub fn all(case: &str, plan: &Plan, ledger: &Ledger, loads: &[LoadBooks]) -> Vec<CheckResult> {
    let mut out = Vec::new();
    let killed = plan.stopped(StopSpec::Kill) + plan.stopped(StopSpec::Fast);
    let connections: u64 = loads.iter().map(|l| l.connections).sum();

    // Conservation: one access-log line per answer nginx sent, one response per answer received.
    let tolerance = ledger.client_timeouts + connections * killed as u64;
    let diff = ledger.nginx_answered() as i64 - ledger.client_responses as i64;
    out.push(check(
        case,
        "every answer is counted twice: nginx access-log lines (less 499s) = responses the \
         clients received"
            .into(),
        format!(
            "{} ± {tolerance} (client timeouts{})",
            ledger.client_responses,
            if killed > 0 {
                " + one per connection per killed replica"
            } else {
                ""
            }
        ),
        format!("{} ({diff:+})", ledger.nginx_answered()),
        diff.unsigned_abs() <= tolerance,
    ));

    if !plan.fired.is_empty() {
        let outside: u64 = loads.iter().map(|l| l.outside).sum();
        let total: u64 = loads.iter().map(|l| l.failures - l.timeouts).sum();
        out.push(check(
            case,
            "every failure falls inside an action's span (its start to 2 s after it ended, by the \
             request's send or its failure)"
                .into(),
            "0 outside".into(),
            format!("{outside} of {total} outside"),
            outside == 0,
        ));
    }

    let only_up = plan.has(|w| w == What::ReplicasUp)
        && !plan.has(|w| !matches!(w, What::ReplicasUp | What::Other));
    if only_up {
        let broken: u64 = loads.iter().map(|l| l.broken()).sum();
        out.push(check(
            case,
            "a replica joining the shared port (reuseport) breaks no connection".into(),
            "0 refused, reset or closed".into(),
            broken.to_string(),
            broken == 0,
        ));
    }

    let kills = killed > 0 || plan.has(|w| w == What::BackendsDown(RemoveMode::Kill));
    if !kills {
        out.push(check(
            case,
            "nothing dies inside nginx: backend responses = backend answers in the access log"
                .into(),
            ledger.upstream_answers.to_string(),
            ledger.backend_responses.to_string(),
            ledger.lost_in_nginx() == 0,
        ));
    }

    if killed > 0 {
        let lost = ledger.lost_in_nginx().max(0) as u64;
        out.push(check(
            case,
            "every backend answer that died inside a killed replica is a request a client lost"
                .into(),
            format!(
                "<= {} (client attempts never answered)",
                ledger.client_broken
            ),
            lost.to_string(),
            lost <= ledger.client_broken,
        ));
    }

    let stopped = plan.stopped(StopSpec::Graceful) + killed;
    if stopped > 0 {
        for l in loads {
            let bound = 2 * l.connections * stopped as u64;
            out.push(check(
                case,
                format!(
                    "{}: stopping {stopped} replica(s) costs at most 2 requests per connection \
                     per replica (the one in flight or next, and one caught in the closing \
                     accept queue)",
                    l.name
                ),
                format!("<= {bound}"),
                l.broken().to_string(),
                l.broken() <= bound,
            ));
        }
    }

    let hups = plan.sighups() as u64;
    if hups > 0 && plan.has(|w| w.reload_only()) {
        for l in loads {
            let lost = l.owned_by(plan, |w| w.reload_only());
            let bound = l.connections * hups;
            out.push(check(
                case,
                format!(
                    "{}: {hups} reload(s) cost at most one request per connection each",
                    l.name
                ),
                format!("<= {bound}"),
                lost.to_string(),
                lost <= bound,
            ));
        }
        // Timed by the send, which only closed-loop records carry exactly.
        let gaps: Vec<_> = loads
            .iter()
            .filter(|l| !l.open)
            .map(|l| l.sighup_gaps(plan, |w| w.reload_only()))
            .collect();
        let early: u64 = gaps.iter().map(|g| g.early).sum();
        let first = gaps
            .iter()
            .filter_map(|g| g.earliest)
            .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |x| x.min(g))));
        if let Some(first) = first {
            out.push(check(
                case,
                "a request lost to a reload left when the old workers were told to quit, not at \
                 SIGHUP (the master starts new workers, sleeps 100 ms, then signals the old)"
                    .into(),
                format!(
                    ">= {:.0} ms after SIGHUP (closed-loop sends)",
                    OLD_WORKERS_QUIT_MS - QUIT_MARGIN_MS
                ),
                format!("earliest {first:.1} ms; {early} earlier"),
                early == 0,
            ));
        }
    }

    if plan.has(|w| w == What::Reload) && loads.iter().any(|l| l.open) {
        let busy: Vec<&LoadBooks> = loads.iter().filter(|l| !l.open).collect();
        let idle: Vec<&LoadBooks> = loads.iter().filter(|l| l.open).collect();
        let rate = |ls: &[&LoadBooks]| {
            let lost: u64 = ls.iter().map(|l| l.broken()).sum();
            let chances: u64 = ls.iter().map(|l| l.connections * hups).sum();
            (lost, lost as f64 / chances.max(1) as f64)
        };
        if !busy.is_empty() {
            let lost: u64 = busy.iter().map(|l| l.cause("read_idle_closed")).sum();
            out.push(check(
                case,
                "busy keep-alive connections lose requests to reloads (read_idle_closed, NGF \
                 issue 1147)"
                    .into(),
                ">= 1".into(),
                lost.to_string(),
                lost >= 1,
            ));
            let (bl, br) = rate(&busy);
            let (il, ir) = rate(&idle);
            out.push(check(
                case,
                "an idle keep-alive connection is closed quietly: it loses no more per reload \
                 than a busy one"
                    .into(),
                format!("<= {br:.4} per connection per reload (busy: {bl} lost)"),
                format!("{ir:.4} ({il} lost)"),
                ir <= br,
            ));
        }
    }

    let five: u64 = loads.iter().map(|l| l.five_xx()).sum();
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Drain)) {
        out.push(check(
            case,
            "drained backends: nginx never met a failing backend (no error/warn line, no 5xx)"
                .into(),
            "0 lines, 0 5xx".into(),
            format!("{} lines, {five} 5xx", ledger.error_warn),
            ledger.error_warn == 0 && five == 0,
        ));
    }
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Kill)) {
        out.push(check(
            case,
            "killed backends: nginx met them (error/warn lines) and passed those requests to a \
             live backend (proxy_next_upstream error), so no 5xx reached a client"
                .into(),
            ">= 1 lines, 0 5xx".into(),
            format!("{} lines, {five} 5xx", ledger.error_warn),
            ledger.error_warn >= 1 && five == 0,
        ));
    }
    out
}
